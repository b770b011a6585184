"""FedBis and FedBiscuit — Wu et al., "Towards Federated RLHF with Aggregated Client Preference for LLMs" (ICLR 2025,
§4, §5 Algorithm 1, App. A–B), with user-level DP added and the preference data derived from each client's own text.

**Preference data.** Neither bioRxiv nor Congress has human preference pairs, so each client's pairs come from its own
text: the server generates a public pool of candidate pairs (A, B) with the public generator from few-shot public
prompts (temperature 0.7, App. B.1); a client is given a fixed subset of the pool (its own seeded draw, split into a
training part and a small validation part, §5.1) and prefers the candidate closer to its spans in embedding space
(summed cosine similarity, POPri's signal). Training examples carry both orders (§4: (x, y_w, y_l, 0) and
(x, y_l, y_w, 1)).

**Binary selector.** A LoRA adapter (r 8, α 16, dropout 0.05) on the profile's generator reads
``"Text A: …\\nText B: …\\nWhich text is more like your own documents? Answer:"`` and is trained with cross-entropy
over the logits of the two choice tokens " A" and " B" at the last position (the reference's ``choices: ['A','B']``).
``selector="embedding"`` (ours, an ablation; :data:`EMBEDDING_SELECTOR_DEVIATION`) replaces it with a linear selector on
the pair's embedding difference, the space in which the clients' preferences are defined.

**FedBis** (§4, App. A.1): R rounds of DP-FedAvg on the selector — Poisson cohorts at the participation rate, K local
AdamW steps, the clipped Δ summed through ``fed.private_sum``, the mean applied (Eq. 8).

**FedBiscuit** (§5, Alg. 1): U selectors. Warm-up: selector u is trained alone for T rounds, u = 0..U−1. Then every τ
rounds the clients are regrouped, and in each round every cohort client trains its own group's selector; its Δ sits
in its group's slot of a U-slot vector, so one ``private_sum`` releases all U sums; selector u moves by its slot's sum
/ M (Eq. 6 with the paper's uniform weights p_m = 1/M, as the reference aggregator's ``1 / num_clients``;
``selector_weights="group"`` divides by the group size N_u instead).

*Grouping made private.* The paper collects every client's U validation losses in the clear and runs a balanced
greedy assignment (the reference's ``check_and_grouping``). Here the losses never leave the client: each client
releases its ranking of the selectors as a unit vector (its negative losses, centred and normalised), all clients'
vectors side by side in one ``private_sum`` (``fed.everyone()``, q = 1, σ_g, sensitivity 1: a client only writes its
own slot), and the server runs the reference's balanced greedy assignment on the noisy rankings, in a public seeded
client order (the reference's shuffle). The groups are therefore exactly balanced (Eq. 5: sizes ⌈M/U⌉ or ⌊M/U⌋,
known from M alone), and each client's group is a function of the noisy release only; with no noise it is the
reference's grouping. σ_g is set so that the grouping releases alone would be (``grouping_budget_share``·ε, δ)-DP
(analytic Gaussian); the DP-FedAvg σ is calibrated so that the whole ledger — warm-up rounds, grouping releases,
clustered rounds, in order — meets (ε, δ). At small ε the per-client rankings are mostly noise, so the grouping
tends to the reference's on random losses (balanced, not preference-driven); the release costs M·U floats per
client (its row in an M·U vector).

**RLHF** (App. A.2, §5 "majority voting"): the server generates ``n_completions`` completions per public prompt with
the generator (temperature 0.7), forms all C(n, 2) pairs, labels each by the majority vote of the U selectors (U = 1
for FedBis), and trains the generator's LoRA adapter with DPO (β 0.1). The synthetic set is then sampled from the
DPO'd generator (one sample per fresh public prompt; empty completions are redrawn). The paper's own tasks (TL;DR
summarisation and SHP/SafeRLHF question answering, judged by win rate against GPT-4/Auto-J) are out of scope: the
benchmark scores the synthetic text by the downstream model's next-token accuracy.

Deviations: :data:`DEVIATIONS` (also in the artifact's ``info["deviations"]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Literal

import numpy as np
import torch

from largefedbench import __version__
from largefedbench.contract import Artifact, Method
from largefedbench.errors import InputError, MethodError
from largefedbench.fedtrain import (
    CHUNK_CLIENTS,
    FedAvgSettings,
    FlatParams,
    Release,
    Server,
    local_updates,
    train_rounds,
)
from largefedbench.fedtrain.frozen_prefix import FrozenPrefix, lowest_adapted_layer, pad_rows
from largefedbench.fedtrain.generator import lora_generator, require_private_budget
from largefedbench.models import embed
from largefedbench.privacy import PoissonGaussianEvent, analytic_gaussian_sigma
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.rounds import RoundsLoop, cohort_fields, record_unreleased, unreleased_path
from largefedbench.synthetic.dpo import dpo_update
from largefedbench.synthetic.generation import seed_for
from largefedbench.synthetic.generator_rounds import Batch, final_set, sample_batch
from largefedbench.synthetic.lora import load_lora_state, lora_state
from largefedbench.synthetic.prompts import SamplingSettings, public_examples
from largefedbench.synthetic.scoring import client_embedding_sums

__all__ = ["DEVIATIONS", "EMBEDDING_SELECTOR_DEVIATION", "AgreementTally", "EmbeddingSelectorTask", "FedBis",
           "FedBisConfig", "FedBiscuit", "FedBiscuitConfig", "PairPool", "SelectorTask", "SelectorUpdate",
           "balanced_grouping", "client_pair_indices", "client_preferences", "clustered_step", "grouping_rows",
           "majority_vote", "own_pairs", "preference_scores", "private_grouping"]

DEVIATIONS = (
    ("user-level DP added (the paper has none): clipped selector updates through fed.private_sum with Poisson cohorts, and "
     "FedBiscuit's grouping on each client's noisy selector ranking (one fed.private_sum of unit vectors) instead of clear "
     "validation losses"),
    ("each client's preference pairs are server-generated candidates labelled by embedding similarity to the client's "
     "own spans (no human preferences exist in the benchmark's data); the selector prompt holds the two texts only"),
    ("the selector is a LoRA adapter on the profile's generator (the paper: Qwen-2-0.5B, Gemma-2B or LLaMA-2-7B); "
     "local AdamW has no weight decay; dropout is off during local training"),
    ("pairs are labelled by each selector's log-odds averaged over both presentation orders (the paper reads one "
     "order); DPO uses trl's AdamW instead of RMSprop"),
    ("the paper's summarisation and QA tasks and their win-rate evaluation are out of scope: the synthetic set is "
     "sampled from the DPO'd generator and scored by downstream next-token accuracy"),
)
EMBEDDING_SELECTOR_DEVIATION = (
    "selector='embedding' (an ablation, not the paper's method): each selector is a linear model on the pair's "
    "embedding difference, log-odds(A) = w·(e_A − e_B) with the public embedder's unit embeddings, trained by the same "
    "rounds, clipping and noise as the LoRA selector, instead of an LLM reading both texts")

SELECTOR_WEIGHTS = ("uniform", "group")  # Eq. 6's p_m: 1/M (paper, reference) or 1/N_u (ours)
SELECTOR_DTYPES = ("float32", "bfloat16")  # the selector's training forward (its scores are always float32)
SELECTORS = ("llm", "embedding")  # the paper's LoRA selector on the generator; ours: linear on embedding differences
AGREEMENT_NEEDS_LOCAL = ("record_agreement needs --executor local: the raw agreement is a diagnostic the client "
                         "functions keep in the process they run in, and on the process or Ray executor that is a "
                         "worker it never leaves; add --executor local, or turn record_agreement off")
TEMPLATE_A, TEMPLATE_B, TEMPLATE_END = "Text A: ", "\nText B: ", "\nWhich text is more like your own documents? Answer:"
CHOICES = (" A", " B")


# -- configs ------------------------------------------------------------------------------------------------
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
    ``selector`` "embedding" is the ablation of :class:`EmbeddingSelectorTask`: the LoRA settings then apply to the
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
        """The ``cpu`` profile (issue 25): 2 rounds at rate 0.5 (~775 clients a round) with 2 local AdamW steps
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

