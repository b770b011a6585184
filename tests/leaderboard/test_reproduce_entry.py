"""`lfb leaderboard reproduce`: a real entry re-runs to the same numbers; a doctored one is caught."""

from __future__ import annotations

import json
import shutil

import pytest

from largefedbench.cli import main
from largefedbench.errors import InputError
from largefedbench.leaderboard.render import render_board
from largefedbench.leaderboard.reproduced import record_path
from largefedbench.leaderboard.validate import format_reports, validate_paths
from largefedbench.run.reproduce import Tolerances, reproduce
from largefedbench.run.sample import record_reproduction

from .entry_variants import save, shift_accuracy


def test_the_produced_entry_reproduces_exactly(produced, tiny, example_plugin, tmp_path):
    _fd, _bundle, root = tiny
    result = reproduce(produced.path, home=root)
    assert result.ok, result.format()
    names = {c.metric for c in result.comparisons}
    assert {"ε, seed 0", "next_token_accuracy.top1, seed 0", "gap_closed, seed 0", "fid, seed 0"} <= names
    assert all(c.difference == 0 for c in result.comparisons), result.format()  # same machine, same software
    precision = produced.entry.environment.precision  # recorded, and re-run under: no note on the same machine
    assert precision["training"] in ("bfloat16", "float32")
    assert precision["generation"] in ("bfloat16", "float32", "as loaded")
    assert not any("dtypes" in note for note in result.notes), result.notes
    # the real re-run recorded beside a byte-identical copy of the entry marks the board
    board = tmp_path / "board"
    copy = save(board, produced.entry.to_json(), artifacts_from=produced.path.parent)
    copy.write_bytes(produced.path.read_bytes())
    record = record_reproduction(result, copy, tolerances=Tolerances(), seconds=1.0)
    (report,) = validate_paths([board / "entries"])
    assert report.valid and report.reproduction is not None and report.reproduction.ok, format_reports([report])
    assert json.loads(record.read_text())["comparisons"][0]["metric"] == "ε, seed 0"
    render_board(board)
    assert f"[yes · {report.reproduction.day} · acc ±2 SD of seeds, ≥ 0.2 pt" in (board / "README.md").read_text()


