"""DP-FTRL (methods/dp_ftrl.py) on the demo snapshot with the tiny models: tree epochs in the ledger and σ, the
tree noise's variance and correlation, the FTRL-with-momentum step, resume mid-epoch and at a restart, and a gain
over the public model at a large ε."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from conftest import Killed, killed_after, public_for, subset
from largefedbench.methods.dp_ftrl import DPFTRL
from timing_free import without_timing

from largefedbench.contract import PublicResources
from largefedbench.data.federated import ClientSplit
from largefedbench.federation import Federation
from largefedbench.fedtrain import FlatParams, ftrl_weights
from largefedbench.privacy import PrivacyBudget, TreeAggregationEvent
from largefedbench.privacy.mechanisms import TreeAggregation, TreePrefixSum
from largefedbench.rounds.checkpoints import CHECKPOINT_NAME
from largefedbench.rounds.state_file import read_state

DELTA = 1e-5
N_CLIENTS = 300


# 300 clients, 120 per round: 2 rounds per epoch (60 sit each epoch out), 3 rounds = 2 trees.
CFG = dataclasses.replace(DPFTRL.Config.tiny(), clients_per_round=120, record_update_norms=True)
BUDGET = PrivacyBudget(50.0, DELTA)


def _flat(model) -> torch.Tensor:
    return FlatParams(model).get()


def run(tiny, run_dir, cfg=CFG, budget=BUDGET, cls=PublicResources):
    fed = Federation(subset(tiny, N_CLIENTS), seed=2)
    return fed, DPFTRL().train(fed, public_for(tiny, run_dir, cls, fed=fed), cfg, budget)


@pytest.fixture(scope="module")
def straight(tiny, tmp_path_factory):
    return run(tiny, tmp_path_factory.mktemp("ftrl"))


def test_ledger_holds_one_tree_per_epoch(straight):
    fed, artifact = straight
    sigma = BUDGET.calibrate(TreeAggregationEvent(1.0, 2, epochs=2), n_clients=N_CLIENTS)
    assert artifact.info["sigma"] == sigma
    assert (artifact.info["rounds_per_epoch"], artifact.info["epochs"]) == (2, 2)
    assert fed.ledger.events == (TreeAggregationEvent(sigma, 2, 2),)
    assert 0.99 * BUDGET.epsilon <= fed.ledger.epsilon(DELTA) <= BUDGET.epsilon
    assert [(r["round"], r.get("epoch")) for r in artifact.history] == [(0, None), (1, 1), (2, 1), (3, 2)]
    assert all(r["cohort_size"] == 120 for r in artifact.history[1:])  # fixed by the design: public
    # record_update_norms=True: the raw norms are not in the (published) history
    assert not any("mean_update_norm" in r or "fraction_clipped" in r for r in artifact.history)


def test_calibrating_as_the_paper_spends_less_than_the_target(tiny, tmp_path):
    """Table 3 σ₂ counts every round as a whole tree: σ is larger than needed and the ledger's ε is lower."""
    cfg = dataclasses.replace(CFG, rounds=2, clients_per_round=150, calibrate_as_paper=True, max_local_steps=1)
    fed, artifact = run(tiny, tmp_path, cfg, PrivacyBudget(4.0, DELTA))
    assert artifact.info["calibrated_epochs"] == 2 and artifact.info["epochs"] == 1
    assert artifact.info["sigma"] == PrivacyBudget(4.0, DELTA).calibrate(TreeAggregationEvent(1.0, 2, epochs=2))
    assert fed.ledger.events == (TreeAggregationEvent(artifact.info["sigma"], 2, 1),)
    assert fed.ledger.epsilon(DELTA) < 0.8 * 4.0


