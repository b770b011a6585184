"""`lfb leaderboard submit ENTRY`: the checks CI would make, then the pull request laid out in a git checkout."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from largefedbench.cli import main
from largefedbench.leaderboard.render import render_board
from largefedbench.leaderboard.validate import validate_paths
from largefedbench.run.submit import submit

from .conftest import EXAMPLE
from .entry_variants import save


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def board_repo(tmp_path):
    """A clone of the board's repository: a git checkout with an empty leaderboard folder, one commit."""
    repo = tmp_path / "board-repo"
    (repo / "leaderboard" / "entries").mkdir(parents=True)
    (repo / "leaderboard" / "entries" / ".keep").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.org")
    _git(repo, "config", "user.name", "test")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the board")
    return repo


def test_a_plugin_entry_is_smoked_and_committed_on_its_own_branch(produced, example_plugin, board_repo, tiny):
    _fd, _bundle, root = tiny
    result = submit(produced.path, board=board_repo / "leaderboard", home=root)
    assert result.ok, result.format()
    assert [name for name, _, _ in result.checks] == ["validate", "plots", "source", "smoke", "placed", "render",
                                                      "branch", "commit"]
    entry = produced.entry
    assert _git(board_repo, "rev-parse", "--abbrev-ref", "HEAD") == f"submit/{entry.entry_id}" == result.branch
    committed = _git(board_repo, "show", "--name-only", "--format=%s", "HEAD").splitlines()
    assert committed[0] == f"leaderboard: {EXAMPLE} on demo (tiny, ε = 1.0, 1 seeds)"
    dest = f"leaderboard/entries/demo/{EXAMPLE}/{entry.entry_id}.json"
    assert dest in committed and "leaderboard/README.md" in committed and "leaderboard/index.html" in committed
    assert all(f"leaderboard/entries/demo/{EXAMPLE}/{name}" in committed for name in entry.artifacts.values())
    assert _git(board_repo, "status", "--porcelain") == ""  # nothing left behind
    # what the board's CI then runs on the pull request passes
    assert all(r.valid for r in validate_paths([board_repo / "leaderboard" / "entries"]))
    assert not render_board(board_repo / "leaderboard", check=True).stale
    assert any("git push -u origin" in step or "git push -u" in step for step in result.steps)


def test_a_plugin_whose_installed_version_differs_is_refused_before_anything_is_copied(produced, example_plugin,
                                                                                       tmp_path, board_repo):
    data = json.loads(produced.path.read_text())
    data["method"]["version"] = "9.9.9"
    forged = save(tmp_path / "mine", data, artifacts_from=produced.path.parent)
    result = submit(forged, board=board_repo / "leaderboard", smoke_plugins=False)
    assert not result.ok and not result.files
    (name, passed, detail), = [c for c in result.checks if c[0] == "source"]
    assert not passed and "names version '9.9.9'" in detail and "pip install NAME==VERSION" in detail
    assert not (board_repo / "leaderboard" / "entries" / "demo").exists()


def test_an_invalid_entry_stops_with_the_validators_fix_hints(produced, tmp_path, board_repo):
    data = json.loads(produced.path.read_text())
    data["privacy"]["epsilon"] = data["privacy"]["epsilon_per_seed"][0] = 0.1  # a smaller ε than the ledger gives
    forged = save(tmp_path / "mine", data, artifacts_from=produced.path.parent)
    result = submit(forged, board=board_repo / "leaderboard")
    assert not result.ok and [c[0] for c in result.checks] == ["validate"]
    assert "privacy-epsilon" in result.checks[0][2] and "re-run `lfb eval`" in result.checks[0][2]


def test_a_plot_that_is_not_a_png_is_refused(produced, tmp_path, board_repo):
    folder = tmp_path / "mine" / "entries" / "demo" / EXAMPLE
    shutil.copytree(produced.path.parent, folder)
    next(folder.glob("*.png")).write_bytes(b"<html>not a plot</html>")
    result = submit(folder / produced.path.name, board=board_repo / "leaderboard", smoke_plugins=False)
    (name, passed, detail), = [c for c in result.checks if c[0] == "plots"]
    assert not passed and "not PNG images" in detail


def test_outside_a_git_checkout_the_steps_are_printed(capsys, tmp_path):
    """A built-in entry of the shipped board, submitted into a plain folder: copied, rendered, steps printed."""
    from pathlib import Path

    shipped = sorted((Path(__file__).resolve().parents[2] / "leaderboard" / "entries" / "demo" / "public").glob(
        "public--demo--tiny--*.json"))[0]
    board = tmp_path / "plain" / "leaderboard"
    assert main(["leaderboard", "submit", str(shipped), "--board", str(board), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ok   source: built-in method 'public'" in out and "is not in a git checkout" in out
    assert "git checkout -b submit/" in out and (board / "README.md").is_file()
    assert (board / "entries" / "demo" / "public" / shipped.name).is_file()
