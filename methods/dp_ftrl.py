"""DP-FTRL: federated fine-tuning without sampling or shuffling amplification (Kairouz, McMahan, Song, Thakkar,
Thakurta & Xu, ICML 2021, "Practical and private (deep) learning without sampling or shuffling": DP-FTRL, Alg. 1,
and its server-momentum variant DP-FTRLM; POPri App. C.2).

The clients are shuffled each epoch and cut into ⌊N/B⌋ disjoint cohorts of B = ``clients_per_round``
(``fed.epoch``), so a client contributes at most once per epoch. Each round the cohort runs the same local SGD as
DP-FedAvg; the server receives the running sum of the clipped updates since the epoch began with binary-tree
noise (``fed.private_sum`` with ``TreeAggregation(σ, tree)``, one N(0, (σ·clip)²) draw per tree node) and takes the FTRL step with server
momentum β (DP-FTRLM, as their code's ``DPFTRLMServerOptimizer``):

    m_t = β·m_{t-1} + S̃_t,      θ_t = θ_0 + server_lr · m_t / B,

S̃_t the noisy prefix sum of client updates Δ = local − global (a negative gradient, hence ``+``). Over an
epoch this is a step of size ≈ server_lr / (1 − β) per averaged update. The tree, m and θ_0 restart every epoch
(θ_0 = the current model). Defaults β = 0.9 and server_lr = 1 are the flag defaults of Kairouz et al.'s code.

Accounting. The ledger records one ``TreeAggregationEvent(σ, ⌊N/B⌋)`` per tree actually started, i.e.
``epochs = ⌈rounds / ⌊N/B⌋⌉`` epochs (a partial last epoch is charged as a whole one), accounted by dp_accounting
as ``SelfComposedDpEvent(SingleEpochTreeAggregationDpEvent(σ, ⌊N/B⌋), epochs)`` under REPLACE_SPECIAL; σ is
calibrated for exactly that plan. POPri Table 3 σ₂ was computed with the same event but ``count = T = 20``
(rounds read as epochs), which is 20 full trees instead of ⌈20B/N⌉ and gives a σ 4.5–5× larger than needed
(../shared/reference/dp-accounting.md). ``calibrate_as_paper=True`` calibrates σ that way to reproduce
Table 3; the ledger still records the trees that really ran, so the entry's ε then comes out below the target.

The loop is shared with DP-FedAvg (:mod:`largefedbench.methods._federated_finetuning`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from largefedbench.methods._federated_finetuning import FederatedFineTuning, FineTuningConfig, ModelServer

from largefedbench.api import FlatParams, InputError, TreeAggregation, TreeAggregationEvent, TreePrefixSum
from largefedbench.federation import Federation
from largefedbench.fedtrain import ftrl_weights

__all__ = ["DPFTRL", "DPFTRLConfig"]


@dataclass(frozen=True)
class DPFTRLConfig(FineTuningConfig):
    """DP-FTRL settings; POPri App. C.2: "similar to DP-FedAvg other than the noise multipliers" (see
    :class:`FineTuningConfig`), server momentum 0.9 and server lr 1 as Kairouz et al.; the ``cpu`` preset is
    DP-FedAvg's (:meth:`FineTuningConfig.cpu`). See the module docstring for ``calibrate_as_paper``."""

    server_momentum: float = 0.9
    calibrate_as_paper: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.server_momentum < 1:
            raise InputError(f"server_momentum={self.server_momentum} must be in [0, 1)")


