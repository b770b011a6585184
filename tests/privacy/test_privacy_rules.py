"""The privacy rules (largefedbench.privacy.rules) and that the harness, calibration and board share them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy import PrivacyBudget
from largefedbench.privacy.rules import (
    BUDGET_ATOL,
    BUDGET_SLACK,
    check_delta,
    check_delta_for_clients,
    delta_for_clients_problem,
    over_budget,
    positive_int,
)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-9, math.nan, math.inf])
def test_delta_outside_open_unit_interval_is_refused_with_an_example(delta):
    with pytest.raises(PrivacyError, match=r"--delta must be in \(0, 1\).*e\.g\. 3e-06"):
        check_delta(delta, name="--delta", example=3e-6)


def test_delta_zero_is_allowed_only_when_asked_and_non_numbers_are_refused():
    assert check_delta(0.0, allow_zero=True) == 0.0
    assert check_delta("1e-6") == 1e-6
    with pytest.raises(PrivacyError, match=r"delta must be a number in \[0, 1\), got 'x'"):
        check_delta("x", allow_zero=True)


def test_delta_must_be_below_one_over_the_client_count():
    assert delta_for_clients_problem(1e-4, 9999) is None
    what, fix = delta_for_clients_problem(1e-4, 10000, "n_train_clients")
    assert "delta=0.0001 must be below 1/n_train_clients = 1/10000 = 0.0001" in what
    assert "in the clear" in what  # says why
    assert fix == "use δ ≪ 1/n, e.g. 1e-05"  # says what to do
    with pytest.raises(PrivacyError, match=r"1/n_clients = 1/10 = 0\.1.*Use δ ≪ 1/n, e\.g\. 0\.01\."):
        check_delta_for_clients(0.1, 10)
    with pytest.raises(PrivacyError, match="n_clients must be an integer ≥ 1, got 0"):
        check_delta_for_clients(1e-6, 0)


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "3", None])
def test_counts_must_be_integers_of_at_least_one(value):
    with pytest.raises(PrivacyError, match="rounds must be an integer ≥ 1"):
        positive_int("rounds", value)
    with pytest.raises(InputError, match="rounds must be an integer ≥ 1"):
        positive_int("rounds", value, InputError)


def test_counts_accept_integer_types():
    assert positive_int("steps", 3) == 3
    assert positive_int("steps", np.int64(3)) == 3 and type(positive_int("steps", np.int64(3))) is int


def test_over_budget_allows_the_calibration_slack_only():
    assert BUDGET_SLACK == 0.01
    assert not over_budget(1.0, 1.0)
    assert not over_budget(1.0 + BUDGET_SLACK, 1.0)
    assert over_budget(1.0 + BUDGET_SLACK + 2 * BUDGET_ATOL, 1.0)
    assert not over_budget(0.0, 0.0) and over_budget(1e-3, 0.0)  # the public reference spends nothing
    assert not over_budget(math.inf, math.inf)  # the non-private reference
    assert over_budget(math.inf, 8.0)


def test_calibration_uses_the_rules():
    with pytest.raises(PrivacyError, match=r"delta must be in \[0, 1\)"):
        PrivacyBudget(1.0, 1.0)
    with pytest.raises(PrivacyError, match="must be below 1/n_clients"):
        PrivacyBudget(1.0, 0.1).check_clients(10)
    with pytest.raises(InputError, match="n_clients must be an integer ≥ 1"):
        PrivacyBudget(1.0, 1e-6).check_clients(0)


def test_harness_and_board_share_the_slack():
    from largefedbench.leaderboard import check_privacy
    from largefedbench.run.eval import _budget_for

    assert check_privacy.BUDGET_SLACK is BUDGET_SLACK

    class Private:
        name = "m"
        fixed_epsilon = None

    with pytest.raises(PrivacyError, match=r"--delta must be in \(0, 1\), got 1\.5.*e\.g\. 3e-06"):
        _budget_for(Private, 1.0, 1.5)
    assert _budget_for(Private, 1.0, None).delta == 3e-6
