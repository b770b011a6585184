"""Renamed keyword arguments kept for one release: the old name still works, warns, and never silently wins.

The one left is ``load_models(root=)`` (``home=``); those whose release has passed are gone (CHANGELOG.md)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from largefedbench.errors import InputError


def renamed_path(where: str, new_name: str, new: Any, old_name: str, old: Any, *, stacklevel: int = 3) -> Any:
    """The value of ``new_name``, taking the deprecated ``old_name`` if only it was given (with a DeprecationWarning);
    both given with different paths: an :class:`InputError` (``where`` names the call in messages)."""
    if old is None:
        return new
    warnings.warn(f"{where}({old_name}=...) is now {where}({new_name}=...); {old_name}= goes away in the next release",
                  DeprecationWarning, stacklevel=stacklevel)
    if new is not None and Path(new) != Path(old):
        raise InputError(f"{where} got {new_name}={new} and {old_name}={old}: give {new_name} only")
    return old
