"""DP unigram, a deliberately small private method (the CONTRIBUTING example): each round a Poisson cohort reports
its word histogram over the public vocabulary, L1-normalised (L2 ≤ 1); the federation clips, sums and adds Gaussian
noise. The noisy counts, mixed with a little of the public distribution, are a unigram model the samples are drawn
from."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from largefedbench.api import Artifact, Gaussian, Method, PoissonGaussianEvent, RoundsLoop


def words(text: str) -> list[str]:
    return re.findall(r"[a-z][a-z'-]*|[0-9]+|[.,;:!?]", text.lower())


@dataclass(frozen=True)
class DPUnigramConfig:
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


@dataclass
class Counts:  # what survives a kill: the noisy word counts so far
    total: np.ndarray


class DPUnigram(Method):
    name = "dp-unigram-example"
    paper = "an example plug-in (LargeFedBench tests): DP word histograms over Poisson cohorts"
    output = "synthetic text"
    Config = DPUnigramConfig

    def train(self, fed, public, cfg: DPUnigramConfig, budget) -> Artifact:
        counts = Counter(w for text in public.public_texts() for w in words(text))
        vocab = [w for w, _ in counts.most_common(cfg.vocab_size)]
        index = {w: i for i, w in enumerate(vocab)}
        prior = np.array([counts[w] for w in vocab], dtype=np.float64) / sum(counts[w] for w in vocab)
        sigma = budget.calibrate(PoissonGaussianEvent(1.0, cfg.sample_rate, cfg.rounds), n_clients=fed.n_clients)

        def histogram(view) -> np.ndarray:  # runs on one client, on its own spans
            row = np.bincount([index[w] for t in view.spans for w in words(t) if w in index], minlength=len(vocab))
            return row / max(row.sum(), 1)

        loop = RoundsLoop(fed, public, Counts(np.zeros(len(vocab))), rounds=cfg.rounds, desc="dp-unigram rounds")
        for r in loop:  # a killed run resumes after its last completed round
            cohort = fed.sample(cfg.sample_rate)
            loop.state.total = loop.state.total + fed.private_sum(cohort, histogram, clip=cfg.clip,
                                                                  mechanism=Gaussian(sigma), shape=(len(vocab),))
            loop.history.append({"round": r, "sigma": sigma, "expected_clients": cfg.sample_rate * fed.n_clients})
        dist = np.clip(loop.state.total, 0.0, None)
        dist = (1 - cfg.public_weight) * (dist / dist.sum() if dist.sum() > 0 else prior) + cfg.public_weight * prior
        rng = public.rng(1)
        texts = [" ".join(rng.choice(vocab, size=cfg.words_per_sample, p=dist)) for _ in range(cfg.n_synthetic)]
        return Artifact.synthetic(texts, sigma=sigma, vocab_size=len(vocab), history=loop.history)
