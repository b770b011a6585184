"""`lfb leaderboard submit ENTRY`: check an entry the way the board's CI will, and lay out its pull request.

The checks, in order (each failure says what to do):

1. the entry validates where it is (every ``lfb leaderboard validate`` check, with its fix hint);
2. its plots are PNG files beside it;
3. its data is a real snapshot: a demo-data entry would be ranked in the board's demo group (``--allow-demo``);
4. its method can be found again: a registered built-in, a declared synthetic set (its file hash is in the entry), or
   a plug-in whose entry names either its distribution's version, installed here from a package index (``pip install
   NAME==VERSION`` gives the same code), or a clean commit on a remote branch of the recorded repository (the entry's
   ``method.repository``; run/provenance.py);
5. a plug-in method passes ``lfb smoke`` (contract, isolation, determinism, no private text in any output).

Then the entry and its plots are copied into the board folder (``--board``, default ``./leaderboard``), the board is
rendered (CI checks that the pages are current) and, inside a git checkout, the files are committed on a branch of
their own; outside one the steps are printed. Before that, where the entry's ε = 0 model (the downstream pretrained
on the public corpus, whose weights hash the board groups by) differs from a committed group's on the same data and
profile, a warning says what the board will show (a superseded group of one, or the committed group superseded) and
how to put the entry beside the committed rows instead.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from largefedbench.errors import InputError
from largefedbench.leaderboard.files import EntryFile, board_of, expected_path
from largefedbench.leaderboard.schema import Entry
from largefedbench.leaderboard.validate import format_reports, validate_entry_file
from largefedbench.paths import check_writable_dir

__all__ = ["SubmitResult", "model_warnings", "submit"]

if TYPE_CHECKING:
    from largefedbench.leaderboard.board import Board, Group

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass
class SubmitResult:
    """What ``submit`` checked and did: ``problems`` stop a submission; ``files`` are the board's changed files."""

    entry_id: str = ""
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)  # the files the commit holds (unchanged pages are not in it)
    branch: str | None = None
    commit: str | None = None
    steps: list[str] = field(default_factory=list)
    #: what the submitter should know before the pull request, though nothing stops it (an entry on another ε = 0 model)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(passed for _, passed, _ in self.checks)

    def add(self, name: str, passed: bool, detail: str) -> bool:
        self.checks.append((name, passed, detail))
        return passed

    def format(self) -> str:
        lines = [f"{'ok  ' if passed else 'FAIL'} {name}: {detail}" for name, passed, detail in self.checks]
        lines += [f"WARN {warning}" for warning in self.warnings]
        if self.commit:
            lines.append(f"committed {len(self.committed)} files on branch {self.branch} ({self.commit[:12]})")
        lines += [f"  {step}" for step in self.steps]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"entry_id": self.entry_id, "ok": self.ok, "checks": [
            {"check": n, "ok": p, "detail": d} for n, p, d in self.checks], "files": [str(f) for f in self.files],
            "committed": self.committed, "branch": self.branch, "commit": self.commit, "steps": self.steps,
            "warnings": self.warnings}


def submit(entry_path: Path, *, board: Path = Path("leaderboard"), smoke_plugins: bool = True, home: Path | None = None,
           allow_demo: bool = False, log: Callable[[str], None] | None = None) -> SubmitResult:
    """Check ``entry_path`` and lay out its pull request into ``board`` (see the module docstring)."""
    log = log or (lambda msg: None)
    result = SubmitResult()
    entry_path = Path(entry_path)
    check_writable_dir(Path(board), f"--board {board}")  # before any check: a file there would fail only at the end
    if not entry_path.is_file():
        raise InputError(f"{entry_path}: no such entry file; give the .json that `lfb eval` wrote under "
                         "OUT/entries/DATASET/METHOD/")
    report = validate_entry_file(EntryFile(entry_path, board_of(entry_path)))
    if not result.add("validate", report.valid, "valid" if report.valid else "\n" + format_reports([report])):
        return result
    entry: Entry = report.entry
    result.entry_id = entry.entry_id
    _check_plots(result, entry_path, entry)
    if not _check_data(result, entry, allow_demo):
        return result
    target = _check_source(result, entry, home)
    if target is not None and smoke_plugins:
        _smoke(result, target, home, log)
    if not result.ok:
        return result
    _lay_out(result, entry_path, entry, Path(board), log)
    return result


