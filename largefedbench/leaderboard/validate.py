"""`lfb leaderboard validate`: every check an entry must pass before the board shows it.

An entry file is data only: it is parsed, never executed (``method.target`` is not imported), and nothing in it
can make the validator read outside the board's ``entries`` folder. Each failure names the check, the field and
what to do. Valid entries are *ranked*, or shown apart as *unranked* (fewer than three seeds) or *possibly
contaminated* (the window does not start after the model's knowledge cutoff, re-checked against the registry).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from largefedbench.leaderboard.check_audit import check_audit
from largefedbench.leaderboard.check_counts import check_counts
from largefedbench.leaderboard.check_leaks import check_leaks
from largefedbench.leaderboard.check_metrics import check_metrics
from largefedbench.leaderboard.check_paths import check_paths
from largefedbench.leaderboard.check_privacy import check_privacy
from largefedbench.leaderboard.check_provenance import (
    check_contamination,
    check_dataset,
    check_environment,
    check_ids,
)
from largefedbench.leaderboard.files import (
    ENTRIES,
    EntryFile,
    UnsafePathError,
    expected_path,
    find_entry_files,
    inside,
    read_entry_json,
)
from largefedbench.leaderboard.findings import (
    MIN_RANKED_SEEDS,
    EntryReport,
    Finding,
    error,
    note,
)
from largefedbench.leaderboard.reproduced import check_record
from largefedbench.leaderboard.schema import SCHEMA_VERSION, Entry, migrate

__all__ = ["format_reports", "reports_json", "validate_entry_file", "validate_paths"]

#: an artifact is a PNG file beside its entry, named with the safe characters only
ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,250}\.png\Z")
_RERUN = "Re-run `lfb eval`, which writes a complete entry"
_EPSILON_BRANCHES = ("constrained-float", "literal['inf']")


def _schema_findings(exc: Any) -> list[Finding]:
    """Readable findings from a pydantic ``ValidationError``: the field path, the problem, the fix."""
    out, epsilons = [], set()
    for err in exc.errors():
        loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in err["loc"]).replace(".[", "[")
        kind, section = err["type"], str(err["loc"][0]) if err["loc"] else ""
        if section == "privacy" and err["loc"][-1] in _EPSILON_BRANCHES:
            loc = loc.rsplit(".", 1)[0]  # one finding per ε field, not one per branch of `number | "inf"`
            if loc not in epsilons:
                epsilons.add(loc)
                out.append(error("privacy-range", loc, f"ε must be a finite number ≥ 0, or the string \"inf\" for "
                                 f"the non-private reference; got {err.get('input')!r}", _RERUN))
        elif kind == "extra_forbidden":
            out.append(error("schema", loc, f"unknown field: schema version {SCHEMA_VERSION} has no such field",
                             "Remove it; entries carry only the fields `lfb eval` writes (extra='forbid')"))
        elif kind == "missing":
            out.append(error("environment" if section == "environment" else "schema", loc, "required field is missing",
                             _RERUN))
        elif section == "artifacts":
            out.append(error("artifacts", loc, err["msg"].removeprefix("Value error, "),
                             "Artifacts are PNG files stored beside the entry, referenced by file name only"))
        elif kind in ("finite_number", "greater_than_equal", "less_than_equal", "greater_than", "less_than") and \
                section in ("metrics", "costs"):
            what = "an accuracy must be finite and within [0, 1]" if section == "metrics" else \
                "a cost must be a finite, non-negative number"
            out.append(error(f"{section}-range", loc, f"{what}; got {err.get('input')!r} ({err['msg']})", _RERUN))
        else:
            out.append(error("schema", loc, f"{err['msg']} (got {str(err.get('input'))[:80]!r})", _RERUN))
    return out


def _check_location(item: EntryFile, entry: Entry) -> list[Finding]:
    if item.board is None:
        return [error("path", "entry_id", f"{item.path} is not under a `{ENTRIES}/` folder",
                      f"Store it as leaderboard/{ENTRIES}/<dataset>/<method>/<entry-id>.json")]
    want = expected_path(item.board, entry.dataset.name, entry.method.name, entry.entry_id)
    if item.path.absolute() != want.absolute():
        rel = want.relative_to(item.board)
        return [error("path", "entry_id", f"the file is at {item.path}, but its dataset, method and entry_id say "
                      f"{rel}", f"Move it to {rel} (the path must agree with dataset.name, method.name and entry_id)")]
    return []


def _check_artifacts(item: EntryFile, entry: Entry) -> list[Finding]:
    out = []
    for key, name in sorted(entry.artifacts.items()):
        where = f"artifacts.{key}"
        if not ARTIFACT_NAME.match(name) or ".." in name:
            out.append(error("artifacts", where, f"{name!r} is not a plain .png file name",
                             "Artifacts are PNG files stored beside the entry, referenced by file name only"))
            continue
        path = item.path.parent / name
        if item.entries_dir is None or not inside(path, item.entries_dir):
            out.append(error("artifacts", where, f"{name!r} is a symlink that leads outside the leaderboard folder",
                             "Commit the PNG itself beside the entry"))
        elif not path.is_file():
            out.append(error("artifacts", where, f"{name!r} is not beside the entry ({path} is missing)",
                             "Add the file `lfb eval` wrote next to the entry, or drop it from artifacts"))
    return out


def validate_entry_file(item: EntryFile) -> EntryReport:
    """Run every check on one entry file."""
    report = EntryReport(item.path, item.board)
    try:
        data = read_entry_json(item)
    except UnsafePathError as exc:
        report.findings.append(error("file", "path", f"refused, not read: {exc}",
                                     "Commit entries as regular files inside leaderboard/entries"))
        return report
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        report.findings.append(error("json", "file", f"not readable JSON: {exc}", _RERUN))
        return report
    from largefedbench.errors import InputError

    try:
        data = migrate(data)
    except InputError as exc:
        field = "schema_version" if isinstance(data, dict) else "file"
        report.findings.append(error("schema-version", field, str(exc), "Use an entry written by `lfb eval`"))
        return report
    from pydantic import ValidationError

    try:
        entry = Entry.model_validate(data)
    except ValidationError as exc:
        report.findings.extend(_schema_findings(exc))
        return report
    report.entry = entry
    ids = check_ids(entry)
    report.findings.extend(ids)
    if not ids:
        report.findings.extend(_check_location(item, entry))
    report.findings.extend(_check_artifacts(item, entry))
    report.findings.extend(check_paths(data))
    for check in (check_dataset, check_environment, check_privacy, check_metrics, check_counts, check_contamination):
        report.findings.extend(check(entry))
    report.findings.extend(check_audit(entry))
    report.findings.extend(check_leaks(entry, data))
    report.reproduction, problems = check_record(item, entry)
    report.findings.extend(problems)
    # diagnostic and declared entries are never ranked, whatever their seeds: no note that asks for more
    if report.valid and len(entry.seeds) < MIN_RANKED_SEEDS and report.status == "unranked":
        report.findings.append(note("seeds", "seeds", f"{len(entry.seeds)} seed(s); ranking needs at least "
                                    f"{MIN_RANKED_SEEDS}", "Run `lfb eval --seeds 0,1,2`; until then the entry is "
                                    "shown apart as unranked"))
    return report


def validate_paths(paths: Iterable[Path]) -> list[EntryReport]:
    """Validate every entry file found under ``paths`` (folders or files); refused paths become reports too."""
    items, refused = find_entry_files([Path(p) for p in paths])
    reports = [validate_entry_file(item) for item in items]
    for path, reason in refused:
        report = EntryReport(path, None)
        report.findings.append(error("file", "path", f"refused, not read: {reason}",
                                     "Commit entries as regular files inside leaderboard/entries"))
        reports.append(report)
    return reports


def format_reports(reports: list[EntryReport], *, verbose: bool = False) -> str:
    """One block per entry with errors or notes (every entry with ``verbose``), then a summary line."""
    lines = []
    for r in reports:
        if r.findings or verbose:
            lines.append(f"{r.path}: {r.status}")
            lines.extend(f"  {f.format()}" for f in r.findings)
    counts = {s: sum(r.status == s for r in reports)
              for s in ("ranked", "unranked", "contaminated", "diagnostic", "declared", "invalid")}
    declared = f"{counts['declared']} declared, " if counts["declared"] else ""
    lines.append(f"{len(reports)} entries: {counts['ranked']} ranked, {counts['unranked']} unranked, "
                 f"{counts['contaminated']} possibly contaminated, {counts['diagnostic']} diagnostic, {declared}"
                 f"{counts['invalid']} invalid")
    return "\n".join(lines)


def reports_json(reports: list[EntryReport]) -> str:
    return json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False)
