"""Immutable, dated snapshots: client splits on disk (HF ``datasets``) plus ``manifest.json`` and a card.

A snapshot folder holds ``data/`` (a ``DatasetDict`` with splits ``train``, ``validation``, ``test`` — the
private clients of the window — and ``public``, the clients dated before it), ``manifest.json`` (what was
built, from what, how: DESIGN.md §3) and ``README.md`` (the dataset card). One row is one client: the record's
fields plus ``spans`` (the span texts), ``n_spans`` and ``n_tokens``. Snapshots are written to a temporary
folder and renamed into place, and never modified afterwards.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench import __version__
from largefedbench.data.records import RECORD_FIELDS, Record
from largefedbench.data.spans import SpanSettings, cut_spans, get_span_tokenizer
from largefedbench.data.splits import PRIVATE_SPLITS, PUBLIC_SPLIT, SPLIT_SALT, SplitRatios, assign_split
from largefedbench.data.windows import Window, after_cutoff
from largefedbench.errors import InputError, SnapshotError
from largefedbench.io import atomic_write_json, atomic_write_text, publish_dir
from largefedbench.paths import HOME_FLAG, check_writable_dir, lfb_home, snapshots_dir, write_error_message

log = logging.getLogger(__name__)

MANIFEST_SCHEMA_VERSION = 1
ALL_SPLITS = (*PRIVATE_SPLITS, PUBLIC_SPLIT)
_INT_FIELDS = {"version"}
#: a snapshot name is one folder under snapshots/: no separators, not hidden, no '..'
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\Z")
#: a build's temporary folder: .tmp-<name>-<pid of the building process>
_TMP = re.compile(r"^\.tmp-.+-(\d+)\Z")


@dataclass
class BuildSpec:
    """Everything that decides a snapshot besides its records."""

    dataset: str
    window: Window
    span: SpanSettings = field(default_factory=SpanSettings)
    splits: SplitRatios = field(default_factory=SplitRatios)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    cleaning_version: str | None = None
    synthetic: bool = False
    after_cutoff_of: str | None = None
    name: str | None = None
    scraped_at: str | None = None
    card_notes: str = ""


@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]
    created: bool  # False when an identical snapshot already existed


def _features():
    from datasets import Features, Sequence, Value

    cols = {name: Value("int64" if name in _INT_FIELDS else "string") for name in RECORD_FIELDS}
    cols.update(spans=Sequence(Value("string")), n_spans=Value("int64"), n_tokens=Value("int64"))
    return Features(cols)


def content_hash(splits: Mapping[str, Iterable[dict[str, Any]]]) -> str:
    """sha256 over every row of every split in canonical JSON: equal hashes mean equal data."""
    h = hashlib.sha256()
    for split in ALL_SPLITS:
        for row in splits[split]:
            h.update(json.dumps([split, row], sort_keys=True, ensure_ascii=False).encode())
            h.update(b"\n")
    return h.hexdigest()


def build_snapshot(
    records: Iterable[Record],
    spec: BuildSpec,
    rejected: Counter | None = None,
    *,
    root: Path | None = None,
    batch_size: int = 4096,
    progress: bool = True,
) -> BuildResult:
    """Cut records into spans, split clients, and write an immutable snapshot (atomically).

    A failed write (disk full, read-only folder) leaves no temporary folder behind and raises
    :class:`SnapshotError`; temporary folders of earlier builds whose process is gone are removed first.
    """
    from tqdm.auto import tqdm

    if spec.name is not None:
        check_snapshot_name(spec.name)
    root_dir = snapshots_dir(root)
    check_writable_dir(root_dir, root_label(root))
    rejected = Counter(rejected or {})
    by_id: dict[str, Record] = {}
    n_in = 0
    for rec in records:
        n_in += 1
        old = by_id.get(rec.id)
        if old is not None:
            rejected["duplicate_id"] += 1
            if (rec.date, rec.version or 0) < (old.date, old.version or 0):
                continue
        by_id[rec.id] = rec

    kept: list[tuple[str, Record]] = []
    for rec in by_id.values():
        period = spec.window.classify(rec.day)
        if period is None:
            rejected["outside_window"] += 1
        else:
            kept.append((period, rec))

    tokenizer = get_span_tokenizer(spec.span.tokenizer)
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in ALL_SPLITS}
    bar = tqdm(total=len(kept), desc=f"spans ({spec.span.tokenizer})", unit="client", disable=not progress)
    for start in range(0, len(kept), batch_size):
        batch = kept[start : start + batch_size]
        for (period, rec), (spans, n_tokens) in zip(batch, cut_spans([r.text for _, r in batch], spec.span, tokenizer)):
            if not spans:
                rejected["too_short_for_a_span"] += 1
                continue
            split = PUBLIC_SPLIT if period == "public" else assign_split(rec.id, spec.splits)
            splits[split].append({**rec.to_dict(), "spans": spans, "n_spans": len(spans), "n_tokens": n_tokens})
        bar.update(len(batch))
    bar.close()
    for rows in splits.values():
        rows.sort(key=lambda r: (r["date"], r["id"]))

    digest = content_hash(splits)
    name = spec.name or f"{spec.dataset}-{spec.window.since}-{spec.window.until}-{digest[:8]}"
    final = root_dir / name
    if final.exists():
        existing = read_manifest(final)
        if existing.get("content_sha256") == digest:
            return BuildResult(final, existing, created=False)
        raise SnapshotError(
            f"a different snapshot named {name!r} already exists at {final} (snapshots are immutable). "
            "Pass another --name, or delete that folder if you no longer need it."
        )

    manifest = _manifest(spec, name, splits, rejected, digest, n_in, tokenizer.describe())
    remove_stale_tmp(root_dir)
    tmp = root_dir / f".tmp-{name}-{os.getpid()}"
    try:
        _write_folder(tmp, splits, manifest, spec.card_notes)
        publish_dir(tmp, final)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raced = isinstance(exc, FileExistsError) or getattr(exc, "errno", None) == errno.ENOTEMPTY
        if raced and (final / "manifest.json").is_file():
            return BuildResult(final, read_manifest(final), created=False)  # another process published it meanwhile
        if isinstance(exc, OSError):
            raise SnapshotError(write_error_message(exc, f"writing snapshot {name!r} under {root_dir}", HOME_FLAG)
                                + "; nothing was kept") from exc
        raise
    return BuildResult(final, manifest, created=True)


def _write_folder(tmp: Path, splits: dict[str, list[dict[str, Any]]], manifest: dict[str, Any], notes: str) -> None:
    from datasets import Dataset, DatasetDict

    tmp.mkdir(parents=True, exist_ok=True)
    features = _features()
    # from_dict keeps the columns of an empty split (from_list([]) would write a table without them).
    dd = DatasetDict({
        s: Dataset.from_dict({c: [row[c] for row in splits[s]] for c in features}, features=features) for s in ALL_SPLITS
    })
    # An empty split needs one explicit (empty) shard, or load_from_disk cannot read it back.
    dd.save_to_disk(str(tmp / "data"), num_shards={s: 1 for s in ALL_SPLITS if not splits[s]})
    atomic_write_json(tmp / "manifest.json", manifest)
    atomic_write_text(tmp / "README.md", dataset_card(manifest, notes))


def root_label(root: Path | None) -> str:
    """How the user named the home folder, for messages: ``--home DIR`` or ``LFB_HOME=DIR``."""
    return f"--home {root}" if root is not None else f"LFB_HOME={lfb_home()}"


def check_snapshot_name(name: str) -> None:
    """A snapshot name must be one folder name inside the snapshots folder (``--name ../../x`` is refused)."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InputError(
            f"--name {name!r} is not a snapshot name: use letters, digits, '.', '_', '+' and '-' only, starting "
            "with a letter or digit, without '/' or '..' (the snapshot is written under $LFB_HOME/snapshots/NAME), "
            "e.g. --name biorxiv-2024-09"
        )


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or not a pid we can check: keep its folder
    return True


