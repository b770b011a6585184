"""The raw response cache and per-range checkpoints that make a refresh resumable.

Every HTTP response is stored on disk, byte for byte, before it is parsed. A refresh that is killed
re-reads what it already stored (no network) and continues from its checkpoint; a parser fix re-runs
from the cache alone. A killed run can leave half-written temp files (``.<name>.<random>.tmp``, see
:func:`largefedbench.io.atomic_write_bytes`); the next run that has the cache to itself removes them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import weakref
from pathlib import Path
from typing import Any

from largefedbench.io import atomic_write_bytes, atomic_write_json

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; only temp files older than STALE_TMP_AGE are removed
    fcntl = None

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")
LOCK_NAME = ".lock"
STALE_TMP_AGE = 3600.0  # seconds; without locks, a temp file this old belongs to no live writer


def cache_key(path: str, params: dict[str, Any] | None = None) -> str:
    """A readable, file-system-safe key for a request path and its (non-secret) query parameters."""
    parts = [_UNSAFE.sub("_", p) for p in path.strip("/").split("/") if p]
    if params:
        query = "&".join(f"{k}={params[k]}" for k in sorted(params))
        parts[-1] = f"{parts[-1]}__{_UNSAFE.sub('_', query)}"
    key = "/".join(parts) or "index"
    # Keep every path component short; long ones get a stable hash suffix.
    safe = []
    for part in key.split("/"):
        if len(part) > 150:
            part = part[:100] + "-" + hashlib.sha256(part.encode()).hexdigest()[:16]
        safe.append(part)
    return "/".join(safe)


class RawCache:
    """A folder of raw responses for one source: ``<root>/<source>/<key>.raw``."""

    def __init__(self, root: Path, source: str) -> None:
        self.dir = Path(root) / source
        self._lock: int | None = None

    def open(self) -> None:
        """Start using the cache (idempotent; every read and write calls it).

        Takes a shared lock on ``<dir>/.lock`` for as long as this object lives. If no other run holds it, the
        temp files of a killed run are removed first (under an exclusive lock, so no live writer loses one).
        """
        if self._lock is not None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        weakref.finalize(self, os.close, fd)  # closing the file releases the lock
        if fcntl is None:
            self.remove_leftovers(older_than=STALE_TMP_AGE)
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another run uses this cache: its temp files may be in flight
                pass
            else:
                self.remove_leftovers()
            fcntl.flock(fd, fcntl.LOCK_SH)
        self._lock = fd

    def remove_leftovers(self, older_than: float = 0.0) -> int:
        """Remove the temp files of interrupted atomic writes (older than ``older_than`` seconds)."""
        removed = 0
        now = time.time()
        for p in self.dir.rglob(".*.tmp"):
            try:
                if p.is_file() and now - p.stat().st_mtime >= older_than:
                    p.unlink()
                    removed += 1
            except FileNotFoundError:  # gone meanwhile
                continue
        if removed:
            log.info("%s: removed %d temp file(s) left by an interrupted run", self.dir, removed)
        return removed

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.raw"

    def get(self, key: str) -> bytes | None:
        self.open()
        p = self.path(key)
        return p.read_bytes() if p.is_file() else None

    def put(self, key: str, body: bytes) -> Path:
        self.open()
        p = self.path(key)
        atomic_write_bytes(p, body)
        return p

    def quarantine(self, key: str) -> Path | None:
        """Move a stored response that failed to parse aside (kept for inspection, never re-used)."""
        self.open()
        p = self.path(key)
        if not p.is_file():
            return None
        bad = p.with_suffix(".bad")
        p.replace(bad)
        return bad


class Checkpoint:
    """A small JSON state file (e.g. the next cursor of a paged range), written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            return json.loads(self.path.read_text())
        except json.JSONDecodeError:
            # A checkpoint is only an optimisation over the response cache: start the range again.
            return {}

    def save(self, state: dict[str, Any]) -> None:
        atomic_write_json(self.path, state)