def _check_plots(result: SubmitResult, entry_path: Path, entry: Entry) -> None:
    bad = [name for name in entry.artifacts.values()
           if not (entry_path.parent / name).read_bytes().startswith(PNG_SIGNATURE)]
    result.add("plots", not bad, f"{len(entry.artifacts)} PNG files beside the entry" if not bad else
               f"not PNG images: {', '.join(bad)}; submit the plots `lfb eval` wrote")


def _check_data(result: SubmitResult, entry: Entry, allow_demo: bool) -> bool:
    """A demo-data entry would be ranked in the board's demo group: only with ``--allow-demo``."""
    snapshot = entry.dataset.snapshot
    if not entry.dataset.synthetic or entry.method.source == "declared":  # declared sets are never ranked
        return result.add("data", True, f"snapshot {snapshot}")
    if allow_demo:
        return result.add("data", True, f"snapshot {snapshot} is synthetic demo data; submitted with --allow-demo")
    return result.add("data", False, f"snapshot {snapshot} is synthetic demo data (it checks the pipeline, not a "
                      "method): the board would rank it in its demo group. Run `lfb eval` on a real snapshot (`lfb data "
                      "list`), or pass --allow-demo to submit it anyway")


def _check_source(result: SubmitResult, entry: Entry, home: Path | None = None) -> str | None:
    """Can the method be found again? Returns the method to smoke-test (plug-ins only), else None."""
    from largefedbench.errors import LfbError
    from largefedbench.paths import lfb_home
    from largefedbench.registry import method_target, resolve_method
    from largefedbench.run.described import describe_method

    m = entry.method
    if m.source == "declared":
        result.add("source", True, f"declared synthetic set {entry.declared.file} (sha256 {entry.declared.sha256[:12]}…), "
                   f"made with {entry.declared.made_with}")
        return None
    try:  # a plug-in is described by its sandboxed process: submitting never imports it here
        if method_target(m.name)[1] == "built-in":
            resolved = resolve_method(m.name)
        else:
            home = Path(home) if home is not None else lfb_home()
            resolved = describe_method(m.name, preset=entry.config.preset, overrides={}, home=home, hidden=[home])
    except LfbError as exc:
        result.add("source", False, f"method {m.name!r} is not registered here ({exc}). Install its package so that "
                   "it registers the name (entry-point group 'largefedbench.methods'), then submit again")
        return None
    if m.source == "built-in":
        from largefedbench import __version__

        result.add("source", resolved.source == "built-in", f"built-in method {m.name!r} (made with largefedbench "
                   f"{m.version}; installed: {__version__})")
        return None
    if resolved.target != m.target:
        result.add("source", False, f"method {m.name!r} is now {resolved.target}, but the entry was made with "
                   f"{m.target}: re-run `lfb eval` with the installed package")
        return None
    if m.version in ("", "unversioned") or resolved.version != m.version:
        result.add("source", False, f"method {m.name!r}: the entry names version {m.version!r} and the installed one is "
                   f"{resolved.version!r}. A plug-in is submitted as a package with a version (`pip install NAME==VERSION` "
                   "must give the code that ran): give the package a version and re-run `lfb eval`")
        return None
    found, detail = _found_again(m)
    return m.name if result.add("source", found, f"plug-in {m.target}: {detail}") else None


