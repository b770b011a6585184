"""The privacy rules, in one place: what δ may be, what counts must be, how far a run may overshoot its ε.

The harness (before and after a run), the noise calibration and the leaderboard's privacy check all apply
these, so a run the harness accepts is an entry the board accepts.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from largefedbench.errors import PrivacyError

__all__ = [
    "BUDGET_ATOL",
    "BUDGET_SLACK",
    "check_delta",
    "check_delta_for_clients",
    "delta_for_clients_problem",
    "over_budget",
    "positive_int",
]

#: the ε spent (recomputed from the ledger) may exceed the target by this relative slack: the noise
#: calibration's own tolerance (opacus' search stops within 0.01 in ε)
BUDGET_SLACK = 0.01
#: ... plus this absolute slack, for numerical differences between accountant library versions
BUDGET_ATOL = 1e-6


def check_delta(delta: Any, *, allow_zero: bool = False, name: str = "delta", example: float = 1e-6) -> float:
    """δ as a float in (0, 1), or [0, 1) with ``allow_zero`` (the ε = 0 and ε = ∞ references); raises
    PrivacyError naming ``name`` (e.g. ``--delta``) and an ``example`` value."""
    interval = "[0, 1)" if allow_zero else "(0, 1)"
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise PrivacyError(f"{name} must be a number in {interval}, got {delta!r}; e.g. {example:g}.") from None
    if not (0.0 <= d < 1.0 if allow_zero else 0.0 < d < 1.0):
        raise PrivacyError(
            f"{name} must be in {interval}, got {delta!r}; use a δ well below 1/n_clients (n_clients = the number "
            f"of clients), e.g. {example:g}."
        )
    return d


def delta_for_clients_problem(delta: float, n_clients: int, clients: str = "n_clients") -> tuple[str, str] | None:
    """(what is wrong, what to do) when δ ≥ 1/n_clients, else None. ``clients`` names the count in the message.

    User-level DP over n clients: with δ ≥ 1/n, releasing one randomly chosen client's data in the clear is
    already (0, δ)-DP, so the (ε, δ) statement would mean nothing.
    """
    n = positive_int(clients, n_clients)
    if delta < 1.0 / n:
        return None
    return (
        f"delta={delta:g} must be below 1/{clients} = 1/{n} = {1 / n:.3g}: with δ ≥ 1/n, releasing one randomly "
        "chosen client's data in the clear is already (0, δ)-DP, so the guarantee would mean nothing",
        f"use δ ≪ 1/n, e.g. {0.1 / n:.1g}",
    )


def check_delta_for_clients(delta: float, n_clients: int) -> None:
    """Raise PrivacyError unless δ < 1/n_clients (see :func:`delta_for_clients_problem`)."""
    problem = delta_for_clients_problem(delta, n_clients)
    if problem is not None:
        what, fix = problem
        raise PrivacyError(f"{what}. {fix[0].upper()}{fix[1:]}.")


def positive_int(name: str, value: Any, error: type[Exception] = PrivacyError) -> int:
    """``value`` as an int ≥ 1 (a count: clients, rounds, steps, epochs...); raises ``error`` naming ``name``."""
    message = f"{name} must be an integer ≥ 1, got {value!r}."
    if isinstance(value, bool):
        raise error(message)
    try:
        n = operator.index(value)
    except TypeError:
        raise error(message) from None
    if n < 1:
        raise error(message)
    return n


def over_budget(spent: float, target: float) -> bool:
    """Whether a run that spent ε = ``spent`` (from its ledger) broke a target ε = ``target``, beyond the
    calibration slack. A target of ∞ (the non-private reference) is never broken."""
    if math.isinf(target):
        return False
    return spent > target * (1 + BUDGET_SLACK) + BUDGET_ATOL
