"""FedBis / FedBiscuit: preferences, selector, majority vote, private balanced grouping, schedule and end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from largefedbench.methods.fedbiscuit import (
    FedBis,
    FedBisConfig,
    FedBiscuit,
    FedBiscuitConfig,
    PairPool,
    SelectorTask,
    client_pair_indices,
    client_preferences,
    grouping_step,
    majority_vote,
    private_grouping,
)

from largefedbench.contract import PublicResources
from largefedbench.federation import Federation, SpanEmbeddings
from largefedbench.privacy import PrivacyBudget, PrivacyLedger, epsilon_of


def test_grouping_step_picks_the_most_proposed_open_selector_and_caps_it():
    u, cap, keep = grouping_step(np.array([9.0, 3.0, 1.0]), np.array([True, True, True]), 9)
    assert (u, cap) == (0, 3) and keep == pytest.approx(3 / 9)
    u, cap, keep = grouping_step(np.array([9.0, 3.0, 1.0]), np.array([False, True, True]), 6)
    assert (u, cap, keep) == (1, 3, 1.0)  # closed selectors are skipped; fewer proposals than room: all join
    u, cap, keep = grouping_step(np.array([-2.0, -1.0]), np.array([True, True]), 1)
    assert (u, cap, keep) == (1, 1, 1.0)  # negative noisy counts do not divide by zero


def test_private_grouping_hand_case_with_distinct_preferences():
    losses = np.array([[0.1, 0.5, 0.9], [0.2, 0.6, 0.8], [0.9, 0.1, 0.5], [0.8, 0.2, 0.6], [0.9, 0.5, 0.1], [0.7, 0.6, 0.2]])
    releases = []

    def release(proposals):
        releases.append(proposals.copy())
        return proposals.sum(0)  # noise-free

    group, sizes = private_grouping(losses, release, np.random.default_rng(0))
    assert group.tolist() == [0, 0, 1, 1, 2, 2]
    assert sizes.tolist() == [2, 2, 2]
    assert len(releases) == 2  # U - 1 releases
    np.testing.assert_array_equal(releases[1][:2], 0)  # assigned clients propose nothing
    assert np.all(np.linalg.norm(releases[0], axis=1) == 1)  # each client weighs 1


def test_private_grouping_balances_a_crowded_favourite():
    # everyone prefers selector 0, then 1, then 2: the server caps selector 0 at 6/3 = 2 and so on
    losses = np.tile([0.1, 0.2, 0.3], (6, 1))
    group, sizes = private_grouping(losses, lambda p: p.sum(0), np.random.default_rng(3))
    assert sizes.tolist() == [2, 2, 2]  # the server's estimates: min(capacity, proposals)
    assert set(group.tolist()) <= {0, 1, 2} and np.all(group >= 0)
    many = [private_grouping(losses, lambda p: p.sum(0), np.random.default_rng(s))[0] for s in range(300)]
    assert abs(np.mean([np.sum(g == 0) for g in many]) - 2.0) < 0.2  # each proposer keeps with prob 2/6


def test_majority_vote():
    scores = np.array([[1.0, -1.0, 1.0, -0.5], [1.0, 1.0, -1.0, -0.1], [-1.0, -1.0, 1.0, 0.3]])
    assert majority_vote(scores).tolist() == [True, False, True, False]
    assert majority_vote(np.array([[0.2, -0.2]])).tolist() == [True, False]


def test_client_preferences_prefer_the_closer_candidate():
    pool = PairPool(["a0", "a1"], ["b0", "b1"], emb_a=np.array([[1.0, 0.0], [0.0, 1.0]]),
                    emb_b=np.array([[0.0, 1.0], [1.0, 0.0]]))
    spans = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    owner = np.array([0, 0, 1])
    labels = client_preferences(spans, owner, 2, pool, np.array([[0, 1], [1, 0]]))
    # client 0 sits on axis x: prefers a0 (label 0) on pair 0 and b1 (label 1) on pair 1; client 1 the opposite
    assert labels.tolist() == [[0, 1], [0, 1]]


def test_client_pair_indices_are_fixed_per_client_and_distinct():
    first = client_pair_indices(np.array([3, 7]), 20, 5, seed=1)
    again = client_pair_indices(np.array([7]), 20, 5, seed=1)
    np.testing.assert_array_equal(first[1], again[0])
    assert all(len(set(row.tolist())) == 5 for row in first)
    assert not np.array_equal(first[0], first[1])


def test_selector_task_loss_and_order_symmetry(tiny):
    tok = tiny[1].generator_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=16, n_layer=1, n_head=2)).eval()
    task = SelectorTask(tok, ["the cell divides", "a bill passes"], ["we met farmers", "genes are expressed"], 8)
    ex = task.examples(np.array([1]), np.array([0]))
    assert ex == [(task.ab[1], 0), (task.ba[1], 1)]
    assert task.ab[0][0] == tok.bos_token_id
    logits = model(input_ids=torch.tensor([task.ab[1]])).logits[0, -1, task.choice_ids]
    manual = torch.nn.functional.cross_entropy(logits[None], torch.tensor([0]))
    torch.testing.assert_close(task.loss(model, ex[:1]), manual)
    flipped = SelectorTask(tok, ["we met farmers", "genes are expressed"], ["the cell divides", "a bill passes"], 8)
    np.testing.assert_allclose(task.prefers_a(model, np.arange(2), 8), -flipped.prefers_a(model, np.arange(2), 8), atol=1e-5)


def test_paper_schedule_and_plan_follow_algorithm_1():
    cfg = FedBiscuitConfig()
    steps = cfg.schedule()
    assert sum(k == "warmup" for k, _ in steps) == 150 and sum(k == "train" for k, _ in steps) == 350
    assert [i for k, i in steps if k == "group"] == list(range(7))  # every 50 of the 350 clustered rounds
    plan = FedBiscuit().plan(cfg, 53, 1.0, 20.0)
    assert len(plan) == 500 + 7 * 2
    assert FedBis().plan(FedBisConfig(), 53, 1.0, 0.0)[0].steps == 500


def _setup(tiny, tmp_path, seed: int = 0):
    fd, bundle, _ = tiny
    vectors = bundle.span_embeddings(fd, "train", progress=False)
    offsets = np.concatenate([[0], np.cumsum(fd.train.span_counts())])
    fed = Federation(fd.train, seed=seed, embeddings=SpanEmbeddings(vectors, offsets))
    public = PublicResources(fd=fd, models=bundle, seed=seed, run_dir=tmp_path, progress=False)
    return fed, public


def _check_ledger(method, cfg, fed, info, budget):
    planned = PrivacyLedger(method.plan(cfg, fed.n_clients, info["noise_multiplier"], info["grouping_noise_multiplier"] or 0.0))
    assert fed.ledger.events == planned.events
    eps = fed.ledger.epsilon(budget.delta)
    assert eps <= budget.epsilon + 1e-6 and eps > 0.97 * budget.epsilon
    assert eps == pytest.approx(epsilon_of(list(planned.events), budget.delta), rel=1e-9)


@pytest.mark.slow
def test_fedbis_end_to_end(tiny, tmp_path):
    fed, public = _setup(tiny, tmp_path)
    cfg = FedBisConfig.tiny()
    budget = PrivacyBudget(4.0, 1e-5)
    art = FedBis().train(fed, public, cfg, budget)
    assert art.kind == "synthetic text" and len(art.texts) >= 0.8 * cfg.n_synthetic
    _check_ledger(FedBis(), cfg, fed, art.info, budget)
    assert art.info["selectors"] == 1 and art.info["dpo_pairs"] > 0 and art.info["dpo"]["steps"] >= 1
    assert [h["phase"] for h in art.history] == ["selector"] * cfg.rounds + ["dpo"]


@pytest.mark.slow
def test_fedbiscuit_end_to_end_with_private_grouping(tiny, tmp_path):
    fed, public = _setup(tiny, tmp_path)
    cfg = FedBiscuitConfig.tiny()
    budget = PrivacyBudget(4.0, 1e-5)
    art = FedBiscuit().train(fed, public, cfg, budget)
    assert len(art.texts) >= 0.8 * cfg.n_synthetic and art.info["selectors"] == 3
    _check_ledger(FedBiscuit(), cfg, fed, art.info, budget)
    phases = [h["phase"] for h in art.history]
    assert phases == ["warmup"] * 3 + ["group", "train", "train", "group", "train", "train", "dpo"]
    sizes = art.history[3]["estimated_group_sizes"]
    assert sum(sizes) == pytest.approx(fed.n_clients) and max(sizes) - min(sizes) <= 0.05 * fed.n_clients
