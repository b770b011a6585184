"""Round checkpoints: a method's state and its federation's, saved atomically after each completed round so a
killed run resumes where it stopped (what :meth:`PublicResources.save_round` / ``resume`` store)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from largefedbench.io import atomic_write_bytes

__all__ = ["CHECKPOINT_NAME", "load_round", "save_round"]

CHECKPOINT_NAME = "round-checkpoint.pt"


def save_round(path: Path, fed, round_index: int, state: dict[str, Any]) -> None:
    """Write round ``round_index``'s method ``state`` (tensors, numbers, lists) and ``fed.state_dict()`` (RNG,
    ledger, costs) to ``path`` atomically."""
    import torch

    buf = io.BytesIO()
    torch.save({"round": int(round_index), "method": state, "federation": fed.state_dict()}, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_round(path: Path, fed) -> tuple[int, dict[str, Any]] | None:
    """``(last completed round, method state)`` saved at ``path``, restoring ``fed``; None without a checkpoint."""
    if not path.exists():
        return None
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=False)
    fed.load_state_dict(saved["federation"])
    return int(saved["round"]), saved["method"]
