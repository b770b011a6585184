"""Where a plug-in method's code can be found again: the installed distribution that holds its module and,
for a source checkout (an editable or local-folder install, or a module inside a git work tree) or a ``pip install
git+URL@COMMIT``, the repository's URL, the commit and whether the method's files differ from it (``dirty``).

An entry records this (:func:`method_provenance`); ``lfb leaderboard submit`` checks it against this machine
(:func:`installed_origin`, :func:`commit_pushed`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from largefedbench.leaderboard.check_paths import ABSOLUTE_PATH
from largefedbench.registry import distribution_of, module_location

__all__ = ["Origin", "commit_pushed", "git_checkout", "installed_origin", "method_provenance", "public_url"]


#: what running or installing a package writes beside its code, not part of it (git pathspecs)
BUILD_OUTPUTS = (":(exclude,glob)**/__pycache__/**", ":(exclude,glob)**/*.pyc", ":(exclude,glob)**/build/**",
                 ":(exclude,glob)**/*.egg-info/**")


@dataclass(frozen=True)
class Origin:
    """How a method's module is installed here."""

    distribution: str | None  # the distribution holding the module (None: a module on sys.path only)
    version: str | None
    installed: str  # "index" (pip install NAME==VERSION), "local" (a folder or file), "vcs" (git+URL), "none"
    code: Path | None  # the module's file, or for a non-editable folder install the folder it was built from
    vcs: dict | None = None  # {"url", "commit"} of a ``pip install git+URL@COMMIT``


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=False)


def public_url(url: str | None) -> str | None:
    """``url`` as an entry may name it: credentials dropped; None for a local folder (not a place others can reach)."""
    url = (url or "").strip()
    if not url or ABSOLUTE_PATH.search(url) or url.startswith(("file:", ".", "~")):
        return None
    if "://" in url:
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))
    return url if re.fullmatch(r"[\w.-]+@[\w.-]+:[^\s]+", url) else None  # scp-like git@host:owner/repo


def _module_file(module: str) -> Path | None:
    """The module's file: from the loaded module, else found without importing it (a sandboxed plug-in's code never
    runs in the harness)."""
    mod = sys.modules.get(module)
    file = getattr(mod, "__file__", None) if mod is not None else None
    return Path(file).resolve() if file else module_location(module)


def installed_origin(module: str, file: Path | None = None) -> Origin:
    """How ``module`` (a dotted name; ``file``, its file where the import system cannot find it, as a method file's)
    is installed: by the distribution's ``direct_url.json`` (PEP 610), which pip writes for folder, file and VCS
    installs and not for installs from a package index."""
    file = file or _module_file(module)
    dist = distribution_of(module)
    if dist is None:
        return Origin(None, None, "none", file)
    direct = json.loads(dist.read_text("direct_url.json") or "null")
    if direct is None:  # an index install, unless a legacy `setup.py develop` left the module in a checkout
        return Origin(dist.name, dist.version, "index" if git_checkout(file) is None else "local", file)
    url = direct.get("url", "")
    if "vcs_info" in direct:
        return Origin(dist.name, dist.version, "vcs", file,
                      {"url": url, "commit": direct["vcs_info"].get("commit_id", "")})
    if "dir_info" in direct and not direct["dir_info"].get("editable") and url.startswith("file:"):
        return Origin(dist.name, dist.version, "local", Path(unquote(urlsplit(url).path)))
    return Origin(dist.name, dist.version, "local", file)


def git_checkout(code: Path | None) -> Path | None:
    """The git work tree that holds ``code`` (a file or folder) as a file it does not ignore, else None."""
    if code is None or not code.exists():
        return None
    folder = code if code.is_dir() else code.parent
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0 or _git(folder, "check-ignore", "-q", str(code)).returncode == 0:
        return None  # not in a work tree, or e.g. a venv's site-packages inside one
    return Path(top.stdout.strip())


def _repository(code: Path) -> dict | None:
    checkout = git_checkout(code)
    if checkout is None:
        return None
    commit = _git(checkout, "rev-parse", "HEAD")
    if commit.returncode != 0:
        return None  # a work tree with no commit yet
    # the method's own files (its package folder, or the module) against the commit, untracked files included
    scope = code.parent if code.is_file() and code.name == "__init__.py" else code
    dirty = bool(_git(checkout, "status", "--porcelain", "--", str(scope), *BUILD_OUTPUTS).stdout.strip())
    remotes = _git(checkout, "remote").stdout.split()
    remote = "origin" if "origin" in remotes else (remotes[0] if remotes else None)
    url = _git(checkout, "remote", "get-url", remote).stdout.strip() if remote else None
    return {"url": public_url(url), "commit": commit.stdout.strip(), "dirty": dirty}


def method_provenance(module: str, file: Path | None = None) -> dict:
    """What an entry records of a plug-in's code: ``distribution`` (None without one) and ``repository``
    ({"url", "commit", "dirty"} for a source checkout or a VCS install, else None)."""
    origin = installed_origin(module, file)
    if origin.installed == "vcs" and re.fullmatch(r"[0-9a-f]{7,64}", origin.vcs["commit"]):
        repo = {"url": public_url(origin.vcs["url"]), "commit": origin.vcs["commit"], "dirty": False}
    elif origin.installed in ("local", "none", "vcs"):
        repo = _repository(origin.code) if origin.code is not None else None
    else:
        repo = None
    return {"distribution": origin.distribution, "repository": repo}


def commit_pushed(checkout: Path, commit: str) -> tuple[bool, str]:
    """Is ``commit`` in ``checkout`` (``git cat-file -e``) and on one of its remote-tracking branches?"""
    if _git(checkout, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return False, f"commit {commit[:12]} is not in the checkout {checkout}"
    branches = _git(checkout, "branch", "-r", "--contains", commit).stdout.split()
    branches = [b for b in branches if b != "->" and not b.endswith("/HEAD")]
    if not branches:
        return False, (f"commit {commit[:12]} is in the checkout {checkout} but on no remote branch: "
                       "push it (`git push`), then submit again")
    return True, f"on {branches[0]}"
