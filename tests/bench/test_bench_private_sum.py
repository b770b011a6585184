"""Benchmark: POPri's noised score sum through Federation.private_sum — the exact shortcut against the general
streamed path — and CSR span-embedding sums against ``np.add.reduceat``.

``pytest tests/bench/test_bench_private_sum.py --benchmark-enable -s`` runs them at 20,000 clients × 18,000 samples × 384
(and 10,000 clients for the sums); with benchmarks disabled each runs once on a small problem and checks the answers
agree. Paper scale (133,000 clients) is ``lfb bench scale``.
"""

from __future__ import annotations

import numpy as np

from largefedbench.bench.scale import SyntheticClients, span_counts, unit_rows
from largefedbench.federation import Federation, SpanEmbeddings
from largefedbench.privacy.mechanisms import NoNoise
from largefedbench.synthetic.scoring import PopriScores, client_embedding_sums


def _federation(n_clients: int, d: int, seed: int = 0) -> Federation:
    rng = np.random.default_rng(seed)
    counts = span_counts(n_clients, rng)
    emb = SpanEmbeddings(unit_rows(int(counts.sum()), d, rng), np.concatenate([[0], np.cumsum(counts)]))
    return Federation(SyntheticClients(n_clients), embeddings=emb, seed=seed)


def _release(fed: Federation, fn, chunk: int) -> np.ndarray:
    return fed.private_sum(fed.everyone(), fn, clip=1.0, mechanism=NoNoise(), batched=True, chunk_clients=chunk)


def test_popri_shortcut_speed(benchmark):
    n, m, d = (400, 300, 32) if benchmark.disabled else (20_000, 18_000, 384)
    fed = _federation(n, d)
    score = PopriScores(unit_rows(m, d, np.random.default_rng(1)))
    out = benchmark.pedantic(_release, args=(fed, score, 8192), rounds=1 if benchmark.disabled else 3)
    general = _release(fed, lambda chunk: score(chunk), 1024) if benchmark.disabled else out
    np.testing.assert_allclose(out, general, atol=1e-5 * np.abs(general).max())


def test_popri_general_streamed_path_speed(benchmark):
    n, m, d = (400, 300, 32) if benchmark.disabled else (20_000, 18_000, 384)
    fed = _federation(n, d)
    score = PopriScores(unit_rows(m, d, np.random.default_rng(1)))
    out = benchmark.pedantic(_release, args=(fed, lambda chunk: score(chunk), 1024), rounds=1)
    assert out.shape == (m,) and np.isfinite(out).all()


def _reduceat_sums(vectors: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, vectors.shape[1]), dtype=np.float32)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    out[owner[starts]] = np.add.reduceat(vectors, starts, axis=0)
    return out


def test_csr_span_sums_speed_against_reduceat(benchmark):
    n, d = (300, 16) if benchmark.disabled else (10_000, 384)
    rng = np.random.default_rng(2)
    counts = span_counts(n, rng)
    vectors, owner = unit_rows(int(counts.sum()), d, rng), np.repeat(np.arange(n), counts)
    sums = benchmark(client_embedding_sums, vectors, owner, n)
    np.testing.assert_allclose(sums, _reduceat_sums(vectors, owner, n), atol=1e-4)
