"""Histogram steps of the synthetic-data methods: k-means buckets, per-client vote vectors, resampling a pool to a
noisy histogram, control-code profiles and kNN votes within a control code.

Every function here is plain numpy (and scikit-learn for PCA/k-means) on public or per-client arrays, so each one is
testable on hand-computable cases. The DP release itself is never done here: a method builds each client's vector with
these functions inside a client computation and releases the sum through ``Federation.private_sum``.

- :func:`fit_buckets` / :class:`Buckets` — Yu et al. 2024 Alg. 2 steps 2–3 as in the released code
  (``resample_with_embeddings.py``): L2-normalise, PCA fitted on the synthetic pool keeping 90% of the variance,
  k-means; real samples go to the nearest centroid.
- :func:`normalized_votes` — one client's bucket counts divided by its number of spans, so a client weighs exactly 1
  (L1 = 1, hence L2 ≤ 1: user-level sensitivity 1 under clip 1).
- :func:`resample_counts`, :func:`shortfall`, :func:`resample` — Alg. 2 steps 11–21: ``p = h̃/N``, take
  ``max(⌈T·p⌉, 0)`` uniformly without replacement from each bucket; a bucket that is too small is "need more initial
  samples" (the caller grows the pool) and, past the pool cap, is sampled with replacement as in App. D.3.
- :func:`proportional_counts` — Wang et al. Alg. 1 stage 3 ``s_j = Round(s·P̃[j])`` (and CTCL's generation counts).
- :func:`knn_code_votes` — Wang et al. Alg. A.2: each private sample votes for its K nearest synthetic candidates of
  its own control code.
- :func:`sample_without_replacement` — Wang et al. Alg. A.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from largefedbench.errors import InputError

__all__ = [
    "Buckets",
    "fit_buckets",
    "knn_code_votes",
    "l2_normalize_rows",
    "normalized_votes",
    "one_hot",
    "proportional_counts",
    "resample",
    "resample_counts",
    "sample_without_replacement",
    "shortfall",
]


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


# -- k-means buckets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Buckets:
    """PCA (fitted on the synthetic pool) + k-means centroids; ``labels`` are the pool's own buckets."""

    mean: np.ndarray  # (d,)
    components: np.ndarray  # (k, d)
    centroids: np.ndarray  # (K, k)
    labels: np.ndarray  # (pool,)

    @property
    def n_buckets(self) -> int:
        return len(self.centroids)

    def broadcast(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a client downloads to find its buckets: the PCA mean and components and the centroids."""
        return self.mean, self.components, self.centroids

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """L2-normalise, centre with the pool's mean and project on the kept principal components."""
        return (_unit_rows(vectors) - self.mean) @ self.components.T

    def assign(self, vectors: np.ndarray) -> np.ndarray:
        """The nearest centroid (Euclidean, in PCA space) of every row (Alg. 2 line 7)."""
        if len(vectors) == 0:
            return np.zeros(0, dtype=np.int64)
        z = self.project(vectors)
        d2 = (z * z).sum(1, keepdims=True) - 2 * z @ self.centroids.T + (self.centroids**2).sum(1)
        return np.argmin(d2, axis=1).astype(np.int64)

    def sizes(self, labels: np.ndarray | None = None) -> np.ndarray:
        """How many pool samples each bucket holds."""
        return np.bincount(self.labels if labels is None else labels, minlength=self.n_buckets)


def fit_buckets(embeddings: np.ndarray, n_buckets: int, *, variance: float = 0.9, seed: int = 0, n_init: int = 5,
                max_iter: int = 500) -> Buckets:
    """Cluster the synthetic pool: L2-normalise, PCA to ``variance`` of the explained variance, k-means.

    Defaults are the released code's (90% variance; faiss k-means ``niter=500, nredo=5``, here scikit-learn's)."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    x = _unit_rows(embeddings)
    if not 1 <= n_buckets <= len(x):
        raise InputError(f"cannot cut a pool of {len(x)} samples into {n_buckets} buckets; generate a larger pool "
                         "or use fewer buckets")
    if not 0 < variance <= 1:
        raise InputError(f"PCA variance share {variance} must be in (0, 1]")
    n_components: float | int = variance if variance < 1 else min(x.shape)
    pca = PCA(n_components=n_components, svd_solver="full", random_state=seed).fit(x)
    z = pca.transform(x)
    km = KMeans(n_clusters=n_buckets, n_init=n_init, max_iter=max_iter, random_state=seed).fit(z)
    return Buckets(mean=pca.mean_.copy(), components=pca.components_.copy(), centroids=km.cluster_centers_.copy(),
                   labels=km.labels_.astype(np.int64))


# -- per-client vote vectors --------------------------------------------------------------------------------
def one_hot(labels: np.ndarray, n: int) -> np.ndarray:
    """Row ``i`` is the indicator of ``labels[i]`` (a label of -1 gives a zero row)."""
    labels = np.asarray(labels, dtype=np.int64)
    out = np.zeros((len(labels), n))
    ok = labels >= 0
    out[np.flatnonzero(ok), labels[ok]] = 1.0
    return out


def normalized_votes(labels: np.ndarray, owner: np.ndarray, n_clients: int, n_buckets: int) -> np.ndarray:
    """Per client, the share of its spans in each bucket: rows sum to 1 (0 for a client without spans)."""
    labels, owner = np.asarray(labels, dtype=np.int64), np.asarray(owner, dtype=np.int64)
    counts = np.zeros((n_clients, n_buckets))
    np.add.at(counts, (owner, labels), 1.0)
    totals = counts.sum(1, keepdims=True)
    return counts / np.maximum(totals, 1.0)


def l2_normalize_rows(votes: np.ndarray) -> np.ndarray:
    """Each non-zero row scaled to unit L2 norm (a client's vote vector then weighs exactly 1)."""
    votes = np.asarray(votes, dtype=np.float64)
    norms = np.linalg.norm(votes, axis=1, keepdims=True)
    return np.where(norms > 0, votes / np.maximum(norms, 1e-12), 0.0)


# -- resampling to a noisy histogram (Yu et al. Alg. 2) ------------------------------------------------------
def resample_counts(noisy_hist: np.ndarray, n_real: int, n_target: int) -> np.ndarray:
    """``max(⌈T·p⌉, 0)`` per bucket with ``p = h̃ / N`` (Alg. 2 lines 12 and 18)."""
    if n_real < 1 or n_target < 0:
        raise InputError(f"resampling needs n_real >= 1 and n_target >= 0, got {n_real} and {n_target}")
    p = np.asarray(noisy_hist, dtype=np.float64) / n_real
    return np.maximum(np.ceil(n_target * p - 1e-9), 0).astype(np.int64)


def shortfall(counts: np.ndarray, bucket_sizes: np.ndarray) -> np.ndarray:
    """How many samples each bucket lacks (Alg. 2 line 15: ``|G_i| < ⌈T·p⌉`` means "need more initial samples")."""
    return np.maximum(np.asarray(counts) - np.asarray(bucket_sizes), 0)


def resample(labels: np.ndarray, counts: np.ndarray, rng: np.random.Generator, *,
             replace_if_short: bool = True) -> np.ndarray:
    """Pool indices: ``counts[b]`` drawn uniformly without replacement from bucket ``b`` (Alg. 2 line 18).

    A bucket holding fewer than ``counts[b]`` samples is drawn *with* replacement when ``replace_if_short`` (the
    paper's App. D.3 fallback), otherwise it raises (the paper's "Need more initial samples")."""
    labels = np.asarray(labels, dtype=np.int64)
    chosen = []
    for b, c in enumerate(np.asarray(counts, dtype=np.int64)):
        if c <= 0:
            continue
        members = np.flatnonzero(labels == b)
        if len(members) >= c:
            chosen.append(rng.choice(members, size=c, replace=False))
        elif not replace_if_short:
            raise InputError(f"bucket {b} holds {len(members)} samples but the histogram asks for {c}: "
                             "need more initial samples")
        elif len(members):
            chosen.append(rng.choice(members, size=c, replace=True))
    return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)


# -- control-code profiles and proportional generation -------------------------------------------------------
def proportional_counts(weights: np.ndarray, total: int, *, exact_total: bool = False) -> np.ndarray:
    """``Round(total · w_j / Σw)`` with negative weights clamped to 0 (Wang et al. Alg. 1 stage 3).

    ``exact_total`` uses largest remainders so the counts sum to ``total`` exactly (CTCL tiles its generation list
    to exactly N_GEN). All-zero weights spread ``total`` evenly."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    if len(w) == 0:
        return np.zeros(0, dtype=np.int64)
    w = np.full_like(w, 1.0) if w.sum() <= 0 else w
    share = total * w / w.sum()
    if not exact_total:
        return np.floor(share + 0.5).astype(np.int64)
    counts = np.floor(share).astype(np.int64)
    rest = total - int(counts.sum())
    order = np.argsort(-(share - counts), kind="stable")
    counts[order[:rest]] += 1
    return counts


# -- kNN votes within a control code (Wang et al. Alg. A.2) --------------------------------------------------
def knn_code_votes(span_vectors: np.ndarray, owner: np.ndarray, client_codes: np.ndarray, pool_vectors: np.ndarray,
                   pool_codes: np.ndarray, k: int) -> np.ndarray:
    """Raw vote counts ``(n_clients, len(pool))``: each span of client ``c`` adds one vote to each of its ``k`` nearest
    pool candidates (cosine) among those with code ``client_codes[c]``. ``n_clients = len(client_codes)``; a code
    with fewer than ``k`` candidates gets a vote on each of them."""
    owner = np.asarray(owner, dtype=np.int64)
    client_codes = np.asarray(client_codes, dtype=np.int64)
    pool_codes = np.asarray(pool_codes, dtype=np.int64)
    votes = np.zeros((len(client_codes), len(pool_codes)))
    if len(owner) == 0 or len(pool_codes) == 0 or k < 1:
        return votes
    spans, pool = _unit_rows(span_vectors), _unit_rows(pool_vectors)
    span_codes = client_codes[owner]
    for code in np.unique(span_codes):
        candidates = np.flatnonzero(pool_codes == code)
        rows = np.flatnonzero(span_codes == code)
        if len(candidates) == 0 or len(rows) == 0:
            continue
        kk = min(k, len(candidates))
        sims = spans[rows] @ pool[candidates].T
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk] if kk < len(candidates) else np.tile(
            np.arange(len(candidates)), (len(rows), 1))
        np.add.at(votes, (np.repeat(owner[rows], kk), candidates[top].ravel()), 1.0)
    return votes


def sample_without_replacement(weights: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Wang et al. Alg. A.4: ``M = min(max(1, ⌊r·n⌋), n)`` successive draws, each with probability ``w_i / W`` over
    the remaining items (uniform once the remaining weight ``W`` is 0). Negative weights count as 0.
    Returns positions into ``weights`` in draw order."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    n = len(w)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if not 0 < rate <= 1:
        raise InputError(f"sampling rate {rate} must be in (0, 1]")
    m = min(max(1, math.floor(rate * n)), n)
    remaining = np.ones(n, dtype=bool)
    out = np.empty(m, dtype=np.int64)
    for j in range(m):
        live = np.flatnonzero(remaining)
        total = w[live].sum()
        if total > 0:
            pick = live[rng.choice(len(live), p=w[live] / total)]
        else:
            pick = live[rng.integers(len(live))]
        out[j] = pick
        remaining[pick] = False
    return out
