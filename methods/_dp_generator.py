"""What CTCL, DP instruction resampling and weak-client voting share: the generator's adapter is DP-fine-tuned with
DP-FedAvg (:func:`~largefedbench.fedtrain.train_adapter`) and a DP histogram over every client then decides what the
fine-tuned generator writes or keeps. Shared here: the release, the calibration of the fine-tuning beside the
histograms, and the DP fine-tuning settings CTCL and DP instruction resampling set alike; each method's histogram is
its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from largefedbench.contract import Method
from largefedbench.fedtrain import FedAvgSettings
from largefedbench.fedtrain.generator import require_private_budget
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.synthetic.generation_settings import GenerationSettings

__all__ = ["DPAdapterSettings", "DPGeneratorMethod", "histogram_release"]


@dataclass(frozen=True)
class DPAdapterSettings(GenerationSettings):
    """The DP fine-tuning settings DP instruction resampling and CTCL share here. From both papers (Yu et al., ICML
    2024, App. F; Tan et al., ICML 2025, §4.1.3): DP-Adam over batches of 4,096 (expected clients a step here),
    nucleus top-p 0.95, the DP histogram at noise multiplier 10. Ours: DP-Adam run as DP-FedAvg (each client one
    local step of lr 1 on its averaged gradient, Adam on the server), local batch 64, 96 tokens, LoRA α 16 (rank 8 is
    Yu et al.'s; neither paper states α). ``clip`` and ``server_lr`` are Yu et al.'s; CTCL's config sets its own."""

    # DP-Adam as DP-FedAvg
    clients_per_round: int = 4096
    clip: float = 0.5
    server_lr: float = 1e-3
    client_lr: float = 1.0
    local_batch_size: int = 64
    max_len: int = 96
    # the generator's adapter, its sampling and the histogram
    lora_rank: int = 8
    lora_alpha: int = 16
    top_p: float = 0.95
    histogram_noise_multiplier: float = 10.0

    def fedavg_steps(self, rounds: int, n_clients: int) -> FedAvgSettings:
        """DP-Adam as DP-FedAvg: ``rounds`` server Adam steps, each over min(clients_per_round, N) expected clients
        taking one local step."""
        return FedAvgSettings(rounds=rounds, clients_per_round=min(self.clients_per_round, n_clients), clip=self.clip,
                              client_lr=self.client_lr, local_epochs=1, local_batch_size=self.local_batch_size,
                              max_local_steps=1, server_lr=self.server_lr, server_optimizer="adam",
                              max_len=self.max_len)


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

    def fedavg_beside_histogram(self, fed, cfg: DPAdapterSettings, budget) -> tuple[FedAvgSettings, float, float]:
        """:meth:`fedavg_rounds` beside one histogram over every client at the configured σ_h =
        ``cfg.histogram_noise_multiplier`` (10 in both papers): σ_h stays fixed and the fine-tuning's σ is calibrated
        so that both releases together spend the budget. Returns the settings, the fine-tuning's σ and σ_h."""
        sigma_h = cfg.histogram_noise_multiplier
        settings, sigma = self.fedavg_rounds(fed, cfg, budget, PoissonGaussianEvent(sigma_h, 1.0, 1))
        return settings, sigma, sigma_h


def histogram_release(fed, votes, sigma: float, *, broadcast: Any = None) -> tuple[Any, np.ndarray]:
    """One DP histogram over every client (``fed.everyone()``): each client's ``votes(chunk)`` rows (L2 ≤ 1) summed
    under clip 1 with ``Gaussian(sigma)``. Returns the cohort and the noisy sum as float64."""
    cohort = fed.everyone()
    noisy = fed.private_sum(cohort, votes, clip=1.0, mechanism=Gaussian(sigma), batched=True, broadcast=broadcast)
    return cohort, np.asarray(noisy, dtype=np.float64)
