"""A method's settings for a preset: the paper's defaults, the ``cpu`` profile's, or the tiny CPU tests'."""

from __future__ import annotations

from typing import Any

from largefedbench.errors import InputError

__all__ = ["PRESETS", "preset_config"]

PRESETS = ("paper", "cpu", "tiny")


def preset_config(method_cls: type, preset: str) -> Any:
    """A method's defaults for ``preset``: ``Config()`` (the paper's), ``Config.cpu()`` (the ``cpu`` profile's
    ~15-minute settings; a method without one uses ``Config.tiny()``) or ``Config.tiny()`` (CPU tests)."""
    if preset not in PRESETS:
        raise InputError(f"--preset {preset!r}: use paper (the paper's defaults), cpu (the cpu profile's) or tiny (CPU tests)")
    if preset == "paper":
        return method_cls.Config()
    factory = getattr(method_cls.Config, "cpu", None) if preset == "cpu" else None
    return (factory or method_cls.Config.tiny)()
