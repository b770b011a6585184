"""DP unigram: a deliberately small private method that produces synthetic text.

Each round a Poisson cohort of clients reports its word histogram over a public vocabulary (the most frequent
words of the public split), L1-normalised so that its L2 norm is at most 1; the federation clips, sums and adds
Gaussian noise. The noisy counts, mixed with a little of the public distribution, become a unigram model from
which the synthetic samples are drawn. It exists to show (and test) the plug-in path: entry point, contract,
calibration of σ through the budget, every release through ``fed.private_sum``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from largefedbench.contract import Artifact, Method
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|[0-9]+|[.,;:!?]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class DPUnigramConfig:
    """Settings of the DP unigram method (no paper: an example)."""

    vocab_size: int = 2000
    rounds: int = 5
    sample_rate: float = 0.1
    clip: float = 1.0
    public_weight: float = 0.05
    n_synthetic: int = 1000
    words_per_sample: int = 48

    @classmethod
    def tiny(cls) -> DPUnigramConfig:
        return cls(vocab_size=400, rounds=2, sample_rate=0.2, n_synthetic=96, words_per_sample=40)


class DPUnigram(Method):
    name = "dp-unigram-example"
    paper = "an example plug-in (LargeFedBench tests): DP word histograms over Poisson cohorts"
    output = "synthetic text"
    Config = DPUnigramConfig

    def train(self, fed, public, cfg: DPUnigramConfig, budget) -> Artifact:
        counts = Counter(w for text in public.public_texts() for w in words(text))
        vocab = [w for w, _ in counts.most_common(cfg.vocab_size)]
        index = {w: i for i, w in enumerate(vocab)}
        prior = np.array([counts[w] for w in vocab], dtype=np.float64)
        prior /= prior.sum()
        sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=cfg.sample_rate, steps=cfg.rounds),
                                 n_clients=fed.n_clients)

        def histogram(spans: list[str]) -> np.ndarray:
            row = np.zeros(len(vocab))
            for text in spans:
                for w in words(text):
                    if w in index:
                        row[index[w]] += 1.0
            total = row.sum()
            return row / total if total else row

        total, history, start = np.zeros(len(vocab)), [], 0
        resumed = public.resume(fed)  # a killed run continues after its last completed round
        if resumed is not None:
            last, state = resumed
            total, history, start = np.asarray(state["total"]), list(state["history"]), last + 1
        for r in range(start, cfg.rounds):
            cohort = fed.sample(cfg.sample_rate)
            total = total + fed.private_sum(cohort, lambda view: histogram(view.spans), clip=cfg.clip,
                                            mechanism=Gaussian(sigma), shape=(len(vocab),))
            history.append({"round": r, "sigma": sigma, "cohort": len(cohort)})
            public.save_round(fed, r, {"total": total.tolist(), "history": history})
        dist = np.clip(total, 0.0, None)
        dist = dist / dist.sum() if dist.sum() > 0 else prior
        dist = (1 - cfg.public_weight) * dist + cfg.public_weight * prior
        rng = public.rng(1)
        texts = [" ".join(rng.choice(vocab, size=cfg.words_per_sample, p=dist)) for _ in range(cfg.n_synthetic)]
        artifact = Artifact.synthetic(texts, sigma=sigma, vocab_size=len(vocab))
        artifact.history = history
        return artifact
