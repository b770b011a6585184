"""Where models run: CUDA when it is available, else the CPU (DESIGN.md §7: the tiny profile is CPU-only)."""

from __future__ import annotations

import torch

from largefedbench.errors import InputError


def get_device(device: str | torch.device | None = None) -> torch.device:
    """The device to run on: ``device`` if given (``"cpu"``, ``"cuda"``, ``"cuda:1"``), else CUDA if available, else CPU.

    Asking for CUDA on a machine without it is an :class:`InputError` (not a silent fall back to the CPU).
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"unknown device {device!r} ({exc}); use 'cpu', 'cuda' or 'cuda:N'") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} was requested but CUDA is not available here; use device='cpu' or leave it unset")
    if resolved.type not in ("cpu", "cuda"):
        raise InputError(f"device {device!r} is not supported; use 'cpu' or 'cuda'")
    return resolved


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a model's first parameter (the CPU for a model without parameters)."""
    for param in model.parameters():
        return param.device
    return torch.device("cpu")
