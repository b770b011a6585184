"""DP instruction resampling end to end on the demo (tiny profile) and its privacy ledger."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import train_end_to_end

from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, epsilon_of

pytestmark = pytest.mark.slow

BUDGET = PrivacyBudget(4.0, 1e-5)


def test_dp_resample_end_to_end_spends_exactly_the_planned_budget(tiny, tmp_path):
    from largefedbench.methods.dp_resample import (
        DPInstructionResampling,
        DPResampleConfig,
    )

    cfg = DPResampleConfig.tiny()
    fed, art = train_end_to_end(tiny, tmp_path, DPInstructionResampling(), cfg, BUDGET)

    info = art.info
    assert art.kind == "synthetic text" and len(art.texts) >= cfg.n_synthetic // 2
    planned = (PoissonGaussianEvent(info["noise_multiplier"], info["sample_rate"], info["rounds"]),
               PoissonGaussianEvent(cfg.histogram_noise_multiplier, 1.0, 1))
    assert fed.ledger.events == planned
    eps = fed.ledger.epsilon(BUDGET.delta)
    assert eps <= BUDGET.epsilon + 1e-6
    assert eps == pytest.approx(epsilon_of(list(planned), BUDGET.delta), rel=1e-9)
    assert eps > 0.97 * BUDGET.epsilon  # the calibration spends the budget, it does not waste it

    # the resampled set follows the released histogram: ceil(T * h/N) per bucket
    counts = np.asarray(info["resample_counts"])
    expected = np.maximum(np.ceil(cfg.n_synthetic * np.asarray(info["noisy_histogram"]) / fed.n_clients - 1e-9), 0)
    np.testing.assert_array_equal(counts, expected)
    assert len(art.texts) == counts.sum()
    assert info["pool"] >= info["initial_pool"] - 10 and info["buckets"] == cfg.n_buckets
    assert [h["phase"] for h in art.history] == ["generator"] * info["rounds"] + ["histogram"]
    assert "deviations" in info and info["pca_components"] >= 1


def test_dp_resample_grows_the_pool_when_buckets_are_short(tiny, tmp_path):
    from largefedbench.methods.dp_resample import (
        DPInstructionResampling,
        DPResampleConfig,
    )

    # a target far above the pool: every bucket is short, the pool grows to its cap, then replacement sampling
    cfg = dataclasses.replace(DPResampleConfig.tiny(), epochs=0.07, pool_size=60, pool_growth=30, max_pool_size=90,
                              n_buckets=4, n_synthetic=400)
    _, art = train_end_to_end(tiny, tmp_path, DPInstructionResampling(), cfg, PrivacyBudget(8.0, 1e-5))
    assert art.info["pool_growth_steps"] >= 1 and art.info["pool"] > 60
    assert art.info["buckets_sampled_with_replacement"] >= 1
    assert len(art.texts) == sum(art.info["resample_counts"]) >= 400
