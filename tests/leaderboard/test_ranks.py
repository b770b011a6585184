"""Ranks the seeds support, the compute columns and reproduce's tolerance from the entry's
own seed spread: planted per-seed values with known answers, on entries built from a committed one."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from largefedbench.leaderboard.board import build_board
from largefedbench.leaderboard.findings import EntryReport
from largefedbench.leaderboard.markdown import md_escape, render_markdown
from largefedbench.leaderboard.ranks import (
    FLOOR,
    rank_ranges,
    rank_text,
    significantly_better,
    spread_tolerance,
    t_quantile,
    welch_interval,
)
from largefedbench.leaderboard.schema import Entry
from largefedbench.run.reproduce import Tolerances, _compare

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "leaderboard/entries/demo/dp-fedavg/dp-fedavg--demo-prose--cpu--eps4--a8c14212ef.json"


def test_the_t_quantile_and_welch_interval_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 1.7, 2, 3.4, 4, 30):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)
    a, b = [0.20, 0.21, 0.23], [0.19, 0.20, 0.195, 0.18]
    ours = welch_interval(a, b)
    theirs = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert ours == pytest.approx((theirs.low, theirs.high), rel=1e-9)


# planted rows (top-1 as fractions, three seeds each) and the ranks the rule gives them
PLANTED = {
    "a": [0.200, 0.202, 0.198],  # 2 points above b and c with tiny spreads: strictly first
    "b": [0.180, 0.182, 0.178],
    "c": [0.179, 0.185, 0.176],  # within b's seeds: b and c share 2–3
    "d": [0.150, 0.151, 0.149],  # strictly last
}


def test_rows_welch_separates_are_ordered_and_the_rest_share_a_range():
    ranges = dict(zip(PLANTED, rank_ranges(list(PLANTED.values()))))
    assert ranges == {"a": (1, 1), "b": (2, 3), "c": (2, 3), "d": (4, 4)}
    assert [rank_text(*ranges[k]) for k in PLANTED] == ["1", "2–3", "2–3", "4"]


def test_a_difference_within_the_floor_is_a_tie_even_where_welch_separates_it():
    high, low = [0.1000, 0.1001, 0.0999], [0.0985, 0.0986, 0.0984]  # 0.15 points apart, spreads of 0.01 points
    lo, _hi = welch_interval(high, low)
    assert lo > 0, "Welch alone would order them"
    assert not significantly_better(high, low) and rank_ranges([high, low]) == [(1, 2), (1, 2)]


def test_a_difference_beyond_the_floor_with_a_wide_spread_is_a_tie():
    high, low = [0.21, 0.17, 0.19], [0.185, 0.18, 0.175]  # 1 point apart on average, seeds 4 points apart
    assert statistics.fmean(high) - statistics.fmean(low) > FLOOR
    assert rank_ranges([high, low]) == [(1, 2), (1, 2)]


def test_one_seed_rows_are_never_ordered_inside_the_floor():
    assert rank_ranges([[0.2000], [0.1985]]) == [(1, 2), (1, 2)]
    assert rank_ranges([[0.2000], [0.1990, 0.1991, 0.1989]]) == [(1, 2), (1, 2)]
    assert rank_ranges([[0.2000], [0.1970]]) == [(1, 1), (2, 2)], "beyond the floor only the floor decides"


def test_the_rank_range_is_one_plus_the_rows_better_to_the_rows_not_worse():
    # a chain: x beats z, but neither beats y nor y either of them
    x, y, z = [0.200, 0.201, 0.199], [0.190, 0.205, 0.175], [0.180, 0.181, 0.179]
    assert rank_ranges([x, y, z]) == [(1, 2), (1, 3), (2, 3)]


# ---- the board: ranks, marks, compute columns and the mixed-hardware note -------------------------------------

def _row_entry(name: str, top1: list[float], *, cpu: str = "AMD EPYC", bf16: str | None = "avx512_bf16",
               threads: int | None = 1, method_s: float = 600.0, downstream_s: float = 120.0) -> dict:
    data = json.loads(COMMITTED.read_text())
    data["method"]["name"] = name
    data["entry_id"] = f"{name}--planted"
    stat = data["metrics"]["next_token_accuracy"]["top1"]
    stat.update(per_seed=top1, mean=statistics.fmean(top1), std=statistics.stdev(top1))
    data["environment"]["hardware"].update(cpu=cpu, cpu_bf16=bf16, torch_threads=threads)
    data["costs"].update(method_seconds=method_s, downstream_seconds=downstream_s)
    return data


def _board(entries: list[dict], reproductions: dict[str, object] | None = None):
    reports = [EntryReport(Path(f"{e['entry_id']}.json"), None, entry=Entry.model_validate(copy.deepcopy(e)),
                           reproduction=(reproductions or {}).get(e["method"]["name"])) for e in entries]
    board = build_board(reports)
    return board, render_markdown(board, {})


def _cells(md: str, name: str) -> list[str]:
    line = next(line for line in md.splitlines() if f"| {md_escape(name)} " in line)
    return [c.strip() for c in line.strip("|").split(" | ")]


def _header(md: str) -> list[str]:
    line = next(line for line in md.splitlines() if line.startswith("| \\# |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_the_board_shows_rank_ranges_and_says_how_ranks_are_formed():
    board, md = _board([_row_entry(f"planted-{k}", v) for k, v in PLANTED.items()])
    ranks = {r.entry.method.name: (r.rank, r.rank_to) for r in board.rows}
    assert ranks == {"planted-a": (1, 1), "planted-b": (2, 3), "planted-c": (2, 3), "planted-d": (4, 4)}
    assert _cells(md, "planted-b")[0] == "2–3 ○" and _cells(md, "planted-a")[0] == "1 ○"
    assert "Welch" in md and "0.2 points" in md and "share a range" in md
    assert "Mixed hardware" not in md


def _record(ok: bool, tolerances: dict, top1: tuple[float, float] | None = None, **kw) -> SimpleNamespace:
    """A reproduction record as the board reads it; ``top1``: seed 1's top-1 in the entry and in the re-run."""
    comparisons = [] if top1 is None else [SimpleNamespace(metric="next_token_accuracy.top1, seed 1", entry=top1[0],
                                                           reproduced=top1[1], ok=True)]
    return SimpleNamespace(ok=ok, failed=0 if ok else 2, seeds=[1], day="2026-12-01",
                           reproduced_at="2026-12-01T00:00:00Z", comparisons=comparisons,
                           tolerances={**tolerances, "epsilon_relative": 1e-3}, **kw)


