"""Renamed keyword arguments: the old name works for one release, warns, and never silently beats the new one; once
its release has passed it is gone (CHANGELOG.md)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from largefedbench.scrapers.refresh import refresh

from largefedbench.data.federated import load_snapshot
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


@pytest.mark.parametrize("entry_point", [load_snapshot, refresh, smoke, reproduce], ids=lambda f: f.__name__)
def test_root_is_gone_from_the_entry_points_whose_release_has_passed(entry_point):
    parameters = inspect.signature(entry_point).parameters
    assert "home" in parameters and "root" not in parameters


def test_the_request_takes_home_only():
    assert "home" in {f.name for f in dataclasses.fields(EvalRequest)}
    with pytest.raises(TypeError, match="root"):
        EvalRequest(method="public", root="/x")
