"""Client feedback on synthetic samples, vectorised over clients (DESIGN.md §9), for ``Federation.private_sum``.

**POPri's score** (Algorithm 2; popri-reference.md spec item 1). For client c with unit span embeddings x_c1..x_cn
and unit synthetic embeddings s_1..s_M, a_c[j] = Σ_i cos(x_ci, s_j) = (Σ_i x_ci) · s_j: one matrix product of the
clients' summed embeddings with the synthetic matrix per chunk of clients. Then, per client (a row operation):

- ``normalization="zscore"`` (reference code, default): z_c = (a_c − mean a_c) / std a_c with the population std
  over the M samples, so the sum-versus-mean question of Algorithm 2 vs the code does not matter (z-scoring is
  scale-free). Guard: a row with std = 0 (every sample equally similar — e.g. a client without spans) becomes the
  zero vector instead of the reference's NaN; it then adds nothing to the sum.
- ``normalization="mean"`` (the paper's Algorithm 2 as printed): a_c / n_c, the mean cosine similarity.

Finally the row is clipped to L2 norm ≤ ``clip`` (1): ``z ← z / max(1, ‖z‖)``. After z-scoring ‖z‖ = √M, so every
client contributes a unit vector. The federation's ``private_sum`` clips again (a no-op) and adds the noise. A row whose std is
below 1e-6 of its largest |value| counts as constant (float32 rounding).

**PE's vote** (PrE-Text / DPSDA with ``vote_normalization_level="client"``, spec item 15): each span votes for its
nearest synthetic sample in L2 (for unit samples: the largest cosine), the client's vote counts form a histogram
over the M samples, and the histogram is divided by its L2 norm, so each client contributes a unit vector
(user-level sensitivity 1). Synthetic vectors need not be unit (PrE-Text's look-ahead embeddings are means):
nearest in L2 is argmax_j x·s_j − ‖s_j‖²/2. Ties go to the lowest index.

``*_reference`` functions are direct per-client loops used by the tests and benchmarks as ground truth.

**The exact shortcut** (:class:`PopriScores` for ``fed.private_sum(…, batched=True)``). With s_c the client's
span-embedding sum and E the synthetic matrix, a_c = E s_c, mean a_c = s_c·ē and var a_c = s_cᵀ C s_c (ē and C the
mean and population covariance of E's rows), so z_c = (E s_c − (s_c·ē)·1) / std_c; every z-scored row has norm √M,
so both clips are one constant scale w. The clipped sum over a chunk is E (Σ_c w s_c/std_c) − (Σ_c w (s_c·ē)/std_c)·1:
the work is in d = 384 dimensions, and no clients × samples matrix exists. ``normalization="mean"`` is exact the
same way (‖a_c‖² = M s_cᵀ G s_c with G = EᵀE/M). Constant rows: the general path zeroes a row whose std is below
1e-6 of its largest |value|; the shortcut uses its root mean square instead (≤ the largest, ≥ it/√M), which
agrees on every row that is not constant to 1e-6 (in practice: a client without spans).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from largefedbench.errors import InputError

__all__ = [
    "NnVotes",
    "PopriScores",
    "client_embedding_sums",
    "nn_vote_histograms",
    "nn_votes_reference",
    "popri_client_scores",
    "popri_scores_reference",
]

Normalization = Literal["zscore", "mean"]
#: a row whose std is below this fraction of its largest |value| counts as constant (float32 rounding is ~6e-8)
_CONSTANT_ROW = 1e-6


def _check(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, synthetic: np.ndarray) -> None:
    if span_vectors.ndim != 2 or synthetic.ndim != 2 or span_vectors.shape[1] != synthetic.shape[1]:
        raise InputError(f"span embeddings {span_vectors.shape} and synthetic embeddings {synthetic.shape} must be "
                         "2-D with the same width")
    if len(owner) != len(span_vectors):
        raise InputError(f"{len(owner)} owners for {len(span_vectors)} span embeddings")
    if len(owner) and (owner.min() < 0 or owner.max() >= n_clients):
        raise InputError(f"owner indices must lie in [0, {n_clients})")


def client_embedding_sums(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int) -> np.ndarray:
    """Σ of each client's span embeddings: an ``(n_clients, d)`` float32 array (zeros for a client without spans).

    One sparse (CSR) client × span indicator product: ~30-50× faster than ``np.add.reduceat`` at 10k clients."""
    from scipy import sparse

    span_vectors = np.asarray(span_vectors, dtype=np.float32)
    owner = np.asarray(owner, dtype=np.int64)
    if len(owner) == 0:
        return np.zeros((n_clients, span_vectors.shape[1]), dtype=np.float32)
    columns = np.argsort(owner, kind="stable") if np.any(np.diff(owner) < 0) else np.arange(len(owner))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n_clients))])
    indicator = sparse.csr_matrix((np.ones(len(owner), np.float32), columns, indptr), shape=(n_clients, len(owner)))
    return np.asarray(indicator @ span_vectors, dtype=np.float32)


def _normalize_rows(block: np.ndarray, counts: np.ndarray, normalization: Normalization, clip: float) -> np.ndarray:
    """z-score (or mean) and clip the rows of ``block`` in place."""
    if normalization == "zscore":
        magnitude = np.abs(block).max(axis=1, keepdims=True) if block.shape[1] else np.zeros((len(block), 1), block.dtype)
        block -= block.mean(axis=1, keepdims=True)
        std = np.sqrt(np.mean(np.square(block), axis=1, keepdims=True))
        # constant rows (up to float32 rounding) have no ranking to tell: they become zero rows
        block /= np.where(std > _CONSTANT_ROW * magnitude, std, np.inf)
    elif normalization == "mean":
        block /= np.maximum(counts, 1)[:, None]
    else:
        raise InputError(f"normalization={normalization!r}; choose 'zscore' (reference code) or 'mean' (Algorithm 2)")
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    block *= np.minimum(1.0, clip / np.maximum(norms, 1e-30))
    return block


def popri_client_scores(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, synthetic: np.ndarray, *,
                        normalization: Normalization = "zscore", clip: float = 1.0, chunk: int = 1024) -> np.ndarray:
    """POPri's clipped score vectors of ``n_clients`` clients: ``(n_clients, M)`` float32 (see the module docstring).

    ``synthetic`` rows must be unit vectors (``models.embed`` returns unit rows); client span rows too.
    Memory beyond the output: one ``(chunk, M)`` block and the ``(n_clients, d)`` sums.
    """
    synthetic = np.asarray(synthetic, dtype=np.float32)
    span_vectors = np.asarray(span_vectors, dtype=np.float32)
    owner = np.asarray(owner, dtype=np.int64)
    _check(span_vectors, owner, n_clients, synthetic)
    sums = client_embedding_sums(span_vectors, owner, n_clients)
    counts = np.bincount(owner, minlength=n_clients)
    out = np.empty((n_clients, len(synthetic)), dtype=np.float32)
    syn_t = np.ascontiguousarray(synthetic.T)
    for lo in range(0, n_clients, chunk):
        hi = min(lo + chunk, n_clients)
        block = out[lo:hi]
        np.matmul(sums[lo:hi], syn_t, out=block)
        _normalize_rows(block, counts[lo:hi], normalization, clip)
    return out


class PopriScores:
    """POPri's client function for ``fed.private_sum(cohort, PopriScores(emb), clip=1.0, mechanism=Gaussian(σ),
    batched=True)``: called on a ``ChunkView`` it returns the chunk's clipped score rows (the general path);
    ``clipped_sum`` is the exact algebraic shortcut the federation uses instead (module docstring)."""

    #: the privacy audit may apply this function to canaries and score them against its releases
    scorable_by_audit = True

    def __init__(self, synthetic: np.ndarray, *, normalization: Normalization = "zscore", clip: float = 1.0,
                 chunk: int = 1024) -> None:
        if normalization not in ("zscore", "mean"):
            raise InputError(f"normalization={normalization!r}; choose 'zscore' (reference code) or 'mean' (Algorithm 2)")
        self.synthetic = np.ascontiguousarray(synthetic, dtype=np.float32)
        if self.synthetic.ndim != 2 or not len(self.synthetic):
            raise InputError(f"synthetic embeddings must be a non-empty (M, d) matrix, got shape {self.synthetic.shape}")
        self.normalization, self.clip, self.chunk = normalization, float(clip), int(chunk)
        self._e64 = self.synthetic.astype(np.float64)
        self._mean = self._e64.mean(axis=0)
        self._cov = self._e64.T @ self._e64 / len(self._e64) - np.outer(self._mean, self._mean)

    def __call__(self, chunk) -> np.ndarray:
        return popri_client_scores(chunk.embeddings, chunk.owner, len(chunk), self.synthetic,
                                   normalization=self.normalization, clip=self.clip, chunk=self.chunk)

    def clipped_sum(self, chunk, clip: float) -> np.ndarray:
        """Σ over the chunk's clients of their score rows clipped again to L2 ≤ ``clip``, without the rows."""
        span_vectors = np.asarray(chunk.embeddings, dtype=np.float32)
        _check(span_vectors, chunk.owner, len(chunk), self.synthetic)
        sums = client_embedding_sums(span_vectors, chunk.owner, len(chunk)).astype(np.float64)
        m = len(self.synthetic)
        mean = sums @ self._mean  # each client's mean score s·ē
        var = np.maximum(np.einsum("cd,cd->c", sums @ self._cov, sums), 0.0)  # sᵀCs
        if self.normalization == "zscore":
            std, rms = np.sqrt(var), np.sqrt(var + mean**2)  # mean square = sᵀGs = sᵀCs + (s·ē)²
            norm = np.sqrt(m)  # every z-scored row
            scale = min(1.0, self.clip / norm)
            scale *= min(1.0, clip / (norm * scale))
            weight = np.where(std > _CONSTANT_ROW * rms, scale / np.where(std > 0, std, 1.0), 0.0)
        else:
            counts = np.maximum(np.bincount(chunk.owner, minlength=len(chunk)), 1)
            norm = np.sqrt(m * (var + mean**2)) / counts
            first = np.minimum(1.0, self.clip / np.maximum(norm, 1e-30))
            weight = first * np.minimum(1.0, clip / np.maximum(norm * first, 1e-30)) / counts
        direction = weight @ sums  # (d,)
        offset = float(weight @ mean) if self.normalization == "zscore" else 0.0
        return (self._e64 @ direction - offset).astype(np.float32)


