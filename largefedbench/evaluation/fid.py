"""Fréchet distance between two sets of sentence embeddings (POPri spec item 10; Heusel et al. 2017).

``FID = ||mu_a - mu_b||^2 + tr(S_a + S_b - 2 sqrtm(S_a S_b))`` with sample covariances (``np.cov(rowvar=False)``,
ddof 1) and the real part of scipy's matrix square root, as in the POPri reference's ``evaluation.py``. The
harness computes it between synthetic and validation span embeddings (all-MiniLM-L6-v2, 384-d).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from largefedbench.errors import InputError


def _check(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2:
        raise InputError(f"FID needs two 2-D embedding arrays (rows = samples); got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[1]:
        raise InputError(f"embedding sizes differ ({a.shape[1]} vs {b.shape[1]}); embed both sets with the same embedder")
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise InputError(f"FID needs at least 2 samples per set for a covariance; got {a.shape[0]} and {b.shape[0]}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InputError("embeddings contain NaN or infinite values")
    return a, b


def fid(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between embedding sets ``a`` (n×d) and ``b`` (m×d); symmetric, 0 for identical sets."""
    a, b = _check(a, b)
    mu_a, mu_b = a.mean(axis=0), b.mean(axis=0)
    cov_a, cov_b = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    covmean = scipy.linalg.sqrtm(cov_a @ cov_b)
    covmean = np.real(covmean)
    value = float(np.sum((mu_a - mu_b) ** 2) + np.trace(cov_a) + np.trace(cov_b) - 2.0 * np.trace(covmean))
    # sqrtm of a product of near-singular PSD matrices carries ~1e-7 relative error; FID is non-negative.
    return max(value, 0.0)


def mean_sq_distance(a: np.ndarray, b: np.ndarray) -> float:
    """``||mu_a - mu_b||^2``, the first FID term (the reference logs it as "MSE")."""
    a, b = _check(a, b)
    return float(np.sum((a.mean(axis=0) - b.mean(axis=0)) ** 2))


def fid_to(embeddings: np.ndarray, reference: np.ndarray) -> float:
    """FID between two embedding sets, NaN when either has fewer than two rows."""
    if len(embeddings) < 2 or len(reference) < 2:
        return math.nan
    return float(fid(embeddings, reference))
