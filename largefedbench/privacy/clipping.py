"""Clipping: every client's contribution scaled to L2 norm at most ``clip`` before it is summed (the sensitivity a
mechanism is calibrated for)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["clip_rows"]


def clip_rows(vectors: Any, clip: float) -> Any:
    """Scale every row with L2 norm above ``clip`` down to norm ``clip`` (numpy or torch)."""
    if type(vectors).__module__.split(".")[0] == "torch":
        import torch

        norms = torch.linalg.vector_norm(vectors, dim=1, keepdim=True)
        return vectors * torch.clamp(clip / torch.clamp(norms, min=1e-12), max=1.0)
    vectors = np.asarray(vectors)
    if not np.issubdtype(vectors.dtype, np.floating):
        vectors = vectors.astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors * np.minimum(1.0, clip / np.maximum(norms, 1e-12))