def popri_scores_reference(client_spans: Sequence[np.ndarray], synthetic: np.ndarray, *,
                           normalization: Normalization = "zscore", clip: float = 1.0) -> np.ndarray:
    """The same scores written out per client and per pair in float64 (cosines normalised explicitly)."""
    syn = np.asarray(synthetic, dtype=np.float64)
    syn = syn / np.linalg.norm(syn, axis=1, keepdims=True)
    rows = []
    for spans in client_spans:
        spans = np.asarray(spans, dtype=np.float64).reshape(-1, syn.shape[1])
        a = np.zeros(len(syn))
        for x in spans:
            a += syn @ (x / np.linalg.norm(x))
        if normalization == "zscore":
            std = a.std()
            z = (a - a.mean()) / std if std > 0 else np.zeros_like(a)
        else:
            z = a / max(len(spans), 1)
        rows.append(z / max(1.0, np.linalg.norm(z) / clip))
    return np.asarray(rows).reshape(len(rows), len(syn))


def _nearest(span_vectors: np.ndarray, synthetic: np.ndarray, chunk: int) -> np.ndarray:
    half_sq = 0.5 * np.einsum("ij,ij->i", synthetic, synthetic)
    syn_t = np.ascontiguousarray(synthetic.T)
    out = np.empty(len(span_vectors), dtype=np.int64)
    for lo in range(0, len(span_vectors), chunk):
        block = span_vectors[lo : lo + chunk] @ syn_t
        block -= half_sq
        out[lo : lo + chunk] = block.argmax(axis=1)
    return out


