"""Checks of an entry's ``audit`` section (``lfb audit``): the bounds are recomputed from the guess counts, the
inserted counts from the seeded coin flips; an audited lower bound above the claimed ε is flagged."""

from __future__ import annotations

from largefedbench.leaderboard.findings import Finding, error, note
from largefedbench.leaderboard.schema import Entry, epsilon_value

#: a stored bound matches the recomputed one within this absolute tolerance (the root search's xtol is 1e-6)
BOUND_ATOL = 1e-4
_FIX = "Re-run `lfb audit`, which writes a consistent audit section"


def audit_exceeds_claim(entry: Entry) -> bool:
    """True when the audit's ε lower bound is above the entry's claimed ε: the claim is falsified."""
    return entry.audit is not None and entry.audit.epsilon_lower_bound > epsilon_value(entry.privacy.epsilon)


def check_audit(entry: Entry) -> list[Finding]:
    audit = entry.audit
    if audit is None:
        return []
    from largefedbench.audit.canaries import CanaryPlan
    from largefedbench.audit.estimators import one_run_epsilon

    out: list[Finding] = []
    if [s.seed for s in audit.per_seed] != list(entry.seeds):
        out.append(error("audit", "audit.per_seed", f"audit seeds {[s.seed for s in audit.per_seed]} are not the "
                         f"entry's seeds {list(entry.seeds)}", _FIX))
        return out
    if audit.delta != entry.privacy.delta:
        out.append(error("audit", "audit.delta", f"the audit used δ = {audit.delta:g}, the entry claims δ = "
                         f"{entry.privacy.delta:g}", _FIX))
    inserted = int(CanaryPlan(audit.canaries, audit.inclusion_seed, audit.kind).included.sum())
    significance = (1 - audit.confidence) / len(audit.per_seed)
    for i, s in enumerate(audit.per_seed):
        where = f"audit.per_seed[{i}]"
        if s.inserted != inserted or s.scores_in.n != inserted or s.scores_out.n != audit.canaries - inserted:
            out.append(error("audit", f"{where}.inserted", f"the coin flips of inclusion seed {audit.inclusion_seed} "
                             f"insert {inserted} of {audit.canaries} canaries, the section says {s.inserted} "
                             f"({s.scores_in.n} in, {s.scores_out.n} out)", _FIX))
            continue
        if not 0 <= s.correct <= s.guesses <= audit.canaries or s.correct > inserted or s.thresholds > audit.canaries:
            out.append(error("audit", where, f"{s.correct} correct of {s.guesses} guesses is impossible with "
                             f"{inserted} of {audit.canaries} canaries inserted", _FIX))
            continue
        want = one_run_epsilon(audit.canaries, s.guesses, s.correct, significance=significance / s.thresholds,
                               delta=audit.delta)
        if abs(s.epsilon_lower_bound - want) > BOUND_ATOL:
            out.append(error("audit", f"{where}.epsilon_lower_bound", f"{s.epsilon_lower_bound:.6g} is not "
                             f"{want:.6g}, the one-run bound of {s.correct} correct of {s.guesses} guesses at "
                             f"confidence {audit.confidence:g}", _FIX))
    top = max(s.epsilon_lower_bound for s in audit.per_seed)
    if abs(audit.epsilon_lower_bound - top) > BOUND_ATOL:
        out.append(error("audit", "audit.epsilon_lower_bound", f"{audit.epsilon_lower_bound:.6g} is not the largest "
                         f"per-seed bound ({top:.6g})", _FIX))
    if not out and audit_exceeds_claim(entry):
        out.append(note("audit", "audit.epsilon_lower_bound", f"the audited lower bound ε ≥ "
                        f"{audit.epsilon_lower_bound:.3g} exceeds the claimed ε = "
                        f"{epsilon_value(entry.privacy.epsilon):.3g}: the implementation leaks more than it claims",
                        "Find the bug (clipping, noise scale, a release outside the federation) before trusting ε"))
    return out
