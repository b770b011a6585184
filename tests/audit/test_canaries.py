"""Canary clients: seeded coin flips, the train split with the included canaries, and the federation hook that makes
a canary's client computation return its direction — still clipped and noised like every other client's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from largefedbench.audit.canaries import CanaryPlan, text_scores, update_scores, with_canaries
from largefedbench.data.federated import ClientSplit
from largefedbench.errors import InputError
from largefedbench.federation import Federation


@pytest.fixture(scope="module")
def demo(shared_root):
    """The demo snapshot only (no models: these tests need no training)."""
    from largefedbench.data.federated import load_snapshot

    return load_snapshot("demo", root=shared_root)




def test_coin_flips_are_seeded_and_fair():
    a, b = CanaryPlan(400, 7, "update"), CanaryPlan(400, 8, "update")
    assert np.array_equal(a.included, CanaryPlan(400, 7, "text").included)
    assert not np.array_equal(a.included, b.included)
    assert 160 < a.included.sum() < 240
    assert a.texts(3) == CanaryPlan(400, 7, "text").texts(3) and a.texts(3) != a.texts(4)
    u = a.direction(5, 1000)
    assert torch.allclose(u, a.direction(5, 1000)) and float(torch.linalg.vector_norm(u)) == pytest.approx(1.0)
    with pytest.raises(InputError, match="at least 2 canaries"):
        CanaryPlan(1, 0, "update")


def test_included_canaries_join_the_split_as_ordinary_clients(demo):
    fd = demo
    base = ClientSplit("train", fd.train.table.select(range(10)))
    plan = CanaryPlan(20, 0, "text")
    split = with_canaries(base, plan)
    inserted = [c for c, inc in zip(plan.ids, plan.included) if inc]
    assert list(split.ids) == list(base.ids) + inserted
    assert split.spans(inserted[0]) == plan.texts(plan.ids.index(inserted[0]))
    assert all(c not in split for c, inc in zip(plan.ids, plan.included) if not inc)


def test_canary_updates_are_clipped_and_summed_like_any_client(demo):
    fd = demo
    plan = CanaryPlan(8, 1, "update")
    split = with_canaries(ClientSplit("train", fd.train.table.select(range(4))), plan)
    fed = Federation(split, seed=0)
    fed.client_outputs = plan.federation_hook(norm=3.0)
    cohort = fed.everyone()
    d = 2000
    out = fed.map(cohort, batch_fn=lambda spans: torch.ones(len(spans), d))
    inserted = [j for j in range(plan.m) if plan.included[j]]
    for k, cid in enumerate(cohort.ids):
        if cid.startswith("lfb-canary-"):
            assert torch.allclose(out[k], 3.0 * plan.direction(plan.ids.index(cid), d))
        else:
            assert torch.all(out[k] == 1)
    clipped = fed.map_clipped_sum(cohort, lambda spans: torch.ones(len(spans), d), clip=1.0, chunk_clients=3)
    want = 4 * torch.ones(d) / np.sqrt(d) + sum(plan.direction(j, d) for j in inserted)
    assert torch.allclose(clipped.total, want, atol=1e-5)  # each canary clipped from norm 3 to norm 1
    # scores: the sum contains each inserted direction once, so inserted canaries score far above held-out ones
    scores = update_scores(plan, clipped.total)
    assert scores[plan.included].min() > 0.2 > np.abs(scores[~plan.included]).max()


def test_text_scores_are_the_nearest_synthetic_cosine():
    plan = CanaryPlan(4, 0, "text")

    def embed_fn(texts):  # bag of characters, unit rows
        rows = np.array([[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz0123456789"] for t in texts], float)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    copy = " ".join(plan.texts(2))
    scores = text_scores(plan, [copy, "zzzz"], embed_fn)
    assert scores[2] == pytest.approx(1.0) and scores.argmax() == 2
    with pytest.raises(InputError, match="no synthetic text"):
        text_scores(plan, [], embed_fn)


def test_private_sum_honours_canaries_per_client_and_batched(demo):
    from largefedbench.privacy.mechanisms import NoNoise

    plan = CanaryPlan(8, 1, "update")
    split = with_canaries(ClientSplit("train", demo.train.table.select(range(4))), plan)
    fed = Federation(split, seed=0)
    fed.client_outputs = plan.federation_hook(norm=3.0)
    d = 2000
    want = 4 * np.ones(d) / np.sqrt(d) + sum(plan.direction(j, d).numpy() for j in np.flatnonzero(plan.included))
    per_client = fed.private_sum(fed.everyone(), lambda view: np.ones(d), clip=1.0, mechanism=NoNoise())
    batched = fed.private_sum(fed.everyone(), lambda view: np.ones((len(view), d)), clip=1.0, mechanism=NoNoise(),
                              batched=True, chunk_clients=3)
    assert np.allclose(per_client, want, atol=1e-5) and np.allclose(batched, want, atol=1e-5)
