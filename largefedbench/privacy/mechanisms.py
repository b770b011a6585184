"""The Gaussian mechanism and the analytic Gaussian σ for a single release.

``add_gaussian_noise`` only adds noise: the privacy event is recorded by whoever releases the result
(the federation's ``noisy_sum`` records it in the ledger).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy.events import dp_accounting

__all__ = ["add_gaussian_noise", "analytic_gaussian_sigma", "classical_gaussian_sigma"]


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch"


def add_gaussian_noise(values: Any, *, noise_multiplier: float, clip: float, generator: Any) -> Any:
    """``values`` + N(0, (noise_multiplier·clip)²) noise, drawn from ``generator``.

    ``values`` is a numpy array with a ``numpy.random.Generator`` or a torch tensor with a
    ``torch.Generator``; the result has the same type, shape and (floating) dtype.
    """
    sigma = float(noise_multiplier)
    clip = float(clip)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise PrivacyError(f"noise_multiplier must be finite and ≥ 0, got {noise_multiplier!r}.")
    if not (math.isfinite(clip) and clip > 0):
        raise PrivacyError(f"clip (the L2 sensitivity) must be finite and > 0, got {clip!r}.")
    std = sigma * clip
    if _is_torch(values):
        import torch  # noqa: PLC0415 - lazy: `lfb --help` must not import torch

        if not isinstance(generator, torch.Generator):
            raise InputError(f"a torch tensor needs a torch.Generator, got {type(generator).__name__}.")
        dtype = values.dtype if values.is_floating_point() else torch.get_default_dtype()
        noise = torch.randn(values.shape, generator=generator, dtype=dtype, device=generator.device)
        return values.to(dtype) + noise.to(values.device) * std
    if not isinstance(generator, np.random.Generator):
        raise InputError(
            f"a numpy array needs a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(generator).__name__}."
        )
    array = np.asarray(values)
    dtype = array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64
    return array.astype(dtype, copy=False) + generator.normal(0.0, std, size=array.shape).astype(dtype)


def _check_single_release(epsilon: float, delta: float, sensitivity: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyError(f"epsilon must be > 0 and finite, got {epsilon!r}.")
    if not 0 < delta < 1:
        raise PrivacyError(f"delta must be in (0, 1), got {delta!r}.")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise PrivacyError(f"sensitivity must be > 0 and finite, got {sensitivity!r}.")


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise std of the analytic Gaussian mechanism (Balle & Wang 2018) for one (ε, δ) release of a
    query with L2 sensitivity Δ: Δ · ``dp_accounting.get_sigma_gaussian(ε, δ)``."""
    _check_single_release(epsilon, delta, sensitivity)
    return sensitivity * float(dp_accounting().get_sigma_gaussian(epsilon, delta))


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classical bound Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth; valid for ε < 1), for comparison."""
    _check_single_release(epsilon, delta, sensitivity)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
