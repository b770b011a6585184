"""DP instruction resampling — Yu, Kairouz, Oh & Xu, "Privacy-Preserving Instructions for Aligning Large Language
Models" (ICML 2024), Algorithms 1 and 2, adapted to user-level DP over federated clients.

1. **DP generator (Alg. 1).** A LoRA adapter on the attention weights of the profile's generator is trained with
   user-level DP: DP-FedAvg with Poisson cohorts, one local step of client lr 1 on the client's spans and Adam on the
   server — i.e. the paper's DP-Adam with one *client's* averaged gradient as the unit (clip, noise, lr, batch and
   epochs are the paper's).
2. **Pool.** A large pool of unconditional samples (top-p 0.95, temperature 1) from the DP generator.
3. **Buckets (Alg. 2 lines 2–3).** The pool is embedded with the profile's embedder, L2-normalised, projected by a
   PCA fitted on the pool keeping 90% of the variance, and cut by k-means into K buckets (all public: it is
   post-processing of the DP generator).
4. **DP histogram (lines 4–11).** Every client assigns each of its spans to the nearest centroid and sends its bucket
   shares (counts / its number of spans), so one client weighs at most 1; the sum goes through ``fed.private_sum``
   with clip 1 and the paper's σ = 10 (``fed.everyone()``, q = 1).
5. **Resampling (lines 12–21).** ``p = h̃ / N``; each bucket contributes ``max(⌈T·p⌉, 0)`` pool samples drawn uniformly
   without replacement. "Need more initial samples" is handled as the paper did: more samples are drawn from the DP
   generator and assigned to the existing buckets (no new release: the histogram is defined by the centroids) until
   every bucket is large enough or the pool reaches ``max_pool_size``; buckets still too small are then sampled with
   replacement (App. D.3).

Privacy: both releases are composed in one accountant — the calibration plan is exactly the ledger's events,
``[PoissonGaussianEvent(σ, q, rounds), PoissonGaussianEvent(10, 1, 1)]``, and σ is the smallest meeting (ε, δ).

Deviations from the paper (also in the artifact's ``info["deviations"]``): see :data:`DEVIATIONS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from largefedbench.methods._dp_generator import DPAdapterSettings, DPGeneratorMethod, histogram_release

from largefedbench.contract import Artifact
from largefedbench.fedtrain import FedAvgSettings, FlatParams, train_adapter
from largefedbench.fedtrain.generator import (
    conditional_prompt,
    generator_update,
    lora_generator,
)
from largefedbench.models import embed
from largefedbench.synthetic.generation import generate_flat, seed_for
from largefedbench.synthetic.histograms import (
    fit_buckets,
    normalized_votes,
    resample,
    resample_counts,
    shortfall,
)

__all__ = ["DEVIATIONS", "DPInstructionResampling", "DPResampleConfig"]

DEVIATIONS = (
    ("user-level DP over clients (one client = one record with several spans) instead of example-level DP over "
     "instructions: DP-SGD's example becomes one client's averaged gradient (DP-FedAvg, one local step of lr 1, "
     "Adam on the server = DP-Adam), with Poisson cohorts as the accountant assumes (the released code shuffled)"),
    "the histogram vote of a client is its span shares per bucket (L1 = 1), not one count per instruction",
    ("both releases are composed in the benchmark's ledger accountant (RDP for Poisson-Gaussian events) instead of "
     "the PRV accountant; p = h̃/N uses the number of clients N (the released code multiplied by num_samples)"),
    ("embeddings from the profile's embedder (all-MiniLM-L6-v2) instead of Sentence-T5-base; scikit-learn PCA and "
     "k-means instead of faiss"),
    ("the synthetic texts are the benchmark's 64-token spans (max_new_tokens) rather than 1024-token instructions; "
     "no GPT-3.5 annotation, SFT or RLHF stage: the harness trains the downstream model on the resampled texts"),
)


@dataclass(frozen=True)
class DPResampleConfig(DPAdapterSettings):
    """Defaults from Yu et al. (ICML 2024).

    Alg. 1 (§4.1, App. F.2 Table 9, App. F.4): LoRA rank 8 on the attention weights; DP-Adam, constant lr 1e-3,
    batch 4096, 10 epochs (steps = int(10·N/4096): 439 for N = 180k), clip 0.5. LoRA α is not stated (2·rank here).
    Sampling (App. F.3): nucleus top-p 0.95, temperature 1.0; one million initial samples (§3.2).
    Alg. 2 (§4.1 "Setup for Algorithm 2", App. F.4): K = 1000 buckets, histogram σ = 10, PCA to 90% variance and
    k-means with 500 iterations and 5 restarts (released code), T = 180k resampled instructions.
    ``max_pool_size``/``pool_growth`` bound the "need more initial samples" loop (the paper needed up to 743k).
    """

    # Alg. 1's DP fine-tuning (the rest as DPAdapterSettings)
    epochs: float = 10.0
    # the initial pool (§3.2) and Alg. 2's resampling
    pool_size: int = 1_000_000
    max_pool_size: int = 2_000_000
    pool_growth: int = 250_000
    n_buckets: int = 1000
    pca_variance: float = 0.9
    kmeans_n_init: int = 5
    kmeans_max_iter: int = 500
    n_synthetic: int = 180_000

    @classmethod
    def tiny(cls) -> DPResampleConfig:
        """About a minute on a CPU with the tiny profile on the demo: 3 rounds of ~100 clients, a 240-sample pool,
        8 buckets, 120 resampled texts (server lr raised to 1e-2 so 3 rounds move the adapter)."""
        return cls(epochs=0.2, clients_per_round=100, server_lr=1e-2, local_batch_size=8, max_len=80, lora_rank=4,
                   lora_alpha=8, max_new_tokens=40, pool_size=240, max_pool_size=360, pool_growth=120, n_buckets=8,
                   kmeans_n_init=2, kmeans_max_iter=100, n_synthetic=120)

    @classmethod
    def cpu(cls) -> DPResampleConfig:
        """The ``cpu`` profile (SmolLM2-135M on 2 cores): DP-FedAvg's cpu cohorts (2 epochs of 300 expected clients:
        10 rounds on demo-prose), server Adam at lr 5e-3 so 10 steps move a rank-4 adapter, a 2,048-sample pool
        (≤ 3,072) cut into 32 buckets, 1,024 resampled texts of 48 new tokens (the cpu downstream's budget)."""
        return cls(epochs=2.0, clients_per_round=300, server_lr=5e-3, local_batch_size=8, max_len=80, lora_rank=4,
                   lora_alpha=8, max_new_tokens=48, generation_batch_size=48, pool_size=2048, max_pool_size=3072,
                   pool_growth=512, n_buckets=32, kmeans_n_init=2, kmeans_max_iter=100, n_synthetic=1024)

    @classmethod
    def matched(cls) -> DPResampleConfig:
        """The cpu preset at about POPri's compute (≈ 13 minutes a seed on 2 cores), scaled from its stage seconds
        measured on demo-prose (clients 1,954 s and generation 606 s of 2,603 s): a quarter of its client updates
        (0.5 epochs: 2 rounds of 300 expected clients there, 4 on the Congress snapshot), half its pool (1,024
        samples, at most 1,536, in 16 buckets), the same 1,024 resampled texts."""
        return dataclasses.replace(cls.cpu(), epochs=0.5, pool_size=1024, max_pool_size=1536, pool_growth=256,
                                   n_buckets=16)

    def fedavg(self, n_clients: int) -> FedAvgSettings:
        """The DP-FedAvg settings: int(epochs·N/B) rounds of B expected clients (App. F.4's step count)."""
        per_round = min(self.clients_per_round, n_clients)
        return self.fedavg_steps(max(1, int(self.epochs * n_clients / per_round)), n_clients)


class DPInstructionResampling(DPGeneratorMethod):
    name = "dp-resample"
    paper = ("Yu, Kairouz, Oh & Xu, 'Privacy-Preserving Instructions for Aligning Large Language Models', ICML 2024 "
             "(Alg. 1 DP generator, Alg. 2 resampling with a DP histogram)")
    Config = DPResampleConfig

    def train(self, fed, public, cfg: DPResampleConfig, budget) -> Artifact:
        settings, sigma, sigma_h = self.fedavg_beside_histogram(fed, cfg, budget)
        n = fed.n_clients
        tok = public.models.generator_tokenizer
        model = lora_generator(public.models, rank=cfg.lora_rank, alpha=cfg.lora_alpha, attention_only=True)
        server = settings.server(FlatParams(model))
        history = train_adapter(fed, public, settings, server, sigma, generator_update(server.flat, tok, settings, seed=public.seed),
                                desc="dp-resample: DP generator")

        pool = self._generate(model, tok, cfg, cfg.pool_size, public, part=0)
        pool_emb = embed(pool, public.models.embedder)
        buckets = fit_buckets(pool_emb, cfg.n_buckets, variance=cfg.pca_variance, seed=public.seed,
                              n_init=cfg.kmeans_n_init, max_iter=cfg.kmeans_max_iter)
        labels = buckets.labels

        k = buckets.n_buckets
        votes = lambda chunk: normalized_votes(buckets.assign(chunk.embeddings), chunk.owner, len(chunk), k)  # noqa: E731
        cohort, noisy = histogram_release(fed, votes, sigma_h, broadcast=buckets.broadcast())

        counts = resample_counts(noisy, n, cfg.n_synthetic)
        part = 0
        while shortfall(counts, buckets.sizes(labels)).any() and len(pool) < cfg.max_pool_size:
            part += 1
            extra = self._generate(model, tok, cfg, min(cfg.pool_growth, cfg.max_pool_size - len(pool)), public, part=part)
            pool += extra
            labels = np.concatenate([labels, buckets.assign(embed(extra, public.models.embedder))])
        short = shortfall(counts, buckets.sizes(labels))
        chosen = resample(labels, counts, public.rng(7))
        texts = [pool[i] for i in chosen]
        history.append({"phase": "histogram", "round": int(cohort.round), "noise_multiplier": sigma_h, "buckets": k,
                        "pool": len(pool), "buckets_short": int((short > 0).sum()), "resampled": len(texts)})
        info = {
            **settings.plan(sigma, n), "histogram_noise_multiplier": sigma_h, "buckets": k,
            "pca_components": int(buckets.components.shape[0]), "initial_pool": cfg.pool_size, "pool": len(pool),
            "pool_growth_steps": part, "buckets_sampled_with_replacement": int((short > 0).sum()),
            "noisy_histogram": [round(float(x), 3) for x in noisy], "resample_counts": counts.tolist(),
            "deviations": list(DEVIATIONS),
        }
        return Artifact.synthetic(texts, **info, history=history)

    @staticmethod
    def _generate(model, tok, cfg: DPResampleConfig, count: int, public, part: int) -> list[str]:
        """``count`` unconditional samples (empty ones dropped) from the DP generator."""
        texts = generate_flat(model, tok, [conditional_prompt(tok)], n_per_prompt=count, **cfg.generation_kwargs(),
                              seed=seed_for(public.seed, 0xD9E5, part), progress=public.progress, desc="dp-resample: pool",
                              stop=())
        return [t for t in texts if t.strip()]
