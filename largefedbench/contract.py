"""The method contract (DESIGN.md §4): what a method declares, what it gets and what it returns.

A method is a class with

- ``name`` (the registry name), ``paper`` (citation), ``output`` (``"synthetic text"`` or ``"model"``),
- ``Config``: a frozen dataclass whose defaults are the paper's, with a ``tiny()`` classmethod giving a
  configuration that runs end to end in about a minute on a CPU,
- ``train(fed, public, cfg, budget) -> Artifact``.

``fed`` (:class:`~largefedbench.federation.Federation`) is the only door to private data; ``public``
(:class:`PublicResources`) holds everything that is not private: the public split, the profile's models,
the seed, progress bars, per-round checkpoints (resume) and the validation-client metrics used for model
selection. The harness, not the method, evaluates the artifact and computes ε from the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from largefedbench.config_overrides import config_from_overrides, config_to_dict  # noqa: F401 - methods import them from here
from largefedbench.errors import MethodError
from largefedbench.rounds import checkpoints

__all__ = [
    "OUTPUT_KINDS",
    "Artifact",
    "Method",
    "NoSettings",
    "PublicResources",
    "config_from_overrides",
    "config_to_dict",
]

OUTPUT_KINDS = ("synthetic text", "model")


@dataclass
class Artifact:
    """What a method produced: synthetic texts (the harness trains the downstream model on them) or a trained
    downstream model. ``info`` is method-specific JSON-ready detail recorded in the entry (σ, rounds, …);
    ``history`` is one JSON-ready dict per round (e.g. FID by round), plotted next to the entry."""

    kind: Literal["synthetic text", "model"]
    texts: list[str] | None = None
    model: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def synthetic(cls, texts: Iterable[str], *, history: list[dict[str, Any]] | None = None, **info: Any) -> Artifact:
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        if not texts:
            raise MethodError("the method produced no synthetic text: nothing to train the downstream model on")
        return cls("synthetic text", texts=texts, info=info, history=list(history or []))

    @classmethod
    def trained_model(cls, model: Any, *, history: list[dict[str, Any]] | None = None, **info: Any) -> Artifact:
        if model is None:
            raise MethodError("the method returned no model")
        return cls("model", model=model, info=info, history=list(history or []))


@dataclass(frozen=True)
class NoSettings:
    """No settings: every preset of the method is the same empty config."""

    @classmethod
    def tiny(cls) -> NoSettings:
        return cls()


class Method:
    """Base class of every method; see the module docstring. Subclasses set the class attributes."""

    name: ClassVar[str]
    paper: ClassVar[str]
    output: ClassVar[str]
    Config: ClassVar[type]
    #: ``"runnable"`` for every registered method (the registry refuses others).
    status: ClassVar[str] = "runnable"
    #: the ε the method always runs at (0 for the public reference, inf for the non-private one), else None.
    fixed_epsilon: ClassVar[float | None] = None
    #: do the method's client functions (``fed.private_sum``) need the cached span embeddings of the private train clients?
    needs_span_embeddings: ClassVar[bool] = False
    #: settings the Config no longer has, each with why it went: ``lfb leaderboard reproduce`` re-runs an older entry
    #: without them (with a note) instead of refusing it; only for settings whose removal leaves results unchanged.
    retired_settings: ClassVar[dict[str, str]] = {}
    #: settings the Config gained, each with the value that does what the method did before it existed:
    #: ``lfb leaderboard reproduce`` re-runs an older entry with it (otherwise with the entry's preset's value).
    introduced_settings: ClassVar[dict[str, Any]] = {}
    #: can ``lfb audit`` score canaries against the method's releases (its client functions are ``NnVotes`` or
    #: ``PopriScores``)? Otherwise synthetic-text methods are audited from their final set.
    audit_by_releases: ClassVar[bool] = False
    #: the method's version for the entry; a plug-in's default is its package's version (the registry's lookup).
    version: ClassVar[str | None] = None

    def train(self, fed, public: PublicResources, cfg: Any, budget) -> Artifact:  # pragma: no cover - abstract
        raise NotImplementedError


class PublicResources:
    """Everything a method may use that is not private client data, for one seed of one run."""

    def __init__(self, *, fd, models, seed: int, run_dir: Path | None = None, progress: bool = True,
                 validation_accuracy: Callable[[Any], dict[str, float]] | None = None,
                 train_downstream: Callable[[list[str]], Any] | None = None, corpus=None) -> None:
        self._fd = fd
        self.models = models
        self.seed = int(seed)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self._validation_accuracy = validation_accuracy
        self._train_downstream = train_downstream
        self.public = fd.public  # the snapshot's pre-window records (its metadata codes; the corpus when kind is split)
        #: the run's public corpus (``largefedbench.data.public_corpus.PublicCorpus``): Omega, replay, the ε = 0 model
        self.corpus = corpus if corpus is not None else getattr(models, "public_corpus", None)
        self.snapshot = {k: fd.manifest.get(k) for k in ("name", "dataset", "window", "content_sha256")}

    @property
    def device(self):
        return self.models.device

    # -- public data -----------------------------------------------------------------------------------
    def public_texts(self) -> list[str]:
        """Every span of the public corpus (the run's ``--public`` resources; the pre-window split by default)."""
        return self.public.all_spans() if self._split_corpus else self.corpus.spans

    def public_documents(self) -> list[list[str]]:
        """The public corpus's documents, each as its spans."""
        return list(self.public.column("spans")) if self._split_corpus else [list(d) for d in self.corpus.documents]

    def public_embeddings(self) -> np.ndarray:
        """Unit embeddings of :meth:`public_texts` (cached per corpus and embedder)."""
        if self._split_corpus:
            return self.models.span_embeddings(self._fd, "public", progress=self.progress)
        from largefedbench.models.embedder import corpus_embeddings

        return corpus_embeddings(self.corpus, self.models.embedder, self.models.embedder_id, root=self.models.root,
                                 progress=self.progress)

    @property
    def _split_corpus(self) -> bool:
        return self.corpus is None or self.corpus.kind == "split"

    def validation_embeddings(self) -> np.ndarray:
        """Unit embeddings of the validation clients' spans, for model selection by FID (POPri §5.2)."""
        return self.models.span_embeddings(self._fd, "validation", progress=self.progress)

    def validation_accuracy(self, model) -> dict[str, float]:
        """Next-token accuracy of a downstream model on the validation clients (to choose a round)."""
        if self._validation_accuracy is None:
            raise MethodError("this run has no validation clients to select a model on")
        return self._validation_accuracy(model)

    def train_downstream(self, texts: list[str]):
        """The profile's downstream model fine-tuned on ``texts`` exactly as the harness does for synthetic text
        (the profile's training settings, epoch chosen on the validation clients); returns the model."""
        if self._train_downstream is None:
            raise MethodError("this run cannot train downstream models (no harness attached)")
        return self._train_downstream(texts)

    def rng(self, stream: int = 0) -> np.random.Generator:
        """A numpy generator for this seed; ``stream`` separates independent uses."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, 0xC0DE, stream]))

    def bar(self, total: int | None = None, desc: str = "", **kwargs: Any):
        """A progress bar (silent when the run is quiet)."""
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, disable=not self.progress, dynamic_ncols=True, **kwargs)

    # -- resume ----------------------------------------------------------------------------------------
    def _checkpoint_path(self, stage: str | None = None) -> Path | None:
        return self.run_dir / checkpoints.checkpoint_name(stage) if self.run_dir is not None else None

    def save_round(self, fed, round_index: int, state: dict[str, Any], stage: str | None = None) -> None:
        """Checkpoint after a completed round: the method's ``state`` (tensors, numbers, lists), the federation's
        (RNG, ledger, costs) and the method's time so far, written atomically so a killed run resumes from here.
        ``stage`` names a phase with its own checkpoint (e.g. public pretraining before the private rounds)."""
        path = self._checkpoint_path(stage)
        if path is not None:
            checkpoints.save_round(path, fed, round_index, state)

    def resume(self, fed, stage: str | None = None) -> tuple[int, dict[str, Any]] | None:
        """``(last completed round, method state)`` of an interrupted run (restoring ``fed``), or None."""
        path = self._checkpoint_path(stage)
        return None if path is None else checkpoints.load_round(path, fed)

    def clear_checkpoint(self) -> None:
        """Delete every stage's checkpoint (the seed is done)."""
        if self.run_dir is not None:
            for path in checkpoints.checkpoint_files(self.run_dir):
                path.unlink()