def nn_vote_histograms(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, synthetic: np.ndarray, *,
                       chunk: int = 4096) -> np.ndarray:
    """Per-client unit-L2 nearest-neighbour vote histograms over the synthetic samples: ``(n_clients, M)`` float32."""
    synthetic = np.asarray(synthetic, dtype=np.float32)
    span_vectors = np.asarray(span_vectors, dtype=np.float32)
    owner = np.asarray(owner, dtype=np.int64)
    _check(span_vectors, owner, n_clients, synthetic)
    m = len(synthetic)
    nearest = _nearest(span_vectors, synthetic, chunk)
    hist = np.zeros((n_clients, m), dtype=np.float32)
    np.add.at(hist, (owner, nearest), 1.0)
    norms = np.linalg.norm(hist, axis=1, keepdims=True)
    hist /= np.where(norms > 0, norms, 1.0)
    return hist


class NnVotes:
    """PE's client function (and POPri's with ``scoring='nn'``) for ``fed.private_sum(cohort, NnVotes(emb),
    clip=1.0, mechanism=Gaussian(σ), batched=True)``: each client's unit-L2 nearest-neighbour vote histogram over
    the synthetic samples, computed on the client's own span embeddings."""

    #: the privacy audit may apply this function to canaries and score them against its releases
    scorable_by_audit = True

    def __init__(self, synthetic: np.ndarray, *, chunk: int = 4096) -> None:
        self.synthetic = np.ascontiguousarray(synthetic, dtype=np.float32)
        if self.synthetic.ndim != 2 or not len(self.synthetic):
            raise InputError(f"synthetic embeddings must be a non-empty (M, d) matrix, got shape {self.synthetic.shape}")
        self.chunk = int(chunk)

    def __call__(self, chunk) -> np.ndarray:
        return nn_vote_histograms(chunk.embeddings, chunk.owner, len(chunk), self.synthetic, chunk=self.chunk)


def nn_votes_reference(client_spans: Sequence[np.ndarray], synthetic: np.ndarray) -> np.ndarray:
    """Per-client loop: each span's nearest synthetic sample by L2 distance, counts, divided by their L2 norm."""
    syn = np.asarray(synthetic, dtype=np.float64)
    rows = []
    for spans in client_spans:
        hist = np.zeros(len(syn))
        for x in np.asarray(spans, dtype=np.float64).reshape(-1, syn.shape[1]):
            hist[int(np.argmin(np.linalg.norm(syn - x, axis=1)))] += 1
        norm = np.linalg.norm(hist)
        rows.append(hist / norm if norm > 0 else hist)
    return np.asarray(rows).reshape(len(rows), len(syn))
