"""Plumbing shared by the trl-based updates (DPO, SFT): quiet, CPU-safe arguments, and undoing trl's side effects.

- Arguments: CPU when there is no CUDA (``use_cpu``), bf16 autocast where the hardware has native bf16 (no fp16), no reports, no checkpoints on disk,
  no gradient checkpointing (trl turns it on by default; it only slows small models), single-process data loading.
- trl seeds the global RNGs (``set_seed``); :func:`preserved_rng` restores python, numpy and torch RNG states.
- trl patches the base model's ``forward`` with a fused LM head; :func:`restored_forward` removes the patch so the
  model object stays as it was given (generation is unaffected either way, but patches would nest every round).
- Trainer log lines and dataset progress bars are silenced unless ``progress``.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from largefedbench.models.precision import train_in_bf16

__all__ = ["base_training_args", "log_series", "output_folder", "preserved_rng", "quiet_datasets", "restored_forward",
           "silence_trainer", "trainer_run"]


def base_training_args(*, lr: float, epochs: int, batch_size: int, seed: int, progress: bool, output_dir: str,
                       gradient_accumulation_steps: int = 1, lr_scheduler_type: str = "constant",
                       bf16: bool | None = None) -> dict[str, Any]:
    """Keyword arguments common to ``DPOConfig`` and ``SFTConfig``; ``bf16`` (None: :func:`train_in_bf16`) trains
    under bf16 autocast."""
    cuda = torch.cuda.is_available()
    return {
        "output_dir": output_dir, "learning_rate": float(lr), "num_train_epochs": float(epochs),
        "per_device_train_batch_size": int(batch_size), "per_device_eval_batch_size": int(batch_size),
        "gradient_accumulation_steps": int(gradient_accumulation_steps), "lr_scheduler_type": lr_scheduler_type,
        "warmup_steps": 0, "seed": int(seed), "data_seed": int(seed), "use_cpu": not cuda,
        "bf16": train_in_bf16() if bf16 is None else bool(bf16), "fp16": False, "report_to": "none",
        "save_strategy": "no", "logging_steps": 1, "disable_tqdm": not progress, "gradient_checkpointing": False,
        "dataloader_num_workers": 0, "dataset_num_proc": None,
    }


@contextlib.contextmanager
def output_folder(output_dir: str | Path | None) -> Iterator[str]:
    """``output_dir`` (created) or a temporary folder removed afterwards."""
    if output_dir is not None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        yield str(output_dir)
        return
    with tempfile.TemporaryDirectory(prefix="lfb-trl-") as tmp:
        yield tmp


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Restore python's, numpy's and torch's global RNG states on exit."""
    py, np_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(np_state)


@contextlib.contextmanager
def restored_forward(model) -> Iterator[None]:
    """Undo trl's fused-LM-head patch of the (base) model's ``forward`` on exit."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    had = "forward" in base.__dict__
    before = base.__dict__.get("forward")
    try:
        yield
    finally:
        if had:
            base.forward = before
        else:
            base.__dict__.pop("forward", None)


@contextlib.contextmanager
def quiet_datasets(progress: bool) -> Iterator[None]:
    """Hide ``datasets``' map/filter progress bars (and trl's reference-scoring bar, which reads ``TQDM_DISABLE``)
    unless ``progress``."""
    from datasets.utils import logging as ds_logging

    enabled = ds_logging.is_progress_bar_enabled()
    before = os.environ.get("TQDM_DISABLE")
    if not progress:
        ds_logging.disable_progress_bar()
        os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        (ds_logging.enable_progress_bar if enabled else ds_logging.disable_progress_bar)()
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before


@contextlib.contextmanager
def trainer_run(model, progress: bool, output_dir: str | Path | None) -> Iterator[str]:
    """Everything a TRL trainer run needs around it, as one ``with``: the global RNG states restored afterwards, the
    model's ``forward`` restored (the trainer wraps it), datasets' progress bars quiet unless ``progress``, and the
    trainer's output folder (``output_dir`` or a temporary one), which it yields."""
    with preserved_rng(), restored_forward(model), quiet_datasets(progress), output_folder(output_dir) as out:
        yield out


def silence_trainer(trainer, progress: bool) -> None:
    """Remove the callback that prints every log dict to stdout (and the progress bar when quiet)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    if not progress:
        trainer.remove_callback(ProgressCallback)


def log_series(trainer, key: str) -> list[float]:
    """The values of ``key`` in the trainer's training log, step by step."""
    return [float(row[key]) for row in trainer.state.log_history if key in row and "train_runtime" not in row]
