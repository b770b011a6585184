"""Monotonicity of ε: falls as σ grows, rises with steps and with the sampling rate."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from largefedbench.privacy import PoissonGaussianEvent, TreeAggregationEvent, epsilon_of

DELTA = 1e-6
fast = settings(deadline=None, max_examples=30)

sigmas = st.floats(0.4, 20.0)
rates = st.floats(1e-3, 1.0)
steps = st.integers(1, 500)


@fast
@given(sigmas, st.floats(1.05, 3.0), rates, steps)
def test_epsilon_falls_as_sigma_grows(sigma, factor, q, t):
    low = epsilon_of([PoissonGaussianEvent(sigma, q, t)], DELTA, "rdp")
    high = epsilon_of([PoissonGaussianEvent(sigma * factor, q, t)], DELTA, "rdp")
    assert high < low


@fast
@given(sigmas, rates, steps, st.integers(1, 500))
def test_epsilon_rises_with_steps(sigma, q, t, extra):
    assert epsilon_of([PoissonGaussianEvent(sigma, q, t)], DELTA, "rdp") < epsilon_of(
        [PoissonGaussianEvent(sigma, q, t + extra)], DELTA, "rdp"
    )


@fast
@given(sigmas, st.floats(1e-3, 0.9), st.floats(1.05, 10.0), steps)
def test_epsilon_rises_with_sampling_rate(sigma, q, factor, t):
    assert epsilon_of([PoissonGaussianEvent(sigma, q, t)], DELTA, "rdp") < epsilon_of(
        [PoissonGaussianEvent(sigma, min(1.0, q * factor), t)], DELTA, "rdp"
    )


@fast
@given(sigmas, st.floats(1.05, 3.0), st.integers(1, 1000), st.integers(1, 50))
def test_tree_epsilon_falls_as_sigma_grows(sigma, factor, rounds, epochs):
    low = epsilon_of([TreeAggregationEvent(sigma, rounds, epochs)], DELTA, "tree")
    high = epsilon_of([TreeAggregationEvent(sigma * factor, rounds, epochs)], DELTA, "tree")
    assert high < low


@fast
@given(sigmas, st.integers(1, 1000), st.integers(1, 50), st.integers(1, 50))
def test_tree_epsilon_rises_with_epochs(sigma, rounds, epochs, extra):
    assert epsilon_of([TreeAggregationEvent(sigma, rounds, epochs)], DELTA, "tree") < epsilon_of(
        [TreeAggregationEvent(sigma, rounds, epochs + extra)], DELTA, "tree"
    )
