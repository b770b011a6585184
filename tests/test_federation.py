"""The federation: Poisson cohorts, client maps, clipping, noise scale, the ledger and costs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from largefedbench.data.demo import build_demo
from largefedbench.data.federated import load_snapshot
from largefedbench.errors import InputError, PrivacyError
from largefedbench.federation import Federation, SpanEmbeddings, clip_rows
from largefedbench.privacy import PoissonGaussianEvent


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


def test_noisy_sum_noise_std_matches_sigma_times_clip_and_is_recorded(train):
    fed = Federation(train, seed=2)
    cohort = fed.everyone()
    zeros = np.zeros((len(cohort), 20_000))
    noisy = fed.noisy_sum(zeros, clip=0.5, noise_multiplier=3.0, cohort=cohort)
    assert abs(noisy.std() - 1.5) < 0.03 and abs(noisy.mean()) < 0.05
    assert fed.ledger.events == (PoissonGaussianEvent(3.0, 1.0, 1),)
    cohort = fed.sample(0.2)
    fed.noisy_sum(np.ones((len(cohort), 4)), clip=1.0, noise_multiplier=3.0, cohort=cohort)
    fed.noisy_sum(np.ones((len(cohort), 4)), clip=1.0, noise_multiplier=3.0, cohort=cohort)
    assert fed.ledger.events[-1] == PoissonGaussianEvent(3.0, 0.2, 2)  # merged: two steps at q = 0.2


def test_noisy_sum_is_the_clipped_sum_plus_noise(train):
    fed = Federation(train, seed=3)
    cohort = fed.sample(0.5)
    vectors = np.random.default_rng(0).normal(size=(len(cohort), 8)) * 10
    out = fed.noisy_sum(vectors, clip=1.0, noise_multiplier=1e-9, cohort=cohort)
    np.testing.assert_allclose(out, clip_rows(vectors, 1.0).sum(0), atol=1e-6)
    with pytest.raises(PrivacyError, match="one vector per client"):
        fed.noisy_sum(vectors[:-1], clip=1.0, noise_multiplier=1.0, cohort=cohort)
    with pytest.raises(PrivacyError, match="must be > 0"):
        fed.noisy_sum(vectors, clip=1.0, noise_multiplier=0.0, cohort=cohort)


def test_map_gives_each_client_only_its_own_spans(train):
    fed = Federation(train, seed=4)
    cohort = fed.sample(0.3)
    per_client = fed.map(cohort, lambda spans: np.array([len(spans), sum(map(len, spans))]))
    batched = fed.map(cohort, batch_fn=lambda clients: np.array([[len(s), sum(map(len, s))] for s in clients]))
    expected = np.array([[len(train.spans(c)), sum(map(len, train.spans(c)))] for c in cohort.ids])
    np.testing.assert_array_equal(per_client, expected)
    np.testing.assert_array_equal(batched, expected)
    with pytest.raises(InputError, match="exactly one"):
        fed.map(cohort)


def test_map_embeddings_chunks_clients_and_matches_a_loop(train):
    rng = np.random.default_rng(5)
    counts = train.span_counts()
    offsets = np.concatenate([[0], np.cumsum(counts)])
    emb = SpanEmbeddings(rng.normal(size=(offsets[-1], 6)).astype(np.float32), offsets)
    fed = Federation(train, seed=5, embeddings=emb)
    cohort = fed.sample(0.5)
    synth = rng.normal(size=(9, 6)).astype(np.float32)

    def scores(vectors, owner, n):
        sums = np.zeros((n, vectors.shape[1]), np.float32)
        np.add.at(sums, owner, vectors)
        return sums @ synth.T

    chunked = fed.map_embeddings(cohort, scores, chunk_clients=7)
    loop = np.stack([emb.vectors[offsets[i]:offsets[i + 1]].sum(0) @ synth.T for i in cohort.indices])
    np.testing.assert_allclose(chunked, loop, rtol=1e-4, atol=1e-4)


def test_costs_are_counted_per_round(train):
    fed = Federation(train, seed=6)
    for _ in range(3):
        cohort = fed.sample(0.5)
        vectors = fed.map(cohort, lambda spans: np.ones(10), download_floats=1000)
        fed.noisy_sum(vectors, clip=1.0, noise_multiplier=1.0, cohort=cohort)
    summary = fed.costs.summary()
    assert summary["rounds"] == 3
    assert summary["floats_down_per_client_per_round"] == 1000 and summary["floats_up_per_client_per_round"] == 10
    assert summary["client_seconds_total"] > 0 and summary["server_seconds_total"] > 0


def test_a_streamed_clipped_sum_releases_the_same_as_the_full_matrix(train):
    """map_clipped_sum holds one chunk of client vectors at a time; its release equals noisy_sum of the full map."""
    def features(clients):
        return np.array([[len(s), sum(map(len, s)), -float(len(s[0]))] for s in clients])

    a, b = Federation(train, seed=5), Federation(train, seed=5)
    ca, cb = a.sample(0.3), b.sample(0.3)
    full = a.noisy_sum(a.map(ca, batch_fn=features), clip=50.0, noise_multiplier=0.5, cohort=ca)
    streamed = b.noisy_sum(b.map_clipped_sum(cb, features, clip=50.0, chunk_clients=7), clip=50.0, noise_multiplier=0.5,
                           cohort=cb)
    np.testing.assert_allclose(streamed, full, rtol=1e-9)
    assert a.ledger == b.ledger and b.costs.summary()["floats_up_per_client_per_round"] == 3
    with pytest.raises(PrivacyError, match="same clip"):
        b.noisy_sum(b.map_clipped_sum(cb, features, clip=10.0), clip=50.0, noise_multiplier=0.5, cohort=cb)
    other = b.sample(0.3)
    with pytest.raises(PrivacyError, match="another cohort"):
        b.noisy_sum(b.map_clipped_sum(cb, features, clip=50.0), clip=50.0, noise_multiplier=0.5, cohort=other)


def test_client_metadata_gives_each_client_its_own_record_fields(train):
    fed = Federation(train, seed=6)
    meta = fed.client_metadata(("category", "no_such_field"))
    assert len(meta) == fed.n_clients
    assert [m["category"] for m in meta] == list(train.column("category"))
    assert all(m["no_such_field"] is None for m in meta)