def _found_again(m) -> tuple[bool, str]:
    """Can others get the code that ran? The named version of the distribution, installed here from a package index,
    or the recorded commit, reachable in the recorded repository. Says which, or why neither."""
    from largefedbench.run.provenance import commit_pushed, git_checkout, installed_origin, public_url

    origin = installed_origin(m.target.partition(":")[0])
    dist = m.distribution or origin.distribution
    why = []
    if origin.installed == "index" and dist == origin.distribution and origin.version == m.version:
        return True, (f"package {dist}=={m.version}, installed here from a package index: `pip install "
                      f"{dist}=={m.version}` gives the code that ran once that version is on a public index (pip "
                      "records no source for an index install, nor for a wheel file installed by name, so this "
                      "check cannot tell them apart: publish the version before the entry is merged)")
    if origin.distribution is None:
        why.append("its module belongs to no installed package")
    elif dist != origin.distribution:
        why.append(f"the entry names package {dist}, but the module is installed here by {origin.distribution}")
    elif origin.installed != "index":
        why.append(f"package {origin.distribution} {origin.version} is installed here from a {origin.installed} "
                   "source, not a package index")
    repo = m.repository
    if repo is None:
        why.append("the entry names no git commit (the method was not in a git checkout when `lfb eval` ran)")
    elif repo.dirty:
        why.append(f"its files differed from commit {repo.commit[:12]} when `lfb eval` ran (dirty: true)")
    elif repo.url is None:
        why.append(f"commit {repo.commit[:12]} is in a checkout with no remote others can reach")
    elif origin.installed == "vcs" and public_url(origin.vcs["url"]) == repo.url and origin.vcs["commit"] == repo.commit:
        return True, f"commit {repo.commit[:12]} of {repo.url}, installed here from there (pip install git+URL@COMMIT)"
    else:
        checkout = git_checkout(origin.code)
        remotes = set() if checkout is None else {
            public_url(_git(checkout, "remote", "get-url", r).stdout.strip()) for r in _git(checkout, "remote").stdout.split()}
        if checkout is None or repo.url not in remotes:
            why.append(f"no checkout of {repo.url} holds the installed module here")
        else:
            pushed, where = commit_pushed(checkout, repo.commit)
            if pushed:
                return True, f"commit {repo.commit[:12]} of {repo.url} ({where} in {checkout})"
            why.append(where)
    return False, ("its code cannot be found again: " + "; ".join(why) + ". Publish the package to a package index "
                   "(`pip install NAME==VERSION` must give the code that ran), or commit the method to a git repository "
                   "with a remote and push it; then re-run `lfb eval` and submit again")


def _smoke(result: SubmitResult, method: str, home: Path | None, log: Callable[[str], None]) -> None:
    from largefedbench.run.smoke import smoke

    log(f"running `lfb smoke {method}` (short runs on the demo, the method in its sandbox)")
    report = smoke(method, home=home, log=log)
    result.add("smoke", report.ok, "passed" if report.ok else "\n" + report.format())


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=False)