# -- the public pair pool and each client's preferences ------------------------------------------------------
@dataclass(frozen=True)
class PairPool:
    """Public candidate pairs (server-generated) and their unit embeddings."""

    a: list[str]
    b: list[str]
    emb_a: np.ndarray
    emb_b: np.ndarray

    def __len__(self) -> int:
        return len(self.a)


def client_pair_indices(clients: np.ndarray, pool_size: int, per_client: int, seed: int) -> np.ndarray:
    """Each client's fixed draw of ``per_client`` distinct pool pairs (seeded by the run seed and the client's
    position): ``(len(clients), per_client)``."""
    k = min(per_client, pool_size)
    return np.stack([np.random.default_rng(np.random.SeedSequence([int(seed), 0xFB15, int(c)])).choice(pool_size, k, replace=False)
                     for c in clients]) if len(clients) else np.zeros((0, k), dtype=np.int64)


def client_preferences(span_vectors: np.ndarray, owner: np.ndarray, n_clients: int, pool: PairPool,
                       pair_idx: np.ndarray) -> np.ndarray:
    """Label 0 where a client prefers A (larger summed cosine similarity to its spans), 1 where it prefers B:
    ``(n_clients, pairs)`` for the pairs ``pair_idx[c]`` of client ``c`` (inside a client function)."""
    sums = client_embedding_sums(span_vectors, owner, n_clients).astype(np.float64)
    sim_a = np.einsum("cd,ckd->ck", sums, pool.emb_a[pair_idx])
    sim_b = np.einsum("cd,ckd->ck", sums, pool.emb_b[pair_idx])
    return (sim_b > sim_a).astype(np.int64)


