"""`lfb leaderboard reproduce --sample K`: K ranked entries drawn at random with a recorded seed,
re-run cheapest first, a reproduction record beside each, the board marked. The runner is replaced here (the
selection, records and marks are what is tested); test_reproduce_entry.py records one real tiny re-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from largefedbench.cli import main
from largefedbench.leaderboard.render import render_board
from largefedbench.leaderboard.reproduced import record_path
from largefedbench.leaderboard.validate import format_reports, validate_paths
from largefedbench.run import sample
from largefedbench.run.reproduce import Comparison, ReproduceResult, Tolerances
from largefedbench.run.sample import draw, reproduce_sample

from .entry_variants import relabel, save, with_seeds

REPO = Path(__file__).resolve().parents[2]
# the tiny demo entry (a cpu-wide ε = 1 entry has one seed: unranked)
FEDAVG = next((REPO / "leaderboard" / "entries" / "demo" / "dp-fedavg").glob("*--demo--tiny--eps1--??????????.json"))
WALL = [500.0, 20.0, 300.0, 40.0, 10.0, 200.0]


def _save(board: Path, data: dict) -> Path:
    return save(board, data, artifacts_from=FEDAVG.parent)


@pytest.fixture()
def board(tmp_path) -> Path:
    """Six ranked copies of the committed DP-FedAvg entry with different recorded wall times, and one unranked."""
    folder = tmp_path / "board"
    base = json.loads(FEDAVG.read_text())
    for i, wall in enumerate(WALL):
        data = relabel(base, entry_id=f"dp-fedavg--demo--tiny--eps1--copy{i}")
        data["costs"]["wall_seconds"] = wall
        data["costs"]["method_seconds"], data["costs"]["downstream_seconds"] = 1.0, 0.5  # the wall time decides
        _save(folder, data)
    _save(folder, relabel(with_seeds(base, [0]), entry_id="dp-fedavg--demo--tiny--eps1--one-seed"))
    render_board(folder)
    return folder


class FakeRunner:
    """Stands in for `reproduce`: compares ε and top-1 of every seed it re-runs (``seeds``, default the entry's), all
    reproduced, or the top-1 of the first of them off by ``off``."""

    def __init__(self, off: float = 0.0) -> None:
        self.calls: list[str] = []
        self.seeds: list[list[int] | None] = []
        self.off = off

    def __call__(self, path: Path, **kwargs) -> ReproduceResult:
        entry = json.loads(Path(path).read_text())
        self.calls.append(entry["entry_id"])
        self.seeds.append(kwargs.get("seeds"))
        comparisons = []
        for n, seed in enumerate(kwargs.get("seeds") or entry["seeds"]):
            i = entry["seeds"].index(seed)
            eps = entry["privacy"]["epsilon_per_seed"][i]
            top1 = entry["metrics"]["next_token_accuracy"]["top1"]["per_seed"][i]
            again = top1 + (self.off if n == 0 else 0.0)
            comparisons += [Comparison(f"ε, seed {seed}", eps, eps, "1e-3 relative", True),
                            Comparison(f"next_token_accuracy.top1, seed {seed}", top1, again, "±0.005",
                                       abs(again - top1) <= 0.005)]
        return ReproduceResult(entry["entry_id"], comparisons, seeds=kwargs.get("seeds"))


def _wall(board: Path, entry_id: str) -> float:
    return json.loads(next(board.rglob(f"{entry_id}.json")).read_text())["costs"]["wall_seconds"]


def test_k_ranked_entries_are_drawn_with_the_seed_and_run_cheapest_first(board):
    runner = FakeRunner()
    result = reproduce_sample(board, 3, seed=7, runner=runner)
    assert len(runner.calls) == 3 and result.ok and result.among == len(WALL)
    assert "one-seed" not in " ".join(runner.calls), "only ranked entries are drawn"
    walls = [_wall(board, e) for e in runner.calls]
    assert walls == sorted(walls), "cheapest first"
    again = FakeRunner()
    reproduce_sample(board, 3, seed=7, runner=again, render=False)
    assert again.calls == runner.calls, "the same seed draws the same entries"
    reports = validate_paths([board / "entries"])
    drawn = {d.entry.entry_id for d in draw(reports, 3, 7)}
    assert drawn == set(runner.calls)
    # uniform, not only the cheap ones: over seeds every ranked entry gets drawn
    seen = {r.entry.entry_id for s in range(40) for r in draw(reports, 2, s)}
    assert len(seen) == len(WALL)


def test_the_records_mark_the_board_with_what_when_and_tolerance(board):
    result = reproduce_sample(board, 2, seed=1, runner=FakeRunner(), tolerances=Tolerances(accuracy=0.004))
    reports = {r.entry.entry_id: r for r in validate_paths([board / "entries"])}
    assert all(r.valid for r in reports.values()), format_reports(list(reports.values()))
    marked = {e for e, r in reports.items() if r.reproduction is not None}
    assert marked == {run.entry_id for run in result.runs}
    record = json.loads(record_path(result.runs[0].path).read_text())
    assert record["ok"] is True and record["selection"] == {"sample": 2, "among": len(WALL), "seed": 1}
    assert record["tolerances"]["accuracy"] == 0.004 and record["reproduced_at"].endswith("Z")
    md = (board / "README.md").read_text()
    row = next(line for line in md.splitlines() if f"`{result.runs[0].entry_id}`" in line)
    assert f"[yes · {record['reproduced_at'][:10]} · acc ±0.004, ε 0.001 rel.]" in row
    assert f"{result.runs[0].entry_id}.reproduced.json)" in row
    assert "2 entries were re-run by `lfb leaderboard reproduce` (2 within tolerance" in md
    assert render_board(board, check=True).stale == [], "the board was rendered with the marks"


def test_a_failed_reproduction_is_marked_and_exits_non_zero(board, monkeypatch, capsys):
    monkeypatch.setattr(sample, "reproduce", FakeRunner(off=0.02))
    code = main(["leaderboard", "reproduce", "--sample", "1", "--seed", "3", str(board), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "NOT reproduced (1 numbers outside)" in out and "random seed 3" in out
    md = (board / "README.md").read_text()
    assert "NO (1 outside)" in md and "(0 within tolerance" in md


def test_a_re_run_that_cannot_start_or_crashes_is_reported_and_the_others_run(board):
    from largefedbench.errors import SnapshotError

    ok = FakeRunner()

    def runner(path, **kwargs):
        if not ok.calls:
            ok.calls.append("first")
            raise SnapshotError("the snapshot with this content hash is not here")
        if len(ok.calls) == 1:
            ok.calls.append("second")
            raise RuntimeError("a method bug")
        return ok(path, **kwargs)

    result = reproduce_sample(board, 3, seed=2, runner=runner)
    skipped = [r.skipped for r in result.runs]
    assert "could not be made: the snapshot" in skipped[0] and "RuntimeError: a method bug" in skipped[1]
    assert result.runs[2].record is not None and not result.ok


def test_a_time_limit_skips_the_expensive_draws(board):
    runner = FakeRunner()
    result = reproduce_sample(board, len(WALL), seed=0, runner=runner, max_seconds=100)
    assert sorted(_wall(board, e) for e in runner.calls) == [10.0, 20.0, 40.0]
    assert [r.entry_id for r in result.runs if r.skipped and "limit" in r.skipped] and not result.ok


def test_an_entry_finished_by_a_resumed_run_counts_its_seeds_time_not_its_last_process(board):
    """Entries before 2026-11-29 recorded the wall time of the process that finished them: a run resumed for its last
    seed wrote a fraction of what re-running it takes. Its seeds' method and downstream seconds say more."""
    path = next(board.rglob("*copy4.json"))  # recorded wall 10 s
    data = json.loads(path.read_text())
    data["costs"]["method_seconds"], data["costs"]["downstream_seconds"] = 400.0, 100.0
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    runner = FakeRunner()
    result = reproduce_sample(board, len(WALL), seed=0, runner=runner, max_seconds=100, render=False)
    assert "dp-fedavg--demo--tiny--eps1--copy4" not in runner.calls
    skipped = next(r for r in result.runs if r.entry_id.endswith("copy4"))
    assert skipped.recorded_seconds == 1500.0 and "limit" in skipped.skipped


def test_a_stale_or_forged_record_is_not_shown(board):
    result = reproduce_sample(board, 2, seed=5, runner=FakeRunner(), render=False)
    stale, forged = (r.path for r in result.runs)
    data = json.loads(stale.read_text())
    data["costs"]["peak_memory_mb"] += 1  # the entry changes after it was reproduced
    stale.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    record = json.loads(record_path(forged).read_text())
    record["comparisons"][1]["ok"] = False  # a number outside tolerance, but the record still says ok
    record_path(forged).write_text(json.dumps(record))
    reports = {r.path: r for r in validate_paths([board / "entries"])}
    assert reports[stale].valid and reports[stale].reproduction is None
    assert any("stale" in f.message for f in reports[stale].notes)
    assert not reports[forged].valid
    assert any(f.check == "reproduction" and "outside their tolerance" in f.message for f in reports[forged].errors)


def test_an_orphan_record_is_refused_and_bad_arguments_are_clear(board, capsys):
    orphan = board / "entries" / "demo" / "dp-fedavg" / "gone.reproduced.json"
    orphan.write_text("{}")
    reports = validate_paths([board / "entries"])
    assert any(r.path == orphan and "without its entry" in r.errors[0].message for r in reports)
    assert main(["leaderboard", "reproduce", "--sample", "0", str(board)]) == 2
    assert "at least 1" in capsys.readouterr().err
    assert main(["leaderboard", "reproduce", "--sample", "1", str(FEDAVG)]) == 2
    assert "not one entry" in capsys.readouterr().err
    assert main(["leaderboard", "reproduce"]) == 2
    assert "--sample K" in capsys.readouterr().err


def test_one_seed_per_entry_is_drawn_with_the_seed_and_named_on_the_board(board):
    """A spot check (``--seeds 1`` with --sample): each drawn entry re-runs one of its three seeds, drawn with the
    recorded random seed; the time limit counts a third of the recorded wall time; the record and mark name it."""
    runner = FakeRunner()
    result = reproduce_sample(board, 3, seed=7, runner=runner, seeds_per_entry=1, max_seconds=250 / 3)
    ran = [r for r in result.runs if r.result is not None]
    assert ran and all(len(s) == 1 and s[0] in (0, 1, 2) for s in runner.seeds)
    assert [r.recorded_seconds for r in result.runs] == pytest.approx([_wall(board, r.entry_id) / 3 for r in result.runs])
    again = FakeRunner()
    reproduce_sample(board, 3, seed=7, runner=again, seeds_per_entry=1, max_seconds=250 / 3, render=False)
    assert again.seeds == runner.seeds, "the same random seed draws the same seeds"
    record = json.loads(record_path(ran[0].path).read_text())
    assert record["seeds"] == runner.seeds[0]
    row = next(line for line in (board / "README.md").read_text().splitlines() if f"`{ran[0].entry_id}`" in line)
    assert f"[yes · seed {runner.seeds[0][0]} of 3 · {record['reproduced_at'][:10]}" in row
    everything = FakeRunner()
    reproduce_sample(board, 2, seed=7, runner=everything, seeds_per_entry=3, render=False)
    assert everything.seeds == [None, None], "as many seeds as the entry has: the whole entry"


def test_a_record_naming_seeds_the_entry_did_not_run_is_an_error(board):
    result = reproduce_sample(board, 1, seed=4, runner=FakeRunner(), seeds_per_entry=1, render=False)
    path = record_path(result.runs[0].path)
    record = json.loads(path.read_text())
    record["seeds"] = [9]
    path.write_text(json.dumps(record))
    report = next(r for r in validate_paths([board / "entries"]) if r.path == result.runs[0].path)
    assert not report.valid and any("names seeds [9]" in f.message for f in report.errors)


def test_the_seed_draw_is_uniform_and_repeatable():
    import random

    from largefedbench.run.sample import draw_seeds

    picks = [draw_seeds([0, 1, 2], 1, random.Random(f"{s}:seeds")) for s in range(60)]
    assert {p[0] for p in picks} == {0, 1, 2}, "every seed gets drawn"
    assert picks == [draw_seeds([0, 1, 2], 1, random.Random(f"{s}:seeds")) for s in range(60)]
    assert draw_seeds([5, 3, 9], 2, random.Random(0)) in ([5, 3], [5, 9], [3, 9]), "kept in the entry's order"
    assert draw_seeds([0, 1, 2], 3, random.Random(0)) is None and draw_seeds([0, 1, 2], None, random.Random(0)) is None


def test_a_spot_check_record_must_compare_exactly_the_seeds_it_claims(board):
    result = reproduce_sample(board, 1, seed=4, runner=FakeRunner(), seeds_per_entry=1, render=False)
    path = record_path(result.runs[0].path)
    record = json.loads(path.read_text())
    assert record["selection"]["seeds_per_entry"] == 1
    claimed = record["seeds"][0]

    def findings(**change) -> list[str]:
        path.write_text(json.dumps({**record, **change}))
        report = next(r for r in validate_paths([board / "entries"]) if r.path == result.runs[0].path)
        return [f.message for f in report.errors]

    assert findings() == []
    assert any("names seeds [9]" in m for m in findings(seeds=[9]))
    assert any("each once" in m for m in findings(seeds=[claimed, claimed]))
    assert any("all of them: leave seeds out" in m for m in findings(seeds=[0, 1, 2]))
    other = next(s for s in (0, 1, 2) if s != claimed)
    assert any(f"compares seeds [{claimed}] but claims [{other}]" in m for m in findings(seeds=[other]))
    dropped = {k: v for k, v in record.items() if k != "seeds"}
    path.write_text(json.dumps(dropped))  # without its seeds the spot check would pass for a full re-run
    report = next(r for r in validate_paths([board / "entries"]) if r.path == result.runs[0].path)
    assert any("(every seed of the entry)" in f.message for f in report.errors)


def test_audit_entries_are_re_run_whole_by_a_spot_check_sample(board):
    base = json.loads(next(board.rglob("*copy0.json")).read_text())
    audit_entry = next(p for p in sorted((REPO / "leaderboard" / "entries" / "demo" / "dp-fedavg").glob("*audit*.json"))
                       if not p.name.endswith(".reproduced.json"))
    data = relabel(json.loads(audit_entry.read_text()), entry_id="dp-fedavg--demo--tiny--eps1--audit-copy")
    data["costs"]["wall_seconds"] = 1.0
    save(board, data, artifacts_from=audit_entry.parent)
    runner = FakeRunner()
    reproduce_sample(board, len(WALL) + 1, seed=0, runner=runner, seeds_per_entry=1, render=False)
    by_id = dict(zip(runner.calls, runner.seeds))
    assert by_id["dp-fedavg--demo--tiny--eps1--audit-copy"] is None
    assert all(len(s) == 1 for e, s in by_id.items() if e != "dp-fedavg--demo--tiny--eps1--audit-copy")
    assert base["seeds"] == [0, 1, 2]


def test_the_seed_options_say_which_goes_with_what(board, capsys):
    code = main(["leaderboard", "reproduce", "--sample", "1", "--seeds", "0,1", str(board), "--quiet"])
    assert code == 2 and "--seeds-per-entry N" in capsys.readouterr().err
    entry = next(board.rglob("*copy0.json"))
    code = main(["leaderboard", "reproduce", str(entry), "--seeds-per-entry", "1", "--quiet"])
    assert code == 2 and "goes with --sample" in capsys.readouterr().err
