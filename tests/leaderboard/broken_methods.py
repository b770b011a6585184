"""Methods that break the contract in one way each, for `lfb smoke` (loaded as ``broken_methods.py:Class``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from largefedbench.contract import Artifact, Method
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian


@dataclass(frozen=True)
class SmallConfig:
    rate: float = 0.3

    @classmethod
    def tiny(cls) -> SmallConfig:
        return cls()


class _Base(Method):
    paper = "a deliberately broken method (LargeFedBench smoke tests)"
    output = "synthetic text"
    Config = SmallConfig

    @staticmethod
    def release(fed, budget, rate: float, steps: int = 1, rounds: int = 1, client_fn=None) -> float:
        """``rounds`` noisy sums of a constant vector (or ``client_fn``'s), with σ calibrated for ``steps`` of them."""
        sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=rate, steps=steps), n_clients=fed.n_clients)
        for _ in range(rounds):
            cohort = fed.sample(rate)
            fed.private_sum(cohort, client_fn or (lambda view: np.ones(4)), clip=1.0, mechanism=Gaussian(sigma),
                            shape=(4,))
        return sigma


class Peeker(_Base):
    """Reads the private clients' spans directly instead of through fed.private_sum."""

    name = "peeker"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate)
        return Artifact.synthetic(fed._clients.all_spans()[:20])


class StorePeeker(_Base):
    """Reads client spans through the federation's client store (the store private_sum's chunks read) in method code."""

    name = "store-peeker"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate)
        spans = fed._store.spans(np.arange(5))
        return Artifact.synthetic([s for client in spans for s in client][:20] or public.public_texts()[:20])


class Silent(_Base):
    """Releases nothing through the federation: its ledger is empty."""

    name = "silent"

    def train(self, fed, public, cfg, budget) -> Artifact:
        return Artifact.synthetic(public.public_texts()[:20])


class Greedy(_Base):
    """Calibrates σ for one release and makes four: ε overshoots the target."""

    name = "greedy"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate, steps=1, rounds=4)
        return Artifact.synthetic(public.public_texts()[:20])


class Moody(_Base):
    """Draws from an unseeded generator: two runs with one seed disagree."""

    name = "moody"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate)
        texts = public.public_texts()
        picks = np.random.default_rng().choice(len(texts), 20, replace=False)
        return Artifact.synthetic([texts[i] for i in picks])


class WrongKind(_Base):
    """Says it returns a model, returns synthetic text."""

    name = "wrong-kind"
    output = "model"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate)
        return Artifact.synthetic(public.public_texts()[:20])


@dataclass(frozen=True)
class NoTinyConfig:
    rate: float = 0.3


class NoTiny(_Base):
    """Its Config has no tiny() preset."""

    name = "no-tiny"
    Config = NoTinyConfig

    def train(self, fed, public, cfg, budget) -> Artifact:  # pragma: no cover - never reached
        raise AssertionError("the contract check comes first")


# -- leaky methods: each keeps what its client function saw and gets it out another way than the noised sum ---------
_SEEN: list[str] = []  # a module global a client function appends to


class LeakyClosure(_Base):
    """The issue's three-line leak: the client function appends the view's spans to a list ``train`` returns."""

    name = "leaky-closure"

    def train(self, fed, public, cfg, budget) -> Artifact:
        kept: list[str] = []

        def client(view):
            kept.extend(view.spans)
            return np.ones(4)

        self.release(fed, budget, cfg.rate, client_fn=client)
        return Artifact.synthetic(kept[:50] or public.public_texts()[:20])


class LeakyGlobal(_Base):
    """Keeps the spans in a module global."""

    name = "leaky-global"

    def train(self, fed, public, cfg, budget) -> Artifact:
        _SEEN.clear()
        self.release(fed, budget, cfg.rate, client_fn=lambda view: _SEEN.extend(view.spans) or np.ones(4))
        return Artifact.synthetic(_SEEN[:50] or public.public_texts()[:20])


class LeakyAttribute(_Base):
    """Keeps the spans on the method object (its client function is a bound method)."""

    name = "leaky-attribute"

    def client(self, view):
        self.kept.extend(view.spans)
        return np.ones(4)

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.kept: list[str] = []
        self.release(fed, budget, cfg.rate, client_fn=self.client)
        return Artifact.synthetic(self.kept[:50] or public.public_texts()[:20])


def _to_file(view) -> np.ndarray:
    with open(Path(tempfile.gettempdir()) / "lfb-leaky-method.txt", "a") as f:
        f.write("\n".join(view.spans) + "\n")
    return np.ones(4)


def _from_file() -> list[str]:
    path = Path(tempfile.gettempdir()) / "lfb-leaky-method.txt"
    return path.read_text().splitlines() if path.exists() else []


class LeakyFile(_Base):
    """The client function writes the spans to a file in the temp folder; ``train`` reads them back as its texts."""

    name = "leaky-file"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate, client_fn=_to_file)
        return Artifact.synthetic(_from_file()[:50] or public.public_texts()[:20])


class LeakyInfo(_Base):
    """Through a file as well, but the texts it returns are public: the private text rides in the artifact's info."""

    name = "leaky-info"

    def train(self, fed, public, cfg, budget) -> Artifact:
        self.release(fed, budget, cfg.rate, client_fn=_to_file)
        return Artifact.synthetic(public.public_texts()[:20], notes=" ".join(_from_file()[:5]))
