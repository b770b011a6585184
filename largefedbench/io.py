"""Atomic writes: a reader never sees a half-written file, and a killed job leaves the old file intact."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from the home's other users
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def publish_dir(tmp_dir: Path, final_dir: Path) -> None:
    """Move a fully written folder into place with one rename; refuse to replace an existing folder."""
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    if final_dir.exists():
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise FileExistsError(final_dir)
    os.replace(tmp_dir, final_dir)


def build_dir_once(final_dir: Path, marker: str, build: Callable[[Path], None]) -> bool:
    """Make ``final_dir`` exist with its ``marker`` file, building it on first use; returns True on a cache hit.

    ``build(tmp)`` writes everything (``marker`` last) into a temporary sibling folder, which is published with one
    rename, so a killed build never leaves a half-written folder. A folder without its marker is debris and is
    rebuilt; a concurrent build that published first wins (both built the same thing).
    """
    if (final_dir / marker).is_file():
        return True
    if final_dir.exists():
        shutil.rmtree(final_dir)
    tmp = final_dir.parent / f".tmp-{final_dir.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        publish_dir(tmp, final_dir)
    except FileExistsError:
        pass
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return False


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file, gzipped when its name ends in ``.gz`` (blank lines skipped)."""
    import gzip

    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
