"""What identifies a model in a leaderboard entry: content digests of its files and its parameter count."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

import torch

__all__ = ["file_sha256", "n_params", "weights_digest"]


@lru_cache(maxsize=8)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MB chunks (memoised per path, size and modification time)."""
    st = os.stat(path)
    return _file_sha256(str(path), st.st_size, st.st_mtime_ns)


def weights_digest(folder: Path) -> str | None:
    """One sha256 over the weight files (``*.safetensors``, ``*.bin``) of a ``save_pretrained`` folder, in name
    order; None if it has none."""
    files = sorted(p for p in Path(folder).glob("*") if p.suffix in (".safetensors", ".bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def n_params(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
