"""The method contract (DESIGN.md §4): what a method declares, what it gets and what it returns.

A method is a class with

- ``name`` (the registry name), ``paper`` (citation), ``output`` (``"synthetic text"`` or ``"model"``),
- ``Config``: a frozen dataclass whose defaults are the paper's, with a ``tiny()`` classmethod giving a
  configuration that runs end to end in about a minute on a CPU,
- ``train(fed, public, cfg, budget) -> Artifact``.

``fed`` (:class:`~largefedbench.federation.Federation`) is the only door to private data, model selection on
held-out data included (``fed.selection``, a :class:`Selection` that records every choice); ``public``
(:class:`PublicResources`) holds only what is public: the ``--public`` corpus, the profile's models, the seed,
progress bars and per-round checkpoints (resume). The harness, not the method, evaluates the artifact and computes
ε from the ledger.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from largefedbench.config_overrides import config_from_overrides, config_to_dict  # noqa: F401 - methods import them from here
from largefedbench.errors import MethodError
from largefedbench.rounds import checkpoints
from largefedbench.rounds.loop import selection_of

if TYPE_CHECKING:  # the contract's types; importing them here would load the federation's executors
    from largefedbench.federation import Federation
    from largefedbench.privacy import PrivacyBudget

__all__ = [
    "OUTPUT_KINDS",
    "SELECT_ON",
    "Artifact",
    "Method",
    "NoSettings",
    "PublicResources",
    "Selection",
    "config_from_overrides",
    "config_to_dict",
    "selection_of",
]

OUTPUT_KINDS = ("synthetic text", "model")
SELECT_ON = ("private", "public")  # lfb eval --select-on: the validation clients, or a held-out public slice


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
    #: the method's selections on held-out data (``Selection.records``), set by the harness when ``train`` returns
    selections: list[dict[str, Any]] = field(default_factory=list)

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

    def train(self, fed: Federation, public: PublicResources, cfg: Any, budget: PrivacyBudget) -> Artifact:
        """Run the method on ``fed`` under ``budget`` (σ from ``budget.calibrate(plan)``); return what it made."""
        raise NotImplementedError  # pragma: no cover - abstract


class PublicResources:
    """Everything a method may use that is not private client data, for one seed of one run: exactly the public
    corpus that ``--public`` names (under ``split``, the snapshot's pre-window records), the profile's models and the
    run's configuration. It holds no reference to the loaded snapshot or any of its splits; model
    selection on held-out data goes through ``fed.selection`` (:class:`Selection`), where it is recorded."""

    def __init__(self, *, models, seed: int, corpus=None, snapshot: dict[str, Any] | None = None,
                 run_dir: Path | None = None, progress: bool = True) -> None:
        self.models = models
        self.seed = int(seed)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        #: the run's public corpus (``largefedbench.data.public_corpus.PublicCorpus``): Omega, replay, the ε = 0 model
        self.corpus = corpus if corpus is not None else getattr(models, "public_corpus", None)
        #: what the entry states about the snapshot (name, dataset, window, content hash): strings, not the data
        self.snapshot = copy.deepcopy({k: (snapshot or {}).get(k) for k in ("name", "dataset", "window", "content_sha256")})

    @property
    def device(self):
        return self.models.device

    # -- public data -----------------------------------------------------------------------------------
    @property
    def _public(self):
        if self.corpus is None:
            raise MethodError("this run has no public corpus (a bare PublicResources without --public resources)")
        return self.corpus

    def public_texts(self) -> list[str]:
        """Every span of the public corpus (the run's ``--public`` resources)."""
        return self._public.spans

    def public_documents(self) -> list[list[str]]:
        """The public corpus's documents, each as its spans."""
        return [list(d) for d in self._public.documents]

    def public_metadata(self) -> list[dict[str, Any]]:
        """Each public document's metadata (the pre-window records' fields under ``--public split``; ``{}`` for a
        corpus without any, such as ``generic`` and ``c4``)."""
        corpus = self._public
        return [dict(m) for m in corpus.metadata] if corpus.metadata else [{} for _ in corpus.documents]

    def public_embeddings(self) -> np.ndarray:
        """Unit embeddings of :meth:`public_texts` (cached per corpus and embedder)."""
        from largefedbench.models.embedder import corpus_embeddings

        return corpus_embeddings(self._public, self.models.embedder, self.models.embedder_id, root=self.models.root,
                                 progress=self.progress)

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


class Selection:
    """Model selection on held-out data: how a method and the harness choose among candidates (a round's weights,
    a downstream epoch), and the record of every choice made.

    ``on`` is ``"private"`` (the validation clients' spans, read without noise: the entry says so) or ``"public"``
    (``lfb eval --select-on public``: a held-out slice of the public corpus that no method or downstream training
    sees). The harness puts it on the federation, ``fed.selection``, never on :class:`PublicResources`. It holds
    the held-out texts and public things only (models, training settings, the public replay pool), no snapshot."""

    def __init__(self, *, on: str, source: str, texts: list[str], tokenizer, embedder, training, new_downstream,
                 seed: int, replay_pool: list[str] | None = None, embeddings_cache: Path | None = None,
                 progress: bool = False) -> None:
        if on not in SELECT_ON:
            raise MethodError(f"select_on={on!r}; choose one of {', '.join(SELECT_ON)}")
        self.on, self.source, self.texts, self.seed = on, source, list(texts), int(seed)
        self._tokenizer, self._embedder, self._training = tokenizer, embedder, training
        self._new_downstream, self._replay_pool = new_downstream, list(replay_pool or [])
        self._cache, self._progress = embeddings_cache, progress
        self._embeddings: np.ndarray | None = None
        self._records: list[dict[str, Any]] = []
        self._loops: list[Any] = []

    def accuracy(self, model) -> dict[str, float]:
        """Next-token accuracy of a downstream model on the held-out texts (to choose a round)."""
        from largefedbench.evaluation.accuracy import next_token_accuracy

        return next_token_accuracy(model, self._tokenizer, self.texts, max_len=self._training.max_len,
                                   batch_size=self._training.eval_batch_size)

    def embeddings(self) -> np.ndarray:
        """Unit embeddings of the held-out texts (FID model selection, POPri §5.2), cached on disk when a cache path
        was given."""
        if self._embeddings is None:
            from largefedbench.models.embedder import cached_embeddings, embed

            self._embeddings = (embed(self.texts, self._embedder, progress=self._progress) if self._cache is None else
                                cached_embeddings(self.texts, self._embedder, self._cache, progress=self._progress))
        return self._embeddings

    def replay(self, n_texts: int, seed: int) -> list[str]:
        """The public spans mixed into a fine-tuning set of ``n_texts`` texts: ``public_replay`` × ``n_texts`` of them
        (at most the whole pool), drawn without replacement by ``seed``; none for an empty set."""
        share = getattr(self._training, "public_replay", 0.0)
        if not (n_texts and share and self._replay_pool):
            return []
        pool = self._replay_pool
        k = min(len(pool), round(share * n_texts))
        picked = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED])).choice(len(pool), size=k, replace=False)
        return [pool[i] for i in sorted(picked)]

    def fine_tune(self, texts: list[str], seed: int | None = None, *, by: str = "harness", progress: bool = False):
        """The ε = 0 downstream fine-tuned on ``texts`` and the public replay, at its best epoch on the held-out texts
        (a ``DownstreamResult``); the choice is recorded."""
        from largefedbench.evaluation.downstream import train_downstream

        seed = self.seed if seed is None else int(seed)
        texts = list(texts) + self.replay(len(texts), seed)
        tuned = train_downstream(self._new_downstream(), self._tokenizer, texts, self.texts, seed=seed,
                                 progress=progress, **self._training.as_kwargs())
        self.record(by=by, what="downstream epoch", metric="top1", chosen=tuned.best_epoch,
                    candidates=len(tuned.history))
        return tuned

    def train_downstream(self, texts: list[str]):
        """The profile's downstream model fine-tuned on ``texts`` exactly as the harness does for synthetic text
        (epoch chosen on the held-out texts, recorded); returns the model."""
        return self.fine_tune(texts, by="method").model

    def record(self, *, by: str, what: str, metric: str, chosen: int, candidates: int) -> None:
        """Record one choice: ``chosen`` (an epoch or round) among ``candidates`` by ``metric``, made by ``by``."""
        self._records.append({"by": by, "what": what, "metric": metric, "chosen": int(chosen),
                              "candidates": int(candidates), "on": self.on})

    def watch(self, loop) -> None:
        """A rounds loop that keeps its best state (``RoundsLoop(select=...)``): its choice is recorded as it ends."""
        self._loops.append(loop)

    def records(self) -> list[dict[str, Any]]:
        """Every choice so far: the watched rounds loops' (those that were offered a candidate) and the others."""
        from_loops = [rec for loop in self._loops if (rec := loop.selection_record()) is not None]
        return [{**r, "on": self.on} for r in from_loops] + [dict(r) for r in self._records]

