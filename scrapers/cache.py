"""The raw response cache and per-range checkpoints that make a refresh resumable.

Every HTTP response is stored on disk, byte for byte, before it is parsed. A refresh that is killed
re-reads what it already stored (no network) and continues from its checkpoint; a parser fix re-runs
from the cache alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from largefedbench.io import atomic_write_bytes, atomic_write_json

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


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

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.raw"

    def get(self, key: str) -> bytes | None:
        p = self.path(key)
        return p.read_bytes() if p.is_file() else None

    def put(self, key: str, body: bytes) -> Path:
        p = self.path(key)
        atomic_write_bytes(p, body)
        return p

    def quarantine(self, key: str) -> Path | None:
        """Move a stored response that failed to parse aside (kept for inspection, never re-used)."""
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
