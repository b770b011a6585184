"""FedBis's and FedBiscuit's settings, with the paper's defaults and the ``cpu`` and ``tiny`` presets."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from largefedbench.errors import InputError
from largefedbench.fedtrain import FedAvgSettings
from largefedbench.synthetic.prompts import SamplingSettings

__all__ = ["SELECTORS", "SELECTOR_DTYPES", "SELECTOR_WEIGHTS", "FedBisConfig", "FedBiscuitConfig"]

SELECTOR_WEIGHTS = ("uniform", "group")  # Eq. 6's p_m: 1/M (paper, reference) or 1/N_u (ours)
SELECTOR_DTYPES = ("float32", "bfloat16")  # the selector's training forward (its scores are always float32)
SELECTORS = ("llm", "embedding")  # the paper's LoRA selector on the generator; ours: linear on embedding differences


@dataclass(frozen=True)
class FedBisConfig(SamplingSettings):
    """Defaults from Wu et al. (ICLR 2025), App. B.1 Table 3 (summarisation) and §6 "Implementation".

    Selector training: 500 rounds, participation 5/53 (a Poisson rate here), 30 local iterations, batch 32, AdamW
    (0.9, 0.95), lr 1e-5, LoRA r 8 / α 16 / dropout 0.05. Generation of multiple completions: temperature 0.7, 2
    completions per prompt (also 4, Table 2). RLFT: DPO with β 0.1 (the reference's ``reward_coeff``), lr 1e-6, batch
    32, 3 epochs (§6; Table 3 says 5). Ours: the clip, the candidate-pair pool and each client's share of it, the
    selector's candidate truncation, the number of DPO prompts and of final samples.

    Prompts and sampling are :class:`~largefedbench.synthetic.prompts.SamplingSettings`: the candidate pairs, the DPO
    pairs and the final set use its prompts (``prompt_format``, ``examples_per_prompt``, ``instruction``) and
    ``max_new_tokens``; the pairs are sampled at ``pair_temperature``, the final set at ``temperature`` and ``top_p``,
    through :func:`~largefedbench.synthetic.generator_rounds.final_set` (the generator-only row's streams and seeds).
    ``selector_layers`` > 0 puts the selector's LoRA in the top that many decoder layers only (0: every layer).
    ``selector`` "embedding" is the ablation of :mod:`.embedding_selector`: the LoRA settings then apply to the
    generator's DPO adapter only, and ``selector_layers``, ``selector_dtype``, ``candidate_tokens`` and
    ``selector_batch_size`` (the LLM selector's) are not used.
    ``record_agreement`` writes, per round, the share of the cohort clients' own validation pairs on which the
    broadcast selector agrees with the client (before its local training) to the run folder's unreleased
    diagnostics — raw, never in the entry, local executor only.
    """

    # selector training (Table 3; the clip is ours)
    rounds: int = 500
    sample_rate: float = 5 / 53
    local_steps: int = 30
    local_batch_size: int = 32
    client_lr: float = 1e-5
    client_betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    # the candidate pairs the selectors judge (pool, shares and truncation ours; temperature 0.7 the paper's)
    pool_pairs: int = 4096
    pairs_per_client: int = 32
    validation_pairs: int = 8
    candidate_tokens: int = 64
    pair_temperature: float = 0.7
    # RLFT: the generator's DPO on the selectors' preferences (§6; the number of prompts is ours)
    n_dpo_prompts: int = 4096
    n_completions: int = 2
    dpo_beta: float = 0.1
    dpo_lr: float = 1e-6
    dpo_epochs: int = 3
    dpo_batch_size: int = 32
    dpo_gradient_accumulation: int = 1
    # the final set, and how the LLM selector runs
    n_synthetic: int = 100_000
    selector_batch_size: int = 64
    selector_dtype: Literal["float32", "bfloat16"] = "float32"
    selector_layers: int = 0
    selector: Literal["llm", "embedding"] = "llm"
    record_agreement: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.selector_layers < 0:
            raise InputError(f"selector_layers={self.selector_layers} must be >= 0 (0: a LoRA in every layer)")
        if self.dpo_batch_size < 1 or self.dpo_gradient_accumulation < 1:
            raise InputError("dpo_batch_size and dpo_gradient_accumulation must be at least 1")
        if self.selector_dtype not in SELECTOR_DTYPES:
            raise InputError(f"selector_dtype={self.selector_dtype!r}; choose one of {', '.join(SELECTOR_DTYPES)}")
        if self.selector not in SELECTORS:
            raise InputError(f"selector={self.selector!r}; choose one of {', '.join(SELECTORS)}")

    @classmethod
    def tiny(cls) -> FedBisConfig:
        """About half a minute on a CPU with the tiny profile on the demo: 4 rounds of ~31 clients with 2 local steps
        on 6 pairs each, a 64-pair pool, 36 DPO pairs, 120 samples."""
        return cls(**_TINY)

    @classmethod
    def cpu(cls) -> FedBisConfig:
        """The ``cpu`` profile: 2 rounds at rate 0.5 (~775 clients a round) with 2 local AdamW steps
        (lr 2e-3) on 8 pairs each, the selector's LoRA (r 4) in the top 4 of SmolLM2's 30 layers (163k weights), a
        1,024-pair pool. The noise of the released mean is then 0.48 of the clip bound over the two rounds (σ·√d /
        M / √T); the preset before (10 rounds at rate 0.05, ~77 clients, the LoRA in every layer: 1.2M weights) had
        3.6 — per round 11× the largest signal a cohort can send (docs/profiles.md). Prompts and sampling are
        POPri's cpu preset's (one open request in the chat template, 48 new tokens, final set at temperature 0.8,
        top-p 0.95), so the generator-only row is FedBis's own no-signal row. DPO on the C(3, 2) = 3 pairs of each
        of 64 prompts (lr 5e-4, 2 epochs of batch 24, 6 accumulated micro-batches of 4: 8 steps an epoch, as POPri's
        cpu epoch), selectors trained in bf16 autocast, 1,024 samples."""
        return cls(**_CPU)

    def fedavg(self, n_clients: int) -> FedAvgSettings:
        """The local training (K AdamW steps over the client's pairs in both orders) and the Poisson rate."""
        return FedAvgSettings(rounds=self.rounds, clients_per_round=self.sample_rate * n_clients, clip=self.clip, client_lr=self.client_lr,
                        local_epochs=max(1, math.ceil(self.local_steps * self.local_batch_size /
                                                      max(2 * self.pairs_per_client, 1))),
                        local_batch_size=self.local_batch_size, max_local_steps=self.local_steps,
                        client_optimizer="adamw", client_betas=self.client_betas)


@dataclass(frozen=True)
class FedBiscuitConfig(FedBisConfig):
    """FedBiscuit on top of FedBis's settings (App. B.2 "Special Setting for FedBiscuit"): U = 3 selectors, 50 warm-up
    rounds each (counted in the 500), regrouping every 50 rounds. ``grouping_budget_share`` (ours) is the share of ε the
    private grouping releases would spend alone. ``selector_weights`` is p_m of Eq. 6: "uniform" (1/M, the paper and
    the reference aggregator, default) or "group" (1/N_u, ours: each group a FedAvg of its own members)."""

    n_selectors: int = 3
    warmup_rounds: int = 50
    regroup_every: int = 50
    grouping_budget_share: float = 0.1
    selector_weights: Literal["uniform", "group"] = "uniform"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_selectors < 1 or self.warmup_rounds < 1 or self.regroup_every < 1:
            raise InputError("n_selectors, warmup_rounds and regroup_every must be at least 1")
        if self.rounds < self.n_selectors * self.warmup_rounds:
            raise InputError(f"rounds={self.rounds} must cover the {self.n_selectors}×{self.warmup_rounds} warm-up "
                             "rounds (they count in the total, App. B.2)")
        if not 0 < self.grouping_budget_share < 1:
            raise InputError(f"grouping_budget_share={self.grouping_budget_share} must be in (0, 1)")
        if self.selector_weights not in SELECTOR_WEIGHTS:
            raise InputError(f"selector_weights={self.selector_weights!r}; choose 'uniform' (p_m = 1/M, Eq. 6 as the "
                             "paper) or 'group' (p_m = 1/N_u)")

    @classmethod
    def tiny(cls) -> FedBiscuitConfig:
        """FedBis's tiny settings with U = 3, one warm-up round each and regrouping every 2 of the 4 clustered rounds."""
        return cls(**{**_TINY, "rounds": 7}, warmup_rounds=1, regroup_every=2)

    @classmethod
    def cpu(cls) -> FedBiscuitConfig:
        """FedBis's cpu settings on U = 3 selectors: one warm-up round each, then one grouping and 2 clustered
        rounds (5 selector rounds, the warm-up counted in them as App. B.2), at rate 0.25 (~387 clients a round):
        about 1.25× FedBis's client updates, and each selector's warm-up cohort a quarter of the clients."""
        return cls(**{**_CPU, "rounds": 5, "sample_rate": 0.25}, warmup_rounds=1, regroup_every=2)

    def schedule(self) -> list[tuple[str, int]]:
        """The rounds in order: ("warmup", u) T times per selector, then ("group", k) every τ clustered rounds
        before ("train", r)."""
        steps = [("warmup", u) for u in range(self.n_selectors) for _ in range(self.warmup_rounds)]
        clustered = self.rounds - len(steps)
        for r in range(max(clustered, 0)):
            if r % self.regroup_every == 0:
                steps.append(("group", r // self.regroup_every))
            steps.append(("train", r))
        return steps


_TINY: dict[str, Any] = {
    "rounds": 4, "sample_rate": 0.02, "local_steps": 2, "local_batch_size": 8, "client_lr": 5e-3, "lora_rank": 4,
    "lora_alpha": 8, "pool_pairs": 64, "pairs_per_client": 6, "validation_pairs": 2, "candidate_tokens": 32,
    "examples_per_prompt": 2, "max_new_tokens": 32, "n_dpo_prompts": 12, "n_completions": 3, "dpo_lr": 2e-3,
    "dpo_epochs": 1, "dpo_batch_size": 8, "n_synthetic": 120,
}

_CPU: dict[str, Any] = {
    "rounds": 2, "sample_rate": 0.5, "local_steps": 2, "local_batch_size": 8, "client_lr": 2e-3, "lora_rank": 4,
    "lora_alpha": 8, "selector_layers": 4, "pool_pairs": 1024, "pairs_per_client": 8, "validation_pairs": 2,
    "candidate_tokens": 48, "prompt_format": "instruction", "max_new_tokens": 48, "temperature": 0.8, "top_p": 0.95,
    "n_dpo_prompts": 64, "n_completions": 3, "dpo_lr": 5e-4, "dpo_epochs": 2, "dpo_batch_size": 4,
    "dpo_gradient_accumulation": 6, "n_synthetic": 1024, "generation_batch_size": 48, "selector_dtype": "bfloat16",
}
