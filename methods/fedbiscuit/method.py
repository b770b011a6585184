"""The two methods: FedBis (one selector trained by DP-FedAvg) and FedBiscuit (U selectors on private balanced client
groups), each followed by the RLHF phase — the generator's DPO on fresh pairs labelled by the selectors' majority
vote — and the final set sampled from the DPO'd generator."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np
import torch
from largefedbench.methods.fedbiscuit.agreement import check_agreement_recordable
from largefedbench.methods.fedbiscuit.config import FedBisConfig, FedBiscuitConfig
from largefedbench.methods.fedbiscuit.embedding_selector import EMBEDDING_SELECTOR_DEVIATION, EmbeddingSelectorTask
from largefedbench.methods.fedbiscuit.pairs import PairPool
from largefedbench.methods.fedbiscuit.selector import majority_vote
from largefedbench.methods.fedbiscuit.server import SelectorServer, selector_task

from largefedbench import __version__
from largefedbench.contract import Artifact, Method
from largefedbench.fedtrain import FlatParams
from largefedbench.fedtrain.generator import lora_generator, require_private_budget
from largefedbench.models import embed
from largefedbench.privacy import PoissonGaussianEvent, analytic_gaussian_sigma
from largefedbench.rounds import RoundsLoop
from largefedbench.synthetic.dpo import dpo_update
from largefedbench.synthetic.generation import seed_for
from largefedbench.synthetic.generator_rounds import Batch, final_set, sample_batch
from largefedbench.synthetic.lora import load_lora_state, lora_state
from largefedbench.synthetic.prompts import public_examples

__all__ = ["DEVIATIONS", "PUBLIC_MODULE", "DpoStage", "FedBis", "FedBiscuit", "deviations"]

#: The module FedBis and FedBiscuit say they are defined in: the package, which re-exports them. Entries record a
#: method as ``module:Class`` (``method.target``) and hash it into their ids, so the classes keep the module they
#: had before the package was split into modules.
PUBLIC_MODULE = "largefedbench.methods.fedbiscuit"

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


def deviations(cfg: FedBisConfig) -> list[str]:
    """The run's deviations from the paper, as its artifact records them."""
    return list(DEVIATIONS) + ([EMBEDDING_SELECTOR_DEVIATION] if cfg.selector == "embedding" else [])


@dataclass
class DpoStage:
    """What the DPO stage's checkpoint keeps: the generator's adapter after DPO, DPO's metrics and the labels' summary."""

    lora: dict[str, torch.Tensor]
    metrics: dict[str, Any]
    labels: dict[str, Any]


class FedBis(Method):
    __module__ = PUBLIC_MODULE  # see PUBLIC_MODULE: the entries' method.target, hashed into their ids
    name = "fedbis"
    paper = ("Wu et al., 'Towards Federated RLHF with Aggregated Client Preference for LLMs', ICLR 2025 (FedBis: one "
             "federated binary selector, then DPO)")
    output = "synthetic text"
    Config = FedBisConfig
    needs_span_embeddings = True
    #: the cpu preset's selector dtype and DPO accumulation (before them the selectors trained in float32 and DPO took
    #: every batch's step) and the selector ablation (before it every selector was the LoRA one)
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
            check_agreement_recordable(fed, public)

        if cfg.selector == "embedding":
            selector = EmbeddingSelectorTask.model(embed([], public.models.embedder).shape[1])
        else:
            selector = lora_generator(public.models, rank=cfg.lora_rank, alpha=cfg.lora_alpha,
                                      dropout=cfg.lora_dropout, top_layers=cfg.selector_layers)
        run = SelectorServer(self.name, self.n_selectors(cfg), fed, public, cfg,
                             lambda: self._pair_pool(generator, tok, examples, cfg, public), FlatParams(selector), sigma,
                             sigma_g)
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

    def _rlhf(self, generator, tok, examples, cfg, public, run: SelectorServer):
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
    __module__ = PUBLIC_MODULE  # see PUBLIC_MODULE: the entries' method.target, hashed into their ids
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
