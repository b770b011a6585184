"""Privacy checks of an entry: ε is recomputed from every seed's ledger, δ is meaningful for the client count."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from largefedbench.leaderboard.findings import Finding, error, note
from largefedbench.leaderboard.schema import CALIBRATED_SINCE, Entry, epsilon_value
from largefedbench.privacy.rules import BUDGET_SLACK, delta_for_clients_problem, over_budget

__all__ = ["BUDGET_SLACK", "EPSILON_ATOL", "EPSILON_RTOL", "check_privacy", "epsilon_matches", "recompute_epsilon",
           "sigma_checked_only_by_rerun"]

#: a claimed ε matches the recomputed one if |claimed − recomputed| ≤ EPSILON_ATOL + EPSILON_RTOL·recomputed
#: (the accountants are deterministic; the slack absorbs numerical differences between library versions)
EPSILON_RTOL = 1e-3
EPSILON_ATOL = 1e-6


def epsilon_matches(claimed: float, recomputed: float) -> bool:
    if math.isinf(claimed) or math.isinf(recomputed):
        return claimed == recomputed
    return abs(claimed - recomputed) <= EPSILON_ATOL + EPSILON_RTOL * abs(recomputed)


@functools.lru_cache(maxsize=256)
def _epsilon(ledger_json: str, delta: float, accountant: str) -> float:
    from largefedbench.privacy import PrivacyLedger

    ledger = PrivacyLedger.from_dict(json.loads(ledger_json))
    if not len(ledger):
        return 0.0
    return ledger.epsilon(delta, accountant)


def recompute_epsilon(ledger: dict[str, Any], delta: float, accountant: str) -> float:
    """ε of one seed's ledger at ``delta`` under ``accountant`` (0 for an empty ledger); raises LfbError."""
    return _epsilon(json.dumps(ledger, sort_keys=True), float(delta), accountant)


def _fmt(eps: float) -> str:
    return "∞" if math.isinf(eps) else f"{eps:.6g}"