def test_doctored_numbers_are_outside_the_tolerance_and_exit_non_zero(produced, tiny, tmp_path, capsys, example_plugin):
    """The doctored copy keeps the produced entry's id, so the re-run can resume from the produced run's stored
    seed results (copied into a scratch board): this checks the comparison, not the method, a second time."""
    _fd, _bundle, root = tiny
    doctored = save(tmp_path / "doctored", shift_accuracy(produced.entry.to_json(), 0.02),
                    artifacts_from=produced.path.parent)
    scratch = tmp_path / "scratch"
    shutil.copytree(produced.path.parents[3] / ".runs", scratch / ".runs")
    code = main(["leaderboard", "reproduce", str(doctored), "--home", str(root), "--out", str(scratch), "--quiet",
                 "--record"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "NOT reproduced" in out and "next_token_accuracy.top1, seed 0" in out and "<- OUTSIDE" in out
    assert "-2.00e-02" in out
    ok = [line for line in out.splitlines() if line.startswith("ε, seed 0")]
    assert ok and "OUTSIDE" not in ok[0], "ε itself still matches"
    (report,) = validate_paths([tmp_path / "doctored" / "entries"])
    assert report.reproduction is not None and not report.reproduction.ok, format_reports([report])
    assert record_path(doctored).is_file()


def test_an_invalid_entry_is_not_reproduced(produced, tmp_path):
    data = shift_accuracy(produced.entry.to_json(), 0.0)
    data["metrics"]["gap_closed"]["mean"] = 0.5
    path = save(tmp_path, data, artifacts_from=produced.path.parent)
    with pytest.raises(InputError, match="not a valid entry.*gap_closed"):
        reproduce(path)


def test_an_entry_made_before_a_setting_existed_is_rebuilt_at_that_settings_preset_value(lfb_home, tmp_path):
    """PE gained ``prompt_format`` and ``prefix_words`` after the board's tiny PE entries were made: their re-run uses
    the preset's values (what PE did before) and says so; a setting the method no longer has still stops it."""
    from pathlib import Path

    from largefedbench.leaderboard.files import EntryFile, board_of
    from largefedbench.leaderboard.validate import validate_entry_file
    from largefedbench.run.reproduce import _prepare

    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    path = next(p for p in sorted(board.glob("demo/pe/pe--demo--tiny--*.json"))
                if not p.name.endswith(".reproduced.json")
                and "prompt_format" not in json.loads(p.read_text())["config"]["method"])
    entry = validate_entry_file(EntryFile(path, board_of(path))).entry
    notes = []
    request = _prepare(entry, tmp_path / "board", lfb_home, False, notes)
    assert request.method == "pe"
    assert any("predates" in n and "prompt_format='few-shot'" in n for n in notes), notes
    gone = entry.model_copy(update={"config": entry.config.model_copy(
        update={"method": {**entry.config.method, "retired_knob": 3}})})
    with pytest.raises(InputError, match="retired_knob"):
        _prepare(gone, tmp_path / "board", lfb_home, False, [])


def test_a_spot_check_compares_the_re_run_seeds_with_the_same_seeds_of_the_entry(entry):
    """``reproduce(seeds=…)``: the re-run holds a subset of the entry's seeds, and each of its numbers is compared
    with the same seed's number in the entry, not with the entry's first seed."""
    from largefedbench.run.reproduce import _compare

    from .entry_variants import with_seeds

    three = with_seeds(entry, [0, 1, 2], spread=0.01)
    again = with_seeds(entry, [0, 1, 2], spread=0.01)
    for section in ("next_token_accuracy", "reference_public", "reference_non_private"):
        for k in ("top1", "top3", "top5"):
            again["metrics"][section][k]["per_seed"] = again["metrics"][section][k]["per_seed"][2:]
    for key in ("gap_closed", "fid"):
        again["metrics"][key]["per_seed"] = again["metrics"][key]["per_seed"][2:]
    again["privacy"]["epsilon_per_seed"] = again["privacy"]["epsilon_per_seed"][2:]
    again["seeds"] = [2]
    compared = _compare(three, again, Tolerances(accuracy=0.005))
    assert compared and all(c.metric.endswith("seed 2") for c in compared)
    assert all(c.ok and c.difference == 0 for c in compared)
    top1 = next(c for c in compared if c.metric == "next_token_accuracy.top1, seed 2")
    assert top1.entry == three["metrics"]["next_token_accuracy"]["top1"]["per_seed"][2]
    # seed 0's number differs by 2 × 0.01 from seed 2's: compared with it, the check would fail
    assert abs(top1.entry - three["metrics"]["next_token_accuracy"]["top1"]["per_seed"][0]) > 0.005


def test_a_spot_check_of_seeds_the_entry_did_not_run_is_refused(produced, capsys):
    code = main(["leaderboard", "reproduce", str(produced.path), "--seeds", "4", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "ran seeds 0; name one or more of those" in err


def test_a_spot_check_runs_only_the_named_seeds(monkeypatch, lfb_home):
    """``reproduce(seeds=…)`` hands the subset to the re-run (the harness would otherwise re-run every seed while the
    mark says one): the request that reaches ``run_eval`` holds only the named seed."""
    from pathlib import Path

    import largefedbench.run.eval as eval_module

    class Stop(Exception):
        pass

    seen = []

    def fake_run_eval(request, **kwargs):
        seen.append(request.seeds)
        raise Stop

    monkeypatch.setattr(eval_module, "run_eval", fake_run_eval)
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    path = next(p for p in sorted(board.glob("demo/dp-fedavg/dp-fedavg--demo--tiny--eps1--??????????.json")))
    with pytest.raises(Stop):
        reproduce(path, home=lfb_home, seeds=[2])
    assert seen == [(2,)]


def test_a_reproduction_samples_and_trains_in_the_dtypes_its_entry_recorded(monkeypatch, lfb_home, tmp_path):
    """An entry records the dtypes it sampled and trained in (``environment.precision``); ``reproduce`` re-runs under
    the same, whatever this shell sets, says so when this machine would have chosen otherwise, and puts the shell's
    settings back afterwards."""
    import os
    from pathlib import Path

    import largefedbench.run.eval as eval_module

    class Stop(Exception):
        pass

    seen = []

    def fake_run_eval(request, **kwargs):
        seen.append((os.environ.get("LFB_GENERATION_DTYPE"), os.environ.get("LFB_TRAINING_DTYPE")))
        raise Stop

    monkeypatch.setattr(eval_module, "run_eval", fake_run_eval)
    monkeypatch.setenv("LFB_TRAINING_DTYPE", "float32")
    monkeypatch.delenv("LFB_GENERATION_DTYPE", raising=False)
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    committed = next(p for p in sorted(board.glob("demo/dp-fedavg/dp-fedavg--demo--tiny--eps1--??????????.json")))
    data = json.loads(committed.read_text())
    assert data["environment"].get("precision") is None  # written before entries recorded it: nothing is pinned
    data["environment"]["precision"] = {"generation": "float32", "training": "bfloat16"}
    path = save(tmp_path / "board", data, artifacts_from=committed.parent)
    with pytest.raises(Stop):
        reproduce(path, home=lfb_home, seeds=[0])
    assert seen == [("float32", "bfloat16")]
    assert os.environ["LFB_TRAINING_DTYPE"] == "float32" and "LFB_GENERATION_DTYPE" not in os.environ
    with pytest.raises(Stop):
        reproduce(committed, home=lfb_home, seeds=[0])
    assert seen[-1] == (None, "float32")  # recorded nothing: the shell's settings stand
    monkeypatch.setenv("LFB_GENERATION_DTYPE", "bfloat16")
    data["environment"]["precision"] = {"generation": "as loaded", "training": "float32"}  # made on CUDA
    with pytest.raises(Stop):
        reproduce(save(tmp_path / "board", data, artifacts_from=committed.parent), home=lfb_home, seeds=[0])
    assert seen[-1] == (None, "float32") and os.environ["LFB_GENERATION_DTYPE"] == "bfloat16"


def test_a_setting_the_entry_predates_reruns_at_the_value_the_method_declares_for_before_it(monkeypatch, lfb_home,
                                                                                          tmp_path):
    """A Config field added after an entry was written runs, in ``reproduce``, at the method's
    ``introduced_settings`` value (what it did before the field existed) rather than at its preset's, with a note."""
    from pathlib import Path

    from largefedbench.methods.dp_fedavg import DPFedAvg

    import largefedbench.run.eval as eval_module

    class Stop(Exception):
        pass

    seen = []

    def fake_run_eval(request, **kwargs):
        seen.append(dict(request.overrides))
        raise Stop

    monkeypatch.setattr(eval_module, "run_eval", fake_run_eval)
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    committed = next(p for p in sorted(board.glob("demo/dp-fedavg/dp-fedavg--demo--tiny--eps1--??????????.json")))
    data = json.loads(committed.read_text())
    assert data["config"]["method"].pop("record_update_norms") is False  # as if written before the setting existed
    path = save(tmp_path / "board", data, artifacts_from=committed.parent)
    with pytest.raises(Stop):
        reproduce(path, home=lfb_home, seeds=[0])
    assert "record_update_norms" not in seen[-1]  # undeclared: the preset's value
    monkeypatch.setattr(DPFedAvg, "introduced_settings", {"record_update_norms": True})
    with pytest.raises(Stop):
        reproduce(path, home=lfb_home, seeds=[0])
    assert seen[-1]["record_update_norms"] in ("true", "True")


def test_a_bf16_entry_says_before_its_re_run_what_this_cpus_bf16_support_means():
    """Re-running an entry that sampled in bfloat16 on a CPU without native bf16 is emulated (hours instead of
    minutes); on another bf16 ISA the kernels round differently. Both are said up front; nothing on the same ISA,
    for a float32 entry, or on a GPU."""
    from pathlib import Path

    from largefedbench.leaderboard.schema import Entry
    from largefedbench.run.reproduce import bf16_here_notes

    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries" / "demo"
    ctcl = Entry.model_validate_json((board / "ctcl" / "ctcl--demo-prose--cpu--eps4--26481cf460.json").read_text())
    assert ctcl.environment.precision["generation"] == "bfloat16"
    assert ctcl.environment.hardware["cpu_bf16"] == "avx512_bf16"
    (note,) = bf16_here_notes(ctcl, "cpu", None)
    assert "emulated" in note and "generation" in note and "than on the avx512_bf16 machine" in note
    made_emulated = ctcl.model_copy(update={"environment": ctcl.environment.model_copy(
        update={"hardware": {**ctcl.environment.hardware, "cpu_bf16": None}})})
    (note,) = bf16_here_notes(made_emulated, "cpu", None)
    assert "as it was where the entry was made" in note
    # a method that outputs a model samples nothing, though the machine-wide precision says bfloat16
    assert bf16_here_notes(ctcl.model_copy(update={"method": ctcl.method.model_copy(update={"output": "model"})}),
                           "cpu", None) == []
    assert bf16_here_notes(ctcl, "cpu", "avx512_bf16") == []
    assert bf16_here_notes(ctcl, "cuda", None) == []
    (note,) = bf16_here_notes(ctcl, "cpu", "amx_bf16")
    assert "round differently" in note
    float32 = ctcl.model_copy(update={"environment": ctcl.environment.model_copy(
        update={"precision": {"generation": "float32", "training": "float32"}})})
    assert bf16_here_notes(float32, "cpu", None) == []


def test_an_entry_whose_eps0_model_is_pretrained_again_says_up_front_when_this_cpu_would_build_other_weights():
    """The cpu-wide entries' ε = 0 model is not shipped; it was pretrained on a CPU with AMX. Another CPU's kernels
    give other weights (docs/profiles.md), which the re-run should say before hours of pretraining, not after."""
    from pathlib import Path

    from largefedbench.leaderboard.schema import Entry
    from largefedbench.run.reproduce import pretraining_here_notes

    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries" / "demo"
    wide = Entry.model_validate_json(next((board / "dp-fedavg").glob("dp-fedavg--demo-prose--cpu-wide--eps4--*[0-9a-f].json"))
                                     .read_text())
    assert wide.environment.hardware["cpu_bf16"] == "amx_bf16" and wide.public_model
    (note,) = pretraining_here_notes(wide, "cpu-wide", "avx512_bf16")
    assert wide.public_model in note and "ran (and most likely pretrained it) on a CPU with amx_bf16" in note
    assert "3,600 steps" in note
    assert pretraining_here_notes(wide, "cpu-wide", None) != []
    assert pretraining_here_notes(wide, "cpu-wide", "amx_bf16") == []
    # since pretraining records its kernels, those count, not the CPU a later run (a cache hit) ran on
    profile = {**wide.profile, "downstream": {**wide.profile["downstream"], "pretraining": {
        **wide.profile["downstream"]["pretraining"], "cpu_bf16": "avx512_bf16", "device": "cpu"}}}
    recorded = wide.model_copy(update={"profile": profile})
    assert pretraining_here_notes(recorded, "cpu-wide", "avx512_bf16") == []
    (note,) = pretraining_here_notes(recorded, "cpu-wide", "amx_bf16")
    assert "it was pretrained on a CPU with avx512_bf16" in note


def test_what_reproduce_knows_before_the_re_run_is_logged_before_it(monkeypatch, lfb_home, tmp_path):
    """The notes that say a re-run will be slow or will not repeat to the digit are worth reading before it starts
    (it may take hours): they are logged before run_eval is called, and kept in the result."""
    from pathlib import Path

    import largefedbench.run.reproduce as reproduce_module

    logged: list[str] = []
    Stop = _stop_at_run_eval(monkeypatch, lambda request: logged.append("run_eval"))
    monkeypatch.setattr(reproduce_module, "cpu_bf16", lambda: None)  # this "CPU" has no native bf16
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    committed = next(p for p in sorted(board.glob("demo/pe/pe--demo--tiny--eps1--*--audit-*.json")))
    data = json.loads(committed.read_text())
    assert data["method"]["output"] == "synthetic text" and data["config"]["profile"] == "tiny"
    data["environment"]["precision"] = {"generation": "bfloat16", "training": "float32"}
    data["environment"]["hardware"]["cpu_bf16"] = "avx512_bf16"
    path = save(tmp_path / "board", data, artifacts_from=committed.parent)
    with pytest.raises(Stop):
        reproduce(path, home=lfb_home, log=logged.append)
    before = logged[: logged.index("run_eval")]
    assert any("runs emulated here" in m for m in before), logged
    assert any("is not shipped for the tiny profile" in m for m in before), logged


def test_a_re_run_uses_the_entrys_local_executor_and_worker_processes_otherwise(monkeypatch, lfb_home, tmp_path):
    """FedBis entries with record_agreement ran on --executor local, which that diagnostic needs: their re-run
    stopped at once on the default worker processes. Ray entries re-run on processes (same sums, no cluster)."""
    from pathlib import Path

    seen: list[str] = []
    Stop = _stop_at_run_eval(monkeypatch, lambda request: seen.append(request.executor))
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    committed = next(p for p in sorted(board.glob("demo/dp-fedavg/dp-fedavg--demo--tiny--eps1--??????????.json")))
    data = json.loads(committed.read_text())
    for recorded in ("local", "ray", "process"):
        data["environment"]["client_executor"] = recorded
        with pytest.raises(Stop):
            reproduce(save(tmp_path / recorded, data, artifacts_from=committed.parent), home=lfb_home, seeds=[0])
    assert seen == ["local", "process", "process"]


def _stop_at_run_eval(monkeypatch, see):
    """Make ``run_eval`` call ``see(request)`` and raise the returned exception class: a re-run's request, unrun."""
    import largefedbench.run.eval as eval_module

    class Stop(Exception):
        pass

    def fake_run_eval(request, **kwargs):
        see(request)
        raise Stop

    monkeypatch.setattr(eval_module, "run_eval", fake_run_eval)
    return Stop
