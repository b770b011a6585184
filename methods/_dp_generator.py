"""What CTCL, DP instruction resampling and weak-client voting share: the generator's adapter is DP-fine-tuned with
DP-FedAvg (:func:`~largefedbench.fedtrain.train_adapter`) and a DP histogram over every client then decides what the
fine-tuned generator writes or keeps. Only the release is shared here; each method's histogram is its own."""

from __future__ import annotations

from typing import Any

import numpy as np

from largefedbench.contract import Method
from largefedbench.fedtrain import FedAvgSettings
from largefedbench.fedtrain.generator import require_private_budget
from largefedbench.privacy.mechanisms import Gaussian

__all__ = ["DPGeneratorMethod", "histogram_release"]


class DPGeneratorMethod(Method):
    """A method whose output is the text of a DP-fine-tuned generator (``Config.fedavg(n)`` gives its rounds)."""

    output = "synthetic text"
    needs_span_embeddings = True

    def fedavg_rounds(self, fed, cfg, budget, *others, rate: float | None = None) -> tuple[FedAvgSettings, float]:
        """The DP-FedAvg settings and their σ, calibrated so that they and the method's ``others`` releases (each a
        PoissonGaussianEvent at its own σ) spend ``budget``; a budget of ε = ∞ or 0 is refused."""
        require_private_budget(budget, self.name)
        settings = cfg.fedavg(fed.n_clients)
        return settings, settings.calibrate(budget, fed.n_clients, *others, rate=rate)


def histogram_release(fed, votes, sigma: float, *, broadcast: Any = None) -> tuple[Any, np.ndarray]:
    """One DP histogram over every client (``fed.everyone()``): each client's ``votes(chunk)`` rows (L2 ≤ 1) summed
    under clip 1 with ``Gaussian(sigma)``. Returns the cohort and the noisy sum as float64."""
    cohort = fed.everyone()
    noisy = fed.private_sum(cohort, votes, clip=1.0, mechanism=Gaussian(sigma), batched=True, broadcast=broadcast)
    return cohort, np.asarray(noisy, dtype=np.float64)
