"""Round checkpoints: a method's state and its federation's, saved atomically after each completed round so a
killed run resumes where it stopped (what :meth:`PublicResources.save_round` / ``resume`` store)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from largefedbench.io import atomic_write_bytes

__all__ = ["CHECKPOINT_NAME", "checkpoint_files", "checkpoint_name", "load_round", "save_round"]

CHECKPOINT_NAME = "round-checkpoint.pt"


def checkpoint_name(stage: str | None = None) -> str:
    """The checkpoint file of a run's rounds (``stage`` None) or of a named earlier stage of them."""
    if stage is None:
        return CHECKPOINT_NAME
    if not stage or not all(c.isalnum() or c == "-" for c in stage):
        raise ValueError(f"stage {stage!r}: use letters, digits and '-'")
    return f"round-checkpoint-{stage}.pt"


def checkpoint_files(folder: Path) -> list[Path]:
    """Every stage's checkpoint in ``folder``."""
    return sorted(folder.glob("round-checkpoint*.pt"))


def save_round(path: Path, fed, round_index: int, state: dict[str, Any]) -> None:
    """Write round ``round_index``'s method ``state`` (tensors, numbers, lists), ``fed.state_dict()`` (RNG, ledger,
    costs, releases) and the method's time so far (``fed.clock``, :class:`~largefedbench.timing.JobClock`) to
    ``path`` atomically."""
    import torch

    clock = getattr(fed, "clock", None)  # a test's stand-in federation may have none
    buf = io.BytesIO()
    torch.save({"round": int(round_index), "method": state, "federation": fed.state_dict(),
                "clock": None if clock is None else clock.state()}, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_round(path: Path, fed) -> tuple[int, dict[str, Any]] | None:
    """``(last completed round, method state)`` saved at ``path``, restoring ``fed`` and adding the saved time to its
    clock (a checkpoint older than the clock adds none); None without a checkpoint."""
    if not path.exists():
        return None
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=False)
    fed.load_state_dict(saved["federation"])
    if getattr(fed, "clock", None) is not None:
        # commits 18932f3..0dcd67f kept the clock inside the federation's state
        fed.clock.resume(saved.get("clock", saved["federation"].get("clock")))
    return int(saved["round"]), saved["method"]