def own_pairs(chunk, position: dict[str, int], pool: PairPool, n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Client side: the chunk clients' own ``n_pairs`` pool pairs (train part first, validation last; seeded by the
    run seed and each client's public position in the federation) and their labels from their own span embeddings."""
    pairs = client_pair_indices(np.asarray([position[c] for c in chunk.ids], dtype=np.int64), len(pool), n_pairs, seed)
    if len(chunk) == 0:
        return pairs, pairs
    return pairs, client_preferences(chunk.embeddings, chunk.owner, len(chunk), pool, pairs)


# -- the selector -------------------------------------------------------------------------------------------
class _PairTask:
    """What a selector task shares: rows ``ab[p]`` (pair p as given, A = ``a[p]``) and ``ba[p]`` (swapped), the
    client's training examples and the log-odds per pair; a subclass gives ``log_odds`` and ``loss``."""

    ab: list
    ba: list

    def examples(self, pairs: np.ndarray, labels: np.ndarray) -> list[tuple[Any, int]]:
        """A client's training examples: each of its pairs in both orders with the matching label (§4)."""
        out = []
        for p, y in zip(pairs, labels):
            out.append((self.ab[p], int(y)))
            out.append((self.ba[p], 1 - int(y)))
        return out

    def prefers_a(self, model, pairs: np.ndarray, batch_size: int) -> np.ndarray:
        """Per pair, the selector's log-odds that pool.a beats pool.b, averaged over both presentation orders."""
        ab = self.log_odds(model, [self.ab[p] for p in pairs], batch_size)
        ba = self.log_odds(model, [self.ba[p] for p in pairs], batch_size)
        return (ab - ba) / 2


class SelectorTask(_PairTask):
    """Token ids of the selector prompt for pool pairs in both orders, its loss and its log-odds."""

    def __init__(self, tokenizer, a: list[str], b: list[str], candidate_tokens: int, dtype: str = "float32") -> None:
        if dtype not in SELECTOR_DTYPES:
            raise ValueError(f"dtype={dtype!r}; choose one of {', '.join(SELECTOR_DTYPES)}")
        # bfloat16: the training forward's matrix products in bf16 (weights, gradients and AdamW state stay float32);
        # scores (DPO labels, FedBiscuit's grouping) stay float32: bf16 would round logits of 11-19 to steps of 1/16-1/8
        self.train_autocast = dtype == "bfloat16"
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        pieces = tokenizer([TEMPLATE_A, TEMPLATE_B, TEMPLATE_END], add_special_tokens=False)["input_ids"]
        self.choice_ids = [tokenizer(c, add_special_tokens=False)["input_ids"][-1] for c in CHOICES]
        texts = tokenizer(list(a) + list(b), add_special_tokens=False)["input_ids"] if a else []
        ta, tb = [t[:candidate_tokens] for t in texts[: len(a)]], [t[:candidate_tokens] for t in texts[len(a):]]
        head = [tokenizer.bos_token_id] + list(pieces[0])

        def build(x: list[int], y: list[int]) -> list[int]:
            return head + x + list(pieces[1]) + y + list(pieces[2])

        self.ab = [build(x, y) for x, y in zip(ta, tb)]  # A = pool.a
        self.ba = [build(y, x) for x, y in zip(ta, tb)]  # A = pool.b
        self.prefix: FrozenPrefix | None = None

    def freeze_prefix(self, model, batch_size: int, progress: bool = False) -> int:
        """Run ``model``'s layers under its adapter once per row of this task (both orders), not in every forward:
        the same logits and gradients, a selector step about 3× faster with a LoRA in the top 4 of 30 layers
        (:mod:`~largefedbench.fedtrain.frozen_prefix`). Returns the number of frozen layers skipped (0: none)."""
        frozen = lowest_adapted_layer(model)
        self.prefix = (FrozenPrefix(model, self.ab + self.ba, self.pad_id, batch_size, progress)
                       if frozen and self.ab else None)
        return frozen if self.prefix is not None else 0

    def _logits(self, model, rows: list[list[int]], autocast: bool = False) -> torch.Tensor:
        device = next(model.parameters()).device
        ids, mask = pad_rows(rows, self.pad_id)
        last = mask.sum(1).to(device) - 1
        # the LM head only at the batch's distinct last positions (each row's, a handful in a right-padded batch),
        # not at every position: the same logits and gradients, a fifth less time a selector step (docs/speed.md)
        keep = torch.unique(last)
        prefix = self.prefix if self.prefix is not None and self.prefix.covers(model, rows) else None
        feed = prefix.feeding(rows, ids.shape[1], autocast) if prefix is not None else nullcontext()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast), feed:
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), logits_to_keep=keep).logits
        if logits.shape[1] != len(keep):
            raise RuntimeError(f"{type(model).__name__} ignored logits_to_keep ({logits.shape[1]} positions, not "
                               f"{len(keep)}): the selector needs a transformers causal LM that supports it")
        return logits[torch.arange(len(rows), device=device), torch.searchsorted(keep, last)][:, self.choice_ids].float()

    def loss(self, model, batch: list[tuple[list[int], int]]) -> torch.Tensor:
        """Cross-entropy over the two choice tokens at the last position."""
        labels = torch.as_tensor([y for _, y in batch], device=next(model.parameters()).device)
        logits = self._logits(model, [r for r, _ in batch], autocast=self.train_autocast)
        return torch.nn.functional.cross_entropy(logits, labels)

    @torch.no_grad()
    def log_odds(self, model, rows: list[list[int]], batch_size: int) -> np.ndarray:
        """logit(" A") − logit(" B") of each row."""
        model.eval()
        out = [self._logits(model, rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)]
        both = torch.cat(out) if out else torch.zeros((0, 2))
        return (both[:, 0] - both[:, 1]).cpu().numpy()


class EmbeddingSelectorTask(_PairTask):
    """The ``selector="embedding"`` ablation (ours): the selector is ``torch.nn.Linear(dim, 1, bias=False)`` on the
    pair's embedding difference, log-odds(A) = w·(e_A − e_B), so the swapped order's log-odds is exactly the negative.
    The clients' preferences are defined in this space (:func:`client_preferences`), where a linear model learns them
    from a few hundred pairs (docs/profiles.md: 0.82 agreement with the majority, the LoRA selector 0.60); the rows are
    pair indices into the stacked differences, ``n + p`` for pair p swapped."""

    def __init__(self, emb_a: np.ndarray, emb_b: np.ndarray) -> None:
        diff = torch.as_tensor(np.asarray(emb_a, dtype=np.float32) - np.asarray(emb_b, dtype=np.float32))
        self.x = torch.cat([diff, -diff])
        self.ab, self.ba = list(range(len(diff))), list(range(len(diff), 2 * len(diff)))

    @staticmethod
    def model(dim: int) -> torch.nn.Module:
        """A selector at chance: every log-odds 0."""
        linear = torch.nn.Linear(dim, 1, bias=False)
        torch.nn.init.zeros_(linear.weight)
        return linear

    def freeze_prefix(self, model, batch_size: int, progress: bool = False) -> int:
        return 0  # no layers to run once

    def _odds(self, model, rows: list[int]) -> torch.Tensor:
        return model(self.x[rows].to(model.weight.device)).squeeze(-1)

    def loss(self, model, batch: list[tuple[int, int]]) -> torch.Tensor:
        """The same cross-entropy as the LLM selector's over (" A", " B") with logits (w·x, 0): label 0 is A."""
        target = torch.as_tensor([float(y == 0) for _, y in batch], device=model.weight.device)
        return torch.nn.functional.binary_cross_entropy_with_logits(self._odds(model, [r for r, _ in batch]), target)

    @torch.no_grad()
    def log_odds(self, model, rows: list[int], batch_size: int) -> np.ndarray:
        return self._odds(model, list(rows)).cpu().numpy()


