"""One computation of a reference row at a time per home.

Two ``lfb eval`` runs that share a home (two lanes of an experiment, a sweep over ε) need the same reference rows
(public, non-private, generator-only) and would both compute an uncached row: minutes of the same work twice. A file
lock beside the row's cache file (``<row>.lock``, so it is keyed exactly as the cache) makes the second run wait for
the first and then read the row the first one cached. Rows with other cache keys never wait for each other. Where the
home cannot hold a lock (read-only, another account's lock file) the row is read or computed without one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

__all__ = ["locked_reference"]


def locked_reference(compute: Callable[[], dict[str, Any]], lock_file: Path, *, what: str,
                     log: Callable[[str], None]) -> dict[str, Any]:
    """``compute()`` (which reads the row's cache or computes and caches it) holding the lock ``lock_file``; when
    another process holds it, say so through ``log`` and wait."""
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lock_file)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log(f"another run sharing this home is computing the {what}; waiting for it (lock {lock_file})")
            lock.acquire()
    except OSError as err:  # a read-only home: nothing to compute twice into it
        log(f"cannot lock {lock_file} ({err.strerror or err}); the {what} is read or computed without the lock")
        return compute()
    try:
        return compute()
    finally:
        lock.release()
