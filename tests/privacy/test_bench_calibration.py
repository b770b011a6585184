"""Benchmark: the library σ search (dp_accounting.calibrate_dp_mechanism, Brent's method) against a
naive reference, a plain bisection calling the same accountant, both to the same σ tolerance.

Run with ``--benchmark-enable`` for pytest-benchmark statistics; either way the measured ratio
(naive time / library time, and the accountant calls each made) is printed and stored in
``benchmark.extra_info``. There is no timing assertion.
"""

from __future__ import annotations

import time

import pytest

from largefedbench.privacy import PoissonGaussianEvent, accountants, calibrate_noise_multiplier, calibration, epsilon_of

EPSILON, DELTA, TOL = 1.0, 3e-6, 1e-6
ROUNDS = 3


def plan(sigma: float):
    # Table 3, 10000 clients / 500 per round. A callable plan takes the generic Brent path
    # (the single-event template would take opacus' own ε-tolerance search).
    return [PoissonGaussianEvent(sigma, 500 / 10000, 20)]


def naive_bisection(calls: list[int]) -> float:
    def eps(sigma: float) -> float:
        calls[0] += 1
        return epsilon_of(plan(sigma), DELTA, "rdp")

    low, high = calibration.MIN_NOISE_MULTIPLIER, 1.0
    while eps(high) > EPSILON:
        low, high = high, 2 * high
    while high - low > TOL:
        middle = (low + high) / 2
        if eps(middle) > EPSILON:
            low = middle
        else:
            high = middle
    return high


def test_sigma_search_vs_naive_bisection(benchmark, monkeypatch):
    # Warm up both (imports of opacus/torch, scipy.optimize) so neither pays first-call costs.
    calibrate_noise_multiplier(plan, EPSILON, DELTA, accountant="rdp", tol=TOL)

    naive_calls = [0]
    naive_times = []
    for _ in range(ROUNDS):
        naive_calls[0] = 0
        start = time.perf_counter()
        naive_sigma = naive_bisection(naive_calls)
        naive_times.append(time.perf_counter() - start)

    library_calls = [0]
    compose = calibration.compose_events

    def counting_compose(events):
        library_calls[0] += 1
        return compose(events)

    # Count every accountant evaluation, including calibration's two reachability checks.
    monkeypatch.setattr(calibration, "compose_events", counting_compose)
    monkeypatch.setattr(accountants, "compose_events", counting_compose)
    library_times = []

    def library() -> float:
        library_calls[0] = 0
        start = time.perf_counter()
        sigma = calibrate_noise_multiplier(plan, EPSILON, DELTA, accountant="rdp", tol=TOL)
        library_times.append(time.perf_counter() - start)
        return sigma

    sigma = benchmark.pedantic(library, rounds=ROUNDS, iterations=1)

    ratio = min(naive_times) / min(library_times)
    benchmark.extra_info.update(
        naive_seconds=min(naive_times), library_seconds=min(library_times), ratio=ratio,
        naive_accountant_calls=naive_calls[0], library_accountant_calls=library_calls[0],
    )
    print(
        f"\nσ search, Table 3 10000/500 at ε=1: library {min(library_times):.3f} s "
        f"({library_calls[0]} accountant calls), naive bisection {min(naive_times):.3f} s "
        f"({naive_calls[0]} calls), ratio naive/library = {ratio:.2f}"
    )
    # Same answer, and both meet the target.
    assert sigma == pytest.approx(naive_sigma, abs=2 * TOL)
    assert epsilon_of(plan(sigma), DELTA, "rdp") <= EPSILON
    assert sigma == pytest.approx(1.60, rel=0.01)  # opacus' ε-tolerance search gives 1.6016
