"""The synthetic texts' vocabulary distance (unigram JSD) and diversity (mean pairwise cosine)."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.evaluation import mean_pairwise_cosine, token_counts, unigram_jsd


def test_token_counts_count_every_id_and_keep_the_vocabulary_size():
    assert token_counts([[0, 2, 2], [], [3]], 5).tolist() == [1, 0, 2, 1, 0]


def test_unigram_jsd_is_zero_for_one_distribution_one_for_disjoint_vocabularies_and_symmetric():
    a, b = np.array([2.0, 2, 0, 0]), np.array([0.0, 0, 5, 1])
    assert unigram_jsd(a, 3 * a) == pytest.approx(0.0, abs=1e-12)  # counts, not sizes: the same distribution
    assert unigram_jsd(a, b) == pytest.approx(1.0)
    c = np.array([1.0, 1, 1, 1])
    # half of c's mass is a's: JSD = H(M) - (H(a) + H(c)) / 2 with M = (3/8, 3/8, 1/8, 1/8), in bits
    h = lambda p: -sum(x * np.log2(x) for x in p if x > 0)  # noqa: E731
    expected = h([3 / 8, 3 / 8, 1 / 8, 1 / 8]) - (h([0.5, 0.5]) + h([0.25] * 4)) / 2
    assert unigram_jsd(a, c) == pytest.approx(expected) == pytest.approx(unigram_jsd(c, a))


def test_unigram_jsd_refuses_what_it_cannot_compare():
    with pytest.raises(InputError, match="same ids"):
        unigram_jsd(np.ones(3), np.ones(4))
    with pytest.raises(InputError, match="at least one token"):
        unigram_jsd(np.zeros(3), np.ones(3))


def test_mean_pairwise_cosine_is_one_for_a_collapsed_set_and_matches_the_pairs_by_hand():
    v = np.array([3.0, 4.0])
    assert mean_pairwise_cosine(np.stack([v, 2 * v, 0.5 * v])) == pytest.approx(1.0)
    assert mean_pairwise_cosine(np.eye(4)) == pytest.approx(0.0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 5))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = [unit[i] @ unit[j] for i in range(7) for j in range(7) if i != j]
    assert mean_pairwise_cosine(x) == pytest.approx(np.mean(pairs))
    with pytest.raises(InputError, match="at least 2"):
        mean_pairwise_cosine(x[:1])
    with pytest.raises(InputError, match="zero"):
        mean_pairwise_cosine(np.zeros((2, 3)))
