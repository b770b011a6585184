"""`lfb eval` end to end for DP resampling, weak-client voting and CTCL (eval_entry.py says what is checked)."""

from __future__ import annotations

import pytest
from eval_entry import check_eval_writes_a_valid_entry  # tests/methods is on sys.path (pytest's prepend import mode)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("method", ['ctcl', 'dp-resample', 'weak-client-voting'])
def test_run_eval_writes_a_valid_entry(tiny, tmp_path, method):
    check_eval_writes_a_valid_entry(tiny, tmp_path, method)
