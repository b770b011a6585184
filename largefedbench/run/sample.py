"""`lfb leaderboard reproduce --sample K`: re-run K randomly chosen ranked entries and mark the board.

Forged numbers that agree everywhere can only be caught by re-running. The K entries are drawn uniformly among the
ranked ones with a recorded random seed (an expensive entry is as likely to be drawn as a cheap one), then re-run
cheapest first by their recorded time (:func:`recorded_seconds`), so a time limit (``max_seconds``) skips the long
ones rather than the short ones. With ``seeds_per_entry``, each drawn entry re-runs only that many of its seeds,
drawn with the same random seed (a spot check at a fraction of the cost: the seeds run independently). Each finished
re-run writes ``<entry-id>.reproduced.json`` beside its entry (what was compared, when, within which tolerances, the
selection, the seeds when not all) and the board is rendered again with the marks.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench.errors import InputError, LfbError
from largefedbench.io import atomic_write_json
from largefedbench.leaderboard.files import ENTRIES
from largefedbench.leaderboard.findings import EntryReport
from largefedbench.leaderboard.reproduced import build_record, record_path, seeds_text
from largefedbench.leaderboard.validate import validate_paths
from largefedbench.run.reproduce import Tolerances, reproduce


@dataclass
class SampledRun:
    path: Path
    entry_id: str
    recorded_seconds: float  # the entry's recorded seconds, prorated to the seeds re-run
    result: Any = None  # ReproduceResult when the re-run finished
    record: Path | None = None
    skipped: str | None = None  # why it was not re-run (time limit, or the re-run could not start)
    seconds: float = 0.0
    seeds: list[int] | None = None  # the seeds re-run, when not all of the entry's

    @property
    def which(self) -> str:
        return "" if self.seeds is None else seeds_text(self.seeds)


@dataclass
class SampleResult:
    seed: int
    among: int
    runs: list[SampledRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every drawn entry was re-run and reproduced within tolerance."""
        return bool(self.runs) and all(r.result is not None and r.result.ok for r in self.runs)

    def format(self) -> str:
        lines = [f"drew {len(self.runs)} of {self.among} ranked entries (random seed {self.seed}); cheapest first:"]
        for r in self.runs:
            if r.result is None:
                lines.append(f"  {r.entry_id}: not re-run: {r.skipped}")
            else:
                state = "reproduced within tolerance" if r.result.ok else \
                    f"NOT reproduced ({sum(not c.ok for c in r.result.comparisons)} numbers outside)"
                which = f" ({r.which} only)" if r.seeds is not None else ""
                lines.append(f"  {r.entry_id}{which}: {state} in {r.seconds:.0f} s (recorded {r.recorded_seconds:.0f} s "
                             f"for {'these seeds' if which else 'all seeds'}); record {r.record}")
        return "\n".join(lines)


def record_reproduction(result: Any, entry_path: Path, *, tolerances: Tolerances, seconds: float,
                        selection: dict[str, int] | None = None) -> Path:
    """Write the reproduction record of ``result`` beside the entry at ``entry_path`` (atomically); its path."""
    path = record_path(entry_path)
    atomic_write_json(path, build_record(result, entry_path, tolerances=tolerances, seconds=seconds,
                                         selection=selection))
    return path


def recorded_seconds(entry: Any) -> float:
    """What re-running ``entry`` takes: its wall time, or its seeds' method and downstream seconds where more (an
    entry written before 2026-11-29 recorded only the wall time of the process that finished it: a resumed run's last
    seed)."""
    costs = entry.costs
    return max(costs.wall_seconds, len(entry.seeds) * (costs.method_seconds + costs.downstream_seconds))


def draw(reports: list[EntryReport], k: int, seed: int) -> list[EntryReport]:
    """``k`` ranked entries drawn uniformly with ``seed``, ordered cheapest first (recorded seconds, then id)."""
    ranked = sorted((r for r in reports if r.status == "ranked"), key=lambda r: r.entry.entry_id)
    chosen = random.Random(seed).sample(ranked, min(k, len(ranked)))
    return sorted(chosen, key=lambda r: (recorded_seconds(r.entry), r.entry.entry_id))


def draw_seeds(seeds: list[int], n: int | None, rng: random.Random) -> list[int] | None:
    """``n`` of an entry's ``seeds`` drawn with ``rng``, in the entry's order (None: all of them)."""
    if n is None or n >= len(seeds):
        return None
    chosen = set(rng.sample(seeds, n))
    return [s for s in seeds if s in chosen]


def reproduce_sample(board: Path, k: int, *, seed: int | None = None, home: Path | None = None,
                     tolerances: Tolerances = Tolerances(), max_seconds: float | None = None, render: bool = True,
                     seeds_per_entry: int | None = None, runner: Callable[..., Any] | None = None,
                     progress: bool = False, log: Callable[[str], None] | None = None) -> SampleResult:
    """Re-run ``k`` random ranked entries of the board folder ``board`` and record each outcome beside its entry.

    ``runner`` (default :func:`~.reproduce.reproduce`) re-runs one entry file and returns its ``ReproduceResult``."""
    log = log or (lambda msg: None)
    runner = runner or reproduce
    if k < 1:
        raise InputError(f"--sample {k}: give the number of entries to re-run, at least 1")
    if seeds_per_entry is not None and seeds_per_entry < 1:
        raise InputError(f"--seeds-per-entry {seeds_per_entry}: give how many seeds to re-run of each entry, at least 1")
    entries = Path(board) / ENTRIES
    if not entries.is_dir():
        raise InputError(f"{board} has no {ENTRIES}/ folder: pass the board folder (e.g. leaderboard)")
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    reports = validate_paths([entries])
    picked = draw(reports, k, seed)
    seed_rng = random.Random(f"{seed}:seeds")  # its own stream: the seed draws do not replay the entry draw
    result = SampleResult(seed, sum(r.status == "ranked" for r in reports))
    start = time.perf_counter()
    for report in picked:
        entry = report.entry
        seeds = None if entry.audit is not None else draw_seeds(list(entry.seeds), seeds_per_entry, seed_rng)
        share = 1.0 if seeds is None else len(seeds) / len(entry.seeds)
        run = SampledRun(report.path, entry.entry_id, recorded_seconds(entry) * share, seeds=seeds)
        result.runs.append(run)
        elapsed = time.perf_counter() - start
        if max_seconds is not None and elapsed + run.recorded_seconds > max_seconds:
            run.skipped = (f"its recorded {run.recorded_seconds:.0f} s would pass the {max_seconds:g} s limit "
                           f"({elapsed:.0f} s used)")
            continue
        log(f"re-running {entry.entry_id} (recorded {run.recorded_seconds:.0f} s" + (f", {run.which} only)" if seeds else ")"))
        t0 = time.perf_counter()
        try:
            run.result = runner(report.path, home=home, tolerances=tolerances, progress=progress, seeds=seeds, log=log)
        except LfbError as exc:
            run.skipped = f"the re-run could not be made: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - a method that crashes on re-run is reported, the others still run
            run.skipped = f"the re-run failed: {type(exc).__name__}: {exc}"
            continue
        run.seconds = time.perf_counter() - t0
        run.record = record_reproduction(run.result, report.path, tolerances=tolerances, seconds=run.seconds,
                                         selection={"sample": k, "among": result.among, "seed": seed,
                                                    **({"seeds_per_entry": seeds_per_entry} if seeds_per_entry else {})})
    if render and any(r.record for r in result.runs):
        from largefedbench.leaderboard.render import render_board

        render_board(Path(board))
    return result
