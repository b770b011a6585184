"""``--set KEY=VALUE`` overrides of a method's Config dataclass, and configs as JSON-ready dicts."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any, Literal

from largefedbench.errors import InputError

__all__ = ["config_from_overrides", "config_json", "config_to_dict"]


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A config dataclass as JSON-ready values (inf and nan become strings; tuples become lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        return v

    return {f.name: plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}


def config_json(cfg: Any) -> dict[str, Any]:
    """:func:`config_to_dict` as the entry id's hash reads it (anything not JSON as its ``str``): what crosses between
    the harness and a sandboxed method's process, where both must agree on it."""
    return json.loads(json.dumps(config_to_dict(cfg), default=str))


def _coerce(name: str, text: Any, annotation: Any) -> Any:
    if not isinstance(text, str):
        return text
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if text.lower() in ("none", "null") and type(None) in typing.get_args(annotation):
            return None
        annotation = args[0] if len(args) == 1 else str
        origin = typing.get_origin(annotation)
    if origin is Literal:
        allowed = typing.get_args(annotation)
        if text not in allowed:
            raise InputError(f"--set {name}={text}: must be one of {', '.join(map(str, allowed))}")
        return text
    if origin in (tuple, list):
        inner = typing.get_args(annotation)[0] if typing.get_args(annotation) else str
        return tuple(_coerce(name, part.strip(), inner) for part in text.split(",") if part.strip())
    try:
        if annotation is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if annotation is int:
            return int(text)
        if annotation is float:
            value = float(text)
            if not math.isfinite(value):
                raise InputError(f"--set {name}={text}: must be a finite number (inf and nan are not settings)")
            return value
    except InputError:
        raise
    except ValueError:
        raise InputError(f"--set {name}={text}: expected {annotation.__name__}") from None
    return text


def config_from_overrides(config_cls: type, base: Any, overrides: dict[str, str]) -> Any:
    """``base`` with ``overrides`` (``--set key=value`` strings) applied, typed from the dataclass fields.

    An unknown key stops with the list of the config's keys."""
    hints = typing.get_type_hints(config_cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise InputError(
            f"unknown --set key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for {config_cls.__qualname__}; "
            f"its keys are: {', '.join(sorted(known))}"
        )
    values = {k: _coerce(k, v, hints.get(k, str)) for k, v in overrides.items()}
    try:
        return dataclasses.replace(base, **values)
    except (TypeError, ValueError) as exc:
        raise InputError(f"--set: {exc}") from None
