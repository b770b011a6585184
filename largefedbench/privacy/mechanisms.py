"""Release mechanisms for the federation's one door, the Gaussian noise they draw, and the analytic σ.

``Federation.private_sum(cohort, client_fn, clip=…, mechanism=…)`` hands the sum of the cohort's clipped client
vectors to one of these mechanisms, which adds its noise and appends its event to the privacy ledger:

- :class:`Gaussian` ``(σ)``: N(0, (σ·clip)²) per coordinate. The event matches how the cohort was drawn: a
  Poisson-sampled cohort (``fed.sample(q)``, ``fed.everyone()`` with q = 1) is a ``PoissonGaussianEvent(σ, q)``
  (amplification by sampling); a fixed-size cohort (a shuffled ``fed.epoch``) is a plain ``GaussianEvent(σ)``
  per release, claiming no amplification.
- :class:`TreeAggregation` ``(σ, tree)``: DP-FTRL's binary-tree prefix sums (:class:`TreePrefixSum`); one
  ``TreeAggregationEvent`` per tree (epoch), recorded at its first round. Only for fixed-size epoch cohorts:
  the tree accountant assumes each client takes part at most once per epoch.
- :class:`NoNoise`: the ε = ∞ reference. No noise; a noiseless ``GaussianEvent(0)`` whose ε is infinite.

``add_gaussian_noise`` only adds noise: the privacy event is recorded by the mechanism that calls it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy.events import Event, GaussianEvent, PoissonGaussianEvent, TreeAggregationEvent, dp_accounting
from largefedbench.privacy.rules import check_delta, positive_int

__all__ = [
    "SAMPLINGS",
    "Gaussian",
    "Mechanism",
    "NoNoise",
    "TreeAggregation",
    "TreePrefixSum",
    "add_gaussian_noise",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
]

#: how a cohort was drawn: "poisson" (each client independently with the cohort's rate) or "fixed" (a fixed-size
#: cohort of a shuffled epoch: no amplification by sampling may be claimed for it)
SAMPLINGS = ("poisson", "fixed")


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
    check_delta(delta)
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


# -- mechanisms of the federation's one door -------------------------------------------------------------------
class Mechanism:
    """Base class: ``release`` appends this mechanism's event to ``ledger`` and returns ``total`` + its noise."""

    def events(self, *, sampling: str, sample_rate: float) -> list[Event]:
        raise NotImplementedError

    def noised(self, total: Any, *, clip: float, generator: Any) -> Any:
        raise NotImplementedError

    def release(self, total: Any, *, clip: float, sampling: str, sample_rate: float, ledger: Any, generator: Any) -> Any:
        if sampling not in SAMPLINGS:
            raise PrivacyError(f"unknown cohort sampling {sampling!r}; one of {', '.join(SAMPLINGS)}")
        for event in self.events(sampling=sampling, sample_rate=sample_rate):
            ledger.append(event)
        return self.noised(total, clip=clip, generator=generator)


def _positive_sigma(noise_multiplier: float, name: str) -> float:
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma > 0):
        raise PrivacyError(f"{name}: noise_multiplier must be finite and > 0 for a private release, got "
                           f"{noise_multiplier!r}; the ε = ∞ reference uses mechanism=NoNoise()")
    return sigma


class Gaussian(Mechanism):
    """N(0, (σ·clip)²) on every coordinate of the clipped sum (see the module docstring for its event)."""

    def __init__(self, noise_multiplier: float) -> None:
        self.noise_multiplier = _positive_sigma(noise_multiplier, "Gaussian")

    def __repr__(self) -> str:
        return f"Gaussian({self.noise_multiplier:g})"

    def events(self, *, sampling: str, sample_rate: float) -> list[Event]:
        if sampling == "poisson":
            return [PoissonGaussianEvent(self.noise_multiplier, sample_rate)]
        return [GaussianEvent(self.noise_multiplier)]  # fixed-size cohort: no amplification claimed

    def noised(self, total: Any, *, clip: float, generator: Any) -> Any:
        return add_gaussian_noise(total, noise_multiplier=self.noise_multiplier, clip=clip, generator=generator)