def check_privacy(entry: Entry) -> list[Finding]:
    """ε per seed and max recomputed from the ledgers; budget; δ against 1/n and ε = 0; client count."""
    from largefedbench.errors import LfbError

    p, out = entry.privacy, []
    n_seeds = len(entry.seeds)
    fix_rerun = "Do not edit privacy numbers by hand: re-run `lfb eval`, which computes them from the ledger"
    if len(p.ledgers) != n_seeds:
        out.append(error("privacy-ledger", "privacy.ledgers", f"{len(p.ledgers)} ledgers for {n_seeds} seeds",
                         "An entry holds one ledger per seed, in seed order. " + fix_rerun))
    if len(p.epsilon_per_seed) != n_seeds:
        out.append(error("privacy-epsilon", "privacy.epsilon_per_seed",
                         f"{len(p.epsilon_per_seed)} values for {n_seeds} seeds",
                         "An entry holds one ε per seed, in seed order. " + fix_rerun))
    if p.n_train_clients != entry.dataset.clients.get("train"):
        out.append(error("privacy-delta", "privacy.n_train_clients",
                         f"{p.n_train_clients} train clients, but dataset.clients.train is "
                         f"{entry.dataset.clients.get('train')}", fix_rerun))
    claimed = [epsilon_value(e) for e in p.epsilon_per_seed]
    if p.delta == 0 and any(c != 0 for c in claimed + [epsilon_value(p.epsilon)]):
        out.append(error("privacy-delta", "privacy.delta", "δ = 0 is only meaningful for ε = 0 (no release at all)",
                         "Record the δ the ε was computed at (`lfb eval --delta`)"))
    elif (problem := delta_for_clients_problem(p.delta, p.n_train_clients, "n_train_clients")) is not None:
        what, fix = problem
        out.append(error("privacy-delta", "privacy.delta", what, f"Re-run `lfb eval` with a --delta that fits: {fix}"))
    if entry.declared is not None or p.accountant == "declared":
        return out + _check_declared(entry, claimed)
    recomputed: list[float] = []
    private = epsilon_value(p.target_epsilon) > 0
    for i, ledger in enumerate(p.ledgers[:n_seeds]):
        where = f"privacy.ledgers[{i}]"
        if private and isinstance(ledger, dict) and not ledger.get("events"):
            out.append(error("privacy-ledger", where, "records no release, yet the entry targets ε > 0: a private "
                             "method learns from the clients only through private_sum, which records every release",
                             fix_rerun))
            continue
        if p.delta == 0 and isinstance(ledger, dict) and ledger.get("events"):
            out.append(error("privacy-delta", where, "the ledger records releases but δ = 0",
                             "An (ε, 0) claim cannot be checked from a Gaussian ledger; record the δ used"))
            continue
        try:
            eps = recompute_epsilon(ledger, p.delta, p.accountant)
        except (LfbError, ValueError, TypeError, KeyError) as exc:
            out.append(error("privacy-ledger", where, f"the ledger cannot be accounted with the {p.accountant!r} "
                             f"accountant: {exc}", fix_rerun))
            continue
        recomputed.append(eps)
        if i < len(claimed) and not epsilon_matches(claimed[i], eps):
            out.append(error("privacy-epsilon", f"privacy.epsilon_per_seed[{i}]",
                             f"claims ε = {_fmt(claimed[i])} but seed {entry.seeds[i]}'s ledger gives ε = {_fmt(eps)} "
                             f"({p.accountant} accountant, δ = {p.delta:g}; tolerance {EPSILON_RTOL:g} relative + "
                             f"{EPSILON_ATOL:g})", fix_rerun))
    if recomputed and len(recomputed) == n_seeds:
        top = max(recomputed)
        if not epsilon_matches(epsilon_value(p.epsilon), top):
            out.append(error("privacy-epsilon", "privacy.epsilon",
                             f"claims ε = {_fmt(epsilon_value(p.epsilon))} but the largest ε over the seeds' ledgers "
                             f"is {_fmt(top)} (tolerance {EPSILON_RTOL:g} relative + {EPSILON_ATOL:g})", fix_rerun))
        target = epsilon_value(p.target_epsilon)
        if entry.diagnostic is not None and entry.diagnostic.kind == "noise-free":
            noised = [ev for led in p.ledgers if isinstance(led, dict) for ev in led.get("events", [])
                      if not isinstance(ev, dict) or ev.get("noise_multiplier") != 0]
            if noised or not all(math.isinf(e) for e in recomputed):
                out.append(error("privacy-budget", "privacy.ledgers",
                                 f"the entry is the noise-free diagnostic, but {len(noised)} of its ledgers' events "
                                 f"record noise (smallest ε over the seeds {_fmt(min(recomputed))}): some release was "
                                 "noised",
                                 "Re-run with `lfb eval --noise-free`, which records every release as noiseless"))
        elif math.isinf(target) and not math.isinf(top):
            out.append(error("privacy-budget", "privacy.target_epsilon",
                             f"is ∞, but the ledgers spend a finite ε = {_fmt(top)}: only the non-private reference "
                             "(a noiseless release, ε = ∞) runs without a budget",
                             "Record the finite ε the method was calibrated for (`lfb eval --epsilon`)"))
        elif over_budget(top, target):
            out.append(error("privacy-budget", "privacy.target_epsilon",
                             f"the ledgers spend ε = {_fmt(top)}, over the target ε = {_fmt(target)} "
                             f"(+{BUDGET_SLACK:.0%} calibration slack)",
                             "Fix the method's noise calibration so its releases fit the budget"))
    if p.calibrations is not None and recomputed and (entry.diagnostic is None or entry.diagnostic.kind != "noise-free"):
        out += _check_calibrations(entry)
    elif p.calibrations is None and _noised(entry) and entry.schema_version >= CALIBRATED_SINCE:
        out.append(error("privacy-calibration", "privacy.calibrations", f"a schema-version-{entry.schema_version} "
                         "entry whose ledgers record noised releases carries no noise calibrations, so its σ cannot "
                         "be checked against its own plan and target",
                         "Do not remove the calibration records: re-run `lfb eval`, which writes them"))
    elif p.calibrations is None and _noised(entry):
        out.append(note("privacy-calibration", "privacy.calibrations", "the entry records no noise calibration (made "
                        "before they were recorded): its σ is checked against its own plan only by re-running it",
                        "`lfb leaderboard reproduce` re-runs it; a new `lfb eval` records the calibrations"))
    return out


def _noised_ledger(ledger: Any) -> bool:
    events = ledger.get("events", []) if isinstance(ledger, dict) else []
    sigmas = [e.get("noise_multiplier") for e in events if isinstance(e, dict)]
    return any(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in sigmas)


def _noised(entry: Entry) -> bool:
    """Does a ledger record a release with noise (a σ to calibrate; a noiseless ε = ∞ release has none)?"""
    return any(_noised_ledger(led) for led in entry.privacy.ledgers)


def sigma_checked_only_by_rerun(entry: Entry) -> bool:
    """A valid entry whose σ the file cannot check against its plan, only a re-run can (the board marks it): one of
    a schema before the calibration records that has none, or with a seed whose method chose its σ without
    ``budget.calibrate`` (noised releases, no record)."""
    p = entry.privacy
    if p.calibrations is None:
        return _noised(entry) and entry.schema_version < CALIBRATED_SINCE
    return any(not records and _noised_ledger(ledger) for records, ledger in zip(p.calibrations, p.ledgers))


