"""The audit's estimators: the one-run bound (Steinke, Nasr & Jagielski 2023) on hand-made guess counts, the bound
from scores, the Gaussian ε and the one-shot estimate (Andrew et al. 2024), and jax_privacy when it is installed."""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

from largefedbench.audit.estimators import (
    gaussian_epsilon,
    one_run_epsilon,
    one_run_lower_bound,
    one_run_p_value,
    one_shot_estimate,
)
from largefedbench.errors import InputError


def logit(q: float) -> float:
    return math.log(q / (1 - q))


def test_all_correct_guesses_give_the_closed_form_bound():
    # δ = 0 and v = r: P[Bin(r, q) ≥ r] = q^r ≤ α  <=>  q ≤ α^(1/r), so ε = logit(α^(1/r))
    for r, alpha in [(20, 0.05), (50, 0.01), (7, 0.1)]:
        assert one_run_epsilon(1000, r, r, significance=alpha) == pytest.approx(logit(alpha ** (1 / r)), abs=1e-5)


def test_p_value_with_delta_is_the_papers_formula_by_hand():
    # r = 2 guesses, v = 2 right, m = 10 canaries at ε = 1: β = q², α = max(2q(1-q) / 1, (1 - q²) / 2)
    q, m, delta = 1 / (1 + math.exp(-1.0)), 10, 1e-3
    beta = q * q
    alpha = max(1 - (1 - q) ** 2 - beta, (1 - beta) / 2)
    assert one_run_p_value(m, 2, 2, 1.0, delta) == pytest.approx(beta + 2 * m * delta * alpha, rel=1e-12)
    assert one_run_p_value(m, 2, 2, 1.0, 0.0) == pytest.approx(beta, rel=1e-12)


def test_some_wrong_guesses_match_the_binomial_tail():
    from scipy.stats import binom

    eps = one_run_epsilon(200, 60, 50, significance=0.05)
    assert binom.sf(49, 60, 1 / (1 + math.exp(-eps))) == pytest.approx(0.05, rel=1e-4)
    assert one_run_epsilon(200, 60, 30, significance=0.05) == 0.0  # chance-level guessing proves nothing


def test_delta_makes_the_bound_smaller():
    assert one_run_epsilon(100, 40, 40, significance=0.05, delta=1e-4) < one_run_epsilon(100, 40, 40, significance=0.05)


def test_bound_from_perfectly_separated_scores_uses_every_threshold():
    scores_in, scores_out = np.arange(50) + 100.0, np.arange(50, dtype=float)
    b = one_run_lower_bound(scores_in, scores_out, confidence=0.95)
    assert (b.guesses, b.correct, b.thresholds_tried) == (50, 50, 100)
    assert b.epsilon == pytest.approx(one_run_epsilon(100, 50, 50, significance=0.05 / 100), abs=1e-6)
    assert 1.5 < b.epsilon < 2.0
    # no separation: nothing is rejected
    rng = np.random.default_rng(0)
    assert one_run_lower_bound(rng.normal(size=50), rng.normal(size=50)).epsilon == 0.0


def test_bad_input_is_a_clear_error():
    with pytest.raises(InputError, match="confidence"):
        one_run_lower_bound([1.0], [0.0], confidence=1.5)
    with pytest.raises(InputError, match="finite"):
        one_run_lower_bound([math.nan], [0.0])
    with pytest.raises(InputError, match="correct"):
        one_run_p_value(10, 3, 4, 1.0)


def test_gaussian_epsilon_matches_dp_accountings_pld():
    from largefedbench.privacy import GaussianEvent, epsilon_of

    for z, delta in [(1.0, 1e-5), (5.0, 3e-6), (0.5, 1e-6)]:
        assert gaussian_epsilon(z, delta) == pytest.approx(epsilon_of([GaussianEvent(z)], delta, "pld"), rel=1e-3)
    assert gaussian_epsilon(0.0, 1e-5) == math.inf


def test_one_shot_estimate_recovers_the_noise_multiplier():
    rng = np.random.default_rng(1)
    cos_in, cos_out = rng.normal(0.01, 0.005, 5000), rng.normal(0.0, 0.005, 5000)
    est = one_shot_estimate(cos_in, cos_out, 1e-5)
    assert est["noise_multiplier"] == pytest.approx(0.5, rel=0.05)
    assert est["epsilon"] == pytest.approx(gaussian_epsilon(0.5, 1e-5), rel=0.1)
    assert one_shot_estimate(-cos_in, cos_out, 1e-5)["epsilon"] == 0.0


def _jax_privacy_auditing():
    """jax_privacy's auditing module, loaded from its file (the package's __init__ imports jax), or None."""
    spec = importlib.util.find_spec("jax_privacy")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = f"{list(spec.submodule_search_locations)[0]}/auditing.py"
    mod_spec = importlib.util.spec_from_file_location("_jax_privacy_auditing", path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules["_jax_privacy_auditing"] = module
    mod_spec.loader.exec_module(module)
    return module


def test_same_bound_as_jax_privacy_at_the_same_threshold():
    aud = _jax_privacy_auditing()
    if aud is None:
        pytest.skip("jax-privacy is not installed (it pulls in jax; see docs/audit.md)")
    rng = np.random.default_rng(3)
    for shift, n, delta in [(2.0, 500, 1e-7), (3.0, 50, 1e-6), (1.0, 100, 1e-5)]:
        s_in, s_out = rng.normal(shift, 1, n), rng.normal(0, 1, n)
        ours = one_run_lower_bound(s_in, s_out, confidence=0.95, delta=delta)
        if ours.threshold is None:
            continue
        # the same guess set (our best threshold) at the same significance gives the same ε
        sig = 0.05 / ours.thresholds_tried
        theirs = aud.CanaryScoreAuditor(s_in, s_out).epsilon_one_run(
            sig, delta, threshold_strategy=aud.Explicit(ours.threshold))
        assert ours.epsilon == pytest.approx(float(theirs), abs=1e-4)
