"""Calibrate the noise multiplier σ for a target (ε, δ) over a planned sequence of events.

The search is the libraries' own: opacus ``get_noise_multiplier`` (RDP, epsilon_tolerance 0.01) for
a single planned Poisson-Gaussian event under the ``rdp`` accountant, exactly as POPri computed
Table 3 σ₁; ``dp_accounting.calibrate_dp_mechanism`` (Brent's method) for everything else.

A *plan* is one of
- an event or a sequence of events, used as templates: every event gets the calibrated σ (the σ
  written in the templates is ignored, e.g. ``PoissonGaussianEvent(1.0, sample_rate=q, steps=T)``);
- a callable ``sigma -> sequence of events``, for plans mixing calibrated and fixed-σ events, e.g.
  ``lambda s: [PoissonGaussianEvent(s, q, T), GaussianEvent(10.0)]``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy.accountants import compose_events, epsilon_of, make_accountant, resolve_accountant
from largefedbench.privacy.events import Event, GaussianEvent, PoissonGaussianEvent, TreeAggregationEvent, dp_accounting
from largefedbench.privacy.rules import BUDGET_SLACK, check_delta, check_delta_for_clients, over_budget, positive_int

__all__ = ["Plan", "PrivacyBudget", "calibrate_noise_multiplier", "check_target", "MIN_NOISE_MULTIPLIER"]

Plan = Event | Sequence[Event] | Callable[[float], Sequence[Event]]

#: Range of the σ search. Below it ε is astronomically large for any realistic plan; above it
#: (opacus' own limit) the noise drowns any signal and opacus' RDP arithmetic breaks down.
MIN_NOISE_MULTIPLIER = 1e-3
MAX_NOISE_MULTIPLIER = 1e6
#: opacus get_noise_multiplier's default, which reproduces POPri Table 3 σ₁.
OPACUS_EPSILON_TOLERANCE = 0.01
#: σ tolerance of the PLD/PRV search, relative to the RDP σ that brackets it (each step costs ~0.5 s).
NUMERICAL_RELATIVE_TOL = 1e-3


def check_target(epsilon: float, delta: float) -> tuple[float, float]:
    """Validate a target (ε, δ) for calibration: ε > 0 and finite, 0 < δ < 1."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise PrivacyError(f"epsilon must be a number > 0, got {epsilon!r}.") from None
    if not (eps > 0 and math.isfinite(eps)):
        raise PrivacyError(
            f"target epsilon must be > 0 and finite to calibrate noise, got {epsilon!r}. "
            "ε = inf is the non-private reference (no noise: σ = 0); ε = 0 is the public "
            "reference, which may release nothing computed from private data."
        )
    return eps, check_delta(delta)


def _as_plan(plan: Plan) -> tuple[Callable[[float], list[Event]], list[Event] | None]:
    """(σ -> events, the template events or None for a callable plan)."""
    event_types = (PoissonGaussianEvent, TreeAggregationEvent, GaussianEvent)  # the event types (events.EVENT_TYPES)
    if callable(plan) and not isinstance(plan, event_types):
        planned = plan
        return (lambda sigma: list(planned(sigma))), None
    templates: list[Event] = [plan] if isinstance(plan, event_types) else list(plan)
    bad = [e for e in templates if not isinstance(e, event_types)]
    if bad or not templates:
        raise InputError(
            "a calibration plan must be an event, a non-empty sequence of events "
            "(PoissonGaussianEvent, TreeAggregationEvent, GaussianEvent) or a callable "
            f"sigma -> events; got {plan!r}."
        )
    return (lambda sigma: [e.with_noise_multiplier(sigma) for e in templates]), templates


def _opacus_search(event: PoissonGaussianEvent, epsilon: float, delta: float) -> float:
    from opacus.accountants.utils import get_noise_multiplier  # noqa: PLC0415 - imports torch

    try:
        return float(
            get_noise_multiplier(
                target_epsilon=epsilon,
                target_delta=delta,
                sample_rate=event.sample_rate,
                steps=event.steps,
                accountant="rdp",
                epsilon_tolerance=OPACUS_EPSILON_TOLERANCE,
            )
        )
    except ValueError as err:  # "The privacy budget is too low." (σ > 1e6)
        raise PrivacyError(
            f"(ε={epsilon:g}, δ={delta:g}) cannot be met with σ ≤ 1e6 for {event}: raise ε or δ, "
            f"or plan fewer steps / a lower sample rate ({err})."
        ) from err


