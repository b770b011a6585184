"""Analytic Gaussian σ (Balle & Wang 2018) and the Gaussian noise helper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy import add_gaussian_noise, analytic_gaussian_sigma, classical_gaussian_sigma

# (ε, δ, σ for Δ = 1) from dp-accounting.md §3
ANALYTIC = [(1.0, 1e-5, 3.730632), (2.0, 1e-5, 1.993812), (6.0, 1e-6, 0.835908)]


def exact_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8), an independent check."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b)


@pytest.mark.parametrize("epsilon, delta, expected", ANALYTIC)
def test_analytic_sigma_matches_dp_accounting_and_reference(epsilon, delta, expected):
    import dp_accounting

    sigma = analytic_gaussian_sigma(epsilon, delta)
    assert sigma == pytest.approx(dp_accounting.get_sigma_gaussian(epsilon, delta), abs=1e-9)
    assert sigma == pytest.approx(expected, abs=1e-6)
    assert exact_delta(sigma, epsilon, 1.0) == pytest.approx(delta, rel=1e-6)
    assert sigma < classical_gaussian_sigma(epsilon, delta)


@pytest.mark.parametrize("epsilon, delta, expected", ANALYTIC)
def test_analytic_sigma_scales_with_sensitivity(epsilon, delta, expected):
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity=2.5)
    assert sigma == pytest.approx(2.5 * expected, abs=1e-5)
    assert exact_delta(sigma, epsilon, 2.5) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=math.inf), dict(delta=1.0),
                                 dict(delta=0.0), dict(sensitivity=0.0)])
def test_analytic_sigma_rejects_bad_input(bad):
    args = dict(epsilon=1.0, delta=1e-5, sensitivity=1.0) | bad
    with pytest.raises(PrivacyError, match=next(iter(bad))):
        analytic_gaussian_sigma(**args)


N_SAMPLES = 40_000


@settings(deadline=None, max_examples=25)
@given(
    sigma=st.floats(0.05, 20.0),
    clip=st.floats(0.01, 10.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_numpy_noise_std_is_sigma_times_clip(sigma, clip, seed):
    values = np.linspace(-1.0, 1.0, N_SAMPLES)
    noisy = add_gaussian_noise(values, noise_multiplier=sigma, clip=clip, generator=np.random.default_rng(seed))
    noise = noisy - values
    std = sigma * clip
    # The sample std has relative standard error 1/sqrt(2n) ≈ 0.35%: a 5% bound is ~14 SE wide,
    # yet fails for noise scaled by σ alone, by clip alone, or by a √2 factor.
    assert noise.std() / std == pytest.approx(1.0, abs=0.05)
    assert abs(noise.mean()) < 6 * std / math.sqrt(N_SAMPLES)
    assert noisy.shape == values.shape and noisy.dtype == values.dtype


@settings(deadline=None, max_examples=10)
@given(sigma=st.floats(0.05, 20.0), clip=st.floats(0.01, 10.0), seed=st.integers(0, 2**62))
def test_torch_noise_std_is_sigma_times_clip(sigma, clip, seed):
    torch = pytest.importorskip("torch")
    values = torch.ones(N_SAMPLES, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    noise = add_gaussian_noise(values, noise_multiplier=sigma, clip=clip, generator=generator) - values
    std = sigma * clip
    assert float(noise.std()) / std == pytest.approx(1.0, abs=0.05)
    assert abs(float(noise.mean())) < 6 * std / math.sqrt(N_SAMPLES)


def test_noise_is_reproducible_from_the_generator():
    a = add_gaussian_noise(np.zeros(5), noise_multiplier=1.0, clip=1.0, generator=np.random.default_rng(7))
    b = add_gaussian_noise(np.zeros(5), noise_multiplier=1.0, clip=1.0, generator=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert np.all(a != 0)


def test_noise_rejects_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(PrivacyError, match="clip"):
        add_gaussian_noise(np.zeros(3), noise_multiplier=1.0, clip=0.0, generator=rng)
    with pytest.raises(PrivacyError, match="noise_multiplier"):
        add_gaussian_noise(np.zeros(3), noise_multiplier=-1.0, clip=1.0, generator=rng)
    with pytest.raises(InputError, match="numpy.random.Generator"):
        add_gaussian_noise(np.zeros(3), noise_multiplier=1.0, clip=1.0, generator=np.random.RandomState(0))