class NoNoise(Mechanism):
    """The ε = ∞ (non-private) reference: the exact clipped sum, recorded as a noiseless release (ε infinite)."""

    def __repr__(self) -> str:
        return "NoNoise()"

    def events(self, *, sampling: str, sample_rate: float) -> list[Event]:
        return [GaussianEvent(0.0)]

    def noised(self, total: Any, *, clip: float, generator: Any) -> Any:
        return total


class TreePrefixSum:
    """The binary-tree aggregator of DP-FTRL for one epoch (restart = a new instance).

    After ``t`` additions it returns Σ_{s≤t} x_s + Σ of the noises of the tree nodes that cover [1, t]
    (one node per set bit of t), so every prefix sum carries at most ⌈log₂(t+1)⌉ node noises and each
    node's noise is drawn once."""

    def __init__(self, rounds_per_epoch: int) -> None:
        self.rounds_per_epoch = positive_int("rounds_per_epoch (a tree epoch's rounds)", rounds_per_epoch, InputError)
        self.steps = 0
        self._sum: Any = None
        self._nodes: dict[tuple[int, int], Any] = {}  # (level, index) -> noise of that node

    def add(self, value: Any, *, noise_multiplier: float, clip: float, generator: Any) -> Any:
        if self.steps >= self.rounds_per_epoch:
            raise PrivacyError(f"the tree epoch has {self.rounds_per_epoch} rounds; start a new TreePrefixSum to restart")
        self.steps += 1
        self._sum = value if self._sum is None else self._sum + value
        t, noise, start = self.steps, None, 0
        for level in reversed(range(t.bit_length())):
            if t >> level & 1:
                key = (level, start >> level)
                if key not in self._nodes:
                    self._nodes[key] = add_gaussian_noise(value * 0, noise_multiplier=noise_multiplier, clip=clip,
                                                          generator=generator)
                noise = self._nodes[key] if noise is None else noise + self._nodes[key]
                start += 1 << level
        return self._sum + noise

    def state_dict(self) -> dict[str, Any]:
        return {"rounds_per_epoch": self.rounds_per_epoch, "steps": self.steps, "sum": self._sum, "nodes": dict(self._nodes)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> TreePrefixSum:
        tree = cls(state["rounds_per_epoch"])
        tree.steps, tree._sum, tree._nodes = state["steps"], state["sum"], dict(state["nodes"])
        return tree


class TreeAggregation(Mechanism):
    """DP-FTRL's release: the noised running sum of ``tree``'s epoch (see :class:`TreePrefixSum`)."""

    def __init__(self, noise_multiplier: float, tree: TreePrefixSum) -> None:
        self.noise_multiplier = _positive_sigma(noise_multiplier, "TreeAggregation")
        self.tree = tree

    def __repr__(self) -> str:
        return f"TreeAggregation({self.noise_multiplier:g}, rounds_per_epoch={self.tree.rounds_per_epoch})"

    def events(self, *, sampling: str, sample_rate: float) -> list[Event]:
        if sampling != "fixed":
            raise PrivacyError("TreeAggregation needs the fixed-size cohorts of a shuffled epoch (fed.epoch): its "
                               "accountant assumes each client takes part at most once per epoch, which a Poisson "
                               "cohort does not guarantee")
        if self.tree.steps >= self.tree.rounds_per_epoch:
            return []  # tree.add raises: the epoch is over
        return [TreeAggregationEvent(self.noise_multiplier, self.tree.rounds_per_epoch)] if self.tree.steps == 0 else []

    def noised(self, total: Any, *, clip: float, generator: Any) -> Any:
        return self.tree.add(total, noise_multiplier=self.noise_multiplier, clip=clip, generator=generator)