def test_a_failed_or_never_run_reproduction_is_marked_beside_the_rank():
    spread_rule = {"accuracy_spread_sds": 2.0, "accuracy_floor": 0.002}
    records = {"planted-a": _record(False, spread_rule),
               # judged at the old fixed ±0.5 points: b's re-run is inside b's seed spread (2 SD = 0.4 points) as well,
               # d's is not (its seeds are 0.1 points apart: the floor, 0.2 points, is its tolerance)
               "planted-b": _record(True, {"accuracy": 0.005}, (0.182, 0.185)),
               "planted-d": _record(True, {"accuracy": 0.005}, (0.151, 0.155))}
    _, md = _board([_row_entry(f"planted-{k}", v) for k, v in PLANTED.items()], records)
    a, b, c, d = (_cells(md, f"planted-{k}") for k in "abcd")
    assert (a[0], b[0], c[0], d[0]) == ("1 ✗", "2–3 ✓", "2–3 ○", "4 ✗")
    reproduced = _header(md).index("Reproduced")
    assert a[reproduced].startswith("[NO (2 outside) · seed 1 of 3 · 2026-12-01 · acc ±2 SD of seeds, ≥ 0.2 pt")
    assert b[reproduced].startswith("[yes · seed 1 of 3 · 2026-12-01 · acc ±0.005, ε 0.001 rel.]")
    assert d[reproduced].startswith("[yes · seed 1 of 3 · 2026-12-01 · acc ±0.005, ε 0.001 rel. · NO by the seed "
                                    "spread (1 outside)]")
    assert c[reproduced] == "not re-run"
    assert "3 entries were re-run by `lfb leaderboard reproduce` (1 within tolerance" in md


def test_every_row_shows_its_minutes_threads_and_cpu_from_the_entry():
    entries = [_row_entry("planted-a", PLANTED["a"], method_s=600.0, downstream_s=120.0, threads=2),
               _row_entry("planted-d", PLANTED["d"], cpu="Intel(R) Xeon(R) Processor", bf16=None, threads=None,
                          method_s=90.0, downstream_s=30.0)]
    _, md = _board(entries)
    head = _header(md)
    a, d = _cells(md, "planted-a"), _cells(md, "planted-d")
    at = {name: head.index(name) for name in ("Method min /seed", "Seed min", "Threads", "CPU")}
    assert [a[i] for i in at.values()] == ["10", "12", "2", "AMD EPYC (avx512\\_bf16)"]
    assert [d[i] for i in at.values()] == ["1.5", "2", "–", "Intel(R) Xeon(R) Processor (no native bf16)"]


