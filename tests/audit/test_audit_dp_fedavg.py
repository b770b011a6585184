"""The audit catches a broken DP-FedAvg and passes a correct one (tiny models, 40 real clients + 100 canaries,
everyone in every round so each inserted canary is in the released model; about 15 s per run). The test's
validation prefers later rounds, so the last round's model is released (with real validation, correct DP at ε = 1
on 140 clients releases the public model, whose delta is 0 and scores nothing)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import selection_for
from largefedbench.methods.dp_fedavg import DPFedAvg, DPFedAvgConfig

import largefedbench.federation as federation_module
import largefedbench.privacy.mechanisms as mechanisms
from largefedbench.audit.canaries import CanaryPlan, update_scores, with_canaries
from largefedbench.contract import PublicResources
from largefedbench.data.federated import ClientSplit
from largefedbench.federation import Federation
from largefedbench.fedtrain import FlatParams
from largefedbench.privacy import PrivacyBudget
from largefedbench.run.audit import audit_seed

pytestmark = pytest.mark.slow
EPSILON, DELTA, CANARIES, N_REAL = 1.0, 1e-6, 100, 40


def audit_run(tiny, seed: int) -> dict:
    """DP-FedAvg at ε = 1 over 40 real clients plus the included canaries, audited from the released model."""
    fd, bundle, _ = tiny
    calls = iter(range(1000))
    public = PublicResources(models=bundle, seed=seed, run_dir=None, progress=False)
    plan = CanaryPlan(CANARIES, seed, "update")
    split = with_canaries(ClientSplit("train", fd.train.table.select(range(N_REAL))), plan)
    cfg = dataclasses.replace(DPFedAvgConfig.tiny(), clients_per_round=len(split))
    fed = Federation(split, seed=seed)
    fed.selection = selection_for(tiny, seed)
    fed.selection.accuracy = lambda m: {"top1": next(calls) / 1000}  # later rounds win
    fed.client_outputs = plan.federation_hook(cfg.clip)
    artifact = DPFedAvg().train(fed, public, cfg, PrivacyBudget(EPSILON, DELTA))
    assert fed.ledger.epsilon(DELTA, "rdp") <= EPSILON * 1.01  # the ledger claims ε = 1 either way
    assert artifact.info["best_round"] == cfg.rounds
    delta = FlatParams(artifact.model).get() - FlatParams(bundle.new_downstream()).get()
    return audit_seed(plan, update_scores(plan, delta), seed=seed, confidence=0.95, delta=DELTA)


def test_noise_forced_off_is_caught(tiny, monkeypatch):
    def no_noise(total, **_):
        return total

    # the broken mechanism: Gaussian(σ) adds nothing, while the ledger still records σ (and claims ε = 1)
    monkeypatch.setattr(mechanisms, "add_gaussian_noise", no_noise)
    monkeypatch.setattr(federation_module, "add_gaussian_noise", no_noise, raising=False)
    result = audit_run(tiny, seed=0)
    assert result["epsilon_lower_bound"] > EPSILON
    assert result["one_shot_epsilon"] == "inf" or result["one_shot_epsilon"] > EPSILON


def test_correct_dp_stays_below_its_claim(tiny):
    for seed in (0, 1):
        result = audit_run(tiny, seed)
        assert result["scores_in"]["std"] > 0  # the released model moved: the canaries were scored on something
        assert result["epsilon_lower_bound"] <= EPSILON
