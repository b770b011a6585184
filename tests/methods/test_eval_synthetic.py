"""`lfb eval` (the harness's run_eval) end to end on the demo, offline, tiny profile, for pe, pe-sft and popri.

Each run is shrunk with ``--set`` overrides (2 rounds, few samples) so the three stay within about a minute on a
quiet 2-core machine; the full ``Config.tiny()`` runs are exercised by tests/methods/test_pe.py and test_popri.py.
"""

from __future__ import annotations

import math

import pytest

from largefedbench.leaderboard.schema import parse_entry
from largefedbench.privacy import PrivacyLedger
from largefedbench.run.eval import EvalRequest, run_eval

pytestmark = pytest.mark.slow

OVERRIDES = {
    "pe": {"rounds": "2", "n_synthetic": "32", "n_final": "96"},
    "pe-sft": {"rounds": "2", "n_synthetic": "24", "n_final": "96"},
    "popri": {"rounds": "2", "n_prompts": "8", "n_per_prompt": "5", "n_final": "96"},
}


@pytest.mark.parametrize("method", ["pe", "pe-sft", "popri"])
def test_lfb_eval_runs_the_method_end_to_end_offline(method, tiny, tmp_path):
    _fd, _bundle, root = tiny
    request = EvalRequest(method=method, seeds=(0,), overrides=OVERRIDES[method], out=tmp_path, home=root, progress=False)
    result = run_eval(request, log=lambda message: None)
    entry = result.entry.to_json()
    parse_entry(entry)
    privacy = entry["privacy"]
    ledger = PrivacyLedger.from_dict(privacy["ledgers"][0])
    assert [(e.type_name, e.sample_rate, e.steps) for e in ledger] == [("poisson_gaussian", 1.0, 2)]
    assert privacy["epsilon"] <= privacy["target_epsilon"] == 1.0
    assert ledger.epsilon(privacy["delta"], privacy["accountant"]) == pytest.approx(privacy["epsilon"], rel=1e-9)
    assert 0 < entry["metrics"]["next_token_accuracy"]["top1"]["mean"] < 1
    assert math.isfinite(entry["metrics"]["fid"]["mean"])
    history = entry["history"][0]
    assert [h["round"] for h in history][:2] == [0, 1] and all(isinstance(h["fid"], float) for h in history)
    assert "fid_by_round" in result.plots and "pca" in result.plots
    assert entry["costs"]["floats_up_per_client_per_round"] > 0 and entry["costs"]["server_seconds_per_round"] > 0
    stages = entry["costs"]["stage_seconds"]  # where the seed's time went, per stage
    assert all(stages[k] > 0 for k in ("generation", "embedding", "clients", "downstream", "evaluation")), stages
    assert stages["dpo" if method == "popri" else "sft"] > 0 or method == "pe"
    assert sum(stages.values()) <= entry["costs"]["method_seconds"] + entry["costs"]["downstream_seconds"] + 1.0
