"""The check of `lfb eval` end to end for DP resampling, FedBis, FedBiscuit, weak-client voting and CTCL (tiny profile,
demo, one seed, the harness's default budget): the entry validates, its ε is the ledger's and within the target. Two
test files share it (test_eval_resample_voting_ctcl.py, test_eval_fedbis.py), so that xdist's workers share the runs."""

from __future__ import annotations

import math

import pytest

from largefedbench.leaderboard.schema import parse_entry
from largefedbench.privacy import PrivacyLedger
from largefedbench.run.eval import DEFAULT_DELTA, DEFAULT_EPSILON, EvalRequest, run_eval

#: smaller than Config.tiny() where it is cheap to be, so the five runs stay short
FAST = {
    "dp-resample": {"pool_size": "120", "max_pool_size": "180", "pool_growth": "60", "n_synthetic": "80"},
    "fedbis": {"rounds": "2", "sample_rate": "0.01", "n_dpo_prompts": "6", "n_synthetic": "60"},
    "fedbiscuit": {"rounds": "5", "sample_rate": "0.01", "n_dpo_prompts": "6", "n_synthetic": "60"},
    "weak-client-voting": {"rounds": "2", "n_generated": "120"},
    "ctcl": {"dp_steps": "2", "public_pretrain_steps": "20", "n_synthetic": "60"},
}


def check_eval_writes_a_valid_entry(tiny, tmp_path, method: str) -> None:
    _fd, _bundle, root = tiny
    request = EvalRequest(method=method, seeds=(0,), out=tmp_path, home=root, progress=False, overrides=FAST[method])
    result = run_eval(request, log=lambda m: None)
    entry = parse_entry(result.entry)
    assert entry.privacy.delta == DEFAULT_DELTA
    (ledger,) = entry.privacy.ledgers
    spent = PrivacyLedger.from_dict(ledger).epsilon(DEFAULT_DELTA, entry.privacy.accountant)
    assert spent == pytest.approx(entry.privacy.epsilon, rel=1e-9)
    assert 0.97 * DEFAULT_EPSILON < spent <= DEFAULT_EPSILON * 1.0001
    assert all(math.isfinite(v) for v in entry.metrics.next_token_accuracy.top1.per_seed)
    assert result.path.parent.name == method