def remove_stale_tmp(folder: Path) -> list[Path]:
    """Delete ``.tmp-*`` build folders whose building process is gone (killed, or failed on a full disk)."""
    removed = []
    if not folder.is_dir():
        return removed
    for child in folder.iterdir():
        m = _TMP.match(child.name)
        if m and child.is_dir() and not _pid_alive(int(m[1])):
            shutil.rmtree(child, ignore_errors=True)
            log.info("removed %s, left by an interrupted snapshot build", child)
            removed.append(child)
    return removed


def _mean_sd(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "sd": 0.0}
    return {"mean": statistics.fmean(values), "sd": statistics.pstdev(values)}


def _manifest(spec, name, splits, rejected, digest, n_in, tokenizer_info) -> dict[str, Any]:
    private = [r for s in PRIVATE_SPLITS for r in splits[s]]
    everything = [r for s in ALL_SPLITS for r in splits[s]]
    dates = [r["date"] for r in everything]
    cutoff = None
    if spec.after_cutoff_of:
        cutoff = {"model": spec.after_cutoff_of, "window_after_cutoff": after_cutoff(spec.window.since, spec.after_cutoff_of)}
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "name": name,
        "dataset": spec.dataset,
        "synthetic": spec.synthetic,
        "sources": spec.sources,
        "window": {**spec.window.to_dict(), "after_cutoff_of": cutoff},
        "scraped_at": spec.scraped_at,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "lfb_version": __version__,
        "cleaning_version": spec.cleaning_version,
        "span": {**spec.span.to_dict(), "tokenizer_info": tokenizer_info},
        "splits": {"ratios": spec.splits.to_dict(), "salt": SPLIT_SALT, "by": "sha256 of the client id"},
        "counts": {
            "records_in": n_in,
            "clients": {s: len(splits[s]) for s in ALL_SPLITS},
            "spans": {s: sum(r["n_spans"] for r in splits[s]) for s in ALL_SPLITS},
            "tokens": sum(r["n_tokens"] for r in everything),
            "spans_per_private_client": _mean_sd([r["n_spans"] for r in private]),
            "date_min": min(dates) if dates else None,
            "date_max": max(dates) if dates else None,
        },
        "rejected": dict(sorted(rejected.items())),
        "licenses": dict(sorted(Counter(r["license"] for r in everything).items())),
        "content_sha256": digest,
    }


