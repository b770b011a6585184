"""The typed run pipeline: a seed's stored result (readable across versions, reused on resume), the request's
home folder, and the entry the run returns (typed, written as the JSON it holds)."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import pytest

from largefedbench.errors import InputError
from largefedbench.leaderboard.schema import parse_entry
from largefedbench.run.eval import EvalRequest
from largefedbench.run.seed import PRECISION_STAMP, check_stored_precision, run_seed
from largefedbench.run.seed_result import SeedResult, jsonable

#: a seed's result.json exactly as lfb 0.x wrote it before SeedResult existed (a resumed run must still read it)
STORED_BEFORE = {
    "seed": 0, "test": {"top1": 0.25, "top3": 0.4, "top5": 0.5, "n_tokens": 1200},
    "validation": {"top1": 0.24, "top3": 0.39, "top5": 0.49, "n_tokens": 1100}, "fid": 3.5, "epsilon": 0.98,
    "accountant": "rdp", "ledger": {"format": "lfb-privacy-ledger/1", "events": []},
    "costs": {"rounds": 2, "floats_up_per_client_per_round": 400.0}, "method_seconds": 1.5,
    "downstream_seconds": 2.5, "history": [{"round": 0, "sigma": 1.2}], "info": {"sigma": 1.2}, "n_synthetic": 96,
}


def test_a_result_stored_by_the_previous_version_reads_back_and_is_stored_the_same_way():
    result = SeedResult.from_json(json.loads(json.dumps(STORED_BEFORE)))
    assert result.test["top1"] == 0.25 and result.audit is None and result.history == [{"round": 0, "sigma": 1.2}]
    assert result.to_json() == STORED_BEFORE  # no new key, no "audit": null
    audited = SeedResult.from_json({**STORED_BEFORE, "audit": {"scores": [0.1, 0.9], "score": "text"}})
    assert audited.to_json()["audit"] == {"scores": [0.1, 0.9], "score": "text"}


def test_a_malformed_result_says_which_file_and_what_to_do(tmp_path):
    with pytest.raises(InputError, match=r"seed-0/result.json is not a seed result \(missing epsilon, .*delete"):
        SeedResult.from_json({k: v for k, v in STORED_BEFORE.items() if k not in ("epsilon", "ledger")},
                             tmp_path / "seed-0" / "result.json")
    with pytest.raises(InputError, match="not a seed result"):
        SeedResult.from_json([1, 2])


def test_a_resumed_run_reuses_the_stored_seed_without_running_the_method(tmp_path):
    (tmp_path / "seed-0").mkdir()
    (tmp_path / "seed-0" / "result.json").write_text(json.dumps(STORED_BEFORE))
    prep = SimpleNamespace(run_dir=tmp_path)  # a finished seed needs nothing else: no method, no federation
    logs: list[str] = []
    assert run_seed(prep, None, 0, logs.append) == SeedResult(**STORED_BEFORE)
    assert logs == [f"seed 0: already done, reusing {tmp_path / 'seed-0' / 'result.json'}"]


BF16 = {"generation": "bfloat16", "training": "float32"}
FP32 = {"generation": "float32", "training": "float32"}


def test_a_stored_seed_made_in_another_precision_stops_the_run_before_any_work(tmp_path):
    for seed, stored in ((0, {**STORED_BEFORE, "precision": BF16}), (1, STORED_BEFORE)):
        (tmp_path / f"seed-{seed}").mkdir()
        (tmp_path / f"seed-{seed}" / "result.json").write_text(json.dumps(stored))
    assert SeedResult.from_json({**STORED_BEFORE, "precision": BF16}).to_json()["precision"] == BF16
    logs: list[str] = []
    check_stored_precision(tmp_path, (0, 1), BF16, logs.append)  # the same precision: nothing but the unchecked seed
    assert len(logs) == 1 and logs[0].startswith("seed-1: stored before lfb recorded their precision")
    # a machine without native bf16 samples in float32: seed 0 (bf16) and a new seed would not be one entry's seeds
    with pytest.raises(InputError, match=r"seed-0/result.json was made sampling in bfloat16 .* here lfb samples in "
                                         r"float32 .* Run with LFB_GENERATION_DTYPE=bfloat16 "
                                         r"LFB_TRAINING_DTYPE=float32 to match it, or delete .*seed-0"):
        check_stored_precision(tmp_path, (2, 0), FP32, logs.append)
    check_stored_precision(tmp_path, (1, 2), FP32, logs.append)  # a run of other seeds does not pool seed 0
    (tmp_path / "seed-2").mkdir()
    (tmp_path / "seed-2" / "result.json").write_text("[1, 2")  # cut short: named with the fix, before any work
    with pytest.raises(InputError, match=r"seed-2/result.json is not a seed result \(not JSON: .*delete its seed"):
        check_stored_precision(tmp_path, (2,), BF16, logs.append)
    prep = SimpleNamespace(run_dir=tmp_path)  # and the same when a run reaches the seed
    with pytest.raises(InputError, match=r"seed-2/result.json is not a seed result \(not JSON"):
        run_seed(prep, None, 2, logs.append)


def test_round_checkpoints_made_in_another_precision_stop_the_run_before_they_are_resumed(tmp_path):
    stopped = tmp_path / "seed-3"
    stopped.mkdir()
    (stopped / PRECISION_STAMP).write_text(json.dumps(BF16))  # a seed stopped with no checkpoint: nothing to mix
    logs: list[str] = []
    check_stored_precision(tmp_path, (3,), FP32, logs.append)
    (stopped / "round-checkpoint.pt").write_bytes(b"rounds 0-3")
    (stopped / "round-checkpoint-selectors.pt").write_bytes(b"a stage")
    check_stored_precision(tmp_path, (3,), BF16, logs.append)  # resumed in the precision its rounds ran in
    assert logs == []
    with pytest.raises(InputError, match=r"the round checkpoints in .*seed-3 \(round-checkpoint-selectors.pt, "
                                         r"round-checkpoint.pt\) were made sampling in bfloat16 .* here lfb samples "
                                         r"in float32 .* Run with LFB_GENERATION_DTYPE=bfloat16 "
                                         r"LFB_TRAINING_DTYPE=float32 to match it, or delete .*seed-3 to run"):
        check_stored_precision(tmp_path, (0, 3), FP32, logs.append)
    check_stored_precision(tmp_path, (0, 4), FP32, logs.append)  # not a seed of this run: left as it is
    (stopped / PRECISION_STAMP).unlink()  # checkpoints from before lfb stamped them: named, not judged
    check_stored_precision(tmp_path, (3,), FP32, logs.append)
    assert len(logs) == 1 and logs[0].startswith("seed-3: stored before lfb recorded their precision")
    for broken, why in (("{", r"not a precision record \(not JSON"), ("[]", r"not a precision record \(\[\]\)")):
        (stopped / PRECISION_STAMP).write_text(broken)
        with pytest.raises(InputError, match=rf"seed-3/precision.json is {why}.*delete .*seed-3"):
            check_stored_precision(tmp_path, (3,), FP32, logs.append)


def test_jsonable_keeps_what_json_holds_and_says_what_it_cannot():
    import numpy as np

    assert jsonable({1: (np.float32(0.5), np.int64(3)), "x": float("inf"), "o": object}) == \
        {"1": [0.5, 3], "x": "inf", "o": repr(object)}


def test_the_request_names_the_lfb_home_home(tmp_path):
    assert EvalRequest(method="public", home=tmp_path).home == tmp_path


def test_entries_are_typed_and_written_as_the_json_they_were_read_from():
    """Every committed entry (audited ones too) round-trips to exactly its JSON: no optional section or field
    appears as null that the file does not have."""
    from pathlib import Path

    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    files = [f for f in board.rglob("*.json") if not f.name.endswith(".reproduced.json")]
    assert any("--audit-" in f.name for f in files)
    for path in files:
        data = json.loads(path.read_text())
        entry = parse_entry(data)
        assert entry.to_json() == data, path
        assert parse_entry(entry) is entry
    assert entry.metrics.next_token_accuracy.top1.mean == data["metrics"]["next_token_accuracy"]["top1"]["mean"]
    with pytest.warns(DeprecationWarning, match=r"read the attribute \(\.metrics\)"):
        assert entry["metrics"] is entry.metrics  # old code that indexed the dict keeps working for one release
    with pytest.raises(KeyError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entry["no_such_section"]


def test_an_entry_names_the_commit_of_each_seed_when_a_resumed_seed_ran_at_another(monkeypatch):
    import torch

    from largefedbench import environment
    from largefedbench.run.entry import _environment

    cpu = torch.device("cpu")
    monkeypatch.setattr(environment, "git_commit", lambda: "c" * 40)
    here = SeedResult(**{**STORED_BEFORE, "seed": 1}, made_with={"lfb_version": "0.3.0", "git_commit": "c" * 40})
    assert _environment([here], "process", cpu).seed_commits is None  # every seed ran here: nothing to add
    earlier = SeedResult(**STORED_BEFORE, made_with={"lfb_version": "0.3.0", "git_commit": "a" * 40})
    before_recorded = SeedResult(**{**STORED_BEFORE, "seed": 2})  # stored before seeds recorded their commit
    env = _environment([earlier, here, before_recorded], "process", cpu)
    assert env.git_commit == "c" * 40
    assert env.seed_commits == {"0": "a" * 40, "1": "c" * 40, "2": None}
    assert SeedResult.from_json(earlier.to_json()).made_with == {"lfb_version": "0.3.0", "git_commit": "a" * 40}


def test_a_finished_seed_can_be_committed_but_checkpoints_and_unreleased_diagnostics_cannot(tmp_path):
    """.gitignore: a run resumes on another machine from committed seed results; nothing unreleased is committed."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(root / ".gitignore", repo / ".gitignore")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    run = Path("leaderboard/.runs/popri--demo-prose--cpu--eps4--0123456789")
    kept = [run / "seed-0" / name for name in ("result.json", "synthetic.json", "synthetic-embeddings.npy")]
    ignored = [run / "seed-0" / name for name in ("method-output.pt", "round-checkpoint.pt", "audit-release-scores.npz",
                                                  "precision.json",
                                                  "round-checkpoint-public-pretraining.pt",
                                                  "unreleased-diagnostics.json")] + [run / "unreleased-diagnostics.json"]
    for path in kept + ignored:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("x")
    out = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    assert sorted(line[3:] for line in out.splitlines()) == sorted([".gitignore"] + [str(p) for p in kept])
