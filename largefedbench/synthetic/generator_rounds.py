"""The generator-rounds template of POPri and PE+SFT (POPri Algorithm 1's skeleton), one loop for both:

every round the LoRA generator writes K × J samples from fresh public prompts → they are embedded and their FID to
the validation clients is offered to early stopping → the cohort scores them in one ``private_sum`` with the
method's client function (σ calibrated for the T rounds) → the method's ``step`` selects from the noised scores and
updates the generator (POPri: preference pairs and DPO; PE+SFT: votes over a threshold and SFT) → after the last
round the lowest-FID generator state (§5.2) writes the final samples.

A method gives the client function and the step; the rounds loop keeps the state, checkpoints, and times the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from largefedbench.errors import InputError
from largefedbench.evaluation.fid import fid_to
from largefedbench.models import embed
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.rounds import RoundsLoop, cohort_fields, draw_cohort, selection_of
from largefedbench.synthetic.early_stopping import keep_lowest_fid_adapter
from largefedbench.synthetic.generation import decode_samples, generate_ids, seed_for
from largefedbench.synthetic.lora import LoraState, add_lora, load_lora_state, lora_state
from largefedbench.synthetic.noise import noise_for_rounds
from largefedbench.synthetic.prompts import SamplingSettings, build_prompts, public_examples
from largefedbench.synthetic.texts import chunks

__all__ = ["FINAL_STREAM", "Batch", "GeneratorRounds", "GeneratorRoundsSettings", "GeneratorRun", "final_samples",
           "final_set", "sample_batch"]


#: the first prompt and seed stream of a final set (chunk i uses FINAL_STREAM + i): every method that samples its
#: final set through :func:`final_set` writes, from an untouched generator, exactly the generator-only row's texts
FINAL_STREAM = 10_000


@dataclass(frozen=True)
class Batch:
    """One sampling's prompts, raw continuations (what DPO/SFT train on) and cleaned samples, prompt-major."""

    prompts: list[str]
    raw: list[str]
    texts: list[str]


@dataclass(frozen=True)
class GeneratorRun:
    """What the rounds produced: the final samples, the noise, the public history and the chosen generator state."""

    texts: list[str]
    sigma: float
    sample_rate: float
    history: list[dict[str, Any]]
    best_round: int
    best_fid: float | None
    final_seconds: float


@dataclass(frozen=True)
class GeneratorRoundsSettings(SamplingSettings):
    """What the template reads from a method's config besides prompting and sampling: T = ``rounds`` (20, POPri
    App. B.1), ``clients_per_round`` (None: every client, the paper's default), the generator's LoRA (r 4 / α 8, no
    dropout: POPri §3.1, App. B.1; PE+SFT uses POPri's), lowest-FID ``early_stopping`` (§5.2) and ``n_final`` final
    samples (1,000,000, App. B.1). POPri's and PE+SFT's configs add their selection and update settings."""

    # rounds and cohorts
    rounds: int = 20
    clients_per_round: int | None = None
    # the generator's adapter and which state writes the final set
    lora_rank: int = 4
    lora_alpha: int = 8
    lora_dropout: float = 0.0
    early_stopping: bool = True
    n_final: int = 1_000_000

    def __post_init__(self) -> None:
        super().__post_init__()
        small = [f"{name}={getattr(self, name)}" for name in ("rounds", "n_final") if getattr(self, name) < 1]
        if small:
            raise InputError(f"{' and '.join(small)}: must be >= 1")


#: the method's client function of a round, built from the samples' embeddings (they are broadcast to the cohort)
ClientFunction = Callable[[np.ndarray], Callable[[Any], Any]]
#: the method's selection and update: ``step(r, noisy, batch)`` → the round's public history fields
Step = Callable[[int, Any, Batch], dict[str, Any]]


