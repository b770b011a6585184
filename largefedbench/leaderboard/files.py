"""Where entries live and how they are read: ``<board>/entries/<dataset>/<method>/<entry-id>.json``.

Entry files come from pull requests, so reading them is defensive: only regular files inside the board's
``entries`` folder are read (a symlink that leads out of it is refused, never followed), files are size-capped,
and nothing in a file decides where the tool reads or writes (ids are checked against the safe pattern before
they are used in a path).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENTRIES = "entries"
#: an entry larger than this is refused unread (the biggest real entries, with long histories, are ~1 MB)
MAX_ENTRY_BYTES = 16 * 2**20
#: ``<entry-id>.reproduced.json`` beside an entry is its reproduction record (see reproduced.py), not an entry
RECORD_SUFFIX = ".reproduced.json"
#: JSON nested deeper than this is refused (real entries nest about 6 deep; the checks and pydantic recurse)
MAX_NESTING = 64


class UnsafePathError(Exception):
    """A path that would make the tool read outside the leaderboard folder."""


@dataclass(frozen=True)
class EntryFile:
    """One candidate entry file: its path as found, and the board folder it belongs to (None if not under one)."""

    path: Path
    board: Path | None

    @property
    def entries_dir(self) -> Path | None:
        return self.board / ENTRIES if self.board is not None else None


def board_of(path: Path) -> Path | None:
    """The board folder of an entry path: the parent of the nearest ancestor named ``entries``."""
    for parent in path.absolute().parents:
        if parent.name == ENTRIES:
            return parent.parent
    return None


def expected_path(board: Path, dataset: str, method: str, entry_id: str) -> Path:
    """Where an entry with these (already checked) ids must be stored."""
    return board / ENTRIES / dataset / method / f"{entry_id}.json"


def inside(path: Path, folder: Path) -> bool:
    """Does ``path``, with every symlink resolved, stay inside ``folder`` (also resolved)?"""
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def find_entry_files(paths: list[Path]) -> tuple[list[EntryFile], list[tuple[Path, str]]]:
    """Every ``*.json`` under each path (a folder, or one file), without following symlinked folders.

    Returns the candidate files and the refused paths with the reason (symlinked folders, missing paths).
    """
    found: list[EntryFile] = []
    refused: list[tuple[Path, str]] = []
    for given in paths:
        if given.name.endswith(RECORD_SUFFIX) and given.is_file():  # checked with its entry
            if not given.with_name(given.name.removesuffix(RECORD_SUFFIX) + ".json").exists():
                refused.append((given, "a reproduction record without its entry beside it"))
        elif given.is_file() or (given.is_symlink() and not given.is_dir()):
            found.append(EntryFile(given, board_of(given)))
        elif given.is_dir():
            files, bad = _walk(given)
            found.extend(files)
            refused.extend(bad)
        else:
            refused.append((given, "no such file or folder"))
    return found, refused


def _walk(folder: Path) -> tuple[list[EntryFile], list[tuple[Path, str]]]:
    files: list[EntryFile] = []
    refused: list[tuple[Path, str]] = []
    for here, dirs, names in os.walk(folder, followlinks=False):
        base = Path(here)
        for d in sorted(dirs):
            if (base / d).is_symlink():
                refused.append((base / d, "a symlinked folder; entries are read from real folders only"))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (base / d).is_symlink())
        for name in sorted(names):
            if name.endswith(RECORD_SUFFIX) and not name.startswith("."):
                if not (base / (name.removesuffix(RECORD_SUFFIX) + ".json")).exists():
                    refused.append((base / name, "a reproduction record without its entry beside it"))
            elif name.endswith(".json") and not name.startswith("."):
                files.append(EntryFile(base / name, board_of(base / name)))
    return files, refused


def read_entry_json(item: EntryFile) -> Any:
    """The parsed JSON of an entry file, refusing anything outside the board's entries folder.

    Raises :class:`UnsafePathError` (refused unread), ``OSError`` or ``ValueError`` (unreadable / not JSON).
    """
    entries = item.entries_dir
    if entries is None:
        raise UnsafePathError(f"{item.path} is not inside a leaderboard `{ENTRIES}/` folder")
    if not inside(item.path, entries):
        raise UnsafePathError(f"{item.path} leads outside {entries} (through a symlink or '..')")
    if not item.path.resolve().is_file():
        raise UnsafePathError(f"{item.path} is not a regular file")
    size = item.path.stat().st_size
    if size > MAX_ENTRY_BYTES:
        raise UnsafePathError(f"{item.path} is {size / 2**20:.1f} MB, over the {MAX_ENTRY_BYTES // 2**20} MB limit")
    too_deep = ValueError(f"nested deeper than {MAX_NESTING} levels of arrays/objects (entries nest about 6 deep)")
    try:
        data = json.loads(item.path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicate_keys)
    except RecursionError:  # the parser gave up on the nesting
        raise too_deep from None
    if nesting_depth(data) > MAX_NESTING:
        raise too_deep
    return data


def nesting_depth(obj: Any) -> int:
    """How deep arrays/objects nest in parsed JSON (0 for a scalar), without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse duplicate keys: parsers disagree on which one wins, so an entry must not have any."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out