@dataclass
class SelectorUpdate:
    """The client function of a selector round (``fed.private_sum``, batched): every client of a chunk labels its own
    training pairs from its own span embeddings (:func:`own_pairs`), trains its selector from the broadcast
    ``weights`` with local AdamW and puts Δ in that selector's slot (one slot per selector of ``slots``). Each client's
    batch order comes from its own generator (``chunk.rng(i, 0x5E1)``: federation seed, round, client id), so neither
    the executor nor the chunking changes the sum."""

    adapter: FlatParams
    task: _PairTask
    pool: PairPool
    settings: FedAvgSettings
    weights: list[torch.Tensor]  # the broadcast selectors
    slots: list[int]  # the selectors trained this round, one slot each
    selector_of: dict[str, int]  # public: each cohort client's selector
    position: dict[str, int]  # public: each cohort client's place in the federation (seeds its pairs)
    train_pairs: int
    n_pairs: int  # train + validation pairs per client
    seed: int
    tally: AgreementTally | None = None  # the unreleased agreement diagnostic (``record_agreement``)

    def __call__(self, chunk) -> torch.Tensor:
        d = self.adapter.numel
        # on the model's device (the broadcast weights may sit on the CPU after a resume: checkpoints load there)
        out = torch.zeros((len(chunk), len(self.slots) * d), device=self.adapter.params[0].device)
        if not len(chunk):
            return out
        pairs, labels = own_pairs(chunk, self.position, self.pool, self.n_pairs, self.seed)
        selector = np.asarray([self.selector_of[c] for c in chunk.ids])
        rngs = [chunk.rng(i, 0x5E1) for i in range(len(chunk))]
        model, k = self.adapter.model, self.train_pairs
        for slot, u in enumerate(self.slots):
            rows = np.flatnonzero(selector == u)
            if not len(rows):
                continue
            self.adapter.set(self.weights[u])
            if self.tally is not None:
                self.tally.add(self.task, model, pairs[rows, k:], labels[rows, k:])
            clients = [self.task.examples(pairs[i, :k], labels[i, :k]) for i in rows]
            out[rows, slot * d : (slot + 1) * d] = local_updates(
                self.adapter, clients, lambda batch: self.task.loss(model, batch), self.settings.local, [rngs[i] for i in rows])
        return out


class AgreementTally:
    """How often the broadcast selector agrees with the cohort clients on their own validation pairs (never trained
    on), summed inside the client function before local training: an aggregate, not differentially private (an
    unreleased diagnostic), and only filled on the ``local`` executor (a Ray worker fills its own copy)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size, self.agree, self.pairs, self.clients = int(batch_size), 0, 0, 0

    def add(self, task: _PairTask, model, pairs: np.ndarray, labels: np.ndarray) -> None:
        prefers_a = task.prefers_a(model, pairs.reshape(-1), self.batch_size) > 0
        self.agree += int((prefers_a == (labels.reshape(-1) == 0)).sum())
        self.pairs += int(labels.size)
        self.clients += len(labels)

    def summary(self) -> dict[str, float]:
        return {"selector_agreement_on_own_validation_pairs": self.agree / self.pairs if self.pairs else float("nan"),
                "validation_pairs": self.pairs}


def majority_vote(scores: np.ndarray) -> np.ndarray:
    """``scores[u, i] > 0`` is selector u's vote for A on pair i; True where most selectors vote A (U odd: no ties;
    an even split goes to A, the reference's ``bincount().argmax()``)."""
    votes = np.asarray(scores) > 0
    return votes.sum(0) * 2 >= votes.shape[0]


# -- private balanced grouping ------------------------------------------------------------------------------
def preference_scores(losses: np.ndarray) -> np.ndarray:
    """Client side: each client's ranking of the selectors as a vector of L2 norm ≤ 1 — its negative validation
    losses, centred and scaled to unit norm (a zero row when all its losses are equal). Order-preserving, so the
    noise-free grouping is exactly the reference's on the losses."""
    scores = -(np.asarray(losses, dtype=np.float64) - np.mean(losses, axis=1, keepdims=True))
    norms = np.linalg.norm(scores, axis=1, keepdims=True)
    return np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 1e-12)


