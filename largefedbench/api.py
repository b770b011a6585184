"""Everything a method author needs, in one import::

    from largefedbench.api import Artifact, Gaussian, Method, PoissonGaussianEvent, RoundsLoop

The contract (:class:`Method`, :class:`Artifact`, :class:`PublicResources`, model selection through
``fed.selection``: :class:`Selection`), the budget and the DP events to
calibrate for, the mechanisms a release goes through (``fed.private_sum(..., mechanism=Gaussian(σ))``), the views a
client function receives, the rounds loop every method runs in and what a round's history may say about its cohort,
and the errors to raise. It offers no way to write un-noised statistics anywhere (``rounds.record_unreleased`` is for
built-in diagnostics, never a plug-in's).
How to write a method: CONTRIBUTING.md; the map: docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from largefedbench.client_views import ChunkView, ClientView
from largefedbench.contract import Artifact, Method, NoSettings, PublicResources, Selection, selection_of
from largefedbench.errors import InputError, MethodError
from largefedbench.federation import Federation
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, TreeAggregationEvent
from largefedbench.privacy.events import GaussianEvent
from largefedbench.privacy.mechanisms import Gaussian, NoNoise, TreeAggregation, TreePrefixSum
from largefedbench.rounds import RoundsLoop, cohort_fields, draw_cohort
from largefedbench.synthetic.noise import noise_for_rounds

if TYPE_CHECKING:
    from largefedbench.fedtrain import FlatParams, Release, Server, train_rounds

#: names whose module imports torch: imported on first use, so ``import largefedbench.api`` stays light
_NEEDS_TORCH = {"FlatParams": "largefedbench.fedtrain", "Release": "largefedbench.fedtrain",
                "Server": "largefedbench.fedtrain", "train_rounds": "largefedbench.fedtrain"}


def __getattr__(name: str) -> Any:
    if name not in _NEEDS_TORCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_NEEDS_TORCH[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NEEDS_TORCH))

__all__ = ["Artifact", "ChunkView", "ClientView", "Federation", "FlatParams", "Gaussian", "GaussianEvent", "InputError", "Method",
           "MethodError", "NoNoise", "NoSettings", "PoissonGaussianEvent", "PrivacyBudget", "PublicResources",
           "Release", "RoundsLoop", "Selection", "Server", "TreeAggregation", "TreeAggregationEvent", "TreePrefixSum",
           "cohort_fields", "draw_cohort", "noise_for_rounds", "selection_of", "train_rounds"]
