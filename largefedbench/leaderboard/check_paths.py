"""A published entry names no path of the machine that made it: absolute paths (POSIX ``/…``, ``~/…``, Windows
``C:\\…``, UNC ``\\\\host\\…``, ``file:`` URLs) anywhere in an entry, in keys or values, are refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from largefedbench.leaderboard.findings import Finding, error

#: an absolute path starts a string or follows a space, quote, '=', ':', '(', '[', ',' or ';'
#: ("https://host/x" and "owner/name" are not paths of the machine)
ABSOLUTE_PATH = re.compile(r"""(?:^|(?<=[\s=:"'(\[,;]))(?:/(?=[^\s/])|~[\w.-]*/|[A-Za-z]:[\\/]|\\\\(?=[^\\\s]))"""
                           r"""|\bfile:/""")
#: at most this many paths are listed per entry
MAX_LISTED = 5


def _strings(obj: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(field path, string) for every key and string value under ``obj``."""
    if isinstance(obj, str):
        yield where, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            here = f"{where}.{key}" if where else str(key)
            yield here, str(key)
            yield from _strings(value, here)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _strings(value, f"{where}[{i}]")


def local_paths(obj: Any) -> list[tuple[str, str]]:
    """(field path, text) of every key or string under ``obj`` that contains an absolute path."""
    return [(where, text) for where, text in _strings(obj) if ABSOLUTE_PATH.search(text)]


def check_paths(data: dict[str, Any]) -> list[Finding]:
    """One error per field that names an absolute path (the first :data:`MAX_LISTED`, then a count)."""
    found = local_paths(data)
    out = [error("paths", where, f"names a path of the machine that made the entry: {text[:120]!r}",
                 "A published entry names no local path; re-run `lfb eval` with this version (it writes the model "
                 "cache relative to $LFB_HOME and snapshots by name), or use a hub id or package instead of a local "
                 "folder") for where, text in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:
        out.append(error("paths", "entry", f"{len(found) - MAX_LISTED} more fields name local paths",
                         "Remove every local path from the entry"))
    return out