def _brent_search(fn, name, probe, epsilon, delta, bracket, tol) -> float | None:
    """dp_accounting's Brent search; None if an explicit ``bracket`` does not bracket the root."""
    dpa = dp_accounting()
    try:
        return float(
            dpa.calibrate_dp_mechanism(
                lambda: make_accountant(name, probe),
                lambda sigma: compose_events(fn(sigma)),
                epsilon,
                delta,
                bracket_interval=bracket,
                tol=tol,
            )
        )
    except dpa.mechanism_calibration.NoBracketIntervalFoundError as err:
        raise PrivacyError(
            f"the {name!r} accountant found no σ in [{MIN_NOISE_MULTIPLIER:g}, {MAX_NOISE_MULTIPLIER:g}] "
            f"that meets (ε={epsilon:g}, δ={delta:g}); try accountant='rdp'."
        ) from err
    except dpa.UnsupportedEventError as err:
        raise PrivacyError(f"the {name!r} accountant cannot account this plan: {err}") from err
    except ValueError:  # brentq: an ExplicitBracketInterval that does not bracket the root
        if not isinstance(bracket, dpa.ExplicitBracketInterval):
            raise
        return None


def _search(fn, name, probe, epsilon, delta, bracket, tol) -> float:
    """:func:`_brent_search` from a lower endpoint and a guess, which always brackets the root (or raises)."""
    sigma = _brent_search(fn, name, probe, epsilon, delta, bracket, tol)
    if sigma is None:
        raise PrivacyError(f"the {name!r} accountant's σ search found no bracket for (ε={epsilon:g}, δ={delta:g}).")
    return sigma


def _check_reachable(fn, epsilon: float, delta: float) -> None:
    """Fail early, with the reason, when no σ in the search range meets the target. Uses
    dp_accounting's RDP (the ``tree`` accountant, which takes every event type): an upper bound on
    ε that stays cheap at extreme σ, unlike PLD/PRV (slow, memory-hungry) and opacus (slow)."""
    if epsilon_of(fn(MAX_NOISE_MULTIPLIER), delta, "tree") > epsilon:
        raise PrivacyError(
            f"(ε={epsilon:g}, δ={delta:g}) cannot be met even with σ = {MAX_NOISE_MULTIPLIER:g}: the "
            "fixed-σ events of the plan alone spend more than ε. Raise ε or δ, or add noise to them."
        )
    if epsilon_of(fn(MIN_NOISE_MULTIPLIER), delta, "tree") <= epsilon:
        raise PrivacyError(
            f"(ε={epsilon:g}, δ={delta:g}) is met even with σ = {MIN_NOISE_MULTIPLIER:g}: the budget "
            "is so large that the run is effectively non-private; use ε = inf (no noise) instead."
        )


def calibrate_noise_multiplier(
    plan: Plan, epsilon: float, delta: float, *, accountant: str = "auto", tol: float | None = None
) -> float:
    """The smallest σ (within tolerance) whose planned events spend at most (ε, δ).

    ``accountant`` is a name from ``ACCOUNTANTS``. ``tol`` is the absolute σ tolerance of the
    dp_accounting search (default 1e-6 for RDP accountants; 0.1% of σ for pld/prv); a single
    template Poisson event under ``rdp`` uses opacus' search, whose tolerance is 0.01 in ε. The
    returned σ always meets the target under the chosen accountant.
    """
    epsilon, delta = check_target(epsilon, delta)
    fn, templates = _as_plan(plan)
    probe = fn(1.0)
    if not probe:
        raise InputError("the calibration plan produced no events; plan at least one release.")
    name = resolve_accountant(probe, accountant)
    dpa = dp_accounting()
    with warnings.catch_warnings():
        # The search visits extreme σ where opacus' best RDP order is at the end of its range.
        warnings.filterwarnings("ignore", message="Optimal order is the (largest|smallest) alpha")
        _check_reachable(fn, epsilon, delta)
        if name == "rdp" and templates is not None and len(templates) == 1 and isinstance(
            templates[0], PoissonGaussianEvent
        ):
            return _opacus_search(templates[0], epsilon, delta)
        if name in ("pld", "prv"):
            # Numerical accountants are slow (and memory-hungry) at small σ: bracket their σ
            # just below the RDP σ, which is (up to discretisation slack) an upper bound for it.
            upper = _search(
                fn, "rdp", probe, epsilon, delta,
                dpa.LowerEndpointAndGuess(MIN_NOISE_MULTIPLIER, 1.0), 1e-4,
            )
            tol = NUMERICAL_RELATIVE_TOL * upper if tol is None else tol
            sigma = _brent_search(
                fn, name, probe, epsilon, delta, dpa.ExplicitBracketInterval(upper / 2, upper), tol
            )
            if sigma is None:  # rare: search outward from the RDP σ instead
                bracket = dpa.LowerEndpointAndGuess(upper / 2, upper)
                sigma = _search(fn, name, probe, epsilon, delta, bracket, tol)
            return sigma
        bracket = dpa.LowerEndpointAndGuess(MIN_NOISE_MULTIPLIER, 1.0)
        return _search(fn, name, probe, epsilon, delta, bracket, tol)


