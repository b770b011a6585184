"""The one federated-training driver: every method that trains weights from the clients' clipped, noised updates
runs its rounds through :func:`train_rounds` — DP-FedAvg and DP-FTRL (the downstream model), the adapter methods
(CTCL, DP instruction resampling, weak-client voting: :func:`~largefedbench.fedtrain.fedavg.train_adapter`) and
FedBis/FedBiscuit's selectors.

What differs between them is the :class:`Server`: a round's :class:`Release` (its cohort and how it was drawn, the
client function, the mechanism, what is broadcast, the public record) and the step on the released sum. The driver
runs the rounds in the shared rounds loop (checkpoint after each, resume after a kill, server time), releases each
round's sum through the federation's one door and, when given a validation score, keeps the best weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.server import ServerState
from largefedbench.rounds import RoundsLoop

__all__ = ["Release", "Server", "release_round", "train_rounds"]


@dataclass
class Release:
    """One round's release: ``fed.private_sum(cohort, client_fn, clip=, mechanism=, batched=True, chunk_clients=,
    broadcast=)``, and the round's public history fields (``row``)."""

    cohort: Any
    client_fn: Callable[[Any], Any]
    mechanism: Any
    clip: float
    chunk_clients: int | None = None
    broadcast: Any = None
    row: dict[str, Any] = field(default_factory=dict)


class Server:
    """A federated-training server: σ (calibrated for its plan), each round's :meth:`release` (it starts the
    federation's round), the :meth:`step` on the released sum (it moves the weights ``flat``, and returns public
    history fields) and the state a checkpoint keeps."""

    sigma: float

    def __init__(self, flat: FlatParams | None) -> None:
        self.flat = flat

    @property
    def weights(self):
        """The global weights as one flat vector."""
        return self.flat.get()

    def release(self, r: int) -> Release:
        raise NotImplementedError

    def step(self, noisy: Any, release: Release) -> dict[str, Any] | None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def release_round(fed, server: Server, r: int, public=None) -> dict[str, Any]:
    """One round: the server's release through the federation's door, then its step; returns the round's record.
    With ``public`` (its ``bar``), a progress bar of the round's clients, chunk by chunk."""
    rel = server.release(r)
    bar = None if public is None else _clients_bar(public, rel.cohort, fed.n_clients, r)
    try:
        noisy = fed.private_sum(rel.cohort, rel.client_fn, clip=rel.clip, mechanism=rel.mechanism, batched=True,
                                chunk_clients=rel.chunk_clients, broadcast=rel.broadcast,
                                progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    return {**rel.row, **(server.step(noisy, rel) or {})}


def _clients_bar(public, cohort, n_clients: int, r: int):
    """A bar over a cohort whose size is public (full participation, a fixed-size epoch cohort). A Poisson cohort's
    size is private (``rounds.cohort_fields``): its bar says the expected size and the time, never a count."""
    if cohort.sample_rate >= 1.0 or getattr(cohort, "sampling", "poisson") != "poisson":
        return public.bar(total=len(cohort), desc=f"round {r}: clients", leave=False)
    expected = round(cohort.sample_rate * n_clients)
    return public.bar(desc=f"round {r}: ~{expected} clients expected", leave=False, bar_format="{desc}, {elapsed}")


def train_rounds(fed, public, server: Server, *, rounds: int, desc: str, first: int = 0,
                 phase: str | None = None, validate: Callable[[], float] | None = None, eval_every: int = 1,
                 fingerprint: dict[str, Any] | None = None) -> RoundsLoop:
    """Rounds ``first … first + rounds - 1`` of ``server`` in the shared rounds loop; returns the loop (its
    ``history``, and with ``validate`` its ``best``).

    Each round's record is ``{"round": r, **release.row, **step fields}`` (with ``"phase": phase`` when given).
    ``validate()`` scores the current weights (higher is better): before the first round (the record of round
    ``first - 1``), every ``eval_every`` rounds and after the last; the best weights are kept as ``loop.best``."""
    loop = RoundsLoop(fed, public, ServerState(), rounds=rounds, first=first, desc=desc,
                      select="max" if validate is not None else None, fingerprint=fingerprint, metric="top1")
    last = first + rounds - 1

    def scored(r: int) -> float:
        score = float(validate())
        loop.offer(score, r, server.weights.cpu())
        return score

    if loop.resumed:
        server.load_state_dict(loop.state.server)
    elif validate is not None:
        loop.history.append({"round": first - 1, "cohort_size": 0, "validation_top1": scored(first - 1)})
    for r in loop:
        record = {"phase": phase} if phase is not None else {}
        record.update({"round": r, **release_round(fed, server, r, public)})
        if validate is not None and (r % eval_every == 0 or r == last):
            record["validation_top1"] = scored(r)
        loop.history.append(record)
        loop.state.server = server.state_dict()
    return loop
