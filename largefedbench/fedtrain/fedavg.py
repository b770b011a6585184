"""DP-FedAvg rounds of a LoRA adapter (McMahan et al. 2018, "Learning differentially private recurrent language
models", Alg. 1 with the fixed-denominator estimator), used by the methods that fine-tune a generator or a selector
privately (DP instruction resampling, CTCL, weak-client voting's strong clients, FedBis/FedBiscuit).

One round:

1. ``fed.sample(q)`` draws a Poisson cohort (q = expected clients per round / number of clients: the rate the
   accountant uses);
2. each cohort client runs :func:`~largefedbench.fedtrain.local_sgd.local_updates` from the global adapter on its own
   examples and reports Δ = local − global;
3. ``fed.private_sum`` (mechanism ``Gaussian(σ)``) clips every Δ to L2 ≤ ``clip``, sums, adds N(0, (σ·clip)²) and
   records a ``PoissonGaussianEvent(σ, q)``;
4. the server divides by the expected cohort q·N and steps (:class:`~largefedbench.fedtrain.server.ServerOptimizer`:
   SGD with momentum, or Adam — with one local step of client lr 1 that is user-level DP-Adam, one client's averaged
   gradient being one "example").

σ comes from the method's composed plan: :meth:`FedAvgSettings.events` gives the planned ledger events of the rounds
so a method can add its other releases and calibrate once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain.driver import Release, Server, release_round, train_rounds
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import LocalSGD
from largefedbench.fedtrain.server import ServerOptimizer
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.rounds import cohort_fields

__all__ = ["CHUNK_CLIENTS", "AdapterServer", "ClientUpdate", "FedAvgSettings", "run_round", "train_adapter"]

#: clients per chunk of a round's ``private_sum`` (memory holds this many Δ rows)
CHUNK_CLIENTS = 64

#: a client update: ``client_update(chunk, spans)`` → one Δ row per client of the chunk (a ``ChunkView``), trained on
#: ``spans`` (the chunk's own spans, or a subset a method keeps); runs inside ``Federation.private_sum``
ClientUpdate = Callable[[Any, list[list[str]]], torch.Tensor]


@dataclass(frozen=True)
class FedAvgSettings:
    """DP-FedAvg settings: rounds, expected cohort, clip, the clients' local training, the server step."""

    rounds: int
    clients_per_round: float
    clip: float
    client_lr: float
    local_epochs: int = 1
    local_batch_size: int = 8
    max_local_steps: int | None = None
    server_lr: float = 1.0
    server_momentum: float = 0.0
    server_optimizer: str = "sgd"  # "sgd" (with momentum) or "adam"
    client_optimizer: str = "sgd"  # "sgd" or "adamw" (a fresh AdamW per client and round, no weight decay)
    client_betas: tuple[float, float] = (0.9, 0.999)
    max_len: int = 96

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.clients_per_round <= 0 or self.clip <= 0:
            raise InputError(f"DP-FedAvg needs rounds >= 1, clients_per_round > 0 and clip > 0; got {self}")
        self.local  # noqa: B018 -- checks the local settings now
        if self.server_optimizer not in ("sgd", "adam"):
            raise InputError(f"server_optimizer={self.server_optimizer!r}; choose 'sgd' or 'adam'")

    @property
    def local(self) -> LocalSGD:
        return LocalSGD(lr=self.client_lr, batch_size=self.local_batch_size, epochs=self.local_epochs,
                        max_steps=self.max_local_steps, optimizer=self.client_optimizer, betas=self.client_betas)

    def server(self, flat: FlatParams) -> ServerOptimizer:
        """The server optimizer of these settings over the global weights ``flat``."""
        return ServerOptimizer(flat, lr=self.server_lr, momentum=self.server_momentum, optimizer=self.server_optimizer)

    def sample_rate(self, n_clients: int) -> float:
        """Poisson rate q = clients_per_round / n_clients (capped at 1)."""
        if n_clients < 1:
            raise InputError("DP-FedAvg needs at least one client")
        return min(1.0, float(self.clients_per_round) / n_clients)

    def events(self, noise_multiplier: float, n_clients: int, rounds: int | None = None, *,
               rate: float | None = None) -> list[PoissonGaussianEvent]:
        """The ledger events of ``rounds`` (default: all) rounds at ``noise_multiplier`` and Poisson ``rate`` (default
        the settings' q): what ``run_round`` records."""
        n = self.rounds if rounds is None else rounds
        q = self.sample_rate(n_clients) if rate is None else rate
        return [PoissonGaussianEvent(noise_multiplier, q, n)] if n > 0 else []

    def plan(self, noise_multiplier: float, n_clients: int, *, rate: float | None = None) -> dict[str, float | int]:
        """What an entry's ``info`` says of these rounds: σ, the Poisson rate (default the settings' q), rounds, clip."""
        q = self.sample_rate(n_clients) if rate is None else rate
        return {"noise_multiplier": noise_multiplier, "sample_rate": q, "rounds": self.rounds, "clip": self.clip}

    def calibrate(self, budget, n_clients: int, *others: PoissonGaussianEvent, rate: float | None = None) -> float:
        """σ of these rounds so that they and the method's ``others`` releases (each at its own σ) spend the budget."""
        return budget.calibrate(lambda sigma: [*self.events(sigma, n_clients, rate=rate), *others], n_clients=n_clients)


