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
from largefedbench.privacy.mechanisms import NoNoise


@pytest.fixture(scope="module")
def demo(shared_root):
    """The demo snapshot only (no models: these tests need no training)."""
    from largefedbench.data.federated import load_snapshot

    return load_snapshot("demo", home=shared_root)




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


def _canary_federation(demo, d: int = 2000):
    """4 real clients plus 8 update canaries (about half inserted) whose outputs are 3·u; ``want`` is the clipped
    (clip 1) sum when every real client returns all ones: (plan, split, fed, d, want)."""
    plan = CanaryPlan(8, 1, "update")
    split = with_canaries(ClientSplit("train", demo.train.table.select(range(4))), plan)
    fed = Federation(split, seed=0)
    fed.client_outputs = plan.federation_hook(norm=3.0)
    want = 4 * np.ones(d) / np.sqrt(d) + sum(plan.direction(int(j), d).numpy() for j in np.flatnonzero(plan.included))
    return plan, split, fed, d, want


def test_canary_updates_are_clipped_and_summed_like_any_client(demo):
    from largefedbench.privacy.mechanisms import NoNoise

    plan, split, fed, d, want = _canary_federation(demo)
    seen = {}

    def client(view):  # a real client's update: all ones (norm √d, clipped to 1)
        seen[view.id] = True
        return np.ones(d)

    total = fed.private_sum(fed.everyone(), client, clip=1.0, mechanism=NoNoise())
    assert len(seen) == len(split)  # canaries ran as ordinary clients; their outputs were then replaced
    assert np.allclose(total, want, atol=1e-5)  # each canary's 3·u clipped to norm 1, summed once
    scores = update_scores(plan, torch.as_tensor(total))
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
    _, _, fed, d, want = _canary_federation(demo)
    per_client = fed.private_sum(fed.everyone(), lambda view: np.ones(d), clip=1.0, mechanism=NoNoise())
    batched = fed.private_sum(fed.everyone(), lambda view: np.ones((len(view), d)), clip=1.0, mechanism=NoNoise(),
                              batched=True, chunk_clients=3)
    assert np.allclose(per_client, want, atol=1e-5) and np.allclose(batched, want, atol=1e-5)
