"""Reproduction records: ``<entry-id>.reproduced.json`` beside an entry says that `lfb leaderboard reproduce`
re-ran it, when, on what, within which tolerances, and whether every number landed inside. A spot check of some of
the entry's seeds names them (``seeds``), and the board's mark says so.

The record names the SHA-256 of the entry file it re-ran, so editing the entry afterwards makes the record stale
(a note, and the board shows no mark until it is re-run). Validation checks ``ok`` against the comparisons; the
board shows the mark.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import platform
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from largefedbench.leaderboard.check_paths import check_paths
from largefedbench.leaderboard.files import RECORD_SUFFIX, EntryFile, UnsafePathError, read_entry_json
from largefedbench.leaderboard.findings import Finding, error, note
from largefedbench.leaderboard.ranks import spread_tolerance

SUFFIX = RECORD_SUFFIX
FORMAT = "lfb-reproduction/1"
_FIX = "Run `lfb leaderboard reproduce --sample K` (or on the entry) again, or delete the record"

Number = float | Literal["inf", "-inf", "nan"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedComparison(_Strict):
    metric: str
    entry: Number
    reproduced: Number
    tolerance: str
    ok: bool


class Selection(_Strict):
    """How the entry was picked: ``sample`` of ``among`` ranked entries with random ``seed`` (and, for a spot check,
    ``seeds_per_entry`` of each drawn entry's seeds, drawn from the same random seed)."""

    sample: int = Field(ge=1)
    among: int = Field(ge=1)
    seed: int
    seeds_per_entry: int | None = Field(default=None, ge=1)


class ReproductionRecord(_Strict):
    format: Literal["lfb-reproduction/1"]
    entry_id: str
    entry_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    reproduced_at: str  # UTC, ISO 8601
    ok: bool
    #: accuracy (fixed, absolute; older records) or accuracy_spread_sds and accuracy_floor (the
    #: entry's seed spread, run/reproduce.py), gap_closed, fid_relative, audit_epsilon, epsilon_relative
    tolerances: dict[str, float]
    comparisons: list[RecordedComparison] = Field(min_length=1)
    notes: list[str]
    seconds: float = Field(ge=0.0, allow_inf_nan=False)
    environment: dict[str, str]  # lfb_version, python, platform
    selection: Selection | None = None
    seeds: list[int] | None = None  # the entry's seeds that were re-run, when not all of them (a spot check)

    @property
    def day(self) -> str:
        return self.reproduced_at[:10]

    @property
    def failed(self) -> int:
        return sum(not c.ok for c in self.comparisons)


def seeds_text(seeds: list[int]) -> str:
    """``"seed 1"`` or ``"seeds 0, 2"``: the seeds a spot check re-ran, as the board and the reports name them."""
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def record_path(entry_path: Path) -> Path:
    """Where the reproduction record of the entry at ``entry_path`` is stored."""
    return entry_path.with_name(entry_path.name.removesuffix(".json") + SUFFIX)


def is_record(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


def entry_of(path: Path) -> Path:
    """The entry file a record at ``path`` belongs to."""
    return path.with_name(path.name.removesuffix(SUFFIX) + ".json")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _json_number(x: float) -> float | str:
    return str(x) if not math.isfinite(x) else float(x)


def build_record(result: Any, entry_path: Path, *, tolerances: Any, seconds: float,
                 selection: dict[str, int] | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """The record of a :class:`~.reproduce.ReproduceResult` of the entry at ``entry_path``, as a JSON-ready dict."""
    from largefedbench import __version__
    from largefedbench.leaderboard.check_privacy import EPSILON_RTOL

    when = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    data = {
        "format": FORMAT, "entry_id": result.entry_id, "entry_sha256": file_sha256(entry_path),
        "reproduced_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "ok": result.ok,
        "tolerances": {**({"accuracy": tolerances.accuracy} if tolerances.accuracy is not None else
                          {"accuracy_spread_sds": tolerances.accuracy_spread_sds,
                           "accuracy_floor": tolerances.accuracy_floor}),
                       "gap_closed": tolerances.gap_closed, "fid_relative": tolerances.fid_relative,
                       "audit_epsilon": tolerances.audit_epsilon, "epsilon_relative": EPSILON_RTOL},
        "comparisons": [{"metric": c.metric, "entry": _json_number(c.entry), "reproduced": _json_number(c.reproduced),
                         "tolerance": c.tolerance, "ok": c.ok} for c in result.comparisons],
        "notes": list(result.notes), "seconds": float(seconds),
        "environment": {"lfb_version": __version__, "python": sys.version.split()[0], "platform": platform.platform()},
        "selection": selection,
    }
    if getattr(result, "seeds", None) is not None:  # a spot check; a full re-run's record keeps the older layout
        data["seeds"] = list(result.seeds)
    ReproductionRecord.model_validate(data)
    return data


_COMPARED_SEED = re.compile(r", seed (-?\d+)\Z")
_ACCURACY = re.compile(r"^(next_token_accuracy|reference_public|reference_non_private)\.(top[135]), seed -?\d+\Z")


def outside_seed_spread(record: ReproductionRecord, entry: Any) -> int:
    """How many accuracies of a record judged at one fixed tolerance (older records) lie outside
    today's rule, the entry's own seed spread with its floor (:func:`~.ranks.spread_tolerance`); 0 for a record
    judged by that rule already."""
    if "accuracy" not in record.tolerances:
        return 0
    outside = 0
    for c in record.comparisons:
        m = _ACCURACY.match(c.metric)
        if m is None or not isinstance(c.entry, float) or not isinstance(c.reproduced, float):
            continue
        per_seed = getattr(getattr(entry.metrics, m.group(1)), m.group(2)).per_seed
        outside += abs(c.reproduced - c.entry) > spread_tolerance(per_seed)
    return outside


def _check_seeds(record: ReproductionRecord, entry: Any, name: str, where: str) -> list[Finding]:
    """A spot check names a proper subset of the entry's seeds, each once, and its comparisons cover exactly the
    seeds it names (a full re-run's: every seed of the entry), so the mark cannot claim more than was compared."""
    if record.seeds is not None and (len(set(record.seeds)) != len(record.seeds) or not record.seeds
                                     or not set(record.seeds) < set(entry.seeds)):
        return [error("reproduction", f"{where}.seeds", f"{name} names seeds {record.seeds}, but a spot check names "
                      f"some of the entry's seeds {list(entry.seeds)}, each once (all of them: leave seeds out)", _FIX)]
    claimed = set(entry.seeds if record.seeds is None else record.seeds)
    compared = {int(m.group(1)) for c in record.comparisons if (m := _COMPARED_SEED.search(c.metric))}
    if compared != claimed:
        return [error("reproduction", f"{where}.comparisons", f"{name} compares seeds {sorted(compared)} but claims "
                      f"{sorted(claimed)}" + (" (every seed of the entry)" if record.seeds is None else ""), _FIX)]
    return []


def check_record(item: EntryFile, entry: Any) -> tuple[ReproductionRecord | None, list[Finding]]:
    """The entry's reproduction record, if there is one, and what is wrong with it."""
    path = record_path(item.path)
    if not path.exists() and not path.is_symlink():
        return None, []
    where = "reproduction"
    try:
        data = read_entry_json(EntryFile(path, item.board))
    except UnsafePathError as exc:
        return None, [error("reproduction", where, f"{path.name} refused, not read: {exc}", _FIX)]
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, [error("reproduction", where, f"{path.name} is not readable JSON: {exc}", _FIX)]
    try:
        record = ReproductionRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return None, [error("reproduction", where, f"{path.name} is not a reproduction record ({loc}: {first['msg']})",
                            _FIX)]
    out = list(check_paths(data))
    if record.entry_id != entry.entry_id:
        out.append(error("reproduction", where, f"{path.name} is the record of {record.entry_id!r}, not of this entry",
                         _FIX))
    elif record.entry_sha256 != file_sha256(item.path):
        stale = note("reproduction", where, f"stale, not shown: the entry file changed after it was reproduced on "
                     f"{record.day} (its SHA-256 is not the record's)", _FIX)
        return None, out + [stale]
    out += _check_seeds(record, entry, path.name, where)
    if record.ok != (record.failed == 0):
        out.append(error("reproduction", f"{where}.ok", f"says ok={record.ok}, but {record.failed} of "
                         f"{len(record.comparisons)} compared numbers are outside their tolerance", _FIX))
    try:
        when = dt.datetime.fromisoformat(record.reproduced_at.replace("Z", "+00:00"))
        if when.tzinfo is None or when > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1):
            raise ValueError("in the future or without a time zone")
    except ValueError as exc:
        out.append(error("reproduction", f"{where}.reproduced_at", f"{record.reproduced_at!r} is not a UTC time of "
                         f"the past ({exc})", _FIX))
    return (record if not out else None), out
