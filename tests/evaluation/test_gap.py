"""Gap closed = (acc - acc0) / (acc_inf - acc0)."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.evaluation import gap_closed


def test_values():
    assert gap_closed(0.60, 0.50, 0.70) == pytest.approx(0.5)
    assert gap_closed(0.50, 0.50, 0.70) == 0.0
    assert gap_closed(0.70, 0.50, 0.70) == pytest.approx(1.0)
    assert gap_closed(0.40, 0.50, 0.70) == pytest.approx(-0.5)  # worse than the public model
    assert gap_closed(np.float32(0.8), 0.5, 0.7) == pytest.approx(1.5, rel=1e-6)  # beats non-private training


def test_undefined_gap_says_what_to_do():
    with pytest.raises(InputError, match="undefined.*non-private model did not improve"):
        gap_closed(0.6, 0.5, 0.5)
    with pytest.raises(InputError, match="finite"):
        gap_closed(float("nan"), 0.5, 0.7)
    with pytest.raises(InputError, match="must be a number"):
        gap_closed("high", 0.5, 0.7)  # type: ignore[arg-type]
