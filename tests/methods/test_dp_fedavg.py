"""DP-FedAvg (methods/dp_fedavg.py, the loop of methods/_federated_finetuning.py) on the demo snapshot with the
tiny models: ledger and σ, server noise, unreleased diagnostics, empty cohorts, resume after a kill, and a gain over
the public model at a large ε. The client update itself is tested in tests/fedtrain."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from conftest import N_VALIDATION, Killed, killed_after, public_for, subset
from largefedbench.methods.dp_fedavg import DPFedAvg
from timing_free import without_timing

from largefedbench.contract import PublicResources
from largefedbench.errors import InputError
from largefedbench.evaluation.accuracy import next_token_accuracy
from largefedbench.federation import Federation
from largefedbench.fedtrain import FlatParams
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget
from largefedbench.rounds import UNRELEASED_FILE
from largefedbench.rounds.checkpoints import CHECKPOINT_NAME
from largefedbench.rounds.state_file import read_state

DELTA = 1e-5


def _flat(model) -> torch.Tensor:
    return FlatParams(model).get()


@pytest.fixture(scope="module")
def large_eps_run(tiny, tmp_path_factory):
    """The tiny config at ε = 50 on the whole demo train split."""
    fd = tiny[0]
    fed = Federation(fd.train, seed=3)
    cfg = DPFedAvg.Config.tiny()
    budget = PrivacyBudget(50.0, DELTA)
    artifact = DPFedAvg().train(fed, public_for(tiny, tmp_path_factory.mktemp("fedavg"), fed=fed), cfg, budget)
    return fed, cfg, budget, artifact


# -- privacy -----------------------------------------------------------------------------------------------
def test_ledger_holds_the_calibrated_rounds(large_eps_run):
    fed, cfg, budget, artifact = large_eps_run
    q = cfg.clients_per_round / fed.n_clients
    sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=q, steps=cfg.rounds), n_clients=fed.n_clients)
    assert artifact.info["sigma"] == sigma and artifact.info["sample_rate"] == q
    assert fed.ledger.events == (PoissonGaussianEvent(sigma, q, cfg.rounds),)
    assert 0.98 * budget.epsilon <= fed.ledger.epsilon(DELTA) <= budget.epsilon
    assert [r["round"] for r in artifact.history] == [0, 1, 2, 3]
    assert all(r["expected_clients"] == pytest.approx(q * fed.n_clients) for r in artifact.history[1:])
    assert all(abs(r["clients"] - q * fed.n_clients) < 40 for r in fed.costs.rounds)  # federation-side, unpublished
    assert fed.costs.summary()["floats_down_per_client_per_round"] == _flat(artifact.model).numel()


def test_server_step_adds_the_calibrated_noise(tiny, tmp_path):
    """With client lr 0 every update is 0, so the model moves by exactly server_lr · N(0, (σ·clip)²) / (q·N)."""
    fed = Federation(subset(tiny, 40), seed=1)
    cfg = dataclasses.replace(DPFedAvg.Config.tiny(), rounds=1, clients_per_round=4, client_lr=0.0, clip=0.3,
                              server_lr=0.7)
    artifact = DPFedAvg().train(fed, public_for(tiny, tmp_path, fed=fed), cfg, PrivacyBudget(4.0, DELTA))
    moved = read_state(tmp_path / CHECKPOINT_NAME, fix="")["method"]["state"]["server"]["weights"]
    noise = (moved - _flat(tiny[1].new_downstream())) * (0.1 * 40) / 0.7
    expected = artifact.info["sigma"] * 0.3
    assert noise.mean().abs() < 5 * expected / noise.numel() ** 0.5
    assert noise.std().item() == pytest.approx(expected, rel=0.02)


def test_raw_update_norms_and_poisson_cohort_sizes_stay_out_of_the_history(tiny, tmp_path):
    """Un-noised statistics are not in the history (published in the entry): the raw update norms go to the run
    folder's unreleased-diagnostics file, and a Poisson cohort is described by its expected size only."""
    fed = Federation(subset(tiny, 30), seed=0)
    cfg = dataclasses.replace(DPFedAvg.Config.tiny(), rounds=2, clients_per_round=10, max_local_steps=1,
                              record_update_norms=True)
    artifact = DPFedAvg().train(fed, public_for(tiny, tmp_path, fed=fed), cfg, PrivacyBudget(8.0, 1e-3))
    published = json.dumps([artifact.history[1:], artifact.info])  # round 0 (the public model) has no cohort
    for leak in ("mean_update_norm", "fraction_clipped", "cohort_size", '"clients"'):
        assert leak not in published
    assert [r["expected_clients"] for r in artifact.history[1:]] == [pytest.approx(10.0)] * 2
    rows = json.loads((tmp_path / UNRELEASED_FILE).read_text())
    assert [r["round"] for r in rows] == [1, 2] and all(0 <= r["fraction_clipped"] <= 1 for r in rows)
    with pytest.raises(InputError, match="run folder"):
        DPFedAvg().train(Federation(subset(tiny, 30), seed=0), public_for(tiny, None), cfg, PrivacyBudget(8.0, 1e-3))


def test_an_empty_cohort_still_counts_as_a_round(tiny, tmp_path):
    fed = Federation(subset(tiny, 30), seed=0)
    cfg = dataclasses.replace(DPFedAvg.Config.tiny(), rounds=4, clients_per_round=1)
    artifact = DPFedAvg().train(fed, public_for(tiny, tmp_path, fed=fed), cfg, PrivacyBudget(8.0, 1e-3))
    sizes = [r["clients"] for r in fed.costs.rounds]  # federation-side counts, never in the history
    assert len(artifact.history) == 5 and 0 in sizes and any(sizes)  # seed 0 draws an empty and a non-empty cohort
    assert fed.ledger.events == (PoissonGaussianEvent(artifact.info["sigma"], 1 / 30, 4),)


# -- resume and selection ----------------------------------------------------------------------------------
def test_resume_after_a_kill_equals_an_uninterrupted_run(tiny, tmp_path):
    cfg = dataclasses.replace(DPFedAvg.Config.tiny(), clients_per_round=30, record_update_norms=True)
    budget = PrivacyBudget(20.0, 1e-4)

    def run(run_dir, cls=PublicResources):
        fed = Federation(subset(tiny, 300), seed=5)
        return fed, DPFedAvg().train(fed, public_for(tiny, run_dir, cls, fed=fed), cfg, budget)

    fed_a, straight = run(tmp_path / "straight")
    with pytest.raises(Killed):
        run(tmp_path / "killed", killed_after(2))
    fed_b, resumed = run(tmp_path / "killed")
    assert without_timing(resumed.history) == without_timing(straight.history)
    assert fed_b.ledger == fed_a.ledger and fed_b.round == fed_a.round == 2
    assert torch.equal(_flat(resumed.model), _flat(straight.model))
    assert resumed.info == straight.info


def test_large_epsilon_beats_the_public_model(large_eps_run, tiny):
    artifact = large_eps_run[-1]
    history = artifact.history
    public_top1 = history[0]["validation_top1"]
    assert artifact.info["best_round"] >= 1
    assert artifact.info["best_validation_top1"] == max(r["validation_top1"] for r in history)
    assert artifact.info["best_validation_top1"] > public_top1 + 0.004
    # The returned model is the selected round's.
    fd, bundle, _ = tiny
    again = next_token_accuracy(artifact.model, bundle.tokenizer, fd.validation.all_spans()[:N_VALIDATION])
    assert again["top1"] == pytest.approx(artifact.info["best_validation_top1"])