def read_manifest(path: Path) -> dict[str, Any]:
    file = Path(path) / "manifest.json"
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise SnapshotError(f"{path} is not a snapshot: it has no manifest.json (an interrupted build?)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"snapshot {path} is damaged: {file} is not valid JSON ({exc}). "
                            + rebuild_hint(path)) from None
    except OSError as exc:
        raise SnapshotError(f"cannot read {file} ({exc.strerror or exc}). " + rebuild_hint(path)) from None
    if not isinstance(manifest, dict):
        raise SnapshotError(f"snapshot {path} is damaged: {file} is not a JSON object. " + rebuild_hint(path))
    return manifest


def rebuild_hint(path: Path, manifest: dict[str, Any] | None = None) -> str:
    """How to rebuild the snapshot at ``path``: delete it and run the command that builds it again."""
    path = Path(path)
    m = manifest or {}
    root = path.parent.parent if path.parent.name == "snapshots" else None
    out = [] if root is None or root.resolve() == lfb_home().resolve() else ["--home", str(root)]
    window, sources = m.get("window") or {}, m.get("sources") or {}
    if m.get("synthetic") or m.get("dataset") == "demo" or (not m and path.name.startswith("demo")):
        cmd = ["lfb", "data", "demo", *(["--prose"] if path.name.startswith("demo-prose") else []), *out]
    elif window.get("since") and window.get("until") and sources:
        cmd = ["lfb", "refresh", "--sources", ",".join(sources), "--since", str(window["since"]),
               "--until", str(window["until"]), "--name", path.name, *out]
        cmd += [arg for source, info in sources.items() if (info or {}).get("mirror")
                for arg in ("--mirror", f"{source}={info['mirror']['folder']}")]
        if window.get("public_since") != _months_back(window["since"], 1):
            cmd += ["--public-months", str(_months_between(window.get("public_since"), window["since"]))]
        tokenizer = (m.get("span") or {}).get("tokenizer")
        if tokenizer and tokenizer != "gpt2":
            cmd += ["--span-tokenizer", str(tokenizer)]
    else:
        return (f"Delete {path} and build it again (`lfb refresh` with the options it was built with, or "
                "`lfb data demo` for the demo).")
    return (f"Delete the folder ({shlex.join(['rm', '-r', str(path)])}) and rebuild it: `{shlex.join(cmd)}`"
            + (" (the raw responses are cached, so nothing is downloaded again)." if cmd[1] == "refresh" else "."))


