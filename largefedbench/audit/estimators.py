"""Empirical privacy estimators: the one-run ε lower bound and the one-shot Gaussian estimate.

**One-run lower bound** (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023).
``m`` canaries are each included with probability ½; the auditor guesses "included" for the ``r`` canaries it is
most confident about and ``v`` of the guesses are right. Under (ε, δ)-DP (their Theorem 5.2 with Proposition 5.7
and the δ-term of their Algorithm 2),

    P[V ≥ v] ≤ β + 2·m·δ·α,   β = P[Binomial(r, q) ≥ v],   α = max_{1≤i≤v} (P[Binomial(r, q) ≥ v − i] − β) / i,

with ``q = e^ε / (1 + e^ε)``. The ε lower bound at confidence ``c`` is the largest ε whose p-value is still
≤ 1 − c: every smaller ε is rejected. Guesses are one-sided (the top-``r`` scores guessed "in", as
``jax_privacy.auditing.CanaryScoreAuditor.epsilon_one_run``), and every threshold is tried with a Bonferroni
correction (significance ÷ number of thresholds), so picking the best threshold after the fact stays valid.

**One-shot estimate** (Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar, "One-shot Empirical Privacy Estimation
for Federated Learning", ICLR 2024). The cosines between the released model delta and random canary directions
that were *not* inserted are ≈ N(0, 1/d); the inserted canaries' cosines are fitted with N(μ, σ²), and the
estimate is the ε, at the run's δ, of the Gaussian mechanism telling N(0, σ²) from N(μ, σ²): noise multiplier
σ/μ, one release. It is an estimate, not a bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from largefedbench.errors import InputError

__all__ = [
    "OneRunBound",
    "gaussian_epsilon",
    "one_run_epsilon",
    "one_run_lower_bound",
    "one_run_p_value",
    "one_shot_estimate",
]

_EPS_MAX = 100.0  # search ceiling; a bound this large means "the claim is falsified at any reasonable ε"


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """The largest probability, under (ε, δ)-DP, of ``v`` or more correct among ``r`` guesses on ``m`` canaries."""
    from scipy.stats import binom

    if not 0 <= v <= r <= m:
        raise InputError(f"need 0 <= correct ({v}) <= guesses ({r}) <= canaries ({m})")
    q = _logistic(epsilon)
    beta = float(binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return beta
    i = np.arange(1, v + 1)
    alpha = float(np.max((binom.sf(v - i - 1, r, q) - beta) / i, initial=0.0))
    return min(beta + 2 * m * delta * alpha, 1.0)


def one_run_epsilon(m: int, r: int, v: int, *, significance: float, delta: float = 0.0) -> float:
    """The largest ε rejected at ``significance`` by ``v`` correct of ``r`` guesses (0 if none is rejected)."""
    from scipy.optimize import brentq

    if not 0 < significance < 1:
        raise InputError(f"significance {significance} must be in (0, 1); it is 1 - confidence")
    if r == 0 or one_run_p_value(m, r, v, 0.0, delta) > significance:
        return 0.0
    if one_run_p_value(m, r, v, _EPS_MAX, delta) <= significance:
        return _EPS_MAX
    return float(brentq(lambda e: significance - one_run_p_value(m, r, v, e, delta), 0.0, _EPS_MAX, xtol=1e-6))


@dataclass(frozen=True)
class OneRunBound:
    """The best one-sided guess set: ``guesses`` top-scored canaries guessed "in", ``correct`` of them right."""

    epsilon: float
    canaries: int
    guesses: int
    correct: int
    threshold: float | None
    confidence: float
    delta: float
    thresholds_tried: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_run_lower_bound(scores_in: Any, scores_out: Any, *, confidence: float = 0.95,
                        delta: float = 0.0) -> OneRunBound:
    """Steinke et al.'s ε lower bound from the scores of inserted (``scores_in``) and held-out canaries.

    Each distinct score is a threshold ("in" iff score ≥ threshold); the significance 1 − ``confidence`` is split
    over all thresholds (Bonferroni) and the largest ε any of them rejects is returned."""
    s_in, s_out = np.asarray(scores_in, dtype=float).ravel(), np.asarray(scores_out, dtype=float).ravel()
    if not (np.all(np.isfinite(s_in)) and np.all(np.isfinite(s_out))):
        raise InputError("canary scores must be finite numbers")
    if not 0 < confidence < 1:
        raise InputError(f"--confidence {confidence} must be in (0, 1), e.g. 0.95")
    m = len(s_in) + len(s_out)
    if m == 0:
        raise InputError("no canaries to audit: give at least one canary")
    labels = np.concatenate([np.ones(len(s_in), bool), np.zeros(len(s_out), bool)])
    scores = np.concatenate([s_in, s_out])
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    # guess sets: every prefix ending at a change of score (ties are guessed together)
    ends = np.flatnonzero(np.append(scores[1:] != scores[:-1], True)) + 1
    significance = (1 - confidence) / len(ends)
    correct = np.cumsum(labels)
    best = OneRunBound(0.0, m, 0, 0, None, confidence, delta, len(ends))
    for r in ends:
        v = int(correct[r - 1])
        if v / r <= _logistic(best.epsilon):  # precision too low to beat the best so far
            continue
        eps = one_run_epsilon(m, int(r), v, significance=significance, delta=delta)
        if eps > best.epsilon:
            best = OneRunBound(eps, m, int(r), v, float(scores[r - 1]), confidence, delta, len(ends))
    return best


def gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """ε at ``delta`` of one Gaussian release with sensitivity 1 and noise std ``noise_multiplier`` (exact: Balle
    & Wang 2018, Thm 8: δ(ε) = Φ(1/2z − εz) − e^ε Φ(−1/2z − εz))."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    if not 0 < delta < 1:
        raise InputError(f"delta {delta} must be in (0, 1)")
    if noise_multiplier <= 0:
        return math.inf
    z = noise_multiplier

    def log_delta(eps: float) -> float:
        a, b = norm.logcdf(0.5 / z - eps * z), eps + norm.logcdf(-0.5 / z - eps * z)
        return a + math.log1p(-math.exp(b - a)) if b < a else -math.inf

    if log_delta(0.0) <= math.log(delta):
        return 0.0
    hi = 1.0
    while log_delta(hi) > math.log(delta):
        hi *= 2
        if hi > 1e6:
            return math.inf
    return float(brentq(lambda e: log_delta(e) - math.log(delta), 0.0, hi, xtol=1e-9))


def one_shot_estimate(cos_in: Any, cos_out: Any, delta: float) -> dict[str, float]:
    """Andrew et al.'s ε estimate: inserted cosines fitted with N(μ, σ²); ε of noise multiplier σ/μ at ``delta``
    (0 when μ ≤ 0: the inserted canaries are not above the null). Also reports the held-out cosines' mean and std
    (≈ 0 and 1/√d when the null holds)."""
    c_in, c_out = np.asarray(cos_in, dtype=float), np.asarray(cos_out, dtype=float)
    if len(c_in) < 2:
        raise InputError("the one-shot estimate needs at least 2 inserted canaries; raise --canaries")
    mu, sd = float(c_in.mean()), float(c_in.std(ddof=1))
    eps = 0.0 if mu <= 0 else gaussian_epsilon(sd / mu, delta) if sd > 0 else math.inf
    return {"epsilon": eps, "mu": mu, "sigma": sd, "noise_multiplier": sd / mu if mu > 0 else math.inf,
            "null_mean": float(c_out.mean()) if len(c_out) else 0.0,
            "null_std": float(c_out.std(ddof=1)) if len(c_out) > 1 else 0.0}
