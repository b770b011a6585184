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
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import LocalSGD
from largefedbench.fedtrain.server import ServerOptimizer, ServerState
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.rounds import RoundsLoop, cohort_fields

__all__ = ["CHUNK_CLIENTS", "ClientUpdate", "FedAvgSettings", "run_round", "train_adapter"]

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

    def events(self, noise_multiplier: float, n_clients: int, rounds: int | None = None) -> list[PoissonGaussianEvent]:
        """The ledger events of ``rounds`` (default: all) rounds at ``noise_multiplier``: what ``run_round`` records."""
        n = self.rounds if rounds is None else rounds
        return [PoissonGaussianEvent(noise_multiplier, self.sample_rate(n_clients), n)] if n > 0 else []


def run_round(fed, settings: FedAvgSettings, server: ServerOptimizer, sigma: float, client_update: ClientUpdate, *,
              rate: float | None = None, expected_clients: float | None = None, download_floats: int = 0,
              chunk_clients: int = CHUNK_CLIENTS) -> dict[str, Any]:
    """One DP-FedAvg round: Poisson cohort at ``rate`` (default the settings' q), ``client_update(chunk, spans)`` → Δ
    rows inside ``fed.private_sum`` (clipped, summed, ``Gaussian(σ)``: one ledger event; ``chunk_clients`` clients a
    chunk), server step dividing by ``expected_clients`` (default q·N). ``download_floats`` is what a client downloads
    besides the adapter. Returns the round's public record."""
    q = settings.sample_rate(fed.n_clients) if rate is None else rate
    cohort = fed.sample(q)
    width = server.flat.numel

    def client_fn(chunk) -> torch.Tensor:
        return client_update(chunk, chunk.spans) if len(chunk) else torch.zeros((0, width))

    noisy = fed.private_sum(cohort, client_fn, clip=settings.clip, mechanism=Gaussian(sigma), batched=True,
                            chunk_clients=chunk_clients, download_floats=width + int(download_floats))
    norm = server.step(noisy, q * fed.n_clients if expected_clients is None else expected_clients)
    return {"round": int(cohort.round), **cohort_fields(cohort, fed.n_clients), "noisy_update_norm": round(norm, 6)}


def train_adapter(fed, public, settings: FedAvgSettings, server: ServerOptimizer, sigma: float,
                  client_update: ClientUpdate, *, desc: str = "DP fine-tuning", phase: str = "generator",
                  rate: float | None = None, expected_clients: float | None = None, download_floats: int = 0,
                  chunk_clients: int = CHUNK_CLIENTS) -> list[dict[str, Any]]:
    """``settings.rounds`` DP-FedAvg rounds (see :func:`run_round` for ``rate``/``expected_clients``/
    ``download_floats``/``chunk_clients``) in the shared rounds loop (checkpoint after each, resume after a kill).
    Returns one public record per round."""
    loop = RoundsLoop(fed, public, ServerState(), rounds=settings.rounds, desc=desc)
    if loop.resumed:
        server.load_state_dict(loop.state.server)
    for _ in loop:
        record = run_round(fed, settings, server, sigma, client_update, rate=rate, expected_clients=expected_clients,
                           download_floats=download_floats, chunk_clients=chunk_clients)
        loop.history.append({"phase": phase, **record})
        loop.state.server = server.state_dict()
    return loop.history
