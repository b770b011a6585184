"""Clipping: every client's contribution scaled to L2 norm at most ``clip`` before it is summed (the sensitivity a
mechanism is calibrated for). A row with a NaN or ±inf entry becomes a zero row: summed as it came, it would make the
release non-finite whatever the noise, telling the server without noise that some client sent one."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CLIP_MARGIN", "clip_rows"]

#: a row above the clip is scaled to norm (1 − CLIP_MARGIN)·clip, not clip: the float32 norm of a row of a million
#: entries is off by about 1e-6 relative (a clipped 1.3M-parameter update measured 1e-6 over the clip on a CPU
#: without AMX), and the noise is calibrated for rows of norm at most clip
CLIP_MARGIN = 1e-5


def clip_rows(vectors: Any, clip: float) -> Any:
    """Scale every row with L2 norm above ``clip`` down to norm ``(1 − CLIP_MARGIN)·clip`` (numpy or torch); rows at
    or under the clip are returned as they are, rows with a non-finite entry (NaN, ±inf) as zero rows."""
    if type(vectors).__module__.split(".")[0] == "torch":
        import torch

        finite = torch.isfinite(vectors).all(dim=1, keepdim=True)
        norms = torch.linalg.vector_norm(vectors, dim=1, keepdim=True)
        scale = torch.clamp(clip / torch.clamp(norms, min=1e-12), max=1.0)
        return (vectors * torch.where(norms > clip, scale * (1 - CLIP_MARGIN), scale)).masked_fill_(~finite, 0)
    vectors = np.asarray(vectors)
    if not np.issubdtype(vectors.dtype, np.floating):
        vectors = vectors.astype(np.float64)
    finite = np.isfinite(vectors).all(axis=1)
    with np.errstate(invalid="ignore", over="ignore"):  # a non-finite row's scale is NaN: the row is zeroed below
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        scale = np.minimum(1.0, clip / np.maximum(norms, 1e-12))
        out = vectors * np.where(norms > clip, scale * (1 - CLIP_MARGIN), scale)
    out[~finite] = 0
    return out
