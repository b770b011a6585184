"""Renamed keyword arguments: the old name works for one release, warns, and never silently beats the new one."""

from __future__ import annotations

import pytest

from largefedbench.deprecation import renamed_path
from largefedbench.errors import InputError
from largefedbench.run.eval import EvalRequest
from largefedbench.run.reproduce import reproduce
from largefedbench.run.smoke import smoke


def test_the_old_name_is_taken_with_a_warning_and_a_conflict_is_refused(tmp_path):
    assert renamed_path("f", "home", tmp_path, "root", None) == tmp_path
    with pytest.warns(DeprecationWarning, match=r"f\(root=...\) is now f\(home=...\)"):
        assert renamed_path("f", "home", None, "root", tmp_path) == tmp_path
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="give home only"):
        renamed_path("f", "home", tmp_path / "a", "root", tmp_path / "b")


def test_every_public_entry_point_still_takes_root(tmp_path):
    with pytest.warns(DeprecationWarning, match="EvalRequest"):
        assert EvalRequest(method="public", root=tmp_path).home == tmp_path
    with pytest.warns(DeprecationWarning, match="smoke"):
        assert not smoke("no-such-method", root=tmp_path).ok
    with pytest.warns(DeprecationWarning, match="reproduce"), pytest.raises(InputError, match="not a valid entry"):
        reproduce(tmp_path / "missing.json", root=tmp_path)
