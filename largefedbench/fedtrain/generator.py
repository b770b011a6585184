"""DP fine-tuning of a generator's LoRA adapter, shared by the methods that train a generator privately (DP
instruction resampling, CTCL, weak-client voting's strong clients): the generator's sequence format, its client
update for :func:`largefedbench.fedtrain.train_adapter`, its adapter, and non-private pretraining on public text.

Sequence format (training and generation must agree): ``[BOS] + prefix + text + [EOS]`` with the loss on text and
EOS; generation prompts are :func:`conditional_prompt` (the BOS as text when the tokenizer does not add one itself,
then the prefix), so the generator continues exactly where training put the text.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from largefedbench.errors import InputError, MethodError
from largefedbench.fedtrain.fedavg import ClientUpdate, FedAvgSettings
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import LMExample, lm_loss, lm_row_losses, local_updates

__all__ = ["attention_targets", "conditional_prompt", "conditional_sequences", "generator_update", "lora_generator",
           "pretrain_on_public", "require_private_budget", "start_text"]


def require_private_budget(budget, method: str) -> None:
    """Stop unless 0 < ε < ∞: the references are the methods 'public' (ε = 0) and 'non-private' (ε = ∞)."""
    if budget.is_public or budget.is_non_private:
        raise MethodError(f"{method} runs at 0 < ε < ∞, got ε = {budget.epsilon}; the ε = 0 and ε = ∞ points are the "
                          "methods 'public' and 'non-private'")


# -- sequences ----------------------------------------------------------------------------------------------
def start_text(tokenizer) -> str:
    """Text that starts a sequence: empty when the tokenizer adds a BOS itself (LLaMA), else the BOS token (GPT-2)."""
    if tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id] and tokenizer.bos_token_id is not None:
        return ""
    if tokenizer.bos_token is None:
        raise InputError("the generator tokenizer has no BOS token; pass it through ensure_special_tokens first")
    return tokenizer.bos_token


def conditional_prompt(tokenizer, prefix: str = "") -> str:
    """The generation prompt whose tokens are ``[BOS] + prefix``: the start of a training sequence."""
    return start_text(tokenizer) + prefix


def conditional_sequences(tokenizer, prefixes: Sequence[str], texts: Sequence[str], max_len: int) -> list[LMExample]:
    """``[BOS] + prefix + text + [EOS]`` per pair, the text (with EOS) truncated to ``max_len`` ids."""
    if len(prefixes) != len(texts):
        raise InputError(f"{len(prefixes)} prefixes for {len(texts)} texts")
    if max_len < 2:
        raise InputError(f"max_len={max_len} must leave room for a token and EOS")
    if not texts:
        return []
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is None or eos is None:
        raise InputError("the tokenizer needs BOS and EOS tokens")
    body = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    unique = sorted(set(prefixes))
    heads = dict(zip(unique, tokenizer(unique, add_special_tokens=False)["input_ids"])) if any(unique) else {"": []}
    out = []
    for prefix, ids in zip(prefixes, body):
        head = [bos] + list(heads.get(prefix, []))
        out.append(LMExample(head + (list(ids)[: max_len - 1] + [eos]), len(head)))
    return out


def generator_update(flat: FlatParams, tokenizer, settings: FedAvgSettings, *, seed: int,
                     prefixes: Callable[[Any], Sequence[str]] | None = None) -> ClientUpdate:
    """The ``client_update`` of generator fine-tuning (:func:`largefedbench.fedtrain.train_adapter`): each client trains
    the adapter ``flat`` on its spans, each after its conditioning prefix (``prefixes(chunk)[i]`` is chunk client i's
    own prefix, computed on the client from its own data or metadata, e.g. ``chunk.metadata``; none for an
    unconditional generator). Each client's batch order comes from its own generator (``chunk.rng(i, seed, …)``:
    federation seed, round, client id and ``seed``), so a resumed run repeats it and neither the executor nor the
    chunking changes it."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def client_update(chunk, spans: list[list[str]]) -> torch.Tensor:
        heads = list(prefixes(chunk)) if prefixes is not None else [""] * len(spans)
        flat_examples = conditional_sequences(tokenizer, [h for h, s in zip(heads, spans) for _ in s],
                                              [t for s in spans for t in s], settings.max_len)
        bounds = np.cumsum([0] + [len(s) for s in spans])
        clients = [flat_examples[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
        rngs = [chunk.rng(i, int(seed), 0x10CA1) for i in range(len(spans))]
        return local_updates(flat, clients, lambda batch: lm_loss(flat.model, batch, pad_id), settings.local, rngs,
                             row_losses=lambda batch: lm_row_losses(flat.model, batch, pad_id))

    return client_update


# -- the generator's adapter and public pretraining ------------------------------------------------------
def attention_targets(model) -> list[str]:
    """LoRA on the attention weights only (Yu et al. 2024 App. F.2, following Hu et al. 2022): GPT-2's fused q/k/v
    ``c_attn`` and attention output ``attn.c_proj``; q, k, v, o projections elsewhere."""
    if getattr(model.config, "model_type", "") == "gpt2":
        return ["c_attn", "attn.c_proj"]
    return ["q_proj", "k_proj", "v_proj", "o_proj"]


def lora_generator(models, *, rank: int, alpha: int, dropout: float = 0.0, attention_only: bool = False,
                   top_layers: int = 0):
    """A fresh copy of the profile's generator with a new LoRA adapter (identical to the public model at first);
    ``top_layers`` > 0 puts it in the top that many decoder layers only."""
    from largefedbench.synthetic.lora import add_lora, top_layer_indices

    model = models.new_generator()
    targets = attention_targets(model) if attention_only else None
    layers = top_layer_indices(model, top_layers) if top_layers else None
    return add_lora(model, rank=rank, alpha=alpha, dropout=dropout, target_modules=targets, layers=layers)


@dataclasses.dataclass
class PretrainState:
    """What public pretraining keeps across a kill: the trainable weights, AdamW's state, the batch sampler's RNG
    and the losses so far."""

    weights: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    rng: dict[str, Any]
    losses: list[float]


def pretrain_on_public(model, tokenizer, prefixes: Sequence[str], texts: Sequence[str], *, steps: int, batch_size: int,
                       lr: float, seed: int, max_len: int, progress: bool = False, fed=None, public=None,
                       steps_per_checkpoint: int = 25) -> dict[str, Any]:
    """Non-private training of ``model``'s trainable parameters on public (prefix, text) pairs, in the same sequence
    format as DP fine-tuning (AdamW, batches drawn without replacement per step). Returns the mean loss of the first
    and of the last five steps.

    Given the run's ``fed`` and ``public``, the steps run in a rounds loop of its own stage ("public-pretraining"),
    checkpointed every ``steps_per_checkpoint`` steps: a killed run resumes after its last checkpoint with the same
    weights, optimizer and batches as a run never killed."""
    examples = conditional_sequences(tokenizer, prefixes, texts, max_len)
    if not examples or steps < 1:
        return {"steps": 0}
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW([p for _, p in named], lr=lr)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x9B11C]))
    losses: list[float] = []
    model.eval()  # no dropout, as in the DP rounds

    def run_steps(n: int) -> None:
        for _ in range(n):
            idx = rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)
            loss = lm_loss(model, [examples[i] for i in idx], pad_id)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())

    if fed is None or public is None or public.run_dir is None:  # nowhere to resume from
        from tqdm.auto import tqdm

        for _ in tqdm(range(steps), desc="public pretraining", disable=not progress, leave=False):
            run_steps(1)
    else:
        from largefedbench.rounds import RoundsLoop

        def snapshot() -> PretrainState:
            return PretrainState({n: p.detach().clone() for n, p in named}, copy.deepcopy(opt.state_dict()),
                                 copy.deepcopy(rng.bit_generator.state), list(losses))

        if steps_per_checkpoint < 1:
            raise InputError(f"steps_per_checkpoint={steps_per_checkpoint} must be >= 1")
        from largefedbench import __version__

        examples_sha = hashlib.sha256(repr([(e.ids, e.n_context) for e in examples]).encode()).hexdigest()[:16]
        chunks = -(-steps // steps_per_checkpoint)
        loop = RoundsLoop(fed, public, snapshot(), rounds=chunks, desc="public pretraining", stage="public-pretraining",
                          fingerprint={"steps": steps, "batch_size": batch_size, "lr": lr, "seed": int(seed),
                                       "max_len": max_len, "examples": examples_sha, "every": steps_per_checkpoint,
                                       "parameters": {n: tuple(p.shape) for n, p in named}, "lfb": __version__})
        if loop.resumed:
            with torch.no_grad():
                for n, p in named:
                    p.copy_(loop.state.weights[n])
            opt.load_state_dict(loop.state.optimizer)
            rng.bit_generator.state = loop.state.rng
            losses[:] = loop.state.losses
        for r in loop:
            run_steps(min(steps_per_checkpoint, steps - r * steps_per_checkpoint))
            loop.state = snapshot()
    return {"steps": steps, "loss_first": round(float(np.mean(losses[:5])), 4),
            "loss_last": round(float(np.mean(losses[-5:])), 4)}