def _lay_out(result: SubmitResult, entry_path: Path, entry: Entry, board: Path, log: Callable[[str], None]) -> None:
    from largefedbench.leaderboard.render import render_board

    dest = expected_path(board, entry.dataset.name, entry.method.name, entry.entry_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    sources = [entry_path] + [entry_path.parent / name for name in sorted(entry.artifacts.values())]
    copied = []
    for src in sources:
        target = dest.parent / src.name
        if not (target.exists() and target.resolve() == src.resolve()):
            shutil.copyfile(src, target)
        copied.append(target)
    placed = validate_entry_file(EntryFile(dest, board))
    if not result.add("placed", placed.valid, f"valid at {dest}" if placed.valid else "\n" + format_reports([placed])):
        return
    log(f"rendering the board in {board}")
    rendered = render_board(board)
    pages = [board / "README.md", board / "index.html"] + sorted((board / "plots").glob("*.png"))
    result.files = copied + [p for p in pages if p.exists()]
    result.add("render", True, f"{board / 'README.md'} and index.html re-rendered ({rendered.board.counts_text()})")
    for warning in model_warnings(entry, rendered.board):  # said before anything is committed
        result.warnings.append(warning)
        log(f"WARNING: {warning}")
    top = _git(board, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        result.steps = [f"{board} is not in a git checkout. In a clone of the board's repository:",
                        f"copy {dest.parent} into its leaderboard/entries/{entry.dataset.name}/",
                        "run `lfb leaderboard render`, then",
                        f"git checkout -b submit/{entry.entry_id} && git add leaderboard && "
                        f"git commit -m {shlex.quote(_message(entry))} && git push -u origin submit/{entry.entry_id}",
                        "and open a pull request."]
        return
    _commit(result, Path(top.stdout.strip()), entry)


def model_warnings(entry: Entry, board: Board) -> list[str]:
    """Where the entry's ε = 0 model (the downstream LargeFedBench pretrains on the public corpus: its weights hash,
    which the board groups by) differs from a committed group's on the same data, profile and public resources: what
    the board will show (the entry in a superseded group, or the committed group superseded by the entry's), and how
    to put the entry beside the committed rows instead."""
    from largefedbench.leaderboard.board import mark_superseded

    mine = next((g for g in board.groups if any(r.entry.entry_id == entry.entry_id for r in g.rows)), None)
    if mine is None or not mine.public_model:
        return []
    family = [g for g in board.groups if g.public_model and _family(g) == _family(mine)]
    if len(family) < 2:
        return []
    before = {g.public_model: replace(g, rows=[r for r in g.rows if r.entry.entry_id != entry.entry_id], superseded_by="")
              for g in family}
    mark_superseded([g for g in before.values() if g.rows])  # the board as it was without this entry
    where = f"{mine.dataset} ({mine.profile} profile, window {mine.window[0]} – {mine.window[1]}, public {mine.public})"
    if mine.superseded_by:
        current = next(g for g in family if g.public_model == mine.superseded_by)
        shown = "as a superseded group of one" if len(mine.rows) == 1 else f"in a superseded group of {len(mine.rows)}"
        return [f"this entry's ε = 0 model is {mine.public_model}, but the board's current group for {where} is on ε = 0 "
                f"model {current.public_model} ({_described(current)}): the board will show this entry {shown}, listed "
                f"after that group and compared with none of its rows. To fix: {_fix(current)}"]
    demoted = [g for g in family if g is not mine and g.superseded_by and g.rows and not before[g.public_model].superseded_by]
    return [f"this entry's ε = 0 model is {mine.public_model}, and the board's group for {where} on ε = 0 model "
            f"{g.public_model} ({_described(g)}) will show as superseded by this entry's group, its rows compared with "
            f"none of this entry's. Unless replacing that group is meant: {_fix(g)}"
            for g in demoted]


def _family(g: Group) -> tuple:
    return g.dataset, g.window, g.content_sha256, g.profile, g.public


def _described(g: Group) -> str:
    methods = sorted({r.entry.method.name for r in g.rows})
    return f"{len(g.rows)} {'entry' if len(g.rows) == 1 else 'entries'} of {', '.join(methods)}"


def _fix(g: Group) -> str:
    """How to make an entry on that group's ε = 0 model: the code (and machine) its entries ran on, or all of it anew."""
    newest = max(g.rows, key=lambda r: r.entry.created_at).entry.environment
    at = f"largefedbench {newest.lfb_version}" + (f", commit {newest.git_commit[:12]}" if newest.git_commit else "")
    methods = " ".join(sorted({r.entry.method.name for r in g.rows}))
    return (f"re-run `lfb eval` at the board's code ({at}, as its entries record) on a machine with the same CPU "
            f"and thread count, so the ε = 0 model is pretrained to {g.public_model} again; or re-run the group's methods "
            f"({methods}) with this code, so that their entries form a complete group on the new model.")


def _message(entry: Entry) -> str:
    return (f"leaderboard: {entry.method.name} on {entry.dataset.snapshot} ({entry.config.profile}, ε = "
            f"{entry.privacy.target_epsilon}, {len(entry.seeds)} seeds)")


def _commit(result: SubmitResult, repo: Path, entry: Entry) -> None:
    branch = f"submit/{entry.entry_id}"
    current = _git(repo, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    if current != branch:
        switched = _git(repo, "checkout", "-b", branch)
        if not result.add("branch", switched.returncode == 0, f"created {branch}" if switched.returncode == 0 else
                          f"`git checkout -b {branch}` failed: {switched.stderr.strip()}. Delete or rename the branch, "
                          "or commit the files yourself"):
            return
    paths = [str(p.resolve().relative_to(repo.resolve())) for p in result.files]
    added = _git(repo, "add", "--", *paths)
    committed = _git(repo, "commit", "-q", "-m", _message(entry), "--", *paths) if added.returncode == 0 else added
    if not result.add("commit", committed.returncode == 0, "the entry, its plots and the rendered board" if
                      committed.returncode == 0 else f"git failed: {(committed.stderr or committed.stdout).strip()}"):
        return
    result.branch, result.commit = branch, _git(repo, "rev-parse", "HEAD").stdout.strip()
    shown = _git(repo, "show", "--name-only", "--format=", "-z", result.commit).stdout
    result.committed = [f for f in shown.split("\0") if f]
    remote = _git(repo, "remote").stdout.split()
    push = f"git push -u {remote[0] if remote else 'origin'} {branch}"
    result.steps = [f"push it: {push}", "then open a pull request from that branch; the board's CI runs "
                    "`lfb leaderboard validate` and `lfb leaderboard render --check` on it"]
