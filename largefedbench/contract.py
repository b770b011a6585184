"""The method contract (DESIGN.md §4): what a method gets, what it returns, how its config is set.

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

import dataclasses
import math
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.io import atomic_write_bytes

__all__ = [
    "OUTPUT_KINDS",
    "Artifact",
    "Method",
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
    def synthetic(cls, texts: Iterable[str], **info: Any) -> Artifact:
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        if not texts:
            raise MethodError("the method produced no synthetic text: nothing to train the downstream model on")
        return cls("synthetic text", texts=texts, info=info)

    @classmethod
    def trained_model(cls, model: Any, **info: Any) -> Artifact:
        if model is None:
            raise MethodError("the method returned no model")
        return cls("model", model=model, info=info)


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

    def train(self, fed, public: PublicResources, cfg: Any, budget) -> Artifact:  # pragma: no cover - abstract
        raise NotImplementedError


class PublicResources:
    """Everything a method may use that is not private client data, for one seed of one run."""

    def __init__(self, *, fd, models, seed: int, run_dir: Path | None = None, progress: bool = True,
                 validation_accuracy: Callable[[Any], dict[str, float]] | None = None,
                 train_downstream: Callable[[list[str]], Any] | None = None) -> None:
        self._fd = fd
        self.models = models
        self.seed = int(seed)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self._validation_accuracy = validation_accuracy
        self._train_downstream = train_downstream
        self.public = fd.public
        self.snapshot = {k: fd.manifest.get(k) for k in ("name", "dataset", "window", "content_sha256")}

    @property
    def device(self):
        return self.models.device

    # -- public data -----------------------------------------------------------------------------------
    def public_texts(self) -> list[str]:
        """Every span of the public (pre-window) split."""
        return self.public.all_spans()

    def public_embeddings(self) -> np.ndarray:
        """Unit embeddings of the public spans (cached per snapshot and embedder)."""
        return self.models.span_embeddings(self._fd, "public", progress=self.progress)

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
    @property
    def _checkpoint_path(self) -> Path | None:
        return self.run_dir / "round-checkpoint.pt" if self.run_dir is not None else None

    def save_round(self, fed, round_index: int, state: dict[str, Any]) -> None:
        """Checkpoint after a completed round: the method's ``state`` (tensors, numbers, lists) and the
        federation's (RNG, ledger, costs), written atomically so a killed run resumes from here."""
        path = self._checkpoint_path
        if path is None:
            return
        import io

        import torch

        buf = io.BytesIO()
        torch.save({"round": int(round_index), "method": state, "federation": fed.state_dict()}, buf)
        atomic_write_bytes(path, buf.getvalue())

    def resume(self, fed) -> tuple[int, dict[str, Any]] | None:
        """``(last completed round, method state)`` of an interrupted run (restoring ``fed``), or None."""
        path = self._checkpoint_path
        if path is None or not path.exists():
            return None
        import torch

        saved = torch.load(path, map_location="cpu", weights_only=False)
        fed.load_state_dict(saved["federation"])
        return int(saved["round"]), saved["method"]

    def clear_checkpoint(self) -> None:
        path = self._checkpoint_path
        if path is not None and path.exists():
            path.unlink()


# -- configs ------------------------------------------------------------------------------------------------
def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A config dataclass as JSON-ready values (inf stays a float; tuples become lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        return v

    return {f.name: plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}


def _coerce(name: str, text: Any, annotation: Any) -> Any:
    if not isinstance(text, str):
        return text
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
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
