"""Round bookkeeping: σ for the planned rounds, refusal of the reference budgets, the best-FID checkpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest

from largefedbench.errors import InputError, MethodError
from largefedbench.evaluation.fid import fid_to
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, epsilon_of
from largefedbench.synthetic.noise import noise_for_rounds


class _Fed:
    n_clients = 1000


def test_sigma_spends_the_budget_over_the_planned_rounds():
    budget = PrivacyBudget(1.0, 1e-5)
    sigma, rate = noise_for_rounds(budget, _Fed(), rounds=5, clients_per_round=None)
    assert rate == 1.0
    eps = epsilon_of([PoissonGaussianEvent(sigma, 1.0, 5)], 1e-5)
    assert 0.98 <= eps <= 1.0
    assert epsilon_of([PoissonGaussianEvent(sigma, 1.0, 6)], 1e-5) > 1.0  # one round more would overspend


@pytest.mark.parametrize("epsilon", [0.0, math.inf])
def test_the_reference_budgets_are_refused(epsilon):
    with pytest.raises(MethodError, match="0 < ε < ∞"):
        noise_for_rounds(PrivacyBudget(epsilon, 0.0 if epsilon == 0 else 1e-5), _Fed(), rounds=3, clients_per_round=None)


def test_bad_round_plans_are_refused():
    with pytest.raises(InputError):
        noise_for_rounds(PrivacyBudget(1.0, 1e-5), _Fed(), rounds=0, clients_per_round=None)
    with pytest.raises(InputError, match="clients_per_round"):
        noise_for_rounds(PrivacyBudget(1.0, 1e-5), _Fed(), rounds=3, clients_per_round=5000)


def test_fid_needs_two_samples_per_set():
    rng = np.random.default_rng(0)
    assert math.isnan(fid_to(rng.standard_normal((1, 4)), rng.standard_normal((5, 4))))
    assert fid_to(rng.standard_normal((50, 4)), rng.standard_normal((50, 4))) >= 0