#: a calibrated σ spends its target up to the search's tolerance (opacus: 0.01 in ε; Brent: 1e-6 in σ; PLD/PRV: 0.1 %
#: of σ); a planned ε below target·(1 − CALIBRATION_RTOL) − CALIBRATION_ATOL is not a calibration for that target
CALIBRATION_RTOL = 0.02
CALIBRATION_ATOL = 0.011


def _check_calibrations(entry: Entry) -> list[Finding]:
    """Each calibration record is tight for the entry's target (its σ is what calibrating its plan for the target gives,
    up to the search's tolerance), and every σ in a seed's ledger is one that seed's calibrations planned."""
    from largefedbench.errors import LfbError
    from largefedbench.privacy.ledger import LEDGER_FORMAT

    p, out = entry.privacy, []
    target, fix = epsilon_value(p.target_epsilon), "Do not edit privacy numbers by hand: re-run `lfb eval`"
    if len(p.calibrations) != len(entry.seeds):
        return [error("privacy-calibration", "privacy.calibrations", f"{len(p.calibrations)} lists for "
                      f"{len(entry.seeds)} seeds", "An entry holds the calibrations of every seed, in seed order. " + fix)]
    for i, (records, ledger) in enumerate(zip(p.calibrations, p.ledgers)):
        planned: list[float] = []
        for j, rec in enumerate(records):
            where = f"privacy.calibrations[{i}][{j}]"
            try:
                events = rec["events"]
                planned_eps = recompute_epsilon({"format": LEDGER_FORMAT, "events": events}, p.delta, rec["accountant"])
                planned += [float(e["noise_multiplier"]) for e in events]
                stated = float(rec["target_epsilon"])
            except (LfbError, ValueError, TypeError, KeyError) as exc:
                out.append(error("privacy-calibration", where, f"is not a calibration record ({exc})", fix))
                continue
            if stated != target or float(rec.get("delta", -1)) != p.delta:
                out.append(error("privacy-calibration", where, f"was made for ε = {_fmt(stated)}, δ = {rec.get('delta')}, "
                                 f"not the entry's target ε = {_fmt(target)}, δ = {p.delta:g}", fix))
            elif planned_eps < target * (1 - CALIBRATION_RTOL) - CALIBRATION_ATOL or over_budget(planned_eps, target):
                out.append(error("privacy-calibration", where,
                                 f"σ = {rec.get('sigma')} gives its own plan ε = {_fmt(planned_eps)}, but a σ calibrated "
                                 f"for the target ε = {_fmt(target)} spends it (within {CALIBRATION_RTOL:.0%} + "
                                 f"{CALIBRATION_ATOL:g}): the σ is not the calibration of this entry's plan and target",
                                 fix))
        released = [float(e.get("noise_multiplier", 0.0)) for e in (ledger or {}).get("events", []) if isinstance(e, dict)]
        stray = [s for s in released if s > 0 and not any(math.isclose(s, q, rel_tol=1e-9) for q in planned)]
        if stray and records:
            out.append(error("privacy-calibration", f"privacy.ledgers[{i}]",
                             f"releases with σ = {stray[0]:.6g}, which no calibration of seed {entry.seeds[i]} planned",
                             "A release's σ comes from budget.calibrate for the method's whole plan. " + fix))
        elif stray:
            out.append(note("privacy-calibration", f"privacy.calibrations[{i}]", "the method chose its σ without "
                            "budget.calibrate, so it is checked against its plan only by re-running it",
                            "Calibrate with budget.calibrate(plan, n_clients=fed.n_clients), which records the plan"))
    return out


def _check_declared(entry: Entry, claimed: list[float]) -> list[Finding]:
    """A declared claim has nothing to recompute: it must say so everywhere and carry no ledger events."""
    p, out = entry.privacy, []
    fix = "Score a synthetic set with `lfb eval --synthetic FILE`, which writes the declared claim consistently"
    if entry.declared is None:
        return [error("privacy-declared", "privacy.accountant", "is 'declared' but the entry has no declared "
                      "section: only `lfb eval --synthetic` entries state their privacy instead of computing it", fix)]
    if p.accountant != "declared":
        out.append(error("privacy-declared", "privacy.accountant", f"is {p.accountant!r} on a declared entry: a "
                         "declared (ε, δ) comes from no accountant", fix))
    if any(isinstance(led, dict) and led.get("events") for led in p.ledgers):
        out.append(error("privacy-declared", "privacy.ledgers", "a declared entry records releases: the texts were "
                         "made outside the federation", fix))
    stated = epsilon_value(p.target_epsilon)
    if any(c != stated for c in claimed + [epsilon_value(p.epsilon)]):
        out.append(error("privacy-declared", "privacy.epsilon", f"differs from the declared ε = {_fmt(stated)}: a "
                         "declared entry claims the stated ε for every seed", fix))
    if entry.diagnostic is not None:
        out.append(error("privacy-declared", "diagnostic", "a declared entry cannot also be a diagnostic", fix))
    return out