def _months_back(iso_day: str, months: int) -> str | None:
    try:
        day = dt.date.fromisoformat(str(iso_day))
    except ValueError:
        return None
    index = day.year * 12 + day.month - 1 - months
    return dt.date(index // 12, index % 12 + 1, 1).isoformat()


def _months_between(public_since: str | None, since: str) -> int:
    if not public_since:
        return 0
    a, b = dt.date.fromisoformat(str(public_since)), dt.date.fromisoformat(str(since))
    return (b.year * 12 + b.month) - (a.year * 12 + a.month)


def check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """Refuse a manifest that cannot describe a snapshot (missing keys, a reversed window)."""
    missing = [k for k in ("name", "dataset", "window", "counts", "content_sha256") if k not in manifest]
    problem = f"it lacks {', '.join(missing)}" if missing else None
    if problem is None:
        try:
            Window.from_dict(manifest["window"])
        except (InputError, TypeError, AttributeError) as exc:
            problem = f"its window is invalid: {exc}"
    if problem:
        raise SnapshotError(f"snapshot {path}: manifest.json is edited or damaged ({problem}). "
                            + rebuild_hint(path, manifest))


def read_snapshot_data(path: Path) -> tuple[dict[str, Any], Any]:
    """The checked manifest and the ``DatasetDict`` of the snapshot at ``path``; damage raises :class:`SnapshotError`."""
    import pyarrow as pa
    from datasets import load_from_disk

    path = Path(path)
    manifest = read_manifest(path)
    check_manifest(manifest, path)
    try:
        dd = load_from_disk(str(path / "data"))
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {path} has a manifest but no readable data/ folder. "
                            + rebuild_hint(path, manifest)) from None
    except (OSError, ValueError, TypeError, KeyError, pa.ArrowException) as exc:
        raise SnapshotError(f"snapshot {manifest['name']!r} at {path} is damaged: its data files cannot be read "
                            f"({type(exc).__name__}: {str(exc)[:200]}). " + rebuild_hint(path, manifest)) from None
    missing = [s for s in ALL_SPLITS if s not in dd]
    if missing:
        raise SnapshotError(f"snapshot {path} lacks the split(s) {', '.join(missing)}. " + rebuild_hint(path, manifest))
    counts = (manifest["counts"] or {}).get("clients", {}) if isinstance(manifest["counts"], dict) else {}
    wrong = [f"{s} has {len(dd[s])} clients, the manifest says {counts[s]}"
             for s in ALL_SPLITS if s in counts and counts[s] != len(dd[s])]
    if wrong:
        raise SnapshotError(f"snapshot {manifest['name']!r} at {path} is damaged: {'; '.join(wrong)}. "
                            + rebuild_hint(path, manifest))
    return manifest, dd


def _rows(table) -> Iterable[dict[str, Any]]:
    """The rows of a split as built (for :func:`content_hash`), read in Arrow batches."""
    for batch in table.with_format("arrow").iter(batch_size=2048):
        yield from batch.to_pylist()


def dataset_content_hash(splits: Any) -> str:
    """:func:`content_hash` of datasets read back (``load_from_disk``, or ``datasets.load_dataset`` of a published
    copy): a mapping of every split to its ``Dataset``. Equal to the manifest's ``content_sha256`` when the rows are
    the ones built."""
    return content_hash({s: _rows(splits[s]) for s in ALL_SPLITS})


def _file_stats(path: Path) -> dict[str, list[int]]:
    files = [path / "manifest.json", *sorted(p for p in (path / "data").rglob("*") if p.is_file())]
    return {f.relative_to(path).as_posix(): [(st := f.stat()).st_size, st.st_mtime_ns] for f in files}


def verify_snapshot(fd, root: Path | None = None, *, full: bool = False) -> bool:
    """Check that a loaded snapshot's data hashes to its manifest's ``content_sha256``.

    The hash is computed once; the sizes and modification times of its files are then remembered in
    ``snapshots/.verified/`` so later loads only stat the files (``full=True`` hashes again whatever is
    remembered: ``lfb data verify``). Returns True when it hashed, False when the remembered check still held.
    A mismatch raises :class:`SnapshotError` saying how to rebuild.
    """
    path, manifest = Path(fd.path), fd.manifest
    claimed = manifest.get("content_sha256")
    stats = _file_stats(path)
    cache = snapshots_dir(root) / ".verified" / f"{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:20]}.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = None
    if not full and isinstance(known, dict) and known.get("content_sha256") == claimed and known.get("files") == stats:
        return False
    if known is not None:  # forgotten until this check passes: a failed one is never answered from memory
        with contextlib.suppress(OSError):  # a read-only LFB_HOME cannot forget (nor remember) anything
            cache.unlink()
    actual = dataset_content_hash({s: fd[s].table for s in ALL_SPLITS})
    if actual != claimed:
        raise SnapshotError(
            f"snapshot {manifest.get('name')!r} at {path} does not match its manifest: its data hashes to "
            f"{actual[:16]}… but manifest.json says content_sha256 {str(claimed)[:16]}… (a data file was edited or "
            "damaged), so an entry could not say truthfully which data it used. " + rebuild_hint(path, manifest)
        )
    try:
        atomic_write_json(cache, {"path": str(path.resolve()), "content_sha256": claimed, "files": stats})
    except OSError as exc:  # a read-only LFB_HOME: verify again next time
        log.debug("cannot remember the verification of %s: %s", path, exc)
    return True


