"""The statistics of a knowledge-cutoff curve's months: a month's mean loss with a bootstrap interval over records,
the records' topics (k-means of their embeddings) and the topic-standardised monthly means."""

from __future__ import annotations

from typing import Any

import numpy as np


def _multinomial_counts(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` bootstrap resamples of ``n`` units as counts per unit, shape ``(draws, n)``."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)


def month_bootstrap(loss: np.ndarray, record: np.ndarray, *, draws: int, rng: np.random.Generator) -> dict[str, Any]:
    """The mean of ``loss`` (one value per window) with a 95% percentile interval from resampling records
    (``record[i]``: window ``i``'s record, 0..R-1) with replacement: a record brings all its windows."""
    n_rec = int(record.max()) + 1
    sums = np.bincount(record, weights=loss, minlength=n_rec)
    counts = np.bincount(record, minlength=n_rec).astype(np.float64)
    c = _multinomial_counts(n_rec, draws, rng)
    reps = (c @ sums) / (c @ counts)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return {"mean": float(sums.sum() / counts.sum()), "ci": [float(lo), float(hi)], "se": float(reps.std(ddof=1)),
            "replicates": reps}


def standardise(month: np.ndarray, record: np.ndarray, topic: np.ndarray, loss: np.ndarray, *, n_months: int,
                n_topics: int, draws: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Topic-standardised monthly means with bootstrap intervals (records resampled within their month).

    ``month[i]``, ``record[i]`` and ``loss[i]`` describe window ``i``; ``topic[r]`` is record ``r``'s topic
    (records are numbered across months). With ``p_k`` the pooled share of windows in topic ``k`` and ``m_k`` the
    pooled mean of topic ``k``, a month's value is ``sum_k p_k m_k + delta``, where ``delta`` is the p-weighted mean
    of ``m_tk - m_k`` over the topics the month has. With every topic present this is ``sum_k p_k m_tk`` (direct
    standardisation); a topic with no window that month is filled with its pooled mean moved by the month's
    ``delta`` (an additive month + topic model), and ``coverage`` reports the share of the pooled mix it had.
    """
    wtopic = topic[record]
    p = np.bincount(wtopic, minlength=n_topics) / len(loss)
    m_k = np.bincount(wtopic, weights=loss, minlength=n_topics) / np.maximum(np.bincount(wtopic, minlength=n_topics), 1)
    grand = float(p @ m_k)

    def value(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:  # (..., K) topic sums and window counts
        present = counts > 0
        dev = np.where(present, sums / np.where(present, counts, 1) - m_k, 0.0)
        share = (present * p).sum(-1)
        return grand + (dev * p).sum(-1) / share

    out = []
    for t in range(n_months):
        sel = month == t
        recs, local = np.unique(record[sel], return_inverse=True)
        onehot = np.eye(n_topics)[topic[recs]]  # (R, K)
        rec_sums = np.bincount(local, weights=loss[sel], minlength=len(recs))[:, None] * onehot
        rec_counts = np.bincount(local, minlength=len(recs)).astype(np.float64)[:, None] * onehot
        sums, counts = rec_sums.sum(0), rec_counts.sum(0)
        c = _multinomial_counts(len(recs), draws, rng)
        reps = value(c @ rec_sums, c @ rec_counts)
        lo, hi = np.percentile(reps, [2.5, 97.5])
        present = counts > 0
        out.append({"mean": float(value(sums, counts)), "ci": [float(lo), float(hi)], "se": float(reps.std(ddof=1)),
                    "coverage": float(p[present].sum()), "topics_present": int(present.sum()), "replicates": reps})
    return out


def cluster_topics(vectors: np.ndarray, k: int, *, seed: int = 0) -> tuple[np.ndarray, str]:
    """K-means labels of ``vectors`` (rows) into ``min(k, rows)`` clusters: scikit-learn's KMeans when it is
    installed, else Lloyd's algorithm with k-means++ seeding in numpy. Returns ``(labels, method)``."""
    k = max(1, min(k, len(vectors)))
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        return _kmeans_numpy(vectors, k, seed=seed), "numpy k-means++ (scikit-learn is not installed)"
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(vectors)
    return np.asarray(labels, dtype=np.int64), f"scikit-learn KMeans (n_init=10, random_state={seed})"


def _kmeans_numpy(x: np.ndarray, k: int, *, seed: int = 0, iters: int = 100) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(len(x))]]
    for _ in range(1, k):  # k-means++: the next centre far from the chosen ones
        d2 = np.min(((x[:, None, :] - np.asarray(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(x[rng.choice(len(x), p=d2 / d2.sum())] if d2.sum() > 0 else x[rng.integers(len(x))])
    c = np.asarray(centres, dtype=np.float64)
    labels = np.zeros(len(x), dtype=np.int64)
    for _ in range(iters):
        new = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        if _ and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            if (labels == j).any():
                c[j] = x[labels == j].mean(0)
    return labels
