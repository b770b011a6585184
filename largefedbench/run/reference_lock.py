"""One computation of a reference row at a time per home.

Two ``lfb eval`` runs that share a home (two lanes of an experiment, a sweep over ε) need the same reference rows
(public, non-private, generator-only) and would both compute an uncached row: minutes of the same work twice. A file
lock per (snapshot, row, seed) under ``<home>/references/.locks/`` makes the second run wait for the first and then
read the row the first one cached. Rows of different snapshots or seeds never wait for each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from filelock import FileLock, Timeout

__all__ = ["locked_reference"]


def lock_path(home: Path, snapshot_sha256: str, name: str, seed: int | None) -> Path:
    """The lock file of the row ``name`` of ``seed`` (None: the seedless public row) on one snapshot."""
    row = name if seed is None else f"{name}-seed{seed}"
    return Path(home) / "references" / ".locks" / f"{snapshot_sha256[:16]}-{row}.lock"


def locked_reference(compute: Callable[[], dict[str, Any]], path: Path, *, what: str,
                     log: Callable[[str], None]) -> dict[str, Any]:
    """``compute()`` (which reads the row's cache or computes and caches it) holding the lock at ``path``; when another
    process holds it, say so through ``log`` and wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"another run sharing this home is computing the {what}; waiting for it (lock {path})")
        lock.acquire()
    try:
        return compute()
    finally:
        lock.release()