class GeneratorRounds:
    """The rounds of a LoRA generator steered by the clients' noised scores of its samples.

    ``cfg`` is a :class:`GeneratorRoundsSettings` (prompts, the samplers' keywords from ``generation_kwargs()``,
    rounds, cohort, LoRA, early stopping, final set); every round samples ``n_prompts`` prompts × ``n_per_prompt``
    samples."""

    def __init__(self, fed, public, budget, cfg, *, n_prompts: int, n_per_prompt: int, desc: str) -> None:
        self.fed, self.public, self.cfg, self.desc = fed, public, cfg, desc
        self.n_prompts, self.n_per_prompt = n_prompts, n_per_prompt
        self.sigma, self.rate = noise_for_rounds(budget, fed, rounds=cfg.rounds,
                                                 clients_per_round=cfg.clients_per_round)
        self.examples = public_examples(public, minimum=cfg.examples_per_prompt)
        self.validation = selection_of(fed).embeddings()  # held-out: the validation clients or a public slice
        self.tokenizer, self.embedder = public.models.generator_tokenizer, public.models.embedder
        self.model = add_lora(public.models.new_generator(), rank=cfg.lora_rank, alpha=cfg.lora_alpha,
                              dropout=cfg.lora_dropout, seed=seed_for(public.seed, 5))

    def sample(self, n_prompts: int, n_per_prompt: int, stream: int) -> Batch:
        """``n_prompts`` fresh public prompts (seeded by ``stream``) × ``n_per_prompt`` samples of the generator."""
        return sample_batch(self.model, self.tokenizer, self.examples, self.cfg, self.public, n_prompts, n_per_prompt,
                            stream)

    def fid(self, texts: list[str]) -> float:
        """FID of ``texts`` to the held-out texts (``fed.selection``: the validation clients by default)."""
        return fid_to(embed(texts, self.embedder), self.validation)

    def run(self, client_function: ClientFunction, step: Step) -> GeneratorRun:
        cfg, fed, model = self.cfg, self.fed, self.model
        loop = RoundsLoop(fed, self.public, LoraState(lora_state(model)), rounds=cfg.rounds, desc=self.desc,
                          select="min", metric="fid")
        if loop.resumed:
            load_lora_state(model, loop.state.lora)
        for r in loop:
            cohort = draw_cohort(fed, self.rate)
            batch = self.sample(self.n_prompts, self.n_per_prompt, stream=1 + r)
            emb = embed(batch.texts, self.embedder)
            fid_r = fid_to(emb, self.validation)
            if cfg.early_stopping:
                loop.offer(fid_r, r, lora_state(model))
            noisy = fed.private_sum(cohort, client_function(emb), clip=1.0, mechanism=Gaussian(self.sigma),
                                    batched=True, broadcast=emb)
            row = {"round": r, "fid": fid_r, "sigma": self.sigma, **cohort_fields(cohort, fed.n_clients)}
            row.update(step(r, noisy, batch))
            loop.history.append(row)
            loop.state.lora = lora_state(model)

        with loop.server_work():
            if cfg.early_stopping:  # the state after the last round joins the selection (fresh samples)
                fresh = self.sample(self.n_prompts, self.n_per_prompt, stream=1 + cfg.rounds)
                keep_lowest_fid_adapter(loop, model, fresh.texts, self.embedder, self.validation, cfg.rounds)
        texts, seconds = final_set(model, self.tokenizer, self.examples, cfg, self.public, cfg.n_final)
        return GeneratorRun(texts, self.sigma, self.rate, loop.history,
                            best_round=loop.best.round if cfg.early_stopping else cfg.rounds,
                            best_fid=loop.best.score if cfg.early_stopping else None, final_seconds=seconds)


def final_samples(n_final: int, write: Callable[[int, int], list[str]]) -> tuple[list[str], float]:
    """The final synthetic set, written ``write(n, chunk_index)`` chunk by chunk (memory holds one chunk's
    generation), and its wall seconds."""
    start = time.perf_counter()
    texts = [t for i, n in chunks(n_final) for t in write(n, i)]
    return texts, time.perf_counter() - start


def sample_batch(model, tokenizer, examples, cfg, public, n_prompts: int, n_per_prompt: int, stream: int) -> Batch:
    """``n_prompts`` fresh public prompts (seeded by ``stream``) × ``n_per_prompt`` samples of ``model``, prompted
    and sampled as ``cfg`` (a :class:`~largefedbench.synthetic.prompts.SamplingSettings`) says."""
    prompts = build_prompts(examples, n_prompts, examples_per_prompt=cfg.examples_per_prompt, rng=public.rng(stream),
                            prompt_format=cfg.prompt_format, prefix_words=cfg.prefix_words, tokenizer=tokenizer,
                            instruction=cfg.instruction)
    ids = generate_ids(model, tokenizer, prompts, n_per_prompt=n_per_prompt, **cfg.generation_kwargs(),
                       seed=seed_for(public.seed, stream), progress=public.progress, desc=f"generating ({stream})")
    raw, samples = decode_samples(tokenizer, ids, prompts, cfg.prompt_format, n_per_prompt)
    return Batch(prompts, raw, samples)


def final_set(model, tokenizer, examples, cfg, public, n_final: int) -> tuple[list[str], float]:
    """The final synthetic set of ``model``: ``n_final`` samples, one per fresh prompt of the streams
    :data:`FINAL_STREAM` + i, and its wall seconds."""
    return final_samples(n_final, lambda n, i: sample_batch(model, tokenizer, examples, cfg, public, n, 1,
                                                            FINAL_STREAM + i).texts)