def test_a_group_that_mixes_cpus_or_threads_says_so():
    same = [_row_entry("planted-a", PLANTED["a"]), _row_entry("planted-b", PLANTED["b"])]
    board, _ = _board(same)
    assert board.groups[0].hardware_note == ""
    threads = [_row_entry("planted-a", PLANTED["a"]), _row_entry("planted-b", PLANTED["b"], threads=2)]
    note = _board(threads)[0].groups[0].hardware_note
    assert "several thread counts (1: 1 row; 2: 1 row)" in note and "CPUs" not in note
    cpus = [_row_entry("planted-a", PLANTED["a"]), _row_entry("planted-b", PLANTED["b"]),
            _row_entry("planted-c", PLANTED["c"], cpu="Intel(R) Xeon(R) Processor", bf16="amx_bf16")]
    board, md = _board(cpus)
    note = board.groups[0].hardware_note
    assert "record several CPUs (AMD EPYC (avx512_bf16): 2 rows; Intel(R) Xeon(R) Processor (amx_bf16): 1 row)" in note
    assert md_escape(note) in md


# ---- reproduce: the entry's own seed spread, and the floor ------------------------------------------------------

def _entry_dict(top1: list[float]) -> dict:
    n = len(top1)
    stat = lambda values: {"per_seed": list(values)}  # noqa: E731 (only per_seed is compared)
    return {"seeds": list(range(n)), "privacy": {"epsilon_per_seed": [4.0] * n},
            "metrics": {"next_token_accuracy": {"top1": stat(top1), "top3": stat([v + 0.1 for v in top1]),
                                                "top5": stat([v + 0.2 for v in top1])},
                        "reference_public": {"top1": stat([0.15] * n)},
                        "reference_non_private": {"top1": stat([0.33] * n)},
                        "gap_closed": stat([0.1] * n), "fid": None}}


def _top1(entry: dict, again: dict, tol: Tolerances = Tolerances()):
    return [c for c in _compare(entry, again, tol) if c.metric.startswith("next_token_accuracy.top1")]


def test_a_re_run_inside_the_seed_spread_passes_and_outside_fails():
    entry = _entry_dict([0.160, 0.168, 0.164])  # sample SD 0.4 points: tolerance 2 SD = 0.8 points
    assert spread_tolerance([0.160, 0.168, 0.164]) == pytest.approx(0.008)
    inside = _entry_dict([0.160 + 0.007, 0.168 - 0.007, 0.164])
    (c0, c1, c2) = _top1(entry, inside)
    assert c0.ok and c1.ok and c2.ok and "2 SD of seeds" in c0.tolerance
    outside = _entry_dict([0.160 + 0.009, 0.168, 0.164])
    assert [c.ok for c in _top1(entry, outside)] == [False, True, True]


def test_the_floor_applies_to_one_seed_and_tight_entries():
    one = _entry_dict([0.16])
    assert [c.ok for c in _top1(one, _entry_dict([0.16 + 0.0019]))] == [True]
    assert [c.ok for c in _top1(one, _entry_dict([0.16 - 0.0021]))] == [False]
    tight = _entry_dict([0.1600, 0.1601, 0.1599])  # 2 SD = 0.02 points: the floor (0.2) is the tolerance
    assert [c.ok for c in _top1(tight, _entry_dict([0.1619, 0.1601, 0.1599]))] == [True, True, True]
    # a reference row without spread over seeds gets the floor, not the old fixed ±0.5 points
    moved = _entry_dict([0.16])
    moved["metrics"]["reference_public"]["top1"]["per_seed"] = [0.15 - 0.004]
    public = [c for c in _compare(one, moved, Tolerances()) if c.metric.startswith("reference_public")]
    assert [c.ok for c in public] == [False]


def test_a_fixed_accuracy_tolerance_still_overrides_the_spread():
    entry = _entry_dict([0.160, 0.168, 0.164])
    again = _entry_dict([0.160 + 0.004, 0.168, 0.164])
    (c0, *_rest) = _top1(entry, again, Tolerances(accuracy=0.003))
    assert not c0.ok and c0.tolerance == "±0.003"
