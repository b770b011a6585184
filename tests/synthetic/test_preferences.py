"""Preference pairs follow the noisy ranking within each prompt's block; ties and identical texts as documented."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.synthetic.preferences import preference_pairs, rank_within_prompts


def test_chosen_is_rank_one_and_rejected_rank_l_of_each_prompt_block():
    scores = np.array([
        0.1, 0.9, 0.3, 0.5, 0.2,   # prompt 0: ranking 1, 3, 2, 4, 0
        2.0, -1.0, 0.0, 1.0, 3.0,  # prompt 1: ranking 9, 5, 8, 7, 6
    ])
    pairs = preference_pairs(scores, 5, rejected_rank=3)
    assert pairs.prompt.tolist() == [0, 1]
    assert pairs.chosen.tolist() == [1, 9]
    assert pairs.rejected.tolist() == [2, 8]
    assert preference_pairs(scores, 5, rejected_rank=5).rejected.tolist() == [0, 6]


def test_pairs_follow_a_random_noisy_ranking():
    rng = np.random.default_rng(0)
    k, j, rank = 200, 10, 5
    noisy = rng.standard_normal(k * j)
    pairs = preference_pairs(noisy, j, rank)
    blocks = noisy.reshape(k, j)
    assert np.array_equal(noisy[pairs.chosen], blocks.max(1))
    assert np.array_equal(noisy[pairs.rejected], np.sort(blocks, axis=1)[:, ::-1][:, rank - 1])
    assert np.array_equal(pairs.chosen // j, np.arange(k)) and np.array_equal(pairs.rejected // j, np.arange(k))


def test_ties_keep_generation_order():
    ranked = rank_within_prompts(np.array([1.0, 2.0, 2.0, 1.0, 2.0, 0.0]), 6)
    assert ranked.tolist() == [[1, 2, 4, 0, 3, 5]]
    pairs = preference_pairs(np.zeros(8), 4, rejected_rank=2)
    assert pairs.chosen.tolist() == [0, 4] and pairs.rejected.tolist() == [1, 5]


def test_pairs_with_identical_texts_are_dropped():
    texts = ["a", "b", "c", "same", "x", "same"]
    scores = np.array([3.0, 2.0, 1.0, 3.0, 1.0, 2.0])
    pairs = preference_pairs(scores, 3, rejected_rank=2, texts=texts)
    assert pairs.prompt.tolist() == [0] and pairs.dropped_identical == 1
    assert len(preference_pairs(scores, 3, rejected_rank=2, texts=texts, distinct_only=False)) == 2


@pytest.mark.parametrize("rank, j, n", [(1, 5, 10), (6, 5, 10), (2, 3, 10)])
def test_bad_ranks_and_blocks_are_refused(rank, j, n):
    with pytest.raises(InputError):
        preference_pairs(np.zeros(n), j, rank)
