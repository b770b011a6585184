"""`lfb leaderboard reproduce`: a real entry re-runs to the same numbers; a doctored one is caught."""

from __future__ import annotations

import shutil

import pytest

from largefedbench.cli import main
from largefedbench.errors import InputError
from largefedbench.leaderboard.reproduce import reproduce

from .entry_variants import save, shift_accuracy


def test_the_produced_entry_reproduces_exactly(produced, tiny, example_plugin):
    _fd, _bundle, root = tiny
    result = reproduce(produced.path, root=root)
    assert result.ok, result.format()
    names = {c.metric for c in result.comparisons}
    assert {"ε, seed 0", "next_token_accuracy.top1, seed 0", "gap_closed, seed 0", "fid, seed 0"} <= names
    assert all(c.difference == 0 for c in result.comparisons), result.format()  # same machine, same software


def test_doctored_numbers_are_outside_the_tolerance_and_exit_non_zero(produced, tiny, tmp_path, capsys, example_plugin):
    """The doctored copy keeps the produced entry's id, so the re-run can resume from the produced run's stored
    seed results (copied into a scratch board): this checks the comparison, not the method, a second time."""
    _fd, _bundle, root = tiny
    doctored = save(tmp_path / "doctored", shift_accuracy(produced.entry, 0.02),
                    artifacts_from=produced.path.parent)
    scratch = tmp_path / "scratch"
    shutil.copytree(produced.path.parents[3] / ".runs", scratch / ".runs")
    code = main(["leaderboard", "reproduce", str(doctored), "--root", str(root), "--out", str(scratch), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "NOT reproduced" in out and "next_token_accuracy.top1, seed 0" in out and "<- OUTSIDE" in out
    assert "-2.00e-02" in out
    ok = [line for line in out.splitlines() if line.startswith("ε, seed 0")]
    assert ok and "OUTSIDE" not in ok[0], "ε itself still matches"


def test_an_invalid_entry_is_not_reproduced(produced, tmp_path):
    data = shift_accuracy(produced.entry, 0.0)
    data["metrics"]["gap_closed"]["mean"] = 0.5
    path = save(tmp_path, data, artifacts_from=produced.path.parent)
    with pytest.raises(InputError, match="not a valid entry.*gap_closed"):
        reproduce(path)
