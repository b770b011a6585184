"""noise_report / epsilon_report, the functions behind `lfb privacy`."""

from __future__ import annotations

import pytest

from largefedbench.errors import InputError, PrivacyError
from largefedbench.privacy import (
    GaussianEvent,
    PoissonGaussianEvent,
    calibrate_noise_multiplier,
    epsilon_report,
    noise_report,
)

KEYS = {"sigma", "epsilon", "delta", "accountant", "mechanism", "sample_rate", "steps", "clients", "per_round"}


def test_gaussian_noise_report_is_table3_sigma1():
    report = noise_report(7, 3e-6, None, 20, clients=10000, per_round=1000)
    assert KEYS <= report.keys()
    assert report["accountant"] == "rdp"
    assert report["sample_rate"] == 0.1
    assert report["sigma"] == pytest.approx(0.814, rel=2e-3)
    assert report["epsilon"] == 7 and report["epsilon_achieved"] <= 7


def test_tree_noise_report_is_table3_sigma2():
    report = noise_report(1, 3e-6, None, 20, "tree", clients=10000, per_round=7500)
    assert report["accountant"] == "tree"
    assert report["rounds_per_epoch"] == 1
    assert report["sigma"] == pytest.approx(19.25, rel=2e-3)  # published 19.5


def test_epsilon_report_inverts_noise_report():
    for mechanism in ("gaussian", "tree"):
        noise = noise_report(2.0, 1e-6, None, 10, mechanism, clients=5000, per_round=500)
        eps = epsilon_report(noise["sigma"], 1e-6, None, 10, mechanism, clients=5000, per_round=500)
        assert KEYS <= eps.keys()
        assert eps["accountant"] == noise["accountant"]
        assert 1.95 <= eps["epsilon"] <= 2.0


def test_epsilon_report_with_sample_rate_only():
    report = epsilon_report(0.81, 5e-7, 4096 / 180000, 439)
    assert report["epsilon"] == pytest.approx(6.627, abs=0.01)  # opacus RDP, no histogram
    assert report["clients"] is None


def test_report_input_errors():
    with pytest.raises(InputError, match="needs clients"):
        noise_report(1, 1e-6, 0.1, 20, "tree")
    with pytest.raises(InputError, match="give sample_rate"):
        noise_report(1, 1e-6, None, 20)
    with pytest.raises(InputError, match="contradicts"):
        noise_report(1, 1e-6, 0.2, 20, clients=100, per_round=10)
    with pytest.raises(InputError, match="unknown mechanism"):
        noise_report(1, 1e-6, 0.1, 20, "laplace")
    with pytest.raises(PrivacyError, match="1/n_clients"):
        epsilon_report(1.0, 1e-3, None, 20, clients=10000, per_round=100)


def test_pld_calibration_of_composed_gaussians_matches_analytic():
    # 4 Gaussian releases at σ compose to one at σ/2: PLD must recover 2 × the analytic σ.
    from largefedbench.privacy import analytic_gaussian_sigma

    sigma = calibrate_noise_multiplier(GaussianEvent(1.0, 4), 1.0, 1e-5)  # auto -> pld
    assert sigma == pytest.approx(2 * analytic_gaussian_sigma(1.0, 1e-5), rel=2e-3)


def test_pld_calibration_of_rounds_plus_histogram():
    from largefedbench.privacy import epsilon_of

    plan = lambda s: [PoissonGaussianEvent(s, 0.2, 5), GaussianEvent(8.0)]  # noqa: E731
    sigma = calibrate_noise_multiplier(plan, 3.0, 1e-6)  # auto -> pld
    assert epsilon_of(plan(sigma), 1e-6, "pld") <= 3.0
    assert epsilon_of(plan(sigma * 0.99), 1e-6, "pld") > 3.0  # within the 0.1% search tolerance
    assert epsilon_of(plan(sigma), 1e-6, "rdp") > 3.0  # PLD is tighter: RDP would need more noise


def test_pld_search_falls_back_when_the_rdp_bracket_misses(monkeypatch):
    import dp_accounting as dpa

    from largefedbench.privacy import analytic_gaussian_sigma, calibration

    real = calibration._brent_search
    used = []

    def explicit_bracket_misses(fn, name, probe, epsilon, delta, bracket, tol):
        used.append(type(bracket).__name__)
        if isinstance(bracket, dpa.ExplicitBracketInterval):
            return None
        return real(fn, name, probe, epsilon, delta, bracket, tol)

    monkeypatch.setattr(calibration, "_brent_search", explicit_bracket_misses)
    sigma = calibrate_noise_multiplier(GaussianEvent(1.0, 4), 1.0, 1e-5, accountant="pld")
    assert used == ["LowerEndpointAndGuess", "ExplicitBracketInterval", "LowerEndpointAndGuess"]
    assert sigma == pytest.approx(2 * analytic_gaussian_sigma(1.0, 1e-5), rel=2e-3)


def test_importing_the_package_loads_no_heavy_library():
    import subprocess
    import sys

    code = (
        "import sys, largefedbench.privacy as p; p.PrivacyLedger().record(noise_multiplier=1.0, sample_rate=0.1); "
        "print(sorted(m for m in ('torch', 'opacus', 'dp_accounting') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
