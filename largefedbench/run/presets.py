"""A method's settings for a preset: the paper's defaults, the ``cpu`` profile's, or the tiny CPU tests'."""

from __future__ import annotations

import dataclasses
from typing import Any

from largefedbench.config_overrides import config_to_dict
from largefedbench.errors import InputError

__all__ = ["PRESETS", "preset_config", "settings_table"]

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


def settings_table(method_cls: type) -> list[dict[str, Any]]:
    """Every setting of the method's Config (what ``lfb eval --set KEY=VALUE`` takes): its type and its value in each
    preset, in the Config's field order (``lfb methods NAME``)."""
    values = {preset: config_to_dict(preset_config(method_cls, preset)) for preset in PRESETS}
    return [{"setting": f.name, "type": f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)),
             **{preset: values[preset][f.name] for preset in PRESETS}}
            for f in dataclasses.fields(method_cls.Config)]
