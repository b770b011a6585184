"""FID between embedding sets (POPri spec item 10) on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.evaluation import fid, mean_sq_distance


def test_one_dimensional_hand_case():
    a = np.array([[0.0], [2.0]])          # mean 1, sample variance 2
    b = np.array([[3.0], [5.0], [7.0]])   # mean 5, sample variance 4
    # (1-5)^2 + 2 + 4 - 2*sqrt(2*4)
    assert fid(a, b) == pytest.approx(22 - 4 * math.sqrt(2), rel=1e-9)
    assert mean_sq_distance(a, b) == pytest.approx(16.0)


def test_isotropic_two_dimensional_hand_case():
    a = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # mean 0, covariance (2/3) I
    b = 2 * a + np.array([3.0, 4.0])                                   # mean (3, 4), covariance (8/3) I
    # 25 + tr((2/3) I + (8/3) I - 2 sqrt((16/9) I)) = 25 + 2 * (10/3 - 8/3)
    assert fid(a, b) == pytest.approx(25 + 4 / 3, rel=1e-9)


def test_zero_for_identical_sets_symmetric_and_translation():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 16))
    b = rng.normal(loc=0.3, scale=1.5, size=(150, 16))
    assert fid(a, a) == pytest.approx(0.0, abs=1e-8)
    assert fid(a, b) == pytest.approx(fid(b, a), rel=1e-6)
    shift = np.arange(16) / 10
    assert fid(a, a + shift) == pytest.approx(float(shift @ shift), rel=1e-6)
    assert fid(a, b) > fid(a, rng.normal(size=(150, 16)))


def test_input_errors():
    with pytest.raises(InputError, match="embedding sizes differ"):
        fid(np.zeros((3, 2)), np.zeros((3, 4)))
    with pytest.raises(InputError, match="at least 2 samples"):
        fid(np.zeros((1, 2)), np.zeros((3, 2)))
    with pytest.raises(InputError, match="2-D"):
        fid(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(InputError, match="NaN"):
        fid(np.array([[np.nan], [1.0]]), np.zeros((3, 1)))
