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
from largefedbench.run.seed import run_seed
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


def test_jsonable_keeps_what_json_holds_and_says_what_it_cannot():
    import numpy as np

    assert jsonable({1: (np.float32(0.5), np.int64(3)), "x": float("inf"), "o": object}) == \
        {"1": [0.5, 3], "x": "inf", "o": repr(object)}


def test_the_request_names_the_lfb_home_home_and_still_takes_root(tmp_path):
    assert EvalRequest(method="public", home=tmp_path).home == tmp_path
    with pytest.warns(DeprecationWarning, match="home="):
        assert EvalRequest(method="public", root=tmp_path).home == tmp_path
    with pytest.raises(InputError, match="give home only"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        EvalRequest(method="public", home=tmp_path, root=tmp_path / "other")


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