def balanced_grouping(scores: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The reference's ``check_and_grouping`` (FedBiscuit §5 Step 2.1) on released scores (higher = preferred).

    The clients, taken in the public shuffled ``order``, propose to their best open selector; the selector with the
    most proposals (ties: the lowest index) keeps the first ⌈unassigned / open⌉ of them in that order and closes;
    the rest propose to their next best open selector; repeat. Every group gets ⌈·⌉ or ⌊·⌋ of the clients, so
    Eq. 5 (max − min ≤ 1) holds and the sizes depend on the number of clients only. Returns each client's group."""
    n, n_sel = scores.shape
    ranking = np.argsort(-np.asarray(scores, dtype=np.float64), axis=1, kind="stable")
    nxt = np.zeros(n, dtype=np.int64)  # each client's position in its own ranking (the reference's iterator)
    group = np.full(n, -1, dtype=np.int64)
    proposals: dict[int, list[int]] = {u: [] for u in range(n_sel)}
    senders = [int(c) for c in order]
    unassigned = n
    while unassigned > 0:
        room = math.ceil(unassigned / len(proposals))
        for c in senders:
            u = int(ranking[c, nxt[c]])
            nxt[c] += 1
            while u not in proposals:
                u = int(ranking[c, nxt[c]])
                nxt[c] += 1
            proposals[u].append(c)
        best = max(proposals, key=lambda v: len(proposals[v]))  # first maximum: the lowest open index
        kept, senders = proposals[best][:room], proposals[best][room:]
        group[kept] = best
        del proposals[best]
        unassigned -= len(kept)
    return group


def grouping_rows(losses: np.ndarray, slots: Sequence[int], n_slots: int) -> np.ndarray:
    """Client side of FedBiscuit's private grouping: each client's :func:`preference_scores` of its own validation
    ``losses`` (one row of U per client) written into its own slot of an ``n_slots``·U vector; the federation sums
    these rows (each of L2 norm ≤ 1: sensitivity 1) and adds the noise."""
    losses = np.asarray(losses, dtype=np.float64)
    n_sel = losses.shape[1] if losses.ndim == 2 else 0
    rows = np.zeros((len(losses), n_slots * n_sel), dtype=np.float32)
    for j, (slot, row) in enumerate(zip(slots, preference_scores(losses) if len(losses) else [])):
        rows[j, slot * n_sel : (slot + 1) * n_sel] = row
    return rows


def private_grouping(noisy: np.ndarray, n_selectors: int, order: np.ndarray) -> np.ndarray:
    """Server side: the reference's balanced grouping on the noisy rankings (the released sum of
    :func:`grouping_rows`), clients taken in the public shuffled ``order``. A function of the release only."""
    return balanced_grouping(np.asarray(noisy, dtype=np.float64).reshape(-1, n_selectors), order)


def clustered_step(weights: list[torch.Tensor], noisy: torch.Tensor, n_clients: int, sizes: np.ndarray,
                   rule: str = "uniform") -> list[torch.Tensor]:
    """Eq. 6 on the released sums: φ_u ← (1 − Σ_{A_u} p_m) φ_u + Σ_{A_u} p_m φ_u^m = φ_u + Σ_{A_u} p_m Δ_m, where
    ``noisy`` holds selector u's noisy Σ Δ in slot u. ``rule`` "uniform": p_m = 1/M (M = ``n_clients``; the paper's
    uniform weights and the reference aggregator's ``1 / num_clients``); "group": p_m = 1/N_u (ours: each group
    averages over its own members, a step about U times larger)."""
    if rule not in SELECTOR_WEIGHTS:
        raise InputError(f"selector_weights={rule!r}; choose one of {', '.join(SELECTOR_WEIGHTS)}")
    d = weights[0].numel()
    out = []
    for u, w in enumerate(weights):
        denominator = float(n_clients) if rule == "uniform" else float(sizes[u])
        out.append(w + noisy[u * d : (u + 1) * d] / max(denominator, 1.0))
    return out


def selector_task(cfg: FedBisConfig, public, a: list[str], b: list[str], emb_a: np.ndarray | None = None,
                  emb_b: np.ndarray | None = None) -> _PairTask:
    """The selector's view of the pairs (a[i], b[i]) for ``cfg.selector``; the embedding selector embeds the texts
    with the public embedder unless their embeddings are given."""
    if cfg.selector == "embedding":
        if emb_a is None or emb_b is None:
            emb = embed(list(a) + list(b), public.models.embedder)
            emb_a, emb_b = emb[: len(a)], emb[len(a):]
        return EmbeddingSelectorTask(emb_a, emb_b)
    return SelectorTask(public.models.generator_tokenizer, a, b, cfg.candidate_tokens, cfg.selector_dtype)


def deviations(cfg: FedBisConfig) -> list[str]:
    """The run's deviations from the paper, as its artifact records them."""
    return list(DEVIATIONS) + ([EMBEDDING_SELECTOR_DEVIATION] if cfg.selector == "embedding" else [])


# -- the methods --------------------------------------------------------------------------------------------
class FedBis(Method):
    name = "fedbis"
    paper = ("Wu et al., 'Towards Federated RLHF with Aggregated Client Preference for LLMs', ICLR 2025 (FedBis: one "
             "federated binary selector, then DPO)")
    output = "synthetic text"
    Config = FedBisConfig
    needs_span_embeddings = True
    #: session 16's cpu-preset settings (before them the selectors trained in float32 and DPO took every batch's step) and
    #: session 24's selector ablation (before it every selector was the LoRA one)
    introduced_settings = {"selector_dtype": "float32", "dpo_gradient_accumulation": 1, "selector": "llm"}

    def n_selectors(self, cfg) -> int:
        return 1

    def plan(self, cfg, n_clients: int, sigma: float, sigma_g: float) -> list[PoissonGaussianEvent]:
        """The ledger's events for DP-FedAvg σ ``sigma`` (and grouping σ ``sigma_g``), in order."""
        return [PoissonGaussianEvent(sigma, cfg.sample_rate, cfg.rounds)]

    def grouping_sigma(self, cfg, budget) -> float:
        return 0.0

    def train(self, fed, public, cfg: FedBisConfig, budget) -> Artifact:
        require_private_budget(budget, self.name)
        n = fed.n_clients
        sigma_g = self.grouping_sigma(cfg, budget)
        sigma = budget.calibrate(lambda s: self.plan(cfg, n, s, sigma_g), n_clients=n)
        tok = public.models.generator_tokenizer
        examples = public_examples(public, minimum=cfg.examples_per_prompt)
        generator = lora_generator(public.models, rank=cfg.lora_rank, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout)
        if cfg.record_agreement:  # fails now, not after the first round
            unreleased_path(public)  # raises if the run has no folder to write the diagnostic to
            if not fed.clients_run_here:
                raise InputError(AGREEMENT_NEEDS_LOCAL)

        if cfg.selector == "embedding":
            selector = EmbeddingSelectorTask.model(embed([], public.models.embedder).shape[1])
        else:
            selector = lora_generator(public.models, rank=cfg.lora_rank, alpha=cfg.lora_alpha,
                                      dropout=cfg.lora_dropout, top_layers=cfg.selector_layers)
        run = _SelectorTraining(self, fed, public, cfg, lambda: self._pair_pool(generator, tok, examples, cfg, public),
                                FlatParams(selector), sigma, sigma_g)
        run.train()
        pool_pairs, frozen = run.pool_info()

        # DPO is a stage with its own checkpoint: a run killed after it resumes at the final samples
        stage = RoundsLoop(fed, public, DpoStage(lora_state(generator), {}, {}), rounds=1, desc=f"{self.name}: dpo",
                           stage="dpo", fingerprint={"phase": "dpo", "lfb": __version__})
        if stage.resumed:
            load_lora_state(generator, stage.state.lora)
        for _ in stage:
            dpo, labels_info = self._rlhf(generator, tok, examples, cfg, public, run)
            stage.state = DpoStage(lora_state(generator), dpo, labels_info)
        dpo, labels_info = stage.state.metrics, stage.state.labels
        texts, _ = final_set(generator, tok, examples, cfg, public, cfg.n_synthetic)
        info = {
            "noise_multiplier": sigma, "sample_rate": cfg.sample_rate, "rounds": cfg.rounds, "clip": cfg.clip,
            "selectors": self.n_selectors(cfg), "grouping_noise_multiplier": sigma_g or None,
            "selector_layers_run_once": frozen,
            "pool_pairs": pool_pairs, "dpo": dpo, **labels_info, "deviations": deviations(cfg),
        }
        dpo_row = {"phase": "dpo", **{k: v for k, v in dpo.items() if isinstance(v, (int, float))}}
        return Artifact.synthetic(texts, **info, history=run.history + [dpo_row])

    # -- pieces --------------------------------------------------------------------------------------------
    @staticmethod
    def _completions(generator, tok, examples, cfg, public, n_prompts: int, stream: int) -> Batch:
        """``n_completions`` samples of each of ``n_prompts`` fresh prompts at ``pair_temperature``, prompt-major."""
        return sample_batch(generator, tok, examples, replace(cfg, temperature=cfg.pair_temperature), public, n_prompts,
                            cfg.n_completions, stream)

    @staticmethod
    def _pairs(batch: Batch, n: int) -> list[tuple[int, int]]:
        """All C(n, 2) pairs of each prompt's samples (indices into ``batch``), distinct non-empty texts only."""
        texts = batch.texts
        return [(i, j) for p in range(len(batch.prompts)) for i, j in combinations(range(p * n, (p + 1) * n), 2)
                if texts[i].strip() and texts[j].strip() and texts[i] != texts[j]]

    def _pair_pool(self, generator, tok, examples, cfg, public) -> PairPool:
        """Public candidate pairs from the public generator (all C(n, 2) pairs per prompt, distinct non-empty texts)."""
        per_prompt = math.comb(cfg.n_completions, 2)
        batch = self._completions(generator, tok, examples, cfg, public, math.ceil(cfg.pool_pairs / per_prompt), 0xB1)
        pairs = self._pairs(batch, cfg.n_completions)[: cfg.pool_pairs]
        a, b = [batch.texts[i] for i, _ in pairs], [batch.texts[j] for _, j in pairs]
        emb = embed(a + b, public.models.embedder)
        return PairPool(a, b, emb[: len(a)], emb[len(a):])

    def _rlhf(self, generator, tok, examples, cfg, public, run: _SelectorTraining):
        """Phase 2: label fresh generator pairs by the selectors' majority vote and DPO the generator on them (on the
        raw continuations, as POPri: prompt + raw text re-tokenises as the generator wrote it)."""
        batch = self._completions(generator, tok, examples, cfg, public, cfg.n_dpo_prompts, 0xD0)
        pairs = self._pairs(batch, cfg.n_completions)
        if not pairs:
            return {"n_pairs": 0}, {"dpo_pairs": 0}
        fresh = selector_task(cfg, public, [batch.texts[i] for i, _ in pairs], [batch.texts[j] for _, j in pairs])
        fresh.freeze_prefix(run.adapter.model, cfg.selector_batch_size, public.progress)
        scores = np.stack([run.scores(fresh, u) for u in range(run.n_sel)])
        prefer_a = majority_vote(scores)
        chosen = [i if pa else j for (i, j), pa in zip(pairs, prefer_a)]
        rejected = [j if pa else i for (i, j), pa in zip(pairs, prefer_a)]
        metrics = dpo_update(generator, tok, [batch.prompts[i // cfg.n_completions] for i, _ in pairs],
                             [batch.raw[i] for i in chosen], [batch.raw[j] for j in rejected], beta=cfg.dpo_beta,
                             lr=cfg.dpo_lr, epochs=cfg.dpo_epochs, batch_size=cfg.dpo_batch_size,
                             gradient_accumulation_steps=cfg.dpo_gradient_accumulation, seed=seed_for(public.seed, 0xD1),
                             progress=public.progress)
        agreement = float(np.mean([np.mean((scores[u] > 0) == prefer_a) for u in range(run.n_sel)]))
        words = [np.mean([len(batch.texts[i].split()) for i in side]) for side in (chosen, rejected)]
        return metrics, {"dpo_pairs": len(pairs), "dpo_first_preferred": round(float(prefer_a.mean()), 4),
                         "selector_agreement_with_majority": round(agreement, 4),
                         "chosen_mean_words": round(float(words[0]), 2), "rejected_mean_words": round(float(words[1]), 2)}


class FedBiscuit(FedBis):
    name = "fedbiscuit"
    paper = ("Wu et al., 'Towards Federated RLHF with Aggregated Client Preference for LLMs', ICLR 2025 (FedBiscuit: U "
             "selectors on balanced client groups, majority vote, then DPO)")
    Config = FedBiscuitConfig

    def n_selectors(self, cfg) -> int:
        return cfg.n_selectors

    def groupings(self, cfg) -> int:
        return sum(1 for kind, _ in cfg.schedule() if kind == "group")

    def grouping_sigma(self, cfg, budget) -> float:
        """σ_g such that the G grouping releases (one per regrouping) alone would be (``grouping_budget_share``·ε,
        δ)-DP: G Gaussian releases of sensitivity 1 are one Gaussian of sensitivity √G, so σ_g = √G · analytic σ
        (Balle & Wang 2018)."""
        releases = self.groupings(cfg)
        if releases == 0:
            return 0.0
        return math.sqrt(releases) * analytic_gaussian_sigma(budget.epsilon * cfg.grouping_budget_share, budget.delta)

    def plan(self, cfg, n_clients: int, sigma: float, sigma_g: float) -> list[PoissonGaussianEvent]:
        events = []
        for kind, _ in cfg.schedule():
            if kind == "group":
                events.append(PoissonGaussianEvent(sigma_g, 1.0, 1))
            else:
                events.append(PoissonGaussianEvent(sigma, cfg.sample_rate, 1))
        return events


@dataclass
class SelectorState:
    """The selector rounds' state: every selector's adapter weights, each client's selector (a function of the noisy
    grouping release), the public group sizes (⌈n/U⌉ or ⌊n/U⌋ each), and the public pair pool's size and the
    selector layers run once over it (None in a checkpoint of an earlier version)."""

    weights: list[torch.Tensor]
    group: np.ndarray | None
    sizes: np.ndarray | None
    pool_pairs: int | None = None
    frozen_layers: int | None = None


@dataclass
class DpoStage:
    """What the DPO stage's checkpoint keeps: the generator's adapter after DPO, DPO's metrics and the labels' summary."""

    lora: dict[str, torch.Tensor]
    metrics: dict[str, Any]
    labels: dict[str, Any]


class _SelectorTraining(Server):
    """The server of FedBis's selector rounds (U = 1) or FedBiscuit's schedule (warm-up, grouping and clustered
    rounds), run by the one federated-training driver with per-round checkpoints."""

    def __init__(self, method: FedBis, fed, public, cfg, make_pool: Callable[[], PairPool], adapter: FlatParams,
                 sigma: float, sigma_g: float) -> None:
        super().__init__(None)
        self.method, self.fed, self.public, self.cfg = method, fed, public, cfg
        self.make_pool, self.adapter = make_pool, adapter
        self.pool: PairPool | None = None
        self.task: _PairTask | None = None
        self.sigma, self.sigma_g = sigma, sigma_g
        self.n_sel = method.n_selectors(cfg)
        self.settings = cfg.fedavg(fed.n_clients)
        self.state = SelectorState([adapter.get() for _ in range(self.n_sel)], None, None)
        self.history: list[dict[str, Any]] = []
        self.pairs_total = cfg.pairs_per_client + cfg.validation_pairs
        self.steps = [("selector", 0)] * cfg.rounds if self.n_sel == 1 else cfg.schedule()

    def train(self) -> None:
        loop = train_rounds(self.fed, self.public, self, rounds=len(self.steps), desc=f"{self.method.name}: selectors")
        self.history = loop.history

    def pool_info(self) -> tuple[int, int]:
        """The pair pool's size and the selector layers run once over it (a checkpoint of an earlier version does not
        carry them: the pool is built again)."""
        if self.state.pool_pairs is None:
            self._prepare()
        return int(self.state.pool_pairs), int(self.state.frozen_layers)

    def _prepare(self) -> None:
        """The public pair pool and the selector's frozen layers run once over it, before the first round this process
        runs: a run resumed after its last selector round (in DPO) needs neither, and skips their minutes. A run
        resumed between selector rounds builds them again (the checkpoint keeps their sizes, not the tensors); those
        minutes were counted when they were first spent, so they are not counted again."""
        if self.pool is not None:
            return
        clock = getattr(self.fed, "clock", None)  # a test's stand-in federation may have none
        with clock.redoing() if clock is not None and self.state.pool_pairs is not None else nullcontext():
            self._build_pool()

    def _build_pool(self) -> None:
        cfg = self.cfg
        pool = self.make_pool()
        if len(pool) < self.pairs_total:
            raise MethodError(f"only {len(pool)} distinct candidate pairs were generated but each client needs "
                              f"{self.pairs_total}; raise pool_pairs or lower pairs_per_client")
        self.task = selector_task(cfg, self.public, pool.a, pool.b, pool.emb_a, pool.emb_b)
        self.state.frozen_layers = self.task.freeze_prefix(self.adapter.model, cfg.selector_batch_size,
                                                           self.public.progress)
        self.state.pool_pairs, self.pool = len(pool), pool

    def scores(self, task: _PairTask, u: int) -> np.ndarray:
        """Selector u's averaged log-odds for A on every pair of ``task``."""
        self.adapter.set(self.state.weights[u])
        return task.prefers_a(self.adapter.model, np.arange(len(task.ab)), self.cfg.selector_batch_size)

    # -- the driver's server interface ---------------------------------------------------------------------
    def release(self, i: int) -> Release:
        self._prepare()
        kind, index = self.current = self.steps[i]
        return self._grouping(index) if kind == "group" else self._selector_round(kind, index)

    def step(self, noisy, release: Release) -> dict[str, Any]:
        kind, index = self.current
        self._record_agreement(release)
        if kind == "group":  # the reference's balanced grouping on the noisy rankings, in a public shuffled order
            shuffle = np.random.default_rng(np.random.SeedSequence([self.public.seed, 0xC015, index]))
            order = shuffle.permutation(len(release.cohort))  # public: the reference's random.shuffle of the clients
            self.state.group = private_grouping(noisy, self.n_sel, order)
            self.state.sizes = np.bincount(self.state.group, minlength=self.n_sel)
            return {"group_sizes": self.state.sizes.tolist()}
        noisy = torch.as_tensor(noisy)
        if kind in ("selector", "warmup"):  # Eq. 8: the mean of the participants' models
            self.state.weights[index] = self.state.weights[index] + noisy / max(self.cfg.sample_rate * self.fed.n_clients, 1e-12)
            return {"selectors": [index]}
        # Eq. 6: φ_u += Σ_{m ∈ A_u} p_m Δ_m
        self.state.weights = clustered_step(self.state.weights, noisy, self.fed.n_clients, self.state.sizes,
                                            self.cfg.selector_weights)
        return {"selectors": list(range(self.n_sel))}

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self.state))

    def _record_agreement(self, release: Release) -> None:
        """After a selector round's release: its agreement tally to the run folder's unreleased file."""
        tally = getattr(release.client_fn, "tally", None)
        if tally is None:
            return
        if tally.clients != len(release.cohort):
            raise InputError(AGREEMENT_NEEDS_LOCAL)
        record_unreleased(self.public, int(release.cohort.round), {"phase": self.current[0], **tally.summary()})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = SelectorState(**state)

    # -- releases ------------------------------------------------------------------------------------------
    def _selector_round(self, kind: str, index: int) -> Release:
        fed, cfg = self.fed, self.cfg
        q = cfg.sample_rate  # exactly the planned rate (not clients_per_round / n, which may differ in the last bit)
        cohort = fed.sample(q)
        single = kind in ("selector", "warmup")  # one selector trained by every cohort client
        position = dict(zip(cohort.ids, cohort.indices.tolist()))  # public: where each client sits in the federation
        # public: each cohort client's selector (in FedBiscuit's clustered rounds a function of the noisy grouping)
        selector_of = {c: index if single else int(self.state.group[p]) for c, p in position.items()}
        update = SelectorUpdate(self.adapter, self.task, self.pool, self.settings, list(self.state.weights),
                                [index] if single else list(range(self.n_sel)), selector_of, position,
                                cfg.pairs_per_client, self.pairs_total, self.public.seed,
                                AgreementTally(cfg.selector_batch_size) if cfg.record_agreement else None)
        width = len(update.slots) * self.adapter.numel
        # what every client downloads: the selectors it may train and the public pool's embeddings
        broadcast = ([update.weights[u] for u in update.slots], (self.pool.emb_a, self.pool.emb_b))
        return Release(cohort, update, Gaussian(self.sigma), cfg.clip, broadcast=broadcast,
                       chunk_clients=max(1, min(CHUNK_CLIENTS, (1 << 24) // width)),
                       row={"phase": kind, "round": int(cohort.round), **cohort_fields(cohort, fed.n_clients)})

    def _grouping(self, index: int) -> Release:
        """The selectors' log-odds on the public pairs are broadcast; each client computes, on its own data, its
        validation loss for every selector and its ranking (:func:`preference_scores`), placed in its own slot of an
        n·U vector; one release of their sum (every ranking + N(0, σ_g²) noise, sensitivity 1); the grouping is
        :meth:`step`'s."""
        fed, n_sel, k = self.fed, self.n_sel, self.cfg.pairs_per_client
        cohort = fed.everyone()
        n = len(cohort)
        batch = self.cfg.selector_batch_size
        # public: each selector's log-odds for A in both presentation orders of every pool pair, broadcast
        odds_ab = np.stack([self.task.log_odds(self._model_with(u), self.task.ab, batch) for u in range(n_sel)])
        odds_ba = np.stack([self.task.log_odds(self._model_with(u), self.task.ba, batch) for u in range(n_sel)])
        position = dict(zip(cohort.ids, cohort.indices.tolist()))
        slot = dict(zip(cohort.ids, range(n)))  # client i of the cohort writes slot i
        pool, n_pairs, seed = self.pool, self.pairs_total, self.public.seed

        def client_fn(chunk) -> np.ndarray:  # client side: its own validation losses and ranking, nothing else
            rows = np.zeros((len(chunk), n * n_sel), dtype=np.float32)
            if not len(chunk):
                return rows
            pairs, labels = own_pairs(chunk, position, pool, n_pairs, seed)
            val_pairs, val_labels = pairs[:, k:], labels[:, k:]
            sign = np.where(val_labels == 0, 1.0, -1.0)  # mean cross-entropy per selector, both orders
            losses = np.stack([(np.logaddexp(0.0, -sign * odds_ab[u][val_pairs]) +
                                np.logaddexp(0.0, sign * odds_ba[u][val_pairs])).mean(1) / 2 for u in range(n_sel)],
                              axis=1)
            return grouping_rows(losses, [slot[cid] for cid in chunk.ids], n)

        chunk = max(1, min(1024, (1 << 22) // max(n * n_sel, 1)))  # bounds the chunk's rows in memory
        return Release(cohort, client_fn, Gaussian(self.sigma_g), 1.0, chunk_clients=chunk, broadcast=(odds_ab, odds_ba),
                       row={"phase": "group", "round": int(cohort.round), "grouping": index})

    def _model_with(self, u: int):
        self.adapter.set(self.state.weights[u])
        return self.adapter.model
