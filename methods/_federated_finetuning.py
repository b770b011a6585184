"""The rounds loop of DP-FedAvg and DP-FTRL: federated fine-tuning of the downstream model, one loop that differs
between the two only by how a round's cohort is drawn, by the mechanism of its noisy sum and by the server step
(a :class:`Server` each). Every round a cohort runs local SGD from the global weights
(:class:`~largefedbench.fedtrain.ModelUpdate`; POPri App. C.1), the server sees only the noisy sum of their clipped
updates (``fed.private_sum``) and steps; the model kept is the round with the best validation top-1 (round 0 = the
public model; POPri §5 and App. C.1). The rounds run in the one federated-training driver
(:func:`~largefedbench.fedtrain.train_rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from largefedbench.contract import Artifact, Method, PublicResources, config_to_dict
from largefedbench.errors import InputError
from largefedbench.federation import Federation
from largefedbench.fedtrain import (
    CohortUpdate,
    FlatParams,
    LocalSGD,
    ModelUpdate,
    Release,
    Server,
    UpdateNormTally,
    record_update_norms,
    train_rounds,
)
from largefedbench.privacy import PrivacyBudget
from largefedbench.rounds import selection_of, unreleased_path

__all__ = ["FederatedFineTuning", "FineTuningConfig", "ModelClients", "ModelServer"]


@dataclass(frozen=True)
class FineTuningConfig:
    """Settings shared by DP-FedAvg and DP-FTRL; the defaults are POPri App. C.1 (full fine-tuning, client batch size
    2, sequence length 64, 20 rounds, client lr tuned in [0.01, 0.06] and clip in [0.01, 0.4] — the middle of both
    ranges here — SGD on the clients, server lr 1) with 1000 clients per round (Table 3).

    ``max_local_steps`` caps each client's local steps (None: every batch of ``local_epochs`` epochs);
    ``chunk_clients`` is how many client updates memory holds at once; ``record_update_norms`` writes the mean raw
    update norm and the fraction clipped per round to the run folder's ``unreleased-diagnostics.json`` — computed
    from un-noised updates, so NOT covered by the ε of the run and never written into the history or the entry."""

    # rounds (App. C.1) and Poisson cohorts (Table 3)
    rounds: int = 20
    clients_per_round: int = 1000
    # each client's local SGD
    local_epochs: int = 1
    client_batch_size: int = 2
    max_len: int = 64
    client_lr: float = 0.03
    max_local_steps: int | None = None
    # the clipped, noised sum and the server step
    clip: float = 0.1
    server_lr: float = 1.0
    # validation, memory and diagnostics
    eval_every: int = 1
    chunk_clients: int = 16
    record_update_norms: bool = False

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.clients_per_round < 1 or self.chunk_clients < 1:
            raise InputError("rounds, clients_per_round and chunk_clients must be at least 1")
        if not (self.clip > 0 and self.server_lr > 0):
            raise InputError(f"clip={self.clip} and server_lr={self.server_lr} must be > 0")
        if self.max_len < 2:
            raise InputError(f"max_len={self.max_len} must be at least 2 (BOS and one target)")
        self.local()

    @classmethod
    def tiny(cls):
        """A few seconds on the demo snapshot: 3 rounds of ~100 clients, at most 2 local steps each."""
        return cls(rounds=3, clients_per_round=100, max_local_steps=2, client_lr=0.05, clip=0.5)

    @classmethod
    def cpu(cls):
        """The ``cpu`` profile's 1.2M-parameter downstream model: 10 rounds of ~300 clients, at most 4 local steps
        (DP-FTRL too, POPri App. C.2: "similar to DP-FedAvg"; on demo-prose's 1,549 clients, 2 epochs of 5 disjoint
        cohorts)."""
        return cls(rounds=10, clients_per_round=300, max_local_steps=4, client_lr=0.05, clip=0.5)

    def local(self) -> LocalSGD:
        return LocalSGD(lr=self.client_lr, batch_size=self.client_batch_size, epochs=self.local_epochs,
                        max_steps=self.max_local_steps)


class ModelServer(Server):
    """What DP-FedAvg and DP-FTRL do differently, on the downstream model's weights ``flat``: σ (calibrated for the
    method's plan), a round's cohort, mechanism and public history fields (:meth:`draw`, which starts the federation
    round), the step on the released sum (:meth:`apply`), the artifact's description of the plan and the state a
    checkpoint keeps. Every round the cohort runs local SGD from the broadcast weights (:attr:`clients`)."""

    clients: ModelClients
    round_index: int = 0

    def draw(self, r: int) -> tuple[Any, Any, dict[str, Any]]:
        """``(cohort, mechanism, history fields)`` of round ``r`` (1-based); starts the federation round."""
        raise NotImplementedError

    def apply(self, noisy_sum: torch.Tensor) -> None:
        raise NotImplementedError

    def plan(self) -> dict[str, Any]:
        """The plan the artifact describes (σ, sampling, rounds)."""
        raise NotImplementedError

    def release(self, r: int) -> Release:
        self.round_index = r
        cohort, mechanism, row = self.draw(r)
        c = self.clients
        tally = UpdateNormTally(c.clip) if c.record_norms else None
        # clip-and-sum chunk by chunk: memory holds chunk_clients updates, not the cohort's
        return Release(cohort, CohortUpdate(c.update, self.weights, tally), mechanism, c.clip,
                       chunk_clients=c.chunk_clients, broadcast=self.weights, row=row)

    def step(self, noisy: torch.Tensor, release: Release) -> None:
        record_update_norms(release.client_fn, release.cohort, self.clients.public, self.round_index)
        self.apply(noisy)


@dataclass
class ModelClients:
    """The clients' side of a model server's rounds: their local update, clip, chunking, the norm diagnostic."""

    update: ModelUpdate
    clip: float
    chunk_clients: int
    record_norms: bool
    public: PublicResources


class FederatedFineTuning(Method):
    """DP-FedAvg and DP-FTRL; a subclass gives its :class:`ModelServer` (``make_server``)."""

    output: ClassVar[str] = "model"
    retired_settings: ClassVar[dict[str, str]] = {
        "vectorize": "0.3.0: the cohort update is one loop (vmap was not faster; fedtrain/local_sgd.py)"}

    def make_server(self, fed: Federation, cfg, budget: PrivacyBudget, flat: FlatParams) -> ModelServer:
        raise NotImplementedError

    def train(self, fed: Federation, public: PublicResources, cfg, budget: PrivacyBudget) -> Artifact:
        if cfg.record_update_norms:
            unreleased_path(public)  # fails now, not after the first round, if the run has no folder
        model = public.models.new_downstream()
        server = self.make_server(fed, cfg, budget, FlatParams(model))
        server.clients = ModelClients(ModelUpdate(model, public.models.tokenizer, cfg.local(), cfg.max_len), cfg.clip,
                                      cfg.chunk_clients, cfg.record_update_norms, public)
        # POPri §5, App. C.1: the reported model is the best on validation (round 0 = the public model); the held-out
        # texts are fed.selection's (the validation clients, or a public slice with --select-on public), recorded
        selection = selection_of(fed)
        loop = train_rounds(fed, public, server, rounds=cfg.rounds, first=1, desc=f"{self.name} rounds",
                            validate=lambda: selection.accuracy(model)["top1"], eval_every=cfg.eval_every,
                            fingerprint={"method": self.name, "config": config_to_dict(cfg), "sigma": server.sigma,
                                         "n_clients": fed.n_clients, "seed": public.seed})
        server.flat.set(loop.best.weights.to(server.weights))
        return Artifact.trained_model(model, **server.plan(), best_round=loop.best.round, clip=cfg.clip,
                                      best_validation_top1=loop.best.score, history=loop.history)
