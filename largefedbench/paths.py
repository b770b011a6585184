"""Where LargeFedBench reads and writes: everything lives under ``$LFB_HOME``.

``LFB_HOME`` defaults to the user's cache directory (``~/.cache/largefedbench`` on Linux). Commands that
write take ``--out`` to put their output somewhere else.
"""

from __future__ import annotations

import os
from pathlib import Path


def lfb_home() -> Path:
    """The root folder of everything the tool writes (``$LFB_HOME`` or the user cache directory)."""
    env = os.environ.get("LFB_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("largefedbench", appauthor=False))


def snapshots_dir(root: Path | None = None) -> Path:
    """Folder holding one sub-folder per snapshot."""
    return (root or lfb_home()) / "snapshots"


def raw_cache_dir(root: Path | None = None) -> Path:
    """Folder holding every raw HTTP response, per source (the scrapers' resume state)."""
    return (root or lfb_home()) / "raw"
