"""FedBiscuit's groups (§5 Step 2.1, made private): each client's ranking of the selectors as a unit vector, the
reference's balanced greedy assignment on the noisy rankings, and the step of the grouped selectors on their
released sums (Eq. 6)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from largefedbench.methods.fedbiscuit.config import SELECTOR_WEIGHTS

from largefedbench.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["balanced_grouping", "clustered_step", "grouping_rows", "preference_scores", "private_grouping"]


def preference_scores(losses: np.ndarray) -> np.ndarray:
    """Client side: each client's ranking of the selectors as a vector of L2 norm ≤ 1 — its negative validation
    losses, centred and scaled to unit norm (a zero row when all its losses are equal). Order-preserving, so the
    noise-free grouping is exactly the reference's on the losses."""
    scores = -(np.asarray(losses, dtype=np.float64) - np.mean(losses, axis=1, keepdims=True))
    norms = np.linalg.norm(scores, axis=1, keepdims=True)
    return np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 1e-12)


def balanced_grouping(scores: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The reference's ``check_and_grouping`` (FedBiscuit §5 Step 2.1) on released scores (higher = preferred).

    The clients, taken in the public shuffled ``order``, propose to their best open selector; the selector with the
    most proposals (ties: the lowest index) keeps the first ⌈unassigned / open⌉ of them in that order and closes;
    the rest propose to their next best open selector; repeat. Every group gets ⌈·⌉ or ⌊·⌋ of the clients, so
    Eq. 5 (max − min ≤ 1) holds and the sizes depend on the number of clients only. Returns each client's group."""
    n, n_sel = scores.shape
    ranking = np.argsort(-np.asarray(scores, dtype=np.float64), axis=1, kind="stable")
    nxt = np.zeros(n, dtype=np.int64)  # each client's position in its own ranking (the reference's iterator)
    group = np.full(n, -1, dtype=np.int64)
    proposals: dict[int, list[int]] = {u: [] for u in range(n_sel)}
    senders = [int(c) for c in order]
    unassigned = n
    while unassigned > 0:
        room = math.ceil(unassigned / len(proposals))
        for c in senders:
            u = int(ranking[c, nxt[c]])
            nxt[c] += 1
            while u not in proposals:
                u = int(ranking[c, nxt[c]])
                nxt[c] += 1
            proposals[u].append(c)
        best = max(proposals, key=lambda v: len(proposals[v]))  # first maximum: the lowest open index
        kept, senders = proposals[best][:room], proposals[best][room:]
        group[kept] = best
        del proposals[best]
        unassigned -= len(kept)
    return group


def grouping_rows(losses: np.ndarray, slots: Sequence[int], n_slots: int) -> np.ndarray:
    """Client side of FedBiscuit's private grouping: each client's :func:`preference_scores` of its own validation
    ``losses`` (one row of U per client) written into its own slot of an ``n_slots``·U vector; the federation sums
    these rows (each of L2 norm ≤ 1: sensitivity 1) and adds the noise."""
    losses = np.asarray(losses, dtype=np.float64)
    n_sel = losses.shape[1] if losses.ndim == 2 else 0
    rows = np.zeros((len(losses), n_slots * n_sel), dtype=np.float32)
    for j, (slot, row) in enumerate(zip(slots, preference_scores(losses) if len(losses) else [])):
        rows[j, slot * n_sel : (slot + 1) * n_sel] = row
    return rows


def private_grouping(noisy: np.ndarray, n_selectors: int, order: np.ndarray) -> np.ndarray:
    """Server side: the reference's balanced grouping on the noisy rankings (the released sum of
    :func:`grouping_rows`), clients taken in the public shuffled ``order``. A function of the release only."""
    return balanced_grouping(np.asarray(noisy, dtype=np.float64).reshape(-1, n_selectors), order)


def clustered_step(weights: list[torch.Tensor], noisy: torch.Tensor, n_clients: int, sizes: np.ndarray,
                   rule: str = "uniform") -> list[torch.Tensor]:
    """Eq. 6 on the released sums: φ_u ← (1 − Σ_{A_u} p_m) φ_u + Σ_{A_u} p_m φ_u^m = φ_u + Σ_{A_u} p_m Δ_m, where
    ``noisy`` holds selector u's noisy Σ Δ in slot u. ``rule`` "uniform": p_m = 1/M (M = ``n_clients``; the paper's
    uniform weights and the reference aggregator's ``1 / num_clients``); "group": p_m = 1/N_u (ours: each group
    averages over its own members, a step about U times larger)."""
    if rule not in SELECTOR_WEIGHTS:
        raise InputError(f"selector_weights={rule!r}; choose one of {', '.join(SELECTOR_WEIGHTS)}")
    d = weights[0].numel()
    out = []
    for u, w in enumerate(weights):
        denominator = float(n_clients) if rule == "uniform" else float(sizes[u])
        out.append(w + noisy[u * d : (u + 1) * d] / max(denominator, 1.0))
    return out
