"""Round checkpoints: a method's state and its federation's, saved atomically after each completed round so a
killed run resumes where it stopped (what :meth:`PublicResources.save_round` / ``resume`` store).

A checkpoint is tensors and JSON (:mod:`largefedbench.rounds.state_file`), never a pickle: reading one from a shared
run folder cannot run code. A checkpoint of the old pickle format (``round-checkpoint*.pt``) is refused, not read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from largefedbench.rounds.state_file import read_state, refuse_legacy, write_state

__all__ = ["CHECKPOINT_NAME", "LEGACY_SUFFIX", "checkpoint_files", "checkpoint_name", "load_round", "save_round"]

CHECKPOINT_NAME = "round-checkpoint.safetensors"
#: the suffix of the pickle checkpoints of the old format (``torch.save``): refused, never unpickled
LEGACY_SUFFIX = ".pt"


def checkpoint_name(stage: str | None = None) -> str:
    """The checkpoint file of a run's rounds (``stage`` None) or of a named earlier stage of them."""
    if stage is None:
        return CHECKPOINT_NAME
    if not stage or not all(c.isalnum() or c == "-" for c in stage):
        raise ValueError(f"stage {stage!r}: use letters, digits and '-'")
    return f"round-checkpoint-{stage}.safetensors"


def checkpoint_files(folder: Path) -> list[Path]:
    """Every stage's checkpoint in ``folder``, those of the old pickle format included."""
    return sorted([*folder.glob("round-checkpoint*.safetensors"), *folder.glob(f"round-checkpoint*{LEGACY_SUFFIX}")])


def _fix(path: Path) -> str:
    return (f"Delete {path} to run that seed's rounds again from the start (or delete its seed folder, "
            f"{path.parent}, to run the whole seed again).")


def save_round(path: Path, fed, round_index: int, state: dict[str, Any]) -> None:
    """Write round ``round_index``'s method ``state`` (tensors, arrays, numbers, strings, lists, tuples, dicts,
    dataclasses: see :mod:`~largefedbench.rounds.state_file`), ``fed.state_dict()`` (RNG, ledger, costs, releases)
    and the method's time so far (``fed.clock``, :class:`~largefedbench.timing.JobClock`) to ``path`` atomically.
    A value of another type stops the run here, with an error naming it."""
    clock = getattr(fed, "clock", None)  # a test's stand-in federation may have none
    write_state(path, {"round": int(round_index), "method": state, "federation": fed.state_dict(),
                       "clock": None if clock is None else clock.state()}, what="checkpoint")


def load_round(path: Path, fed) -> tuple[int, dict[str, Any]] | None:
    """``(last completed round, method state)`` saved at ``path``, restoring ``fed`` and adding the saved time to its
    clock (a checkpoint older than the clock adds none); None without a checkpoint. A pickle checkpoint beside it
    (``.pt``, the old format), or a ``path`` that is not tensors and JSON, is refused with an ``InputError``."""
    path = Path(path)
    legacy = path.with_suffix(LEGACY_SUFFIX)
    if not path.exists():
        if legacy != path and legacy.exists():
            refuse_legacy(legacy, fix=_fix(legacy))
        return None
    saved = read_state(path, fix=_fix(path), device="cpu")
    fed.load_state_dict(saved["federation"])
    if getattr(fed, "clock", None) is not None:
        fed.clock.resume(saved["clock"])
    return int(saved["round"]), saved["method"]
