"""σ ↔ ε reports for the CLI (``lfb privacy noise`` / ``lfb privacy epsilon``).

mechanism ``gaussian``: ``steps`` Poisson-sampled rounds at rate q (``sample_rate``, or
``per_round / clients``) — DP-FedAvg / PrE-Text / POPri, POPri Table 3 σ₁.
mechanism ``tree``: DP-FTRL tree aggregation over ``clients // per_round`` rounds per epoch, restarted
``steps`` times (``steps`` counts epochs/restarts, the setting that reproduces Table 3 σ₂).
"""

from __future__ import annotations

import math
from typing import Any

from largefedbench.errors import InputError
from largefedbench.privacy.accountants import ACCOUNTANTS, epsilon_of, resolve_accountant
from largefedbench.privacy.calibration import PrivacyBudget, check_target
from largefedbench.privacy.events import Event, PoissonGaussianEvent, TreeAggregationEvent
from largefedbench.privacy.rules import positive_int

__all__ = ["noise_report", "epsilon_report", "MECHANISMS"]

MECHANISMS = ("gaussian", "tree")


def _plan(mechanism: str, sample_rate: float | None, steps: int, clients: int | None,
          per_round: int | None) -> tuple[Event, dict[str, Any]]:
    """The planned event (σ = 1 placeholder) and the resolved inputs for the report."""
    if mechanism not in MECHANISMS:
        raise InputError(f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}.")
    steps = positive_int("steps", steps, InputError)
    if (clients is None) != (per_round is None):
        raise InputError("give both clients (N) and per_round (B), or neither.")
    q_from_counts = None
    if clients is not None:
        clients = positive_int("clients", clients, InputError)
        per_round = positive_int("per_round", per_round, InputError)
        if per_round > clients:
            raise InputError(f"per_round={per_round} cannot exceed clients={clients}.")
        q_from_counts = per_round / clients
    if mechanism == "tree" and q_from_counts is None:
        raise InputError("mechanism 'tree' needs clients (N) and per_round (B): a tree epoch has N//B rounds.")
    if sample_rate is None:
        if q_from_counts is None:
            raise InputError("give sample_rate, or clients and per_round (q = per_round / clients).")
        sample_rate = q_from_counts
    elif q_from_counts is not None and not math.isclose(sample_rate, q_from_counts, rel_tol=1e-9):
        raise InputError(
            f"sample_rate={sample_rate!r} contradicts per_round/clients = {per_round}/{clients} = "
            f"{q_from_counts:.6g}; give one or the other."
        )
    inputs: dict[str, Any] = {
        "mechanism": mechanism,
        "sample_rate": sample_rate,
        "steps": steps,
        "clients": clients,
        "per_round": per_round,
    }
    if mechanism == "tree":
        assert clients is not None and per_round is not None  # checked above: a tree needs both
        inputs["rounds_per_epoch"] = clients // per_round
        return TreeAggregationEvent(1.0, clients // per_round, steps), inputs
    return PoissonGaussianEvent(1.0, sample_rate, steps), inputs


def _accountant_fields(event: Event, accountant: str) -> dict[str, str]:
    name = resolve_accountant([event], accountant)
    if name == "rdp" and isinstance(event, TreeAggregationEvent):
        detail = ACCOUNTANTS["tree"]
    else:
        detail = ACCOUNTANTS[name]
    return {"accountant": name, "accountant_detail": detail}


def noise_report(epsilon: float, delta: float, sample_rate: float | None, steps: int, mechanism: str = "gaussian",
                 clients: int | None = None, per_round: int | None = None, *,
                 accountant: str = "auto") -> dict[str, Any]:
    """The noise multiplier σ that meets (ε, δ); ``epsilon_achieved`` is ε at that σ (≤ ε)."""
    epsilon, delta = check_target(epsilon, delta)
    event, inputs = _plan(mechanism, sample_rate, steps, clients, per_round)
    budget = PrivacyBudget(epsilon, delta)
    sigma = budget.calibrate(event, n_clients=clients, accountant=accountant)
    fields = _accountant_fields(event, accountant)
    achieved = epsilon_of([event.with_noise_multiplier(sigma)], delta, fields["accountant"])
    return {"sigma": sigma, "epsilon": epsilon, "epsilon_achieved": achieved, "delta": delta,
            **fields, **inputs}


def epsilon_report(sigma: float, delta: float, sample_rate: float | None, steps: int, mechanism: str = "gaussian",
                   clients: int | None = None, per_round: int | None = None, *,
                   accountant: str = "auto") -> dict[str, Any]:
    """ε spent at δ by the planned rounds with noise multiplier ``sigma``."""
    event, inputs = _plan(mechanism, sample_rate, steps, clients, per_round)
    event = event.with_noise_multiplier(sigma)
    if clients is not None:
        PrivacyBudget(math.inf, delta).check_clients(clients)
    fields = _accountant_fields(event, accountant)
    epsilon = epsilon_of([event], delta, fields["accountant"])
    return {"sigma": event.noise_multiplier, "epsilon": epsilon, "delta": delta, **fields, **inputs}
