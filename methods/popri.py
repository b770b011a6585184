"""POPri: Preference Optimization for Private Client Data (Hou et al., ICML 2025, Algorithm 1).

Each round t = 1..T: K prompts from public examples ("Original Text Sample" template, App. B.2), J samples per
prompt from the current generator Ψ_t, embedded by the profile's embedder; every cohort client scores all K·J
samples (Algorithm 2 / spec item 1: summed cosine similarity with its spans, z-scored, clipped to norm 1) inside
``fed.private_sum`` (its exact algebraic shortcut, ``PopriScores``), which adds N(0, σ²) with σ calibrated for T rounds; per prompt the rank-1
sample is *chosen* and the rank-ℓ sample *rejected*; DPO (trl) updates a LoRA adapter on Ψ. The generator state
with the lowest FID against the validation clients is kept (early stopping, §5.2; App. B.1) and generates the
final synthetic set (step 4). Paper ablations are options: ``rejected_rank``, ``temperature``, ``loss_type``
(DPO, IPO, cDPO, App. E.4), ``scoring`` (cosine vs PE's nearest-neighbour histogram, App. E.1).

Deviations from the paper and the reference code (meiyuw/POPri):

- LoRA rank 4, α 8 (paper §3.1, App. B.1) by default; the reference code used 16/16 (``lora_rank``/``lora_alpha``).
- DPO β = 0.01 and per-device batch 24 (reference config × accumulation; App. B.1 "batch size 24"); 2 epochs per
  round (App. B.1; the reference's HEAD config has 1). The learning rate follows the paper's cosine from 8e-7
  down to 3e-7, but per round: round t trains at the schedule's value for t (constant within the round) with a
  fresh AdamW, where the reference ran one continuous trainer (optimizer state carried across rounds).
- Each round starts from the round before's best checkpoint (App. B.1: "select the best checkpoint with the lowest
  FID score relative to the validation dataset. This checkpoint is used for synthetic data generation and as the
  starting point for the next iteration"): the adapter after each DPO epoch is kept, each generates one sample per
  prompt of the round (same prompts and seed for every epoch), and the epoch with the lowest validation FID is the
  next round's start (``round_start="best_epoch"``, default). ``round_start="last_epoch"`` carries the last epoch's
  adapter on, as the reference code's resumed trainer does. The DPO reference policy is the public checkpoint
  (adapter disabled), as in the paper's loss.
- Early stopping compares the generator before round 1 (the public model) and after every round, each by the
  FID of K·J samples: the round's own samples (they come from the state being judged), plus K·J fresh samples
  after the last round. The reference evaluated one separate sample per prompt.
- Scores are not divided by the number of clients (the reference divides; ranking is scale-free). A client whose
  similarities are all equal contributes a zero vector (the reference's z-score would give NaN). Pairs whose
  chosen and rejected texts are identical are dropped; ties keep generation order.
- Clients are Poisson-sampled when ``clients_per_round`` is set (the reference sampled a fixed number without
  replacement while accounting as Poisson); the paper's default is full participation.
- Completions are capped at ``max_new_tokens`` = 64 generator tokens (the reference sampled 85 tokens and cut
  them to 64 LLaMA-3 tokens); prompts are truncated from the left to fit the context.
- Final set: ``n_final`` samples, one per fresh prompt, from the best generator (App. B.1: 1,000,000).
- The ``cpu`` preset prompts with one open request in the generator's chat template (``prompt_format=
  "instruction"``, "Write a short original text.") instead of the paper's few-shot "Original Text Sample" prompt of
  3 public examples (App. B.2): a 135M generator continuing public text keeps the examples' topics, so the K·J
  samples of a prompt differed too little for the clients' ranking to move it (measured: 38 % of the score
  variance within a prompt for 12-word continuations, 91 % for the request; docs/profiles.md). Every entry whose
  config has ``prompt_format != "few-shot"`` carries this in ``info["deviations"]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from largefedbench.config_overrides import config_to_dict
from largefedbench.contract import Artifact, Method, PublicResources
from largefedbench.errors import InputError
from largefedbench.synthetic.dpo import LOSS_TYPES, dpo_update
from largefedbench.synthetic.generation import seed_for
from largefedbench.synthetic.generator_rounds import Batch, GeneratorRounds, GeneratorRoundsSettings
from largefedbench.synthetic.lora import load_lora_state, lora_state
from largefedbench.synthetic.preferences import preference_pairs
from largefedbench.synthetic.scoring import NnVotes, PopriScores
from largefedbench.synthetic.texts import take

#: deviations an entry states in ``info["deviations"]`` when its config makes them (the rest: the module docstring)
PROMPT_DEVIATION = ("prompts: {fmt!r} instead of the paper's few-shot 'Original Text Sample' prompt of 3 public "
                    "examples (App. B.2); the cpu preset's open request lets the clients' ranking move the topic "
                    "(docs/profiles.md)")


@dataclass(frozen=True)
class POPriConfig(GeneratorRoundsSettings):
    """POPri's settings; defaults from the paper (§3.1, §5, App. B.1, E.1–E.5) and the reference config.

    K = ``n_prompts`` = 1800 prompts × J = ``n_per_prompt`` = 10 samples per round, rejected rank ℓ = 5, 64 new
    tokens at temperature 1.0 (top-p 1.0), T = 20 rounds (App. B.1), 3 public examples per prompt, LoRA r 4 / α 8,
    DPO β 0.01, lr 8e-7 → 3e-7 cosine over rounds, 2 epochs per round, batch 24, each round starting from the round
    before's lowest-FID epoch (``round_start``, App. B.1), full participation, 1,000,000 final samples. Models (LLaMA-3-8B, all-MiniLM-L6-v2, DistilGPT2) come from the profile.
    """

    # each round's samples and the clients' scores (§3.1, App. E)
    n_prompts: int = 1800
    n_per_prompt: int = 10
    rejected_rank: int = 5
    scoring: Literal["cosine", "nn"] = "cosine"
    score_normalization: Literal["zscore", "mean"] = "zscore"
    # the DPO step (App. B.1)
    loss_type: Literal["sigmoid", "ipo", "cdpo", "robust"] = "sigmoid"
    label_smoothing: float = 0.0
    beta: float = 0.01
    lr: float = 8e-7
    min_lr: float = 3e-7
    dpo_epochs: int = 2
    dpo_batch_size: int = 24
    round_start: Literal["best_epoch", "last_epoch"] = "best_epoch"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.round_start not in ("best_epoch", "last_epoch"):
            raise InputError(f"round_start={self.round_start!r}; choose 'best_epoch' (App. B.1: the round's lowest-FID "
                             "epoch starts the next round) or 'last_epoch' (the reference code)")
        if not 2 <= self.rejected_rank <= self.n_per_prompt:
            raise InputError(f"rejected_rank={self.rejected_rank} must be between 2 and n_per_prompt={self.n_per_prompt}")
        if self.loss_type not in LOSS_TYPES:
            raise InputError(f"loss_type={self.loss_type!r}; choose one of {', '.join(LOSS_TYPES)}")
        if self.scoring not in ("cosine", "nn"):
            raise InputError(f"scoring={self.scoring!r}; choose 'cosine' (POPri) or 'nn' (PE's histogram, App. E.1)")
        if min(self.n_prompts, self.dpo_epochs, self.dpo_batch_size) < 1:
            raise InputError("n_prompts, dpo_epochs and dpo_batch_size must be >= 1")

    @classmethod
    def tiny(cls) -> POPriConfig:
        """CPU settings for the demo snapshot and the tiny profile (about a minute): 3 rounds of 16 prompts × 6
        samples, 2 examples per prompt (so prompts fit the tiny generator's 256 positions), a stronger DPO step for
        a 0.3M-parameter generator (β 0.1, lr 5e-3, batch 8), 256 final samples."""
        return cls(rounds=3, n_prompts=16, n_per_prompt=6, rejected_rank=5, examples_per_prompt=2, beta=0.1, lr=5e-3,
                   min_lr=5e-3, dpo_batch_size=8, n_final=256)

    @classmethod
    def cpu(cls) -> POPriConfig:
        """The ``cpu`` profile (SmolLM2-135M on 2 cores): 3 rounds of 16 prompts × 6 samples (rejected rank 5: 16
        pairs a round); every prompt is one open request in SmolLM2's chat template (``"instruction"``), 48 new tokens
        at temperature 0.8, top-p 0.95. The request leaves the topic to the generator, so the clients' preference can
        move it: with 12-word continuations of the generic corpus (the earlier preset) the prefix fixed each
        sample's topic, 38 % of the variance of the samples' similarity to the private centroid lay within a prompt
        (91 % for the request) and POPri tied its no-signal row. DPO β 0.1 at lr 5e-4 → 2e-4 over 2 epochs of batch 2
        (16 steps a round: with 2 steps a round at lr 1e-4 the margins stayed below 0.005 and the generator did not
        move), 1024 final samples (512 real private spans close 11 % of the demo-prose gap, 1024 close 40–47 %:
        docs/profiles.md), generation batch 48."""
        return cls(rounds=3, n_prompts=16, n_per_prompt=6, rejected_rank=5, prompt_format="instruction",
                   max_new_tokens=48, temperature=0.8, top_p=0.95, beta=0.1, lr=5e-4, min_lr=2e-4, dpo_epochs=2,
                   dpo_batch_size=2, n_final=1024, generation_batch_size=48)

    def lr_at(self, round_index: int) -> float:
        """The learning rate of round ``round_index`` (0-based): cosine from ``lr`` to ``min_lr`` over the rounds."""
        if self.rounds == 1:
            return self.lr
        frac = round_index / (self.rounds - 1)
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1 + math.cos(math.pi * frac))


def best_epoch(fids: list[float]) -> int:
    """Index of the lowest FID (NaN never wins; all NaN: the last epoch)."""
    finite = [(f, i) for i, f in enumerate(fids) if math.isfinite(f)]
    return min(finite)[1] if finite else len(fids) - 1


class POPri(Method):
    name = "popri"
    paper = ("Hou, Wang, Zhu, Lazar, Fanti, 'Private Federated Learning using Preference-Optimized Synthetic Data', "
             "ICML 2025 (POPri), Algorithm 1")
    output = "synthetic text"
    Config = POPriConfig
    needs_span_embeddings = True
    audit_by_releases = True  # the audit scores canaries against its score sums

    def train(self, fed, public: PublicResources, cfg: POPriConfig, budget) -> Artifact:
        rounds = GeneratorRounds(fed, public, budget, cfg, n_prompts=cfg.n_prompts, n_per_prompt=cfg.n_per_prompt,
                                 desc="POPri rounds")
        model, tok = rounds.model, rounds.tokenizer

        def scores(emb):
            return PopriScores(emb, normalization=cfg.score_normalization) if cfg.scoring == "cosine" else NnVotes(emb)

        def epoch_fid(state: dict, r: int) -> float:
            """Validation FID of one epoch's adapter: one sample per prompt of round ``r`` (same prompts and seed for
            every epoch of the round)."""
            load_lora_state(model, state)
            return rounds.fid(rounds.sample(cfg.n_prompts, 1, stream=1 + r).texts)

        def step(r: int, noisy, batch: Batch) -> dict:
            """Preference pairs from the noised scores, then DPO (and the round's lowest-FID epoch, App. B.1)."""
            pairs = preference_pairs(noisy, cfg.n_per_prompt, cfg.rejected_rank, texts=batch.texts)
            row = {"n_samples": len(batch.texts), "n_pairs": len(pairs), "dropped_identical_pairs": pairs.dropped_identical,
                   "lr": cfg.lr_at(r)}
            if not len(pairs):
                return row
            epochs: list[dict] = []  # the adapter after each DPO epoch
            metrics = dpo_update(
                model, tok, take(batch.prompts, pairs.prompt), take(batch.raw, pairs.chosen),
                take(batch.raw, pairs.rejected), beta=cfg.beta, lr=cfg.lr_at(r), epochs=cfg.dpo_epochs,
                batch_size=cfg.dpo_batch_size, loss_type=cfg.loss_type, label_smoothing=cfg.label_smoothing,
                seed=seed_for(public.seed, 7, r), progress=public.progress, epoch_end=lambda: epochs.append(lora_state(model)),
            )
            row.update({k: metrics[k] for k in ("train_loss", "margin_first", "margin_last", "reward_accuracy_last", "steps")})
            if cfg.round_start == "best_epoch" and len(epochs) > 1:
                fids = [epoch_fid(state, r) for state in epochs]
                pick = best_epoch(fids)
                load_lora_state(model, epochs[pick])
                row.update({"epoch_fids": fids, "start_epoch": pick + 1})
            return row

        run = rounds.run(scores, step)
        return Artifact.synthetic(
            run.texts, method="popri", sigma=run.sigma, sample_rate=run.sample_rate, rounds=cfg.rounds,
            best_round=run.best_round, best_fid=run.best_fid,
            lora={"rank": cfg.lora_rank, "alpha": cfg.lora_alpha, "dropout": cfg.lora_dropout},
            fid_round_meaning="fid at round r = FID of the generator after r DPO updates (r = 0: the public generator)",
            final_generation_seconds=round(run.final_seconds, 3), config=config_to_dict(cfg),
            deviations=[PROMPT_DEVIATION.format(fmt=cfg.prompt_format)] if cfg.prompt_format != "few-shot" else [],
            history=run.history,
        )
