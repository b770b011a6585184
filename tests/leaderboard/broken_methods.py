"""Methods that break the contract in one way each, for `lfb smoke` (loaded as ``broken_methods.py:Class``)."""

from __future__ import annotations

from dataclasses import dataclass

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
    def release(fed, budget, rate: float, steps: int = 1, rounds: int = 1) -> float:
        """``rounds`` noisy sums of a constant vector, with σ calibrated for ``steps`` of them."""
        sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=rate, steps=steps), n_clients=fed.n_clients)
        for _ in range(rounds):
            cohort = fed.sample(rate)
            fed.private_sum(cohort, lambda view: np.ones(4), clip=1.0, mechanism=Gaussian(sigma), shape=(4,))
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


class TestPeeker(_Base):
    """Looks at the test clients through the snapshot (and hides the error it gets)."""

    name = "test-peeker"

    def train(self, fed, public, cfg, budget) -> Artifact:
        try:
            leaked = public._fd.test.all_spans()[:5]
        except Exception:  # noqa: BLE001 - the point: swallowing the refusal does not hide the attempt
            leaked = []
        self.release(fed, budget, cfg.rate)
        return Artifact.synthetic(public.public_texts()[:20] + leaked)


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
