"""Bad input raises PrivacyError / InputError with a message that says what to do."""

from __future__ import annotations

import math

import pytest

from largefedbench.errors import InputError, LfbError, PrivacyError
from largefedbench.privacy import (
    GaussianEvent,
    PoissonGaussianEvent,
    PrivacyBudget,
    TreeAggregationEvent,
    calibrate_noise_multiplier,
    epsilon_of,
    noise_report,
)

PLAN = PoissonGaussianEvent(1.0, 0.1, 20)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan])
def test_calibration_rejects_epsilon_not_positive_finite(epsilon):
    with pytest.raises(PrivacyError, match=r"epsilon must be > 0 and finite"):
        calibrate_noise_multiplier(PLAN, epsilon, 1e-6)


@pytest.mark.parametrize("delta", [1.0, 1.5, 0.0, -1e-6])
def test_rejects_delta_outside_open_unit_interval(delta):
    with pytest.raises(PrivacyError, match=r"delta must be in \(0, 1\)"):
        calibrate_noise_multiplier(PLAN, 1.0, delta)
    with pytest.raises(PrivacyError, match=r"delta must be in \(0, 1\)"):
        epsilon_of([PLAN], delta)


def test_budget_rejects_delta_at_least_one_over_n():
    budget = PrivacyBudget(1.0, 1e-4)
    with pytest.raises(PrivacyError) as info:
        budget.calibrate(PLAN, n_clients=10000)
    message = str(info.value)
    assert "delta=0.0001 must be below 1/n_clients = 1/10000 = 0.0001" in message
    assert "in the clear" in message  # says why
    budget.check_clients(9999 // 2)  # δ = 1e-4 < 1/4999 is accepted


def test_budget_rejects_negative_epsilon_and_delta_at_least_one():
    with pytest.raises(PrivacyError, match="epsilon must be ≥ 0"):
        PrivacyBudget(-1.0, 1e-6)
    with pytest.raises(PrivacyError, match=r"delta must be in \[0, 1\)"):
        PrivacyBudget(1.0, 1.0)
    with pytest.raises(PrivacyError, match="pure DP"):
        PrivacyBudget(1.0, 0.0)


def test_reference_budgets():
    assert PrivacyBudget(math.inf, 0.0).calibrate(PLAN, n_clients=10) == 0.0  # non-private: no noise
    with pytest.raises(PrivacyError, match="public reference"):
        PrivacyBudget(0.0, 0.0).calibrate(PLAN)


@pytest.mark.parametrize("q", [1.5, 0.0, -0.1, math.nan])
def test_rejects_sample_rate_outside_unit_interval(q):
    with pytest.raises(PrivacyError, match=r"sample_rate must be in \(0, 1\]"):
        PoissonGaussianEvent(1.0, q, 20)


def test_rejects_sample_rate_above_one_in_reports():
    with pytest.raises(PrivacyError, match=r"sample_rate must be in \(0, 1\]"):
        noise_report(1.0, 1e-6, 1.2, 20)
    with pytest.raises(InputError, match="per_round=20 cannot exceed clients=10"):
        noise_report(1.0, 1e-6, None, 20, clients=10, per_round=20)


@pytest.mark.parametrize("steps", [0, -3, 2.5, True])
def test_rejects_steps_below_one(steps):
    with pytest.raises(PrivacyError, match="steps must be an integer ≥ 1"):
        PoissonGaussianEvent(1.0, 0.1, steps)


def test_rejects_negative_noise_multiplier():
    with pytest.raises(PrivacyError, match="noise_multiplier must be finite and ≥ 0"):
        GaussianEvent(-1.0)


def test_unknown_accountant_lists_the_known_ones():
    with pytest.raises(InputError) as info:
        epsilon_of([PLAN], 1e-6, accountant="moments")
    message = str(info.value)
    assert "unknown accountant 'moments'" in message
    for name in ("auto", "rdp", "tree", "pld", "prv"):
        assert repr(name) in message
    with pytest.raises(InputError, match="known accountants"):
        calibrate_noise_multiplier(PLAN, 1.0, 1e-6, accountant="gdp")


def test_tree_events_need_an_rdp_accountant():
    with pytest.raises(PrivacyError, match="use accountant='tree'"):
        epsilon_of([TreeAggregationEvent(5.0, 10, 2)], 1e-6, accountant="pld")


def test_unreachable_budget_is_explained():
    # A fixed histogram with σ = 0.5 alone spends far more than ε = 1.
    plan = lambda sigma: [PoissonGaussianEvent(sigma, 0.1, 20), GaussianEvent(0.5)]  # noqa: E731
    with pytest.raises(PrivacyError, match=r"cannot be met even with σ = 1e\+06: the fixed-σ events of the plan alone"):
        calibrate_noise_multiplier(plan, 1.0, 1e-6, accountant="rdp")


def test_errors_are_lfb_errors_and_value_errors():
    with pytest.raises(LfbError):
        PoissonGaussianEvent(1.0, 2.0)
    with pytest.raises(ValueError):
        epsilon_of([PLAN], 1e-6, accountant="nope")


def test_effectively_non_private_budget_is_explained():
    with pytest.raises(PrivacyError, match="use ε = inf"):
        calibrate_noise_multiplier(GaussianEvent(1.0), 1e9, 1e-6)
