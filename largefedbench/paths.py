"""Where LargeFedBench reads and writes: everything lives under ``$LFB_HOME``.

``LFB_HOME`` defaults to the user's cache directory (``~/.cache/largefedbench`` on Linux). Commands that
write take ``--out`` to put their output somewhere else.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def lfb_home() -> Path:
    """The root folder of everything the tool writes (``$LFB_HOME`` or the user cache directory)."""
    env = os.environ.get("LFB_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("largefedbench", appauthor=False))


def home_root(root: Path | str | None = None) -> Path:
    """``root`` as a path (a string is fine), or :func:`lfb_home` when it is None."""
    return Path(root).expanduser() if root else lfb_home()


def snapshots_dir(root: Path | str | None = None) -> Path:
    """Folder holding one sub-folder per snapshot."""
    return home_root(root) / "snapshots"


def raw_cache_dir(root: Path | str | None = None) -> Path:
    """Folder holding every raw HTTP response, per source (the scrapers' resume state)."""
    return home_root(root) / "raw"


#: errnos of a write that failed because of where it writes (not because of a bug)
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR}


def check_writable_dir(path: Path, what: str) -> None:
    """Raise :class:`InputError` unless ``path`` is (or can be created as) a folder this process may write into.

    Nothing is created: the nearest existing ancestor must be a writable folder. ``what`` names the setting
    in the message, e.g. ``"--out /x"`` or ``"LFB_HOME=/x"``.
    """
    from largefedbench.errors import InputError

    probe = Path(path).expanduser().absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"{what}: {probe} is a file, not a folder; pass a folder (it is created if missing)")
    if not os.access(probe, os.W_OK | os.X_OK):
        flag = what.split("=")[0].split()[0]  # the setting the user gave: --out, --board, --home or LFB_HOME
        raise InputError(f"{what}: cannot write into {probe} (read-only or permission denied); "
                         f"{'set' if flag == 'LFB_HOME' else 'pass'} {flag} a writable folder")


HOME_FLAG = "--home DIR (the home: snapshots, caches)"
HOME_OR_BOARD = f"{HOME_FLAG} or --out DIR (the board)"


def write_error_message(exc: OSError, what: str, elsewhere: str = HOME_OR_BOARD) -> str:
    """A user-facing sentence for a write that failed with ``exc`` (disk full, read-only, permissions);
    ``elsewhere`` names the flags that move what was being written (:data:`HOME_FLAG` where only the home is)."""
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{what} failed: the disk is full{where}. Free some space or pass {elsewhere} on another disk, and run the same command again"
    if exc.errno == errno.EROFS:
        return f"{what} failed: the file system is read-only{where}. Pass {elsewhere} on a writable one"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what} failed: permission denied{where}. Pass {elsewhere} that you may write into"
    return f"{what} failed: {exc.strerror or exc}{where}. Check the folders given as {elsewhere}"
