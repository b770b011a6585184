"""The public candidate pairs the selectors judge, and each client's preferences on its own share of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from largefedbench.synthetic.scoring import client_embedding_sums

__all__ = ["PairPool", "client_pair_indices", "client_preferences", "own_pairs"]


@dataclass(frozen=True)
class PairPool:
    """Public candidate pairs (server-generated) and their unit embeddings."""

    a: list[str]
    b: list[str]
    emb_a: np.ndarray
    emb_b: np.ndarray

    def __len__(self) -> int:
        return len(self.a)


def client_pair_indices(clients: np.ndarray, pool_size: int, per_client: int, seed: int) -> np.ndarray:
    """Each client's fixed draw of ``per_client`` distinct pool pairs (seeded by the run seed and the client's
    position): ``(len(clients), per_client)``."""
    k = min(per_client, pool_size)
    return np.stack([np.random.default_rng(np.random.SeedSequence([int(seed), 0xFB15, int(c)])).choice(pool_size, k, replace=False)
                     for c in clients]) if len(clients) else np.zeros((0, k), dtype=np.int64)


def client_preferences(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, pool: PairPool,
                       pair_idx: np.ndarray) -> np.ndarray:
    """Label 0 where a client prefers A (larger summed cosine similarity to its spans), 1 where it prefers B:
    ``(n_clients, pairs)`` for the pairs ``pair_idx[c]`` of client ``c`` (inside a client function)."""
    sums = client_embedding_sums(span_vectors, owner, n_clients).astype(np.float64)
    sim_a = np.einsum("cd,ckd->ck", sums, pool.emb_a[pair_idx])
    sim_b = np.einsum("cd,ckd->ck", sums, pool.emb_b[pair_idx])
    return (sim_b > sim_a).astype(np.int64)


def own_pairs(chunk, position: dict[str, int], pool: PairPool, n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Client side: the chunk clients' own ``n_pairs`` pool pairs (train part first, validation last; seeded by the
    run seed and each client's public position in the federation) and their labels from their own span embeddings."""
    pairs = client_pair_indices(np.asarray([position[c] for c in chunk.ids], dtype=np.int64), len(pool), n_pairs, seed)
    if len(chunk) == 0:
        return pairs, pairs
    return pairs, client_preferences(chunk.embeddings, chunk.owner, len(chunk), pool, pairs)