def test_tree_prefix_sums_carry_the_expected_noise():
    """Prefix sum t carries one N(0, (σ·clip)²) node per set bit of t; consecutive prefix sums share nodes."""
    d, sigma, clip, rounds = 100_000, 1.3, 0.7, 7
    fed = Federation(ClientSplit("train", _table(rounds)), seed=11)
    tree = TreePrefixSum(rounds)
    noises = []
    for planned in fed.epoch(1):
        cohort = planned.start()
        noises.append(fed.private_sum(cohort, lambda chunk: torch.zeros(len(chunk), d), clip=clip,
                                      mechanism=TreeAggregation(sigma, tree), batched=True))
    unit = (sigma * clip) ** 2
    for t, noise in enumerate(noises, start=1):
        assert noise.var().item() == pytest.approx(t.bit_count() * unit, rel=0.03)
    assert (noises[2] - noises[1]).var().item() == pytest.approx(unit, rel=0.03)  # t=3 = node [1,2] + leaf 3
    assert (noises[3] - noises[1]).var().item() == pytest.approx(2 * unit, rel=0.03)  # [1,4] vs [1,2]: fresh node
    assert fed.ledger.events == (TreeAggregationEvent(sigma, rounds, 1),)


def _table(n: int):
    from datasets import Dataset

    return Dataset.from_dict({"id": [f"c{i}" for i in range(n)], "spans": [["a span"]] * n, "n_spans": [1] * n})


def test_ftrl_step_with_momentum():
    theta0, s1, s2 = torch.tensor([1.0, 2.0]), torch.tensor([4.0, 0.0]), torch.tensor([8.0, -4.0])
    w1, m1 = ftrl_weights(theta0, None, s1, lr=0.5, momentum=0.5, per_round=4)
    w2, m2 = ftrl_weights(theta0, m1, s2, lr=0.5, momentum=0.5, per_round=4)
    assert torch.equal(w1, theta0 + 0.5 * s1 / 4)
    assert torch.equal(m2, s2 + 0.5 * s1) and torch.equal(w2, theta0 + 0.5 * (s2 + 0.5 * s1) / 4)


def test_model_noise_follows_the_tree(tiny, tmp_path):
    """Client lr 0, no momentum: after round t the model is θ_0 + lr · (tree noise of prefix t) / B."""
    cfg = dataclasses.replace(CFG, rounds=3, clients_per_round=2, client_lr=0.0, server_momentum=0.0, server_lr=0.5,
                              clip=0.2)
    fed = Federation(subset(tiny, 6), seed=4)
    artifact = DPFTRL().train(fed, public_for(tiny, tmp_path, fed=fed), cfg, PrivacyBudget(4.0, 0.01))
    server = read_state(tmp_path / CHECKPOINT_NAME, fix="")["method"]["state"]["server"]
    noise = (server["weights"] - _flat(tiny[1].new_downstream())) * 2 / 0.5
    assert torch.equal(server["theta0"], _flat(tiny[1].new_downstream()))  # 6 // 2 = 3 rounds: one epoch
    assert noise.std().item() == pytest.approx(math.sqrt(2) * artifact.info["sigma"] * 0.2, rel=0.02)  # t=3: 2 nodes


@pytest.mark.parametrize("kill_after", [1, 2], ids=["mid-epoch", "at-restart"])
def test_resume_after_a_kill_equals_an_uninterrupted_run(tiny, tmp_path, straight, kill_after):
    fed_a, expected = straight
    with pytest.raises(Killed):
        run(tiny, tmp_path, cls=killed_after(kill_after))
    fed_b, resumed = run(tiny, tmp_path)
    assert without_timing(resumed.history) == without_timing(expected.history)
    assert fed_b.ledger == fed_a.ledger
    assert torch.equal(_flat(resumed.model), _flat(expected.model))
    assert resumed.info == expected.info


def test_large_epsilon_beats_the_public_model(straight):
    _, artifact = straight
    public_top1 = artifact.history[0]["validation_top1"]
    assert artifact.info["best_round"] >= 1
    assert artifact.info["best_validation_top1"] == max(r["validation_top1"] for r in artifact.history)
    assert artifact.info["best_validation_top1"] > public_top1 + 0.004
