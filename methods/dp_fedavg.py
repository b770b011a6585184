"""DP-FedAvg: federated fine-tuning of the downstream model with user-level DP (McMahan et al., ICLR 2018,
"Learning differentially private recurrent language models", Alg. 1; POPri App. C.1).

Each round a Poisson cohort (rate q = clients_per_round / N) runs local SGD from the global weights; the server
sees only the noisy sum of their updates, each clipped to L2 ≤ ``clip``, plus N(0, (σ·clip)²) (``fed.private_sum``
with ``Gaussian(σ)``: secure aggregation + Gaussian noise), and steps with the fixed-denominator estimator of
McMahan et al. (2018, Alg. 1, ``f̃_f`` with unit client weights):

    θ ← θ + server_lr · noisy_sum / (q·N),

an unbiased estimate of the mean update whose sensitivity does not depend on the (random, private) cohort
size. σ is calibrated for ``PoissonGaussianEvent(σ, q, rounds)``, exactly POPri Table 3 σ₁ (opacus RDP);
the model kept is the round with the best validation top-1 (round 0 = the public model). The loop is shared
with DP-FTRL (:mod:`largefedbench.methods._federated_finetuning`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from largefedbench.methods._federated_finetuning import FederatedFineTuning, FineTuningConfig, ModelServer

from largefedbench.api import FlatParams, Gaussian, PoissonGaussianEvent, cohort_fields
from largefedbench.fedtrain import ServerOptimizer

__all__ = ["DPFedAvg", "DPFedAvgConfig"]


@dataclass(frozen=True)
class DPFedAvgConfig(FineTuningConfig):
    """DP-FedAvg settings (see :class:`FineTuningConfig`; server lr 1 is plain averaging)."""


class PoissonServer(ModelServer):
    """Poisson cohorts at q, ``Gaussian(σ)`` sums, the fixed-denominator SGD step (:class:`ServerOptimizer`)."""

    def __init__(self, fed, cfg: DPFedAvgConfig, budget, flat: FlatParams) -> None:
        super().__init__(flat)
        self.fed, self.n, self.rounds = fed, fed.n_clients, cfg.rounds
        self.q = min(1.0, cfg.clients_per_round / self.n)
        self.sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=self.q, steps=cfg.rounds), n_clients=self.n)
        self.optimizer = ServerOptimizer(flat, lr=cfg.server_lr)

    def draw(self, r: int):
        cohort = self.fed.sample(self.q)
        # the expected cohort size: the exact Poisson count is not released
        return cohort, Gaussian(self.sigma), cohort_fields(cohort, self.n)

    def apply(self, noisy_sum) -> None:
        self.optimizer.step(noisy_sum, self.q * self.n)

    def plan(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "sample_rate": self.q, "rounds": self.rounds, "expected_cohort": self.q * self.n,
                "aggregation": "theta += server_lr * noisy_sum / (q * N) (McMahan et al. 2018 fixed denominator)"}

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


class DPFedAvg(FederatedFineTuning):
    name = "dp-fedavg"
    paper = ("McMahan, Ramage, Talwar & Zhang, ICLR 2018, 'Learning differentially private recurrent language "
             "models' (DP-FedAvg); settings of POPri (Hou et al., ICML 2025) App. C.1 and Table 3")
    Config = DPFedAvgConfig

    def make_server(self, fed, cfg: DPFedAvgConfig, budget, flat: FlatParams) -> PoissonServer:
        return PoissonServer(fed, cfg, budget, flat)
