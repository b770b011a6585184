"""Hand-computable cases of the histogram steps (buckets, votes, resampling, profiles, kNN votes, Alg. A.4)."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.synthetic.histograms import (
    fit_buckets,
    knn_code_votes,
    l2_normalize_rows,
    normalized_votes,
    one_hot,
    proportional_counts,
    resample,
    resample_counts,
    sample_without_replacement,
    shortfall,
)


def test_buckets_separate_three_obvious_clusters_and_assign_new_points():
    rng = np.random.default_rng(0)
    axes = np.eye(8)[:3]
    pool = np.concatenate([axes[i] + 0.01 * rng.standard_normal((20, 8)) for i in range(3)])
    buckets = fit_buckets(pool, 3, seed=0, n_init=2)
    assert buckets.n_buckets == 3
    # each true cluster is one bucket
    groups = [set(buckets.labels[i * 20 : (i + 1) * 20]) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3
    assert list(buckets.sizes()) == [20, 20, 20]
    # PCA kept at most the 2 components that carry the variance of 3 points on a plane (90% rule)
    assert buckets.components.shape[0] <= 3
    new = np.stack([axes[2] * 5.0, axes[0] * 0.3])  # scale does not matter: rows are L2-normalised
    assert list(buckets.assign(new)) == [buckets.labels[40], buckets.labels[0]]


def test_fit_buckets_refuses_more_buckets_than_samples():
    with pytest.raises(InputError, match="buckets"):
        fit_buckets(np.eye(4), 5)


def test_normalized_votes_make_each_client_weigh_one():
    # client 0: spans in buckets 0, 0, 2; client 1: one span in bucket 1; client 2: no spans
    votes = normalized_votes(np.array([0, 0, 2, 1]), np.array([0, 0, 0, 1]), 3, 3)
    np.testing.assert_allclose(votes, [[2 / 3, 0, 1 / 3], [0, 1, 0], [0, 0, 0]])
    assert np.all(np.linalg.norm(votes, axis=1) <= 1 + 1e-12)


def test_one_hot_and_l2_normalize():
    np.testing.assert_array_equal(one_hot(np.array([2, -1, 0]), 3), [[0, 0, 1], [0, 0, 0], [1, 0, 0]])
    np.testing.assert_allclose(l2_normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0, 0]])


def test_resample_counts_follow_algorithm_2():
    # N = 10 real samples, noisy histogram (4.2, 5.5, -0.7), T = 20 -> p = (.42, .55, -.07) -> ceil(8.4)=9, ceil(11)=11, 0
    counts = resample_counts(np.array([4.2, 5.5, -0.7]), 10, 20)
    assert list(counts) == [9, 11, 0]
    assert list(shortfall(counts, np.array([10, 5, 3]))) == [0, 6, 0]


def test_resample_draws_without_replacement_and_falls_back_when_short():
    labels = np.array([0, 0, 0, 1, 1, 2])
    rng = np.random.default_rng(0)
    idx = resample(labels, np.array([2, 2, 0]), rng)
    assert len(idx) == 4 and len(set(idx.tolist())) == 4
    assert sorted(labels[idx].tolist()) == [0, 0, 1, 1]
    with pytest.raises(InputError, match="need more initial samples"):
        resample(labels, np.array([0, 3, 0]), rng, replace_if_short=False)
    idx = resample(labels, np.array([0, 3, 0]), rng)  # App. D.3: with replacement
    assert len(idx) == 3 and set(idx.tolist()) <= {3, 4}


def test_proportional_counts_round_and_exact_total():
    assert list(proportional_counts(np.array([3.0, 1.0, -2.0]), 10)) == [8, 3, 0]  # 7.5 -> 8, 2.5 -> 3 (half up)
    exact = proportional_counts(np.array([3.0, 1.0, -2.0]), 10, exact_total=True)
    assert exact.sum() == 10 and list(exact) in ([8, 2, 0], [7, 3, 0])
    assert list(proportional_counts(np.array([0.0, -1.0]), 4)) == [2, 2]


def test_knn_code_votes_stay_inside_the_clients_code():
    pool = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [1.0, 0.05]])
    pool_codes = np.array([0, 0, 1, 1])
    spans = np.array([[1.0, 0.0], [1.0, 0.0]])
    owner = np.array([0, 1])
    votes = knn_code_votes(spans, owner, np.array([0, 1]), pool, pool_codes, k=1)
    # client 0 (code 0) votes for candidate 0; client 1 (code 1) must pick among 2 and 3: candidate 3
    np.testing.assert_array_equal(votes, [[1, 0, 0, 0], [0, 0, 0, 1]])
    votes = knn_code_votes(spans, owner, np.array([0, 1]), pool, pool_codes, k=5)
    np.testing.assert_array_equal(votes, [[1, 1, 0, 0], [0, 0, 1, 1]])


def test_sample_without_replacement_algorithm_a4():
    rng = np.random.default_rng(0)
    # M = max(1, floor(0.5 * 4)) = 2; all weight on items 1 and 3 -> exactly those two, each once
    picked = sample_without_replacement(np.array([0.0, 2.0, -1.0, 1.0]), 0.5, rng)
    assert sorted(picked.tolist()) == [1, 3]
    # once the weight is used up, the rest is uniform over what remains (W = 0 branch)
    picked = sample_without_replacement(np.array([1.0, 0.0, 0.0]), 1.0, rng)
    assert picked[0] == 0 and sorted(picked.tolist()) == [0, 1, 2]
    assert len(sample_without_replacement(np.ones(3), 0.01, rng)) == 1  # at least one
    # frequencies of the first draw follow the weights
    firsts = [sample_without_replacement(np.array([3.0, 1.0]), 0.5, rng)[0] for _ in range(2000)]
    assert abs(np.mean(np.array(firsts) == 0) - 0.75) < 0.04
