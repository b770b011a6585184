"""What ``lfb eval`` is asked (:class:`EvalRequest`), the request once checked (:class:`Prepared`) and the finished
run (:class:`EvalResult`): the types the modules of the harness pass each other, apart from the harness
(:mod:`largefedbench.run.eval`) so that those modules need not import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench.leaderboard.schema import Entry
from largefedbench.privacy import PrivacyBudget
from largefedbench.registry import ResolvedMethod

__all__ = ["EvalRequest", "EvalResult", "Prepared", "default_dataset"]


@dataclass(frozen=True)
class EvalRequest:
    """What ``lfb eval`` was asked to do."""

    method: str
    dataset: str | None = None  # default: default_dataset(profile), an offline demo snapshot
    epsilon: float | None = None
    delta: float | None = None
    profile: Any = "tiny"  # a profile's name; reproduce passes a ModelProfile to rebuild an entry's older settings
    seeds: tuple[int, ...] = (0, 1, 2)
    overrides: dict[str, str] = field(default_factory=dict)
    preset: str | None = None  # "paper" | "cpu" | "tiny"; default: the profile's own (ModelProfile.preset)
    out: Path = Path("leaderboard")  # the board folder the entry is written under
    home: Path | None = None  # the LargeFedBench home instead of $LFB_HOME (snapshots, model and reference caches)
    device: str | None = None
    executor: str = "process"  # where client computations of Federation.private_sum run: process, local or ray
    ray_address: str | None = None  # join this Ray cluster instead of starting a local one
    noise_free: bool = False  # the diagnostic: calibrated for ε, released with σ = 0 (ε = ∞ recorded), never ranked
    shuffled_releases: bool = False  # the control: every noised sum permuted before the method sees it, never ranked
    public: str | None = None  # the public resources: generic | c4 | c4:PATH | split (default: the profile's)
    select_on: str = "private"  # model selection (epochs, rounds) on the validation clients or a held-out public slice
    sandbox: str = "auto"  # the method's train() in its own guarded process: auto (plug-ins), on (every method), off
    synthetic: Path | None = None  # score this file's texts (declared privacy) instead of running ``method``
    made_with: str | None = None  # with ``synthetic``: the tool that made the texts, as the entry states it
    progress: bool = True
    command: str = ""

    def __post_init__(self) -> None:
        if self.dataset is None:
            object.__setattr__(self, "dataset", default_dataset(self.profile))


@dataclass
class Prepared:
    """A checked request: the method, its resolved config, budget, snapshot and profile."""

    request: EvalRequest
    method: ResolvedMethod
    config: Any
    preset: str
    budget: PrivacyBudget
    fd: Any
    profile: Any
    entry_id: str
    entry_path: Path
    run_id: str = ""  # the entry id without the seed list: seeds done for (0,) are reused by (0, 1, 2)
    public_spec: str = "split"  # the public resources (largefedbench.data.public_corpus.parse_public)

    @property
    def method_cls(self) -> type:
        return self.method.cls

    @property
    def declared(self) -> bool:
        """Is this run scoring a declared synthetic set (``--synthetic``) rather than running a method?"""
        return self.request.synthetic is not None

    @property
    def run_dir(self) -> Path:
        return self.request.out / ".runs" / (self.run_id or self.entry_id)


@dataclass
class EvalResult:
    """A finished run: its entry, the file it was written to and its plots (name -> file beside the entry)."""

    entry: Entry
    path: Path
    plots: dict[str, Path]


def default_dataset(profile: Any) -> str:
    """The offline snapshot a profile (a name or a ``ModelProfile``) runs on when no dataset is named: ``demo-prose``
    (text a real LLM can write) for the profiles whose generator is a real LLM on the CPU; the templated ``demo``
    otherwise (an unknown profile name is reported later, by :func:`~largefedbench.run.eval.prepare`)."""
    from largefedbench.models.profiles import PROFILES

    if not isinstance(profile, str):
        return profile.default_dataset
    return PROFILES[profile].default_dataset if profile in PROFILES else "demo"