@dataclass(frozen=True)
class PrivacyBudget:
    """A user-level (ε, δ) budget. ε = inf is the non-private reference, ε = 0 the public one."""

    epsilon: float
    delta: float
    #: every calibration made with this budget: its target, the accountant, σ and the planned events at σ (JSON), so
    #: an entry can show that its ledger's σ is what calibrating its own plan for its target gives
    calibrations: list = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        try:
            eps = float(self.epsilon)
        except (TypeError, ValueError):
            raise PrivacyError(
                f"a privacy budget needs numbers, got epsilon={self.epsilon!r}, delta={self.delta!r}."
            ) from None
        if math.isnan(eps) or eps < 0:
            raise PrivacyError(
                f"epsilon must be ≥ 0 (0 = public reference, inf = non-private), got {self.epsilon!r}."
            )
        delta = check_delta(self.delta, allow_zero=True)
        if delta == 0 and 0 < eps < math.inf:
            raise PrivacyError(
                f"epsilon={eps:g} with delta=0 is pure DP, which Gaussian noise cannot give; "
                "use a δ > 0 well below 1/n_clients."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    @property
    def is_public(self) -> bool:
        return self.epsilon == 0

    @property
    def is_non_private(self) -> bool:
        return self.epsilon == math.inf

    def check_clients(self, n_clients: int) -> None:
        """Raise unless δ < 1/n_clients (user-level DP over ``n_clients`` clients)."""
        check_delta_for_clients(self.delta, positive_int("n_clients", n_clients, InputError))

    def calibrate(
        self, plan: Plan, *, n_clients: int | None = None, accountant: str = "auto",
        tol: float | None = None,
    ) -> float:
        """σ for ``plan`` within this budget (0.0 for the non-private reference)."""
        if n_clients is not None:
            self.check_clients(n_clients)
        if self.is_non_private:
            return 0.0
        if self.is_public:
            raise PrivacyError(
                "ε = 0 is the public reference: it may release nothing computed from private "
                "data, so there is no noise multiplier to calibrate."
            )
        sigma = calibrate_noise_multiplier(plan, self.epsilon, self.delta, accountant=accountant, tol=tol)
        events = _as_plan(plan)[0](sigma)
        self.calibrations.append({"target_epsilon": self.epsilon, "delta": self.delta,
                                  "accountant": resolve_accountant(events, accountant), "sigma": sigma,
                                  "events": [e.to_dict() for e in events]})
        return sigma

    def check_release(self, spent: Sequence[Event], release: Sequence[Event], *, accountant: str = "auto") -> None:
        """Refuse a release (its ``release`` events) that would take the ledger (``spent`` events so far) over this
        budget beyond the calibration slack: the run stops before the release instead of finishing over budget."""
        if self.is_non_private or not release:
            return
        planned = [*spent, *release]
        name = resolve_accountant(planned, accountant)
        after = epsilon_of(planned, self.delta, name)
        if over_budget(after, self.epsilon):
            before = epsilon_of(list(spent), self.delta, name) if spent else 0.0
            raise PrivacyError(
                f"this release would bring ε to {after:.4g} at δ = {self.delta:g} ({name} accountant; ε = {before:.4g} "
                f"before it), over the budget ε = {self.epsilon:g} (+{BUDGET_SLACK:.0%} calibration slack): the run "
                "stops before releasing. Calibrate σ for every release the method makes, e.g. "
                "budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=q, steps=rounds), n_clients=fed.n_clients)."
            )
