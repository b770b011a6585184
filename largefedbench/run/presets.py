"""A method's settings for a preset: the paper's defaults, the ``cpu`` profile's, or the tiny CPU tests'."""

from __future__ import annotations

import dataclasses
from typing import Any

from largefedbench.config_overrides import config_to_dict
from largefedbench.errors import InputError

__all__ = ["PRESETS", "preset_config", "preset_or_none", "settings_table"]

PRESETS = ("paper", "cpu", "tiny")  # every method has these
MATCHED = "matched"  # only the methods whose cpu preset costs several times POPri's
#: the methods whose ``cpu`` preset costs several times POPri's have a ``matched`` one at about POPri's minutes a seed
MATCHED_COMPUTE = "about POPri's cpu-preset minutes a seed on 2 cores (≈ 13)"


def preset_config(method_cls: type, preset: str) -> Any:
    """A method's defaults for ``preset``: ``Config.paper()`` or ``Config()`` (the paper's), ``Config.cpu()`` (the
    ``cpu`` profile's ~15-minute settings), ``Config.tiny()`` (CPU tests) or ``Config.matched()`` (the cpu profile
    at POPri's compute, for the methods that have it). A Config with settings and no ``cpu()`` is
    refused for the cpu preset (its tiny settings would run silently); one without settings is the same everywhere."""
    if preset not in (*PRESETS, MATCHED):
        raise InputError(f"--preset {preset!r}: use paper (the paper's defaults), cpu (the cpu profile's), tiny (CPU "
                         "tests) or matched (the cpu profile at POPri's compute, where a method has it)")
    cfg = method_cls.Config
    if preset == MATCHED:
        if not callable(getattr(cfg, "matched", None)):
            name = getattr(method_cls, "name", method_cls.__name__)
            raise InputError(f"method {name!r} has no matched preset: it is for the methods whose cpu preset costs "
                             f"several times POPri's (dp-resample, ctcl, weak-client-voting), run at {MATCHED_COMPUTE}; "
                             "use --preset cpu")
        return cfg.matched()
    if preset == "paper":
        paper = getattr(cfg, "paper", None)
        return (paper if callable(paper) else cfg)()
    if preset == "cpu" and not callable(getattr(cfg, "cpu", None)):
        if dataclasses.is_dataclass(cfg) and not dataclasses.fields(cfg):
            return cfg.tiny()
        name = getattr(method_cls, "name", method_cls.__name__)
        raise InputError(f"method {name!r} has no cpu preset: its Config ({cfg.__name__}) has no cpu() classmethod. Add "
                         "`@classmethod def cpu(cls)` with the settings for the cpu profile (see `lfb new method`), or "
                         "run its tiny settings on purpose with --preset tiny")
    return (cfg.cpu if preset == "cpu" else cfg.tiny)()


def preset_or_none(method_cls: type, preset: str) -> Any:
    """:func:`preset_config`, or None for a preset the method does not have."""
    try:
        return preset_config(method_cls, preset)
    except InputError:
        return None


def settings_table(method_cls: type, configs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every setting of the method's Config (what ``lfb eval --set KEY=VALUE`` takes): its type and its value in each
    preset, in the Config's field order (``lfb methods NAME``). ``configs``: each preset's configuration or its JSON
    (None where the method has none) when the class cannot make them here (a plug-in described by its sandbox)."""
    if configs is None:
        configs = {preset: preset_or_none(method_cls, preset) for preset in PRESETS}
    values = {preset: {} if (cfg := configs.get(preset)) is None else cfg if isinstance(cfg, dict) else config_to_dict(cfg)
              for preset in PRESETS}
    return [{"setting": f.name, "type": f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)),
             **{preset: values[preset].get(f.name) for preset in PRESETS}}
            for f in dataclasses.fields(method_cls.Config)]