class TreeServer(ModelServer):
    """Shuffled epochs of ⌊N/B⌋ disjoint cohorts, tree-aggregated prefix sums restarting every epoch, the DP-FTRLM
    step (θ_0, momentum and tree restart with each epoch)."""

    def __init__(self, fed: Federation, cfg: DPFTRLConfig, budget, flat: FlatParams) -> None:
        super().__init__(flat)
        n = fed.n_clients
        self.fed, self.cfg = fed, cfg
        self.per_round = min(cfg.clients_per_round, n)
        self.rounds_per_epoch = n // self.per_round
        self.epochs = math.ceil(cfg.rounds / self.rounds_per_epoch)
        self.plan_epochs = cfg.rounds if cfg.calibrate_as_paper else self.epochs
        self.sigma = budget.calibrate(TreeAggregationEvent(1.0, self.rounds_per_epoch, epochs=self.plan_epochs),
                                      n_clients=n)
        self.theta0, self.buffer, self.tree, self.epoch_rng, self.cohorts = None, None, None, None, None

    def draw(self, r: int):
        j = (r - 1) % self.rounds_per_epoch
        if j == 0:  # restart: new shuffle, new tree, θ_0 = current model, momentum reset
            self.epoch_rng = self.fed.state_dict()["rng"]
            self.cohorts, self.tree = self.fed.epoch(self.per_round), TreePrefixSum(self.rounds_per_epoch)
            self.theta0, self.buffer = self.weights, None
        cohort = self.cohorts[j].start()
        # the cohort size is fixed by the design (B clients of a shuffled epoch), a public count
        row = {"cohort_size": len(cohort), "epoch": (r - 1) // self.rounds_per_epoch + 1}
        # the tree adds its node noises to the running sum of the epoch
        return cohort, TreeAggregation(self.sigma, self.tree), row

    def apply(self, noisy_prefix_sum: torch.Tensor) -> None:
        weights, self.buffer = ftrl_weights(self.theta0, self.buffer, noisy_prefix_sum.to(self.theta0),
                                            lr=self.cfg.server_lr, momentum=self.cfg.server_momentum,
                                            per_round=self.per_round)
        self.flat.set(weights)

    def plan(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "clients_per_round": self.per_round, "rounds_per_epoch": self.rounds_per_epoch,
                "epochs": self.epochs, "rounds": self.cfg.rounds, "server_momentum": self.cfg.server_momentum,
                "calibrated_epochs": self.plan_epochs}

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.cpu(), "theta0": self.theta0.cpu(), "momentum": self.buffer.cpu(),
                "tree": self.tree.state_dict(), "epoch_rng": self.epoch_rng}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        like = self.weights
        self.flat.set(state["weights"].to(like))
        self.theta0, self.buffer, self.epoch_rng = state["theta0"].to(like), _to(state["momentum"], like), state["epoch_rng"]
        self.tree = TreePrefixSum.from_state_dict(_to(state["tree"], like))
        self.cohorts = _replay_epoch(self.fed, self.epoch_rng, self.per_round)


class DPFTRL(FederatedFineTuning):
    name = "dp-ftrl"
    paper = ("Kairouz, McMahan, Song, Thakkar, Thakurta & Xu, ICML 2021, 'Practical and private (deep) learning "
             "without sampling or shuffling' (DP-FTRLM with tree restarts); settings of POPri (Hou et al., ICML "
             "2025) App. C.2 and Table 3")
    Config = DPFTRLConfig

    def make_server(self, fed, cfg: DPFTRLConfig, budget, flat: FlatParams) -> TreeServer:
        return TreeServer(fed, cfg, budget, flat)


def _replay_epoch(fed: Federation, epoch_rng: dict, per_round: int) -> list:
    """The cohorts of the interrupted epoch: ``fed.epoch`` redrawn from the federation RNG state saved at the
    epoch's start, then every other part of the federation's state put back (same shuffle, nothing else moves)."""
    now = fed.state_dict()
    fed.load_state_dict({**now, "rng": epoch_rng})
    cohorts = fed.epoch(per_round)
    fed.load_state_dict(now)
    return cohorts


def _to(value, like: torch.Tensor):
    """Tensors of a checkpointed value (nested dicts) moved to ``like``'s device and dtype."""
    if isinstance(value, dict):
        return {k: _to(v, like) for k, v in value.items()}
    return value.to(like) if hasattr(value, "to") else value
