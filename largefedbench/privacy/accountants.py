"""A small registry of privacy accountants, all exposed as fresh ``dp_accounting`` accountants.

===========  ==================================================================================
``rdp``      opacus ``RDPAccountant`` for Poisson-subsampled / plain Gaussian events (what POPri
             used for Table 3 σ₁); when the events include tree aggregation, dp_accounting
             ``RdpAccountant(neighboring_relation=REPLACE_SPECIAL)`` (as ``tree``).
``tree``     dp_accounting ``RdpAccountant(neighboring_relation=REPLACE_SPECIAL)``: DP-FTRL tree
             aggregation (Table 3 σ₂), composable with Gaussian and Poisson-Gaussian events.
``pld``      dp_accounting ``PLDAccountant`` (add/remove one client): tight numerical composition
             of Poisson-Gaussian rounds with plain Gaussian releases (Yu et al.: rounds + histogram).
``prv``      opacus ``PRVAccountant`` (Gopi et al.), reporting its upper bound with eps_error 0.01.
``auto``     ``tree`` if any tree event; else ``pld`` if any plain Gaussian release; else ``rdp``.
===========  ==================================================================================

opacus accountants are wrapped as ``dp_accounting.PrivacyAccountant`` subclasses so that every
accountant can be composed with the same ``DpEvent`` and searched by
``dp_accounting.calibrate_dp_mechanism``.

Every accountant is valid only for some (sampling, neighbouring relation) pairs, and a mismatch silently
understates ε; :func:`check_assumptions` refuses the others with a message naming the pair (see
:data:`SUPPORTED_PAIRS`, the pairs Flower's 2026 accountant also supports, and :data:`REFUSED_PAIRS`).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy.events import Event, GaussianEvent, TreeAggregationEvent, dp_accounting
from largefedbench.privacy.rules import check_delta

__all__ = ["ACCOUNTANTS", "REFUSED_PAIRS", "SUPPORTED_PAIRS", "check_assumptions", "compose_events", "epsilon_of",
           "make_accountant", "resolve_accountant"]

ACCOUNTANTS: dict[str, str] = {
    "auto": "tree if the events include tree aggregation, else pld if they include a plain "
    "Gaussian release (e.g. a histogram), else rdp",
    "rdp": "opacus RDP for Poisson-subsampled Gaussian; dp_accounting RDP (REPLACE_SPECIAL) "
    "when tree aggregation is involved",
    "tree": "dp_accounting RDP with neighboring_relation=REPLACE_SPECIAL (DP-FTRL tree aggregation)",
    "pld": "dp_accounting privacy-loss-distribution accountant (add/remove one client)",
    "prv": "opacus PRV accountant (upper bound, eps_error=0.01)",
}

#: (sampling, relation) → why the accountants may account it, and the least sensitivity (in clip norms) it needs
SUPPORTED_PAIRS: dict[tuple[str, str], tuple[str, float]] = {
    ("poisson", "add_remove"): ("amplification by Poisson sampling is proven under add/remove-one, with sensitivity "
                                "C (every accountant)", 1.0),
    ("none", "add_remove"): ("no amplification claimed: a Gaussian release of sensitivity C (every accountant)", 1.0),
    ("none", "replace_one"): ("no amplification claimed: replacing one client moves a clipped sum by up to 2C, so "
                              "the noise must be calibrated for sensitivity 2C (every accountant)", 2.0),
    ("fixed", "replace_special"): ("DP-FTRL's tree aggregation over a shuffled epoch, each client at most once per "
                                   "tree (the tree accountant: dp_accounting RDP with REPLACE_SPECIAL)", 1.0),
}
#: (sampling, relation) → why no accountant here accounts it, and what to record instead
REFUSED_PAIRS: dict[tuple[str, str], str] = {
    ("poisson", "replace_one"): "amplification by Poisson sampling is accounted under add/remove-one; record the "
                                "release as add_remove",
    ("fixed", "add_remove"): "a fixed-size cohort drawn without replacement has no add/remove amplification bound (the "
                             "PLD accountant has no sampled-without-replacement event); record it with sampling 'none' "
                             "(no amplification)",
    ("fixed", "replace_one"): "sampling without replacement under replace-one (sensitivity 2C) is not accounted here "
                              "yet; record it with sampling 'none' and sensitivity 2",
}


def check_assumptions(events: Iterable[Event], accountant: str) -> None:
    """Raise PrivacyError for an event whose (sampling, relation) pair or sensitivity ``accountant`` cannot account."""
    for event in events:
        pair = (event.sampling, event.relation)
        name = f"{type(event).__name__} (sampling {pair[0]!r}, relation {pair[1]!r})"
        if pair not in SUPPORTED_PAIRS:
            why = REFUSED_PAIRS.get(pair, "no accountant here was proven for it")
            supported = "; ".join(f"{s} + {r}" for s, r in SUPPORTED_PAIRS)
            raise PrivacyError(f"the ledger holds a {name}, which cannot be accounted: {why}. Supported pairs: "
                               f"{supported}.")
        tree = isinstance(event, TreeAggregationEvent)
        if tree != (pair == ("fixed", "replace_special")):
            raise PrivacyError(f"the ledger holds a {name}: only tree aggregation is accounted with sampling 'fixed' "
                               "and relation 'replace_special', and tree aggregation only so.")
        least = SUPPORTED_PAIRS[pair][1]
        if event.sensitivity < least:
            raise PrivacyError(f"the ledger holds a {name} calibrated for sensitivity {event.sensitivity:g}·C, but "
                               f"under {pair[1]} one client can move the sum by {least:g}·C: "
                               f"{SUPPORTED_PAIRS[pair][0]}.")
        if tree and accountant in ("pld", "prv"):
            raise PrivacyError(f"the {accountant!r} accountant cannot account DP-FTRL tree aggregation (relation "
                               "replace_special); use accountant='tree' (or 'rdp' or 'auto').")


#: eps_error of the PRV accountant: its reported upper bound is at most this far above the estimate.
PRV_EPS_ERROR = 0.01


def resolve_accountant(events: Iterable[Event], accountant: str = "auto") -> str:
    """The concrete accountant name used for ``events`` (resolves ``auto``; validates the name)."""
    if accountant not in ACCOUNTANTS:
        known = ", ".join(f"{name!r}" for name in ACCOUNTANTS)
        raise InputError(f"unknown accountant {accountant!r}; known accountants are {known}.")
    events = list(events)
    has_tree = any(isinstance(e, TreeAggregationEvent) for e in events)
    if accountant == "auto":
        if has_tree:
            return "tree"
        return "pld" if any(isinstance(e, GaussianEvent) for e in events) else "rdp"
    if has_tree and accountant in ("pld", "prv"):
        raise PrivacyError(
            f"the {accountant!r} accountant cannot account DP-FTRL tree aggregation events; "
            "use accountant='tree' (or 'rdp' or 'auto')."
        )
    return accountant


@functools.cache
def _opacus_accountant_class():
    """A ``dp_accounting.PrivacyAccountant`` that hands Poisson/Gaussian events to an opacus
    accountant as its ``history`` of (noise_multiplier, sample_rate, steps)."""
    dpa = dp_accounting()
    base: Any = dpa.PrivacyAccountant  # imported on first use, so the type checker sees Any

    class OpacusAccountant(base):
        def __init__(self, mechanism: str):
            super().__init__(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
            self.mechanism = mechanism
            self.history: list[tuple[float, float, int]] = []
            self.non_private = False

        def _maybe_compose(self, event, count, do_compose):
            if isinstance(event, dpa.NoOpDpEvent):
                return None
            if isinstance(event, dpa.NonPrivateDpEvent):
                self.non_private |= do_compose
                return None
            if isinstance(event, dpa.SelfComposedDpEvent):
                return self._maybe_compose(event.event, event.count * count, do_compose)
            if isinstance(event, dpa.ComposedDpEvent):
                for sub in event.events:
                    error = self._maybe_compose(sub, count, do_compose)
                    if error is not None:
                        return error
                return None
            if isinstance(event, dpa.GaussianDpEvent):
                sigma, q = event.noise_multiplier, 1.0
            elif isinstance(event, dpa.PoissonSampledDpEvent) and isinstance(
                event.event, dpa.GaussianDpEvent
            ):
                sigma, q = event.event.noise_multiplier, event.sampling_probability
            else:
                return self.CompositionErrorDetails(
                    invalid_event=event,
                    error_message=f"opacus {self.mechanism} accounts only (Poisson-sampled) Gaussian events",
                )
            if do_compose and count > 0:
                self.history.append((sigma, q, count))
            return None

        def get_epsilon(self, target_delta: float) -> float:
            if self.non_private:
                return math.inf
            if not self.history:
                return 0.0
            from opacus.accountants import create_accountant  # noqa: PLC0415 - imports torch

            accountant = create_accountant(self.mechanism)
            accountant.history = list(self.history)
            if self.mechanism == "prv":
                import numpy as np  # noqa: PLC0415

                # PRV of q = 1 takes log(0) on its (unused) lower branch, and opacus sizes the PRV
                # domain with an RDP bound whose order warning says nothing about the PRV result.
                with np.errstate(divide="ignore"), warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Optimal order is the (largest|smallest) alpha")
                    return float(accountant.get_epsilon(delta=target_delta, eps_error=PRV_EPS_ERROR))
            return float(accountant.get_epsilon(delta=target_delta))

    return OpacusAccountant


def make_accountant(name: str, events: Sequence[Event] = ()):
    """A fresh ``dp_accounting.PrivacyAccountant`` for accountant ``name`` and these events."""
    name = resolve_accountant(events, name)
    check_assumptions(events, name)
    dpa = dp_accounting()
    if name == "tree" or (name == "rdp" and any(isinstance(e, TreeAggregationEvent) for e in events)):
        return dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    if name == "pld":
        return dpa.pld.PLDAccountant()
    return _opacus_accountant_class()(name)  # "rdp" or "prv"


def compose_events(events: Iterable[Event]):
    """The ``dp_accounting`` event for the sequential composition of ``events``."""
    return dp_accounting().ComposedDpEvent([e.to_dp_event() for e in events])


def epsilon_of(events: Iterable[Event], delta: float, accountant: str = "auto") -> float:
    """ε spent by ``events`` at ``delta`` under ``accountant`` (see ``ACCOUNTANTS``)."""
    events = list(events)
    name = resolve_accountant(events, accountant)
    check_assumptions(events, name)
    delta = check_delta(delta)
    if not events:
        return 0.0
    acc = make_accountant(name, events)
    try:
        acc.compose(compose_events(events))
    except dp_accounting().UnsupportedEventError as err:
        raise PrivacyError(f"the {name!r} accountant cannot account these events: {err}") from err
    return float(acc.get_epsilon(delta))
