"""Preference pairs from the noisy client scores (POPri Algorithm 1 lines 20–26; spec item 3).

The K·J scores come in consecutive blocks of J, one block per prompt (``generate_flat`` order). Each block is
ranked by score, highest first; the rank-1 sample is *chosen* and the rank-ℓ sample (1-indexed, ℓ = 5 of J = 10
in the paper, App. E.5) is *rejected*.

Ties: ranks are a stable sort, so equal scores keep generation order (the earlier sample ranks higher). Scores
are noisy reals, so exact ties only arise in constructed cases. Each sample keeps its own score, unlike the
reference's ``A.index(x)`` lookup that gave duplicate strings the first copy's score (popri-reference.md §4 g).
A pair whose chosen and rejected *texts* are identical teaches nothing and is dropped (``distinct_only``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from largefedbench.errors import InputError

__all__ = ["PreferencePairs", "preference_pairs", "rank_within_prompts"]


def rank_within_prompts(scores: np.ndarray, n_per_prompt: int) -> np.ndarray:
    """``(K, J)`` indices into the flat score vector, each row the prompt's samples from best to worst (stable)."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    j = int(n_per_prompt)
    if j < 1 or len(scores) % j:
        raise InputError(f"{len(scores)} scores do not form blocks of n_per_prompt={n_per_prompt}")
    blocks = scores.reshape(-1, j)
    order = np.argsort(-blocks, axis=1, kind="stable")
    return order + (np.arange(len(blocks)) * j)[:, None]


@dataclass(frozen=True)
class PreferencePairs:
    """Chosen and rejected sample indices (into the flat sample list) and the prompt index of each pair."""

    prompt: np.ndarray
    chosen: np.ndarray
    rejected: np.ndarray
    dropped_identical: int = 0

    def __len__(self) -> int:
        return len(self.prompt)


def preference_pairs(scores: np.ndarray, n_per_prompt: int, rejected_rank: int, *, texts: list[str] | None = None,
                     distinct_only: bool = True) -> PreferencePairs:
    """One (chosen = rank 1, rejected = rank ``rejected_rank``) pair per prompt; see the module docstring."""
    if not 2 <= rejected_rank <= n_per_prompt:
        raise InputError(f"rejected_rank={rejected_rank} must be between 2 and n_per_prompt={n_per_prompt} (1-indexed)")
    ranked = rank_within_prompts(scores, n_per_prompt)
    prompt = np.arange(len(ranked))
    chosen, rejected = ranked[:, 0], ranked[:, rejected_rank - 1]
    dropped = 0
    if texts is not None and distinct_only:
        if len(texts) != ranked.size:
            raise InputError(f"{len(texts)} texts for {ranked.size} scores")
        keep = np.array([texts[c] != texts[r] for c, r in zip(chosen, rejected)], dtype=bool)
        dropped = int((~keep).sum())
        prompt, chosen, rejected = prompt[keep], chosen[keep], rejected[keep]
    return PreferencePairs(prompt, chosen, rejected, dropped)
