"""`lfb leaderboard submit ENTRY`: the checks CI would make, then the pull request laid out in a git checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

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
    result = submit(produced.path, board=board_repo / "leaderboard", home=root, allow_demo=True)
    assert result.ok, result.format()
    assert [name for name, _, _ in result.checks] == ["validate", "plots", "data", "source", "smoke", "placed", "render",
                                                      "branch", "commit"]
    source = dict((name, detail) for name, _, detail in result.checks)["source"]
    assert "package lfb-example-method==0.1.0, installed here from a package index" in source
    entry = produced.entry
    assert _git(board_repo, "rev-parse", "--abbrev-ref", "HEAD") == f"submit/{entry.entry_id}" == result.branch
    committed = _git(board_repo, "show", "--name-only", "--format=%s", "HEAD").splitlines()
    assert committed[0] == f"leaderboard: {EXAMPLE} on demo (tiny, ε = 1.0, 1 seeds)"
    dest = f"leaderboard/entries/demo/{EXAMPLE}/{entry.entry_id}.json"
    assert dest in committed and "leaderboard/README.md" in committed and "leaderboard/index.html" in committed
    assert all(f"leaderboard/entries/demo/{EXAMPLE}/{name}" in committed for name in entry.artifacts.values())
    assert _git(board_repo, "status", "--porcelain") == ""  # nothing left behind
    # the count it prints is the commit's own (the board's unchanged plots are not in it)
    files = [f for f in committed[1:] if f]
    assert sorted(result.committed) == sorted(files) and f"committed {len(files)} files" in result.format()
    # what the board's CI then runs on the pull request passes
    assert all(r.valid for r in validate_paths([board_repo / "leaderboard" / "entries"]))
    assert not render_board(board_repo / "leaderboard", check=True).stale
    assert any("git push -u origin" in step or "git push -u" in step for step in result.steps)


def test_a_plugin_whose_installed_version_differs_is_refused_before_anything_is_copied(produced, example_plugin,
                                                                                       tmp_path, board_repo):
    data = json.loads(produced.path.read_text())
    data["method"]["version"] = "9.9.9"
    forged = save(tmp_path / "mine", data, artifacts_from=produced.path.parent)
    result = submit(forged, board=board_repo / "leaderboard", smoke_plugins=False, allow_demo=True)
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
    assert main(["leaderboard", "submit", str(shipped), "--board", str(board), "--quiet", "--allow-demo"]) == 0
    out = capsys.readouterr().out
    assert "ok   source: built-in method 'public'" in out and "is not in a git checkout" in out
    assert "git checkout -b submit/" in out and (board / "README.md").is_file()
    assert (board / "entries" / "demo" / "public" / shipped.name).is_file()


def test_a_demo_data_entry_is_refused_without_allow_demo(produced, board_repo, capsys):
    result = submit(produced.path, board=board_repo / "leaderboard", smoke_plugins=False)
    assert not result.ok and [c[0] for c in result.checks] == ["validate", "plots", "data"] and not result.files
    assert "synthetic demo data" in result.checks[-1][2] and "--allow-demo" in result.checks[-1][2]
    assert main(["leaderboard", "submit", str(produced.path), "--board", str(board_repo / "leaderboard"),
                 "--no-smoke", "--quiet"]) == 1
    assert "FAIL data: snapshot demo is synthetic demo data" in capsys.readouterr().out
    assert not (board_repo / "leaderboard" / "entries" / "demo").exists()


def test_the_produced_entry_names_the_distribution_and_no_repository(produced):
    method = produced.entry.method
    assert (method.distribution, method.version, method.repository) == ("lfb-example-method", "0.1.0", None)
    assert method.target == "lfb_example_method:DpUnigramExample"


# --- a plug-in in a git checkout (an editable install): the commit, reachable in the recorded repository -------------
URL = "https://example.org/me/lfb-git-unigram.git"


def _editable(checkout: Path, site: Path, name: str, module: str, distribution: str) -> None:
    """What `pip install -e CHECKOUT` leaves (PEP 660): a dist-info naming the folder (direct_url.json, editable), with
    the entry point and top-level module; the checkout itself goes on the path."""
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    (info / "top_level.txt").write_text(module + "\n")
    cls = "".join(p.capitalize() for p in name.split("-"))
    (info / "entry_points.txt").write_text(f"[largefedbench.methods]\n{name} = {module}:{cls}\n")
    (info / "direct_url.json").write_text(json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}))


@pytest.fixture()
def git_plugin(tmp_path, monkeypatch):
    """`lfb new method git-unigram` in a git checkout whose commit is on origin/main, installed editable."""
    from largefedbench.run.scaffold import new_method

    checkout = new_method("git-unigram", tmp_path / "lfb-git-unigram")
    for args in (["init", "-q"], ["config", "user.email", "t@example.org"], ["config", "user.name", "t"],
                 ["add", "-A"], ["commit", "-q", "-m", "my method"], ["remote", "add", "origin", URL],
                 ["update-ref", "refs/remotes/origin/main", "HEAD"]):  # as after `git push origin main`
        _git(checkout, *args)
    _editable(checkout, tmp_path / "site", "git-unigram", "lfb_git_unigram", "lfb-git-unigram")
    monkeypatch.syspath_prepend(str(checkout))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield checkout
    import sys

    for name in [m for m in sys.modules if m.startswith("lfb_git_unigram")]:
        del sys.modules[name]


def _as_git_plugin(produced, folder: Path, repository: dict | None) -> Path:
    """The produced entry as if `lfb eval` had run the git plug-in (what it records of the method)."""
    data = json.loads(produced.path.read_text())
    data["method"].update(name="git-unigram", target="lfb_git_unigram:GitUnigram", source="lfb_git_unigram",
                          version="0.1.0", distribution="lfb-git-unigram")
    data["method"].pop("repository", None)
    if repository is not None:
        data["method"]["repository"] = repository
    data["entry_id"] = "git-unigram--demo--tiny--eps1--" + ("none" if repository is None else repository["commit"][:8])
    return save(folder, data, artifacts_from=produced.path.parent)


def test_a_source_checkout_is_recorded_with_its_remote_commit_and_dirtiness(git_plugin):
    from largefedbench.run.provenance import method_provenance, public_url

    head = _git(git_plugin, "rev-parse", "HEAD")
    assert method_provenance("lfb_git_unigram") == {
        "distribution": "lfb-git-unigram", "repository": {"url": URL, "commit": head, "dirty": False}}
    (git_plugin / "lfb_git_unigram" / "extra.py").write_text("x = 1\n")  # a file the commit does not hold
    assert method_provenance("lfb_git_unigram")["repository"]["dirty"] is True
    assert public_url("https://me:s3cret@github.com/me/x.git") == "https://github.com/me/x.git"  # no credentials
    assert public_url("/home/me/repos/x.git") is None and public_url("file:///home/me/x") is None
    assert public_url("git@github.com:me/x.git") == "git@github.com:me/x.git"


def test_a_plugin_whose_commit_is_on_the_recorded_remote_is_accepted(produced, git_plugin, tmp_path, board_repo):
    head = _git(git_plugin, "rev-parse", "HEAD")
    entry = _as_git_plugin(produced, tmp_path / "mine", {"url": URL, "commit": head, "dirty": False})
    result = submit(entry, board=board_repo / "leaderboard", smoke_plugins=False, allow_demo=True)
    assert result.ok, result.format()
    source = dict((name, detail) for name, _, detail in result.checks)["source"]
    assert f"commit {head[:12]} of {URL} (on origin/main in {git_plugin})" in source


@pytest.mark.parametrize("case, expected", [
    ("unpushed", "on no remote branch: push it"),
    ("dirty", "(dirty: true)"),
    ("other-remote", "no checkout of https://example.org/someone-else/x.git holds the installed module"),
    ("no-commit", "the entry names no git commit"),
])
def test_a_plugin_only_on_the_submitters_disk_is_refused(case, expected, produced, git_plugin, tmp_path, board_repo):
    head = _git(git_plugin, "rev-parse", "HEAD")
    repository = {"url": URL, "commit": head, "dirty": False}
    if case == "unpushed":
        (git_plugin / "NOTES.md").write_text("more\n")
        _git(git_plugin, "add", "-A")
        _git(git_plugin, "commit", "-q", "-m", "not pushed")
        repository["commit"] = _git(git_plugin, "rev-parse", "HEAD")
    elif case == "dirty":
        repository["dirty"] = True
    elif case == "other-remote":
        repository["url"] = "https://example.org/someone-else/x.git"
    entry = _as_git_plugin(produced, tmp_path / "mine", None if case == "no-commit" else repository)
    result = submit(entry, board=board_repo / "leaderboard", smoke_plugins=False, allow_demo=True)
    (name, passed, detail), = [c for c in result.checks if c[0] == "source"]
    assert not passed and not result.files and expected in detail, detail
    assert "installed here from a local source, not a package index" in detail
    assert "Publish the package to a package index" in detail and "commit the method to a git repository" in detail


# --- an entry on another ε = 0 model than the board's group ----------------------------------------------------------
def _shipped(method: str) -> Path:
    folder = Path(__file__).resolve().parents[2] / "leaderboard" / "entries" / "demo" / method
    return next(p for p in sorted(folder.glob(f"{method}--demo--tiny--*.json")) if "--audit-" not in p.name
                and not p.name.endswith(".reproduced.json"))


def _on_another_model(method: str, folder: Path) -> Path:
    from .entry_variants import load, relabel

    data = relabel(load(_shipped(method)), entry_id=f"{method}--on-a-new-model")
    data["profile"]["downstream"]["sha256"] = "f" * 64  # the ε = 0 model pretrained by another code version
    return save(folder, data, artifacts_from=_shipped(method).parent)


def test_an_entry_on_another_eps0_model_than_the_boards_group_is_warned_about_before_it_is_committed(board_repo,
                                                                                                    tmp_path, capsys):
    board = board_repo / "leaderboard"
    for method in ("public", "non-private"):  # the committed group: two methods on the board's ε = 0 model
        (board / "entries" / "demo" / method).mkdir(parents=True)
        shutil.copyfile(_shipped(method), board / "entries" / "demo" / method / _shipped(method).name)
    render_board(board)
    _git(board_repo, "add", "-A")
    _git(board_repo, "commit", "-q", "-m", "the board's tiny group")
    model = json.loads(_shipped("public").read_text())["profile"]["downstream"]["sha256"][:12]
    lines, branch_when_warned, base = [], [], _git(board_repo, "rev-parse", "--abbrev-ref", "HEAD")

    def log(line):
        lines.append(line)
        if line.startswith("WARNING"):
            branch_when_warned.append(_git(board_repo, "rev-parse", "--abbrev-ref", "HEAD"))

    result = submit(_on_another_model("public", tmp_path / "mine"), board=board, allow_demo=True, log=log)
    assert result.ok and result.commit, result.format()  # a warning, not a refusal
    (warning,) = result.warnings
    assert "this entry's ε = 0 model is ffffffffffff, but the board's current group for demo (tiny profile" in warning
    assert f"is on ε = 0 model {model} (2 entries of non-private, public)" in warning
    assert "the board will show this entry as a superseded group of one" in warning
    assert "re-run `lfb eval` at the board's code (largefedbench " in warning and "non-private public" in warning
    assert any(line.startswith("WARNING: this entry's ε = 0 model") for line in lines)
    assert f"WARN {warning}" in result.format() and result.to_dict()["warnings"] == [warning]
    assert branch_when_warned == [base]  # said before the submission's branch and commit were made
    assert result.branch == _git(board_repo, "rev-parse", "--abbrev-ref", "HEAD")
    # an entry on the group's own model: nothing to warn about
    assert not submit(_shipped("dp-ftrl"), board=board, allow_demo=True).warnings


def test_an_entry_that_would_supersede_the_boards_group_is_warned_about(tmp_path, capsys):
    """One committed method on the board's model; a newer entry of another method on a new model ties on methods
    and wins on its date: the committed group would show as superseded."""
    board = tmp_path / "plain" / "leaderboard"
    (board / "entries" / "demo" / "public").mkdir(parents=True)
    shutil.copyfile(_shipped("public"), board / "entries" / "demo" / "public" / _shipped("public").name)
    assert main(["leaderboard", "submit", str(_on_another_model("non-private", tmp_path / "mine")), "--board", str(board),
                 "--quiet", "--allow-demo"]) == 0
    out = capsys.readouterr().out
    assert "WARN this entry's ε = 0 model is ffffffffffff, and the board's group for demo (tiny profile" in out
    assert "(1 entry of public) will show as superseded by this entry's group" in out
    assert "Unless replacing that group is meant: re-run `lfb eval` at the board's code" in out
