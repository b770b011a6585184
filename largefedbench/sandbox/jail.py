"""The OS guard around a method's process: Linux user, mount, PID, network, IPC and UTS namespaces (``unshare`` from
util-linux, no privileges needed where unprivileged user namespaces are enabled), every capability dropped before the
process starts (``setpriv``), so it cannot leave its root or mount anything.

Inside, the process sees a fresh root (tmpfs) holding read-only binds of the system folders, the Python install and
the folders its code imports from, the profile's model cache, and one writable folder (the seed's method folder).
The LFB home, the snapshot and the board are covered by empty tmpfs where a bind would show them; there is no
network (a new, unconfigured network namespace) and no other process (a new PID namespace and its own /proc).
Where ``unshare`` cannot create the namespaces the method still runs in its own process (``process``), and the entry
says so.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["JAIL", "NO_JAIL", "jail_available", "jailed_command"]

JAIL = "namespaces"  # the entry's sandbox field: the method ran behind the OS guard
NO_JAIL = "process"  # in its own process, without the OS guard (no unprivileged namespaces here)
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys")
_UNSHARE = ("unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--net", "--ipc", "--uts",
            "--kill-child")
#: run after the mounts, before the process: no capability (the namespace's root could chroot out of its root, or
#: mount), none to regain through exec, no new privileges
_DROP_CAPS = ("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
#: environment variables the method's process keeps (models, threads, offline switches); nothing else crosses
KEPT_ENV = ("LFB_HOME", "LFB_SPAN_TOKENIZER", "LFB_GENERATION_DTYPE", "LFB_TRAINING_DTYPE", "HF_HOME", "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS",
            "TOKENIZERS_PARALLELISM",
            "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


@functools.lru_cache(maxsize=1)
def jail_available() -> str | None:
    """None when the namespaces can be created here, else why not."""
    if sys.platform != "linux":
        return f"no Linux namespaces on {sys.platform}"
    if any(shutil.which(tool) is None for tool in ("unshare", "mount", "setpriv", "chroot")):
        return "util-linux's unshare, mount or setpriv, or coreutils' chroot, is not installed"
    try:
        done = subprocess.run([*_UNSHARE, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed ({exc})"
    if done.returncode != 0:
        return f"unshare could not create the namespaces: {done.stderr.decode(errors='replace').strip()}"
    return None


def _existing(paths: Iterable[str | Path]) -> list[str]:
    """The folders and files among ``paths`` that exist, symlinks resolved, each once."""
    seen: list[str] = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.exists(real) and real != "/" and real not in seen:
            seen.append(real)
    return seen


def _links(paths: Iterable[str | Path]) -> list[str]:
    """``ln -s`` lines recreating the symlinks among ``paths`` (``/lib`` -> ``usr/lib`` on a merged /usr, a venv's
    ``python``), whose targets :func:`_existing` binds."""
    lines = []
    for p in map(str, paths):
        if os.path.islink(p):
            dst = shlex.quote("$R" + p).replace("'$R", "\"$R\"'", 1)
            lines.append(f"if [ ! -e {dst} ]; then mkdir -p \"$(dirname {dst})\" && ln -s {shlex.quote(os.readlink(p))} {dst}; fi")
    return lines


def _bind(src: str, *, read_only: bool) -> str:
    dst = shlex.quote("$R" + src).replace("'$R", "\"$R\"'", 1)  # "$R"'/path' keeps $R expanded, the path literal
    make = f"mkdir -p {dst}" if os.path.isdir(src) else f"mkdir -p \"$(dirname {dst})\" && touch {dst}"
    line = f"{make} && mount --rbind {shlex.quote(src)} {dst}"
    return line + (f" && mount -o remount,bind,ro {dst}" if read_only else "")


def _hide(path: str) -> str:
    dst = shlex.quote("$R" + path).replace("'$R", "\"$R\"'", 1)
    return f"mkdir -p {dst} && mount -t tmpfs -o size=4k,mode=0555 lfb-hidden {dst}"


def _seal(path: str) -> str:
    dst = shlex.quote("$R" + path).replace("'$R", "\"$R\"'", 1)
    return f"mount -o remount,ro {dst}"


def jailed_command(argv: list[str], *, root: str | Path, read_only: Iterable[str | Path], writable: Iterable[str | Path],
                   hidden: Iterable[str | Path], env: dict[str, str]) -> list[str]:
    """``argv`` run in the namespaces, chrooted to a tmpfs mounted (in the new mount namespace only) on the empty
    folder ``root``: ``read_only`` folders bound at their own paths (after the system folders), then ``hidden``
    covered by empty tmpfs, then ``read_only`` binds that lie inside a hidden folder (the model cache inside the
    home) bound again, then the ``writable`` ones; ``env`` is the whole environment."""
    ro, rw, hide = _existing(read_only), _existing(writable), _existing(hidden)
    inside_hidden = [p for p in ro if any(p == h or p.startswith(h + os.sep) for h in hide)]
    steps = ["set -e", f"R={shlex.quote(os.path.realpath(root))}", "mount -t tmpfs lfb-root \"$R\"",
             "mkdir -p \"$R/tmp\" && mount -t tmpfs lfb-jail-tmp \"$R/tmp\""]  # first: binds below /tmp go on top
    steps += [_bind(p, read_only=True) for p in _existing(SYSTEM) + [p for p in ro if p not in inside_hidden]]
    steps += _links([*SYSTEM, *read_only])
    steps += ["mkdir -p \"$R/dev\" && mount --rbind /dev \"$R/dev\""]
    steps += [_hide(p) for p in hide]
    steps += [_bind(p, read_only=True) for p in inside_hidden]
    steps += [_bind(p, read_only=False) for p in rw]
    steps += [_seal(p) for p in hide]  # read-only once the binds inside have their mount points
    steps += ["mkdir -p \"$R/proc\" \"$R/dev/shm\"", "mount -t proc proc \"$R/proc\"",
              "mount -t tmpfs lfb-jail-shm \"$R/dev/shm\""]
    launch = shlex.join(["chroot", "$R", *_DROP_CAPS, "env", "-i", *[f"{k}={v}" for k, v in sorted(env.items())], *argv])
    steps += ["exec " + launch.replace("'$R'", "\"$R\"", 1)]
    return [*_UNSHARE, "sh", "-c", "\n".join(steps)]


def kept_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a method's process: ``PATH``, ``HOME=/tmp``, :data:`KEPT_ENV` where set, and ``extra``."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update({k: os.environ[k] for k in KEPT_ENV if k in os.environ})
    env.update(extra or {})
    return env
