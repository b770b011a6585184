"""Private Evolution (PrE-Text): defaults from App. C.3, the thresholded selection, an end-to-end run and resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import Killed, killed_after, train_end_to_end
from largefedbench.methods.pe import PEConfig, PESFTConfig, PrivateEvolution, select, vote_threshold
from timing_free import without_timing

from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget

BUDGET = PrivacyBudget(1.0, 3e-6)


def test_defaults_are_the_papers():
    cfg = PEConfig()
    assert (cfg.rounds, cfg.n_synthetic, cfg.threshold_multiplier, cfg.lookahead) == (20, 1024, 0.1626, 4)
    assert (cfg.variation_model, cfg.mask_fraction, cfg.variation_passes, cfg.min_words) == ("roberta-large", 0.3, 2, 20)
    assert (cfg.examples_per_prompt, cfg.temperature, cfg.top_p, cfg.clients_per_round) == (3, 1.0, 1.0, None)
    sft = PESFTConfig()
    assert (sft.rounds, sft.n_synthetic, sft.threshold_multiplier, sft.lora_rank, sft.lora_alpha) == (20, 1024, 0.1626, 4, 8)
    assert PEConfig.tiny().variation_model is None and PEConfig.tiny().lookahead == 0


def test_selection_is_proportional_to_the_histogram_above_the_threshold():
    rng = np.random.default_rng(0)
    picked, uniform = select(np.array([0.1, 5.0, 2.0, -3.0]), 1.0, 20_000, rng)  # weights 0, 4, 1, 0
    counts = np.bincount(picked, minlength=4) / 20_000
    assert not uniform and counts[0] == counts[3] == 0
    assert counts[1] == pytest.approx(0.8, abs=0.02)
    picked, uniform = select(np.array([0.5, -1.0, 1.0]), 1.0, 3_000, rng)  # nothing above H: uniform
    assert uniform and set(picked.tolist()) == {0, 1, 2}


def test_threshold_scales_with_the_noise_so_noise_only_candidates_are_dropped_at_epsilon_1():
    """PrE-Text's H = 4 · H_multiplier · sensitivity · σ with H_multiplier 0.1626: at ε = 1 (σ ≈ 19.3, App. C.1) a
    candidate no client voted for keeps weight only when its noise exceeds 0.65 σ, not whenever it is positive."""
    sigma = BUDGET.calibrate(PoissonGaussianEvent(1.0, sample_rate=1.0, steps=PEConfig().rounds), n_clients=1000)
    assert sigma == pytest.approx(19.3, rel=0.03)
    h = vote_threshold(sigma, PEConfig().threshold_multiplier)
    assert h == pytest.approx(4 * 0.1626 * sigma) and vote_threshold(2 * sigma) == pytest.approx(2 * h)
    rng = np.random.default_rng(1)
    # a typical noise draw of half a noise std on the candidate nobody voted for: never selected
    picked, uniform = select(np.array([0.5 * sigma, 1000.0, 400.0]), h, 20_000, rng)
    assert not uniform and 0 not in picked
    # over many noise draws, noise-only candidates (index ≥ 2) survive at rate P(Z > 0.65) ≈ 0.26 (absolute H: ≈ 0.5)
    noisy = np.concatenate([[1000.0, 500.0], rng.normal(0.0, sigma, 20_000)])
    assert (noisy[2:] > h).mean() == pytest.approx(0.258, abs=0.015)


def run(tiny, run_dir, cfg, resources=None):
    return train_end_to_end(tiny, run_dir, PrivateEvolution(), cfg, BUDGET, seed=2, resources=resources)


@pytest.mark.slow
def test_pe_runs_end_to_end_and_resumes_after_a_kill_as_if_uninterrupted(tiny, tmp_path):
    cfg = dataclasses.replace(PEConfig.tiny(), n_synthetic=32, n_final=40, clients_per_round=800)
    fed_a, straight = run(tiny, tmp_path / "straight", cfg)
    sigma, rate = straight.info["sigma"], straight.info["sample_rate"]
    assert rate == 800 / fed_a.n_clients
    assert fed_a.ledger.events == (PoissonGaussianEvent(sigma, rate, cfg.rounds),)
    assert fed_a.ledger.epsilon(BUDGET.delta) <= BUDGET.epsilon
    assert [h["round"] for h in straight.history] == list(range(cfg.rounds))
    # a Poisson cohort's exact size is not released: the history states its expected size
    assert all(np.isfinite(h["fid"]) and "clients" not in h and h["expected_clients"] == pytest.approx(800)
               for h in straight.history)
    assert 0 < len(straight.texts) <= cfg.n_final and all(len(t.split()) > 3 for t in straight.texts)
    assert fed_a.costs.rounds[0]["floats_down_per_client"] == cfg.n_synthetic * 384
    assert fed_a.costs.rounds[0]["floats_up_per_client"] == cfg.n_synthetic

    with pytest.raises(Killed):
        run(tiny, tmp_path / "killed", cfg, killed_after(1))
    fed_b, resumed = run(tiny, tmp_path / "killed", cfg)
    assert fed_b.ledger == fed_a.ledger
    assert without_timing(resumed.history) == without_timing(straight.history)
    assert resumed.texts == straight.texts
