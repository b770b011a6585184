"""The federation: Poisson cohorts, clipping and costs (the one door itself: test_federation_private_sum.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from largefedbench.data.demo import build_demo
from largefedbench.data.federated import load_snapshot
from largefedbench.errors import InputError
from largefedbench.federation import Federation, payload_floats
from largefedbench.privacy.clipping import clip_rows
from largefedbench.privacy.mechanisms import Gaussian


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    root = tmp_path_factory.mktemp("fed")
    return load_snapshot(build_demo(root=root, n_clients=600, progress=False).path).train


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 16)), elements=st.floats(-1e6, 1e6)),
       st.floats(1e-3, 1e3))
def test_a_clipped_contribution_never_exceeds_the_clip_norm(vectors, clip):
    clipped = clip_rows(vectors, clip)
    assert np.all(np.linalg.norm(clipped, axis=1) <= clip * (1 + 1e-9))
    small = np.linalg.norm(vectors, axis=1) <= clip
    np.testing.assert_allclose(clipped[small], vectors[small])  # vectors inside the ball are untouched


def test_clipping_in_torch_matches_numpy():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).normal(size=(7, 5)) * 3
    np.testing.assert_allclose(clip_rows(torch.tensor(x), 1.5).numpy(), clip_rows(x, 1.5), rtol=1e-6)


def test_poisson_sampling_uses_the_stated_rate(train):
    fed = Federation(train, seed=1)
    sizes = [len(fed.sample(0.1)) for _ in range(200)]
    n = fed.n_clients
    assert abs(np.mean(sizes) - 0.1 * n) < 4 * np.sqrt(n * 0.1 * 0.9 / 200)
    assert np.std(sizes) > 0  # not a fixed-size cohort
    assert fed.round == 199
    with pytest.raises(InputError, match=r"\(0, 1\]"):
        fed.sample(0.0)


def test_costs_are_counted_per_round(train):
    fed = Federation(train, seed=6)
    for _ in range(3):
        cohort = fed.sample(0.5)
        fed.private_sum(cohort, lambda view: np.ones(10), clip=1.0, mechanism=Gaussian(1.0), broadcast=np.zeros(1000))
    summary = fed.costs.summary()
    assert summary["rounds"] == 3
    assert summary["floats_down_per_client_per_round"] == 1000 and summary["floats_up_per_client_per_round"] == 10
    assert summary["client_seconds_total"] > 0 and summary["server_seconds_total"] > 0
    assert fed.door_seconds > 0


def test_broadcast_is_measured_not_declared(train):
    fed = Federation(train, seed=6)
    weights, pool = torch.zeros(7, 3), [np.zeros((4, 5)), {"b": np.zeros(2)}]
    fed.private_sum(fed.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(1.0),
                    broadcast=(weights, pool))
    assert fed.costs.rounds[0]["floats_down_per_client"] == 21 + 20 + 2
    assert payload_floats(None) == 0
    with pytest.raises(InputError, match="broadcast holds a str"):
        fed.private_sum(fed.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(1.0), broadcast="w")
    assert len(fed.ledger.events) == 1  # refused before anything was released
