"""Benchmark: POPri's client scoring as chunked matrix products vs a per-client loop (DESIGN.md §9).

Run with ``pytest tests/synthetic/test_bench_scoring.py --benchmark-enable -s`` for the real figures (2,000 clients
with 6.6 spans each on average, as bioRxiv, × 18,000 synthetic samples of 384 dimensions, the paper's K·J); with
benchmarks disabled it runs once on a small problem to check that both give the same scores.
"""

from __future__ import annotations

import time

import numpy as np

from largefedbench.synthetic.scoring import popri_client_scores


def naive_scores(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, synthetic: np.ndarray) -> np.ndarray:
    """Reference: client by client, its spans against every synthetic sample, summed, z-scored and clipped."""
    out = np.empty((n_clients, len(synthetic)), dtype=np.float32)
    bounds = np.searchsorted(owner, np.arange(n_clients + 1))  # owner is sorted: client c owns rows bounds[c]:bounds[c+1]
    for c in range(n_clients):
        a = (span_vectors[bounds[c] : bounds[c + 1]] @ synthetic.T).sum(0)
        z = (a - a.mean()) / a.std()
        out[c] = z / max(1.0, float(np.linalg.norm(z)))
    return out


def problem(n_clients: int, n_synthetic: int, d: int = 384, seed: int = 0):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(5.6, size=n_clients) + 1
    spans = rng.standard_normal((int(counts.sum()), d)).astype(np.float32)
    spans /= np.linalg.norm(spans, axis=1, keepdims=True)
    synthetic = rng.standard_normal((n_synthetic, d)).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    return spans, np.repeat(np.arange(n_clients), counts), synthetic


def test_scoring_speed_against_a_per_client_loop(benchmark):
    n_clients, n_synthetic = (200, 1_000) if benchmark.disabled else (2_000, 18_000)
    spans, owner, synthetic = problem(n_clients, n_synthetic)
    fast = benchmark.pedantic(popri_client_scores, args=(spans, owner, n_clients, synthetic), rounds=1 if benchmark.disabled else 3,
                              iterations=1)
    t0 = time.perf_counter()
    slow = naive_scores(spans, owner, n_clients, synthetic)
    naive_seconds = time.perf_counter() - t0
    np.testing.assert_allclose(fast, slow, atol=1e-5)  # same scores, so the comparison is fair
    if not benchmark.disabled:
        mean = benchmark.stats.stats.mean
        benchmark.extra_info.update(clients=n_clients, synthetic=n_synthetic, seconds=round(mean, 3),
                                    naive_seconds=round(naive_seconds, 3), speedup=round(naive_seconds / mean, 2))
        print(f"\nPOPri scoring: {n_clients} clients × {n_synthetic} samples in {mean:.2f} s; per-client loop "
              f"{naive_seconds:.2f} s; x{naive_seconds / mean:.1f}")
