"""Weak-client voting — Wang, Gounley & Hanson, "Resource-Adaptive Federated Text Generation with Differential
Privacy" (DATA-FM @ ICLR 2026), Algorithm 1 with Algorithms A.2–A.4, adapted to user-level DP over many small clients.

A public, seeded fraction of the clients is *strong* (can fine-tune); the rest are *weak* (inference only).

1. **Stage 1 — federated DP fine-tuning on the strong clients (Alg. A.3).** The profile's generator with a LoRA
   adapter learns p(x | c): each strong client's spans follow its control code as a prompt line. DP-FedAvg: Poisson
   cohorts (weak members of a cohort send nothing), local SGD for ``local_epochs`` passes, the clipped Δ summed
   through ``fed.private_sum``, the server adding η·mean Δ.
2. **Stage 2 — DP profiles (all clients).** Each client's control-code counts; one client = one record = one code,
   so its profile is a one-hot vector (L2 sensitivity 1), released as a sum with the analytic Gaussian mechanism's σ
   for the profile's share of the budget (Balle & Wang 2018).
3. **Stage 3 — generation.** ``s_j = Round(s·P̃_j)`` samples per code, prompted by the code.
4. **Stage 4 — weak-client votes (Alg. A.2).** Each span of a weak client votes for its K nearest candidates (cosine
   of the profile's embedder) *within its own control code*; the client's vote vector is scaled to unit L2 norm
   (weighs 1) and the sum is released with the analytic Gaussian σ for the vote share. Per code the noisy votes,
   L1-normalised, weight Alg. A.4's sampling without replacement of ``max(1, ⌊r·|I_j|⌋)`` candidates.

Control codes (public and predetermined, as the paper assumes, following Yue et al. 2022): bioRxiv records by
``category``, parliamentary records by country × chamber, the demo by whichever of the two its record has; the code
set is the one found in the metadata of the run's public corpus (``public.public_metadata()``) plus "Other" for codes
it lacks. Only ``--public split`` (the pre-window records) carries such metadata; under ``generic`` or ``c4`` the set
is "Other" alone, so every client shares one code and the method runs unconditioned.

Privacy: the benchmark's ledger composes every release sequentially, so the per-client split of App. B
(strong: ε_train + ε_prof; weak: ε_vote + ε_prof; ε = 8 → 6 + 2) becomes shares of one composition: the profile and
vote σ are the analytic Gaussian σ for 2/14 and 6/14 of (ε, δ/3), and the DP-FedAvg σ is calibrated so that
``[PoissonGaussianEvent(σ, q, R), PoissonGaussianEvent(σ_prof, 1), PoissonGaussianEvent(σ_vote, 1)]`` — exactly the
ledger — meets (ε, δ). This over-counts (no client is in both the fine-tuning and the vote), so it is conservative.

Client metadata: :func:`own_codes` reads each client's control code from its own record (``chunk.metadata``) inside
the client functions of ``fed.private_sum`` (prompt prefixes, profiles, votes); no code leaves a client un-noised.

Deviations from the paper: :data:`DEVIATIONS` (also in the artifact's ``info["deviations"]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from largefedbench.methods._dp_generator import DPGeneratorMethod, histogram_release

from largefedbench.contract import Artifact
from largefedbench.fedtrain import FedAvgSettings, FlatParams, train_adapter
from largefedbench.fedtrain.generator import (
    conditional_prompt,
    generator_update,
    lora_generator,
    require_private_budget,
)
from largefedbench.models import embed
from largefedbench.privacy import PoissonGaussianEvent, analytic_gaussian_sigma
from largefedbench.rounds import releases_of
from largefedbench.synthetic.generation import generate, seed_for
from largefedbench.synthetic.generation_settings import GenerationSettings
from largefedbench.synthetic.histograms import (
    knn_code_votes,
    l2_normalize_rows,
    one_hot,
    proportional_counts,
    sample_without_replacement,
)

__all__ = ["DEVIATIONS", "OTHER", "WeakClientVoting", "WeakClientVotingConfig", "code_set",
           "control_code", "own_codes", "strong_clients"]

OTHER = "Other"

DEVIATIONS = (
    ("user-level DP over many small clients (cross-device) instead of sample-level DP over a few silos: DP-FedAvg "
     "clips and noises each strong client's whole update centrally (secure aggregation) instead of local DP-SGD, and "
     "profiles and votes are noised once on their sum instead of per client"),
    ("the releases are composed sequentially in one accountant (the ledger's RDP) with the paper's 2:6 profile:vote "
     "ratio and the fine-tuning σ calibrated for the rest, instead of per-client basic composition with parallel "
     "composition across strong and weak clients (conservative)"),
    ("a client's vote vector is scaled to unit L2 norm (user-level sensitivity 1); noisy votes are clamped at 0 "
     "before Alg. A.4 samples with them"),
    ("the generator is the profile's generator with a LoRA adapter (the paper fine-tunes GPT-2 fully; Table A.13 "
     "uses LoRA); embeddings from all-MiniLM-L6-v2 instead of stsb-roberta-base-v2; 64-token samples"),
    "strong clients are a seeded random fraction of the clients (the paper's IID setting)",
    ("the control-code set is read from the run's public corpus (the paper takes the codes as public and given): "
     "under --public split the pre-window records' categories and chambers; --public generic and c4 carry no such "
     "metadata, so there the set is 'Other' alone and fine-tuning, profile, generation and votes run with one code "
     "(unconditioned). Earlier versions read the set from the pre-window records whatever --public said"),
)


@dataclass(frozen=True)
class WeakClientVotingConfig(GenerationSettings):
    """Defaults from Wang, Gounley & Hanson (2026), App. B (GPT-2 on Yelp with DP) and App. D.

    Fine-tuning: R = 200 rounds, τ = 50 local iterations, batch 256, client lr γ = 5e-4, server lr η = 1e-3,
    max length 128; every strong client takes part in every round (cross-silo; ``strong_sample_rate`` 1). The clip
    for GPT-2 is not stated (1, as for LLaMA). Strong clients: 10% (§4.2). Generation: s = 10000, temperature 1.0;
    refinement sampling rate r = 0.2; K = 5 votes per sample (App. D, Table A.8's default row). Budget split
    (App. B "DP Setting"): ε_prof : ε_vote = 2 : 6 and ε_train = 6, each at δ/3 here (δ/2 per phase there).
    """

    # who fine-tunes (§4.2)
    strong_fraction: float = 0.1
    strong_sample_rate: float = 1.0
    # the strong clients' DP fine-tuning (App. B)
    rounds: int = 200
    local_epochs: int = 50
    local_batch_size: int = 256
    client_lr: float = 5e-4
    server_lr: float = 1e-3
    clip: float = 1.0
    max_len: int = 128
    lora_rank: int = 8
    lora_alpha: int = 16
    # ε shares of the two histograms (App. B); the fine-tuning gets the rest
    profile_budget_share: float = 2 / 14
    vote_budget_share: float = 6 / 14
    # generation and the weak clients' votes (App. D)
    n_generated: int = 10_000
    votes_per_sample: int = 5
    sampling_rate: float = 0.2

    @classmethod
    def tiny(cls) -> WeakClientVotingConfig:
        """About half a minute on a CPU with the tiny profile on the demo: ~156 strong clients, half of them in each
        of 3 rounds with 2 local passes; 240 candidates, 120 kept."""
        return cls(strong_sample_rate=0.5, rounds=3, local_epochs=2, local_batch_size=8, client_lr=0.05, server_lr=1.0,
                   max_len=80, lora_rank=4, lora_alpha=8, n_generated=240, votes_per_sample=3, sampling_rate=0.5,
                   max_new_tokens=40)

    @classmethod
    def cpu(cls) -> WeakClientVotingConfig:
        """The ``cpu`` profile: half of the ~155 strong clients in each of 5 rounds (1 local pass, client lr 0.05),
        2,048 candidates of 48 new tokens, 3 votes each, half kept: 1,024 texts (the cpu downstream's budget)."""
        return cls(strong_sample_rate=0.5, rounds=5, local_epochs=1, local_batch_size=8, client_lr=0.05, server_lr=1.0,
                   max_len=80, lora_rank=4, lora_alpha=8, n_generated=2048, votes_per_sample=3, sampling_rate=0.5,
                   max_new_tokens=48, generation_batch_size=48)

    @classmethod
    def matched(cls) -> WeakClientVotingConfig:
        """The cpu preset at about POPri's compute (≈ 13 minutes a seed on 2 cores), scaled from its stage seconds
        measured on demo-prose (clients 621 s and generation 432 s of 1,110 s): 3 rounds (from 5) and 1,536
        candidates (from 2,048), two thirds kept: the same 1,024 texts."""
        return dataclasses.replace(cls.cpu(), rounds=3, n_generated=1536, sampling_rate=0.6667)

    def fedavg(self, n_clients: int) -> FedAvgSettings:
        """Poisson rate ``strong_sample_rate`` over all clients (weak members of a cohort send nothing)."""
        return FedAvgSettings(rounds=self.rounds, clients_per_round=self.strong_sample_rate * n_clients, clip=self.clip, client_lr=self.client_lr,
                        local_epochs=self.local_epochs, local_batch_size=self.local_batch_size, server_lr=self.server_lr,
                        server_optimizer="sgd", max_len=self.max_len)


# -- control codes ------------------------------------------------------------------------------------------
def control_code(meta: Mapping[str, Any]) -> str:
    """A record's control code: its bioRxiv category, else its country and chamber, else "Other"."""
    if meta.get("category"):
        return f"Category: {meta['category']}"
    if meta.get("country") or meta.get("chamber"):
        return f"Country: {meta.get('country') or '?'}, Chamber: {meta.get('chamber') or '?'}"
    return OTHER


def code_set(public_metadata: list[Mapping[str, Any]]) -> list[str]:
    """The predetermined code set: every code in the public corpus's metadata (one mapping per public document,
    ``PublicResources.public_metadata``), sorted, then "Other"."""
    codes = {control_code(meta) for meta in public_metadata}
    return sorted(codes - {OTHER}) + [OTHER]


def own_codes(chunk, codes: list[str]) -> np.ndarray:
    """Client side: each chunk client's code index (``codes.index``; "Other" for a code outside the set), read from
    the client's own record inside a client function."""
    index = {c: i for i, c in enumerate(codes)}
    return np.asarray([index.get(control_code(meta), index[OTHER]) for meta in chunk.metadata], dtype=np.int64)


def strong_clients(n_clients: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A public boolean mask of ``max(1, round(fraction·n))`` strong clients drawn at random."""
    if not 0 < fraction <= 1:
        raise ValueError(f"strong_fraction={fraction} must be in (0, 1]")
    mask = np.zeros(n_clients, dtype=bool)
    mask[rng.permutation(n_clients)[: max(1, round(fraction * n_clients))]] = True
    return mask


class WeakClientVoting(DPGeneratorMethod):
    name = "weak-client-voting"
    paper = ("Wang, Gounley & Hanson, 'Resource-Adaptive Federated Text Generation with Differential Privacy', "
             "DATA-FM @ ICLR 2026 (strong clients fine-tune, weak clients vote within control codes)")
    Config = WeakClientVotingConfig

    def train(self, fed, public, cfg: WeakClientVotingConfig, budget) -> Artifact:
        require_private_budget(budget, self.name)  # before its ε is split into the two histograms' σ
        n = fed.n_clients
        third = budget.delta / 3
        sigma_prof = analytic_gaussian_sigma(budget.epsilon * cfg.profile_budget_share, third)
        sigma_vote = analytic_gaussian_sigma(budget.epsilon * cfg.vote_budget_share, third)
        q = cfg.strong_sample_rate

        settings, sigma = self.fedavg_rounds(fed, cfg, budget, PoissonGaussianEvent(sigma_prof, 1.0, 1),
                                             PoissonGaussianEvent(sigma_vote, 1.0, 1), rate=q)
        codes = code_set(public.public_metadata())  # from the --public corpus only
        strong = strong_clients(n, cfg.strong_fraction, public.rng(0x57))  # public, by federation position
        strong_ids = frozenset(np.asarray(fed.client_ids, dtype=object)[strong].tolist())
        prompts = [code + "\n" for code in codes]

        tok = public.models.generator_tokenizer
        model = lora_generator(public.models, rank=cfg.lora_rank, alpha=cfg.lora_alpha)
        server = settings.server(FlatParams(model))
        train_strong = generator_update(server.flat, tok, settings, seed=public.seed,
                                        prefixes=lambda chunk: [prompts[c] for c in own_codes(chunk, codes)])

        def strong_update(chunk, spans):  # weak members of the cohort do not train
            return train_strong(chunk, [s if cid in strong_ids else [] for s, cid in zip(spans, chunk.ids)])

        history = train_adapter(fed, public, settings, server, sigma, strong_update, desc="weak-client voting: strong clients",
                                rate=q, expected_clients=q * strong.sum())
        for record in history:  # the exact number of strong clients in a Poisson cohort is not released
            record["expected_strong_clients"] = round(float(q * strong.sum()), 6)

        cohort, noisy_profile = histogram_release(fed, lambda chunk: one_hot(own_codes(chunk, codes), len(codes)),
                                                  sigma_prof)
        per_code = proportional_counts(noisy_profile, cfg.n_generated)
        history.append({"phase": "profile", "round": int(cohort.round), "noise_multiplier": sigma_prof,
                        "codes": len(codes), "generated": int(per_code.sum()),
                        "releases": releases_of(fed, cohort.round)})

        pool: list[str] = []
        pool_codes: list[int] = []
        for j in np.flatnonzero(per_code):
            out = generate(model, tok, [conditional_prompt(tok, prompts[j])], n_per_prompt=int(per_code[j]),
                           **cfg.generation_kwargs(), seed=seed_for(public.seed, 0x3EC, int(j)), stop=())[0]
            kept = [t for t in out if t.strip()]
            pool += kept
            pool_codes += [int(j)] * len(kept)
        pool_codes_arr = np.asarray(pool_codes, dtype=np.int64)
        pool_emb = embed(pool, public.models.embedder)

        votes = WeakVotes(codes, strong_ids, pool_emb, pool_codes_arr, cfg.votes_per_sample)
        cohort, noisy_votes = histogram_release(fed, votes, sigma_vote, broadcast=pool_emb)
        rng = public.rng(0xA4)
        chosen: list[int] = []
        for j in np.unique(pool_codes_arr):
            members = np.flatnonzero(pool_codes_arr == j)
            weights = noisy_votes[members]
            l1 = np.abs(weights).sum()
            picked = sample_without_replacement(weights / l1 if l1 > 0 else weights, cfg.sampling_rate, rng)
            chosen += members[picked].tolist()
        texts = [pool[i] for i in chosen]
        history.append({"phase": "votes", "round": int(cohort.round), "noise_multiplier": sigma_vote,
                        "candidates": len(pool), "kept": len(texts), "releases": releases_of(fed, cohort.round)})
        info = {
            **settings.plan(sigma, n, rate=q),
            "strong_clients": int(strong.sum()), "weak_clients": int(n - strong.sum()),
            "profile_noise_multiplier": sigma_prof, "vote_noise_multiplier": sigma_vote, "codes": codes,
            "noisy_profile": [round(float(x), 3) for x in noisy_profile], "generated_per_code": per_code.tolist(),
            "candidates": len(pool), "deviations": list(DEVIATIONS),
        }
        return Artifact.synthetic(texts, **info, history=history)


class WeakVotes:
    """The client function of the vote: each weak client's k-NN votes for the candidates of its own control code (read
    from its own record), unit L2; strong clients send a zero vector (they do not vote)."""

    def __init__(self, codes: list[str], strong_ids: frozenset[str], pool_emb: np.ndarray, pool_codes: np.ndarray,
                 k: int) -> None:
        self.codes, self.strong_ids, self.pool_emb, self.pool_codes, self.k = codes, strong_ids, pool_emb, pool_codes, k

    def __call__(self, chunk) -> np.ndarray:
        votes = knn_code_votes(chunk.embeddings, chunk.owner, own_codes(chunk, self.codes), self.pool_emb,
                               self.pool_codes, self.k)
        votes[[cid in self.strong_ids for cid in chunk.ids]] = 0.0
        return l2_normalize_rows(votes)