class AdapterServer(Server):
    """DP-FedAvg of an adapter: Poisson cohorts at ``rate`` (default the settings' q), ``client_update(chunk, spans)``
    → Δ rows summed ``chunk_clients`` clients at a time with ``Gaussian(σ)``, the server optimizer's step dividing
    by ``expected_clients`` (default q·N). ``broadcast`` is what a client downloads besides the adapter."""

    def __init__(self, fed, settings: FedAvgSettings, optimizer: ServerOptimizer, sigma: float,
                 client_update: ClientUpdate, *, rate: float | None = None, expected_clients: float | None = None,
                 broadcast: Any = None, chunk_clients: int = CHUNK_CLIENTS) -> None:
        super().__init__(optimizer.flat)
        self.fed, self.settings, self.optimizer, self.sigma = fed, settings, optimizer, float(sigma)
        self.q = settings.sample_rate(fed.n_clients) if rate is None else rate
        self.expected = self.q * fed.n_clients if expected_clients is None else expected_clients
        self.client_update, self.extra, self.chunk_clients = client_update, broadcast, chunk_clients

    def release(self, r: int) -> Release:
        cohort, width, update = self.fed.sample(self.q), self.flat.numel, self.client_update

        def client_fn(chunk) -> torch.Tensor:  # sent to the worker processes: it holds the update, not the server
            return update(chunk, chunk.spans) if len(chunk) else torch.zeros((0, width))

        return Release(cohort, client_fn, Gaussian(self.sigma), self.settings.clip, chunk_clients=self.chunk_clients,
                       broadcast=(self.weights, self.extra),
                       row={"round": int(cohort.round), **cohort_fields(cohort, self.fed.n_clients)})

    def step(self, noisy: torch.Tensor, release: Release) -> dict[str, Any]:
        return {"noisy_update_norm": round(self.optimizer.step(noisy, self.expected), 6)}

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


def run_round(fed, settings: FedAvgSettings, server: ServerOptimizer, sigma: float, client_update: ClientUpdate, *,
              rate: float | None = None, expected_clients: float | None = None, broadcast: Any = None,
              chunk_clients: int = CHUNK_CLIENTS) -> dict[str, Any]:
    """One DP-FedAvg round of an adapter (:class:`AdapterServer`); returns the round's public record."""
    adapter = AdapterServer(fed, settings, server, sigma, client_update, rate=rate, expected_clients=expected_clients,
                            broadcast=broadcast, chunk_clients=chunk_clients)
    return release_round(fed, adapter, 0)


def train_adapter(fed, public, settings: FedAvgSettings, server: ServerOptimizer, sigma: float,
                  client_update: ClientUpdate, *, desc: str = "DP fine-tuning", phase: str = "generator",
                  rate: float | None = None, expected_clients: float | None = None, broadcast: Any = None,
                  chunk_clients: int = CHUNK_CLIENTS) -> list[dict[str, Any]]:
    """``settings.rounds`` DP-FedAvg rounds of an adapter (:class:`AdapterServer`) in the one federated-training
    driver (checkpoint after each, resume after a kill). Returns one public record per round."""
    adapter = AdapterServer(fed, settings, server, sigma, client_update, rate=rate, expected_clients=expected_clients,
                            broadcast=broadcast, chunk_clients=chunk_clients)
    return train_rounds(fed, public, adapter, rounds=settings.rounds, desc=desc, phase=phase).history
