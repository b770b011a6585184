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

from largefedbench.client_views import ChunkView, ClientView
from largefedbench.contract import Artifact, Method, NoSettings, PublicResources, Selection, selection_of
from largefedbench.errors import InputError, MethodError
from largefedbench.fedtrain import FlatParams, Release, Server, train_rounds
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, TreeAggregationEvent
from largefedbench.privacy.events import GaussianEvent
from largefedbench.privacy.mechanisms import Gaussian, NoNoise, TreeAggregation, TreePrefixSum
from largefedbench.rounds import RoundsLoop, cohort_fields, draw_cohort
from largefedbench.synthetic.noise import noise_for_rounds

__all__ = ["Artifact", "ChunkView", "ClientView", "FlatParams", "Gaussian", "GaussianEvent", "InputError", "Method",
           "MethodError", "NoNoise", "NoSettings", "PoissonGaussianEvent", "PrivacyBudget", "PublicResources",
           "Release", "RoundsLoop", "Selection", "Server", "TreeAggregation", "TreeAggregationEvent", "TreePrefixSum",
           "cohort_fields", "draw_cohort", "noise_for_rounds", "selection_of", "train_rounds"]
