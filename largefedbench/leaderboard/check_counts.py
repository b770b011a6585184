"""Counts an entry states twice must agree, so a forgery has to be consistent everywhere (and is then caught by
`lfb leaderboard reproduce`): the rounds of the config, the costs and each seed's history against the releases
each seed's ledger records; the ledger's sampling rate against the config's clients per round and the train
client count; one history per seed.

The rules hold for every method that follows the contract: each round's cohort is released through the
federation (``private_sum`` records one step per ``Gaussian`` release, one tree epoch per ``TreeAggregation`` tree of
``rounds_per_epoch`` rounds), so a seed's ledger covers at least as many rounds as the seed ran. A method
``Config`` field ``rounds`` counts federation rounds (a method may run more, e.g. extra histogram rounds);
``clients_per_round`` (expected cohort size) or ``sample_rate`` set the Poisson rate of those rounds.
"""

from __future__ import annotations

from typing import Any

from largefedbench.leaderboard.findings import Finding, error
from largefedbench.leaderboard.schema import Entry

#: a ledger's sampling rate equals the config's (the same float division) up to this relative difference
RATE_RTOL = 1e-9
_FIX = "Entries are written by `lfb eval`; do not edit counts or ledgers by hand, re-run the evaluation"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ledger_releases(ledger: dict[str, Any]) -> tuple[int, list[float]] | None:
    """(rounds the ledger's releases can cover, Poisson sampling rates below 1), or None if it is unreadable
    (check_privacy reports that)."""
    from largefedbench.errors import LfbError
    from largefedbench.privacy import PoissonGaussianEvent, PrivacyLedger, TreeAggregationEvent

    try:
        events = PrivacyLedger.from_dict(ledger).events
    except (LfbError, TypeError, ValueError, AttributeError):
        return None
    covered, rates = 0, []
    for event in events:
        if isinstance(event, PoissonGaussianEvent):
            covered += event.steps
            if event.sample_rate < 1:
                rates.append(event.sample_rate)
        elif isinstance(event, TreeAggregationEvent):
            covered += event.epochs * event.rounds_per_epoch
        else:
            covered += event.count
    return covered, rates


def _last_round(history: list[dict[str, Any]]) -> int | None:
    rounds = [_count(row.get("round")) for row in history if isinstance(row, dict)]
    rounds = [r for r in rounds if r is not None]
    return max(rounds) if rounds else None


def _expected_rate(entry: Entry) -> tuple[float, str] | None:
    cfg, n = entry.config.method, entry.privacy.n_train_clients
    rate = cfg.get("sample_rate")
    if isinstance(rate, float) and 0 < rate < 1:
        return rate, f"config.method.sample_rate = {rate:g}"
    per_round = _count(cfg.get("clients_per_round"))
    if entry.audit is not None:  # an audit's federation also holds its inserted canaries (checked in check_audit)
        canaries = entry.audit.per_seed[0].inserted  # and the leak canaries searched for in its outputs
        leak = entry.audit.leak_canaries
        if per_round is not None and 0 < per_round < n + canaries + leak:
            return per_round / (n + canaries + leak), (
                f"config.method.clients_per_round / (privacy.n_train_clients + inserted canaries + leak canaries) = "
                f"{per_round}/({n} + {canaries} + {leak})")
        return None
    if per_round is not None and 0 < per_round < n:
        return per_round / n, f"config.method.clients_per_round / privacy.n_train_clients = {per_round}/{n}"
    return None


def check_counts(entry: Entry) -> list[Finding]:
    """Rounds (config, costs, history) ≤ what each seed's ledger covers; sampling rate; one history per seed."""
    out: list[Finding] = []
    n = len(entry.seeds)
    if entry.history and len(entry.history) != n:
        out.append(error("counts", "history", f"{len(entry.history)} per-seed histories for {n} seeds", _FIX))
    rounds = entry.costs.rounds
    configured = _count(entry.config.method.get("rounds"))
    if configured is not None and configured > rounds:
        out.append(error("counts", "costs.rounds", f"is {rounds}, but config.method.rounds = {configured}: the "
                         "federation cannot have run fewer rounds than configured", _FIX))
    histories = entry.history if len(entry.history) == n else [[] for _ in range(n)]
    expected_rate = _expected_rate(entry)
    covered_max = None
    for i, (seed, ledger, history) in enumerate(zip(entry.seeds, entry.privacy.ledgers, histories)):
        last = _last_round(history)
        if last is not None and last > rounds:
            out.append(error("counts", f"history[{i}]", f"seed {seed}'s history reaches round {last}, but costs.rounds "
                             f"= {rounds}", _FIX))
        parsed = ledger_releases(ledger)
        if parsed is None:
            continue
        covered, rates = parsed
        covered_max = covered if covered_max is None else max(covered_max, covered)
        need = max(configured or 0, last or 0)
        if covered < need:
            why = " and ".join(s for s in (f"config.method.rounds = {configured}" if configured else "",
                                          f"its history reaches round {last}" if last else "") if s)
            out.append(error("counts", f"privacy.ledgers[{i}]", f"covers {covered} round(s) of releases, but seed "
                             f"{seed} ran at least {need} ({why}): every round's cohort is released through the "
                             "federation, which records each release in the ledger", _FIX))
        if expected_rate is not None and rates:
            want, source = expected_rate
            if not any(abs(q - want) <= RATE_RTOL * want for q in rates):
                out.append(error("counts", f"privacy.ledgers[{i}]", f"samples clients at rate(s) "
                                 f"{', '.join(f'{q:.6g}' for q in sorted(set(rates)))}, but {source} gives "
                                 f"{want:.6g}", _FIX))
    if covered_max is not None and covered_max < rounds:
        out.append(error("counts", "privacy.ledgers", f"the ledgers cover at most {covered_max} round(s) of releases, "
                         f"but costs.rounds = {rounds}: every round's cohort is released through the federation, "
                         "which records each release in the ledger", _FIX))
    return out
