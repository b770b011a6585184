"""Client scoring: the vectorised POPri score and PE vote equal direct per-client loops; clipping and noise are right."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.client_views import ClientStore, chunk_view
from largefedbench.data.federated import ClientSplit
from largefedbench.federation import Federation, SpanEmbeddings
from largefedbench.privacy.mechanisms import Gaussian, NoNoise
from largefedbench.synthetic.scoring import (
    NnVotes,
    PopriScores,
    client_embedding_sums,
    nn_vote_histograms,
    nn_votes_reference,
    popri_client_scores,
    popri_scores_reference,
)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def random_clients(rng, n_clients: int, d: int = 16, max_spans: int = 6, empty: tuple[int, ...] = ()):
    counts = rng.integers(1, max_spans + 1, size=n_clients)
    counts[list(empty)] = 0
    vectors = unit(rng.standard_normal((int(counts.sum()), d)))
    owner = np.repeat(np.arange(n_clients), counts)
    per_client = [vectors[owner == i] for i in range(n_clients)]
    return vectors, owner, per_client


@pytest.mark.parametrize("normalization", ["zscore", "mean"])
def test_vectorised_popri_score_equals_the_per_client_reference(normalization):
    rng = np.random.default_rng(0)
    vectors, owner, per_client = random_clients(rng, 57)
    synthetic = unit(rng.standard_normal((40, 16)))
    fast = popri_client_scores(vectors, owner, 57, synthetic, normalization=normalization, chunk=8)  # several chunks
    slow = popri_scores_reference(per_client, synthetic, normalization=normalization)
    np.testing.assert_allclose(fast, slow, atol=1e-5)


def test_zscored_scores_are_clipped_to_unit_norm_and_keep_the_ranking():
    rng = np.random.default_rng(1)
    vectors, owner, per_client = random_clients(rng, 20)
    synthetic = unit(rng.standard_normal((30, 16)))
    scores = popri_client_scores(vectors, owner, 20, synthetic)
    np.testing.assert_allclose(np.linalg.norm(scores, axis=1), 1.0, atol=1e-5)  # ||z|| = sqrt(M) > 1, clipped to 1
    raw = np.stack([(c @ synthetic.T).sum(0) for c in per_client])  # sum of cosines per client
    assert all((np.argsort(-s, kind="stable") == np.argsort(-r, kind="stable")).all() for s, r in zip(scores, raw))


def test_mean_scores_are_clipped_only_above_norm_one():
    spans = unit(np.ones((2, 8)))  # two identical spans: the mean cosine equals each cosine
    owner = np.zeros(2, int)
    small = np.eye(2, 8, dtype=np.float32)  # cosines 1/sqrt(8) each: norm 0.5, kept as is
    np.testing.assert_allclose(popri_client_scores(spans, owner, 1, small, normalization="mean")[0], [8 ** -0.5] * 2, atol=1e-6)
    large = unit(np.eye(4, 8) + 0.1)  # four cosines of 0.5625: norm 1.125, scaled down to 1
    scores = popri_client_scores(spans, owner, 1, large, normalization="mean")[0]
    np.testing.assert_allclose(scores, [0.5625 / 1.125] * 4, atol=1e-6)


def test_constant_scores_and_clients_without_spans_give_zero_rows():
    rng = np.random.default_rng(2)
    vectors, owner, _ = random_clients(rng, 6, empty=(2, 4))
    synthetic = unit(np.tile(rng.standard_normal((1, 16)), (5, 1)))  # five identical samples: nothing to rank
    scores = popri_client_scores(vectors, owner, 6, synthetic)
    assert np.isfinite(scores).all() and not scores.any()
    scores = popri_client_scores(vectors, owner, 6, unit(rng.standard_normal((5, 16))))
    assert not scores[[2, 4]].any() and np.abs(scores[[0, 1, 3, 5]]).sum(1).min() > 0


def test_client_sums_accept_unsorted_owners():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((9, 4)).astype(np.float32)
    owner = np.array([2, 0, 1, 2, 0, 0, 1, 2, 2])
    expected = np.stack([vectors[owner == i].sum(0) for i in range(4)])
    np.testing.assert_allclose(client_embedding_sums(vectors, owner, 4), expected, atol=1e-6)


def test_nn_vote_histogram_hand_computed_case():
    synthetic = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    spans = np.array([
        [0.9, 0.1, 0.0], [0.8, 0.0, 0.2], [0.1, 0.9, 0.0],  # client 0: votes 2× sample 0, 1× sample 1
        [0.0, 0.2, 0.9],                                      # client 1: one vote for sample 2
        [0.0, 0.7, 0.1], [0.1, 0.6, 0.0],                     # client 2: two votes for sample 1
    ], dtype=np.float32)
    owner = np.array([0, 0, 0, 1, 2, 2])
    hist = nn_vote_histograms(spans, owner, 4, synthetic)
    expected = np.array([[2, 1, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]], dtype=float)
    expected[0] /= np.sqrt(5)  # unit L2 norm per client (sensitivity 1)
    np.testing.assert_allclose(hist, expected, atol=1e-6)


def test_nn_votes_equal_the_reference_also_for_non_unit_lookahead_embeddings():
    rng = np.random.default_rng(4)
    vectors, owner, per_client = random_clients(rng, 33, d=8)
    synthetic = (rng.standard_normal((25, 8)) * rng.uniform(0.3, 1.0, size=(25, 1))).astype(np.float32)  # means, not unit
    np.testing.assert_allclose(nn_vote_histograms(vectors, owner, 33, synthetic, chunk=7), nn_votes_reference(per_client, synthetic),
                               atol=1e-6)


class _Clients(ClientSplit):
    """A split of n clients with the given span counts (texts are never read by an embeddings-only client function)."""

    def __init__(self, counts):
        self.name, self.ids, self._counts = "train", [f"c{i}" for i in range(len(counts))], np.asarray(counts)

    def span_counts(self):
        return self._counts


def test_scores_through_the_federation_match_the_reference_and_the_noise_has_std_sigma():
    rng = np.random.default_rng(5)
    n, m = 300, 4000
    vectors, owner, per_client = random_clients(rng, n, d=16)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))])
    fed = Federation(_Clients(np.diff(offsets)), seed=0, embeddings=SpanEmbeddings(vectors, offsets))
    synthetic = unit(rng.standard_normal((m, 16)))
    exact = popri_scores_reference(per_client, synthetic).sum(0)
    clean = fed.private_sum(fed.everyone(), PopriScores(synthetic), clip=1.0, mechanism=NoNoise(), batched=True,
                            chunk_clients=128)
    np.testing.assert_allclose(clean, exact, atol=1e-4)
    sigma = 3.0
    noisy = fed.private_sum(fed.everyone(), PopriScores(synthetic), clip=1.0, mechanism=Gaussian(sigma), batched=True,
                            chunk_clients=128, broadcast=synthetic)
    noise = noisy - exact
    assert abs(noise.mean()) < 4 * sigma / np.sqrt(m)
    assert noise.std() == pytest.approx(sigma, rel=0.05)  # N(0, (σ·clip)²) with clip 1
    event = fed.ledger.events[-1]
    assert (event.noise_multiplier, event.sample_rate, event.steps) == (sigma, 1.0, 1)
    assert fed.costs.rounds[1]["floats_down_per_client"] == synthetic.size
    assert fed.costs.rounds[1]["floats_up_per_client"] == m


def test_nn_votes_through_the_federation_sum_to_unit_vectors():
    rng = np.random.default_rng(6)
    vectors, owner, per_client = random_clients(rng, 50, d=8)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=50))])
    split = _Clients(np.diff(offsets))
    synthetic = unit(rng.standard_normal((12, 8)))
    reference = nn_votes_reference(per_client, synthetic)
    rows = NnVotes(synthetic)(chunk_view(ClientStore(split, SpanEmbeddings(vectors, offsets)), np.arange(50), round_=0,
                                         fed_seed=1))  # on the clients: one unit vector each
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(rows, reference, atol=1e-6)
    fed = Federation(split, seed=1, embeddings=SpanEmbeddings(vectors, offsets))
    total = fed.private_sum(fed.everyone(), NnVotes(synthetic), clip=1.0, mechanism=NoNoise(), batched=True,
                            chunk_clients=16)
    np.testing.assert_allclose(total, reference.sum(0), atol=1e-5)
