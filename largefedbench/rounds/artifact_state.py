"""A method's artifact as tensors and JSON: a model artifact's module is kept as its weights (class name, training
flag, ``state_dict``) and loaded back into a fresh model of the same class and layout. Used for the method output a
seed keeps while it is evaluated, and for the artifact a sandboxed method's process hands to the harness."""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["join_model", "split_model"]


def _is_module(model: Any) -> bool:
    torch = sys.modules.get("torch")  # a model artifact is a torch module, so torch is loaded
    return torch is not None and isinstance(model, torch.nn.Module)


def _class_name(model: Any) -> str:
    return f"{type(model).__module__}.{type(model).__qualname__}"


def _layout(weights: dict[str, Any]) -> dict[str, tuple]:
    return {k: (v.dtype, tuple(v.shape)) for k, v in weights.items()}


def split_model(artifact: Any) -> tuple[Any, dict[str, Any] | None]:
    """``(artifact without its model, the model's weights record)``; ``(artifact, None)`` when it holds no module."""
    model = getattr(artifact, "model", None)
    if model is None or not dataclasses.is_dataclass(artifact) or not _is_module(model):
        return artifact, None
    weights = {"class": _class_name(model), "training": bool(model.training), "state": model.state_dict()}
    artifact = copy.copy(artifact)  # not dataclasses.replace: attributes set besides the fields stay
    object.__setattr__(artifact, "model", None)
    return artifact, weights


def join_model(artifact: Any, weights: dict[str, Any] | None, new_model: Callable[[], Any], device) -> bool:
    """Put the model ``weights`` describes back into ``artifact``: a ``new_model()`` on ``device`` of the same class and
    layout; False (and nothing set) when they do not fit it."""
    if weights is None:
        return True
    model = new_model().to(device)
    if _class_name(model) != weights["class"] or _layout(model.state_dict()) != _layout(weights["state"]):
        return False
    model.load_state_dict(weights["state"])
    object.__setattr__(artifact, "model", model.train(bool(weights["training"])))
    return True