def dataset_card(manifest: dict[str, Any], notes: str = "") -> str:
    """The snapshot's README.md: what it is, from where, under which licences, and how it was cleaned."""
    c = manifest["counts"]
    w = manifest["window"]
    lines = [
        "---",
        f"pretty_name: LargeFedBench {manifest['dataset']} ({w['since']} to {w['until']})",
        # `load_dataset(REPO)` reads the splits' Arrow files, not the `save_to_disk` state files beside them
        "configs:",
        "- config_name: default",
        "  data_files:",
        *[line for split in ALL_SPLITS for line in (f"  - split: {split}", f"    path: data/{split}/data-*.arrow")],
        "tags: [federated-learning, differential-privacy, largefedbench]",
        "---",
        f"# LargeFedBench snapshot `{manifest['name']}`",
        "",
    ]
    if manifest["synthetic"]:
        lines += ["**Synthetic data.** Every record was generated by LargeFedBench's own code (`lfb data demo`); "
                  "numbers computed from it say nothing about real text.", ""]
    lines += [
        f"- Dataset: {manifest['dataset']}; one record (abstract or speech) = one client.",
        f"- Private window: {w['since']} to {w['until']}; public records from {w['public_since'] or '-'} to the window start.",
        "- Clients: " + ", ".join(f"{s} {n}" for s, n in c["clients"].items()) + ".",
        "- Spans (samples): " + ", ".join(f"{s} {n}" for s, n in c["spans"].items())
        + f"; {manifest['span']['span_tokens']}-token spans cut with `{manifest['span']['tokenizer']}`, "
        + manifest["span"]["last_span_rule"] + ".",
        f"- Dates: {c['date_min']} to {c['date_max']}; scraped at {manifest['scraped_at']}.",
        f"- Cleaning version {manifest['cleaning_version']}: procedural boilerplate removed, sentences with more "
        "than 30% non-letter characters dropped, written notation that was not spoken removed.",
        f"- Rejected records by reason: {json.dumps(manifest['rejected'])}.",
        f"- Content sha256: `{manifest['content_sha256']}` (every row of the splits train, validation, test and "
        "public, in that order, as canonical JSON; `largefedbench.data.snapshot.dataset_content_hash(ds)` recomputes "
        "it from `ds = datasets.load_dataset(REPO)`).",
        "",
        "## Sources and licences",
        "",
    ]
    for source, info in manifest["sources"].items():
        lines.append(f"- **{source}**: {info.get('license_note', '')} ({info.get('base_url', '')}, scraper {info.get('scraper_version')})")
        if mirror := info.get("mirror"):
            up = mirror.get("upstream") or {}
            origin = f"{up['repository']} @ {up['commit']}" if up else "upstream not recorded"
            lines.append(f"  **Mirror-derived**: read from the folder `{mirror['folder']}` ({len(mirror['files_sha256'])} "
                         f"files, digest `{mirror['files_digest'][:16]}…`), copied from {origin}; not scraped live."
                         + "".join(f" {note}." for note in mirror.get("notes") or []))
    lines += ["", "Licences of the records: " + ", ".join(f"{k} ({v})" for k, v in manifest["licenses"].items()), ""]
    if notes:
        lines += [notes, ""]
    lines += [
        "## How to cite",
        "",
        "Hou, Wang, Zhou, et al., *Private Federated Learning using Preference-Optimized Synthetic Data* "
        "(POPri and LargeFedBench), ICML 2025, arXiv:2504.16438.",
        "",
    ]
    return "\n".join(lines)


def list_snapshots(root: Path | None = None) -> list[dict[str, Any]]:
    """Manifests of every complete snapshot under the snapshots folder, newest first."""
    folder = snapshots_dir(root)
    out = []
    if folder.is_dir():
        for child in folder.iterdir():
            if child.is_dir() and not child.name.startswith(".") and (child / "manifest.json").is_file():
                try:
                    manifest = read_manifest(child)
                    check_manifest(manifest, child)
                except SnapshotError as exc:  # one damaged snapshot must not hide the others
                    log.warning("skipping %s: %s", child, exc)
                    continue
                out.append({**manifest, "path": str(child)})
    out.sort(key=lambda m: m.get("created_at") or "", reverse=True)
    return out
