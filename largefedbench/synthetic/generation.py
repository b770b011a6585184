"""Batched sampling from the generator LLM with the KV cache (DESIGN.md §9; its speed: docs/speed.md).

Prompts are tokenised with the tokenizer's own special tokens (a LLaMA tokenizer adds BOS, GPT-2's adds nothing,
as vLLM and trl do), truncated from the left so that prompt plus ``max_new_tokens`` fit the model's context, and
left-padded by hand (the shared tokenizer's ``padding_side`` is never touched). Each prompt is repeated
``n_per_prompt`` times consecutively (as the POPri reference repeats its requests) and requests are batched in
order of prompt length. Sampling is seeded by ``seed`` through its own ``torch.Generator``, so a call is
deterministic for a given seed and batch size and leaves the global RNG untouched.

The decode loop is ours, not HF ``generate``'s (1.6–3× faster in float32, docs/speed.md): each distinct prompt of
a batch is prefilled once and its KV cache copied to its samples; the LM head runs on the last position only;
nucleus sampling is exact but sorts only the top 1,024 probabilities (a full sort where those hold less than
``top_p``) and draws by inverse CDF, where HF sorts the whole vocabulary and draws with ``multinomial``. The model
samples in :func:`~largefedbench.models.precision.generation_dtype` (bf16 on a CPU with native bf16).

Continuations are cut at the first EOS, decoded, cut at the first stop string (default :data:`prompts.STOP`,
i.e. the next "Original Text Sample"), newlines become spaces and the text is stripped (the reference's
post-processing, spec item 5; the reference's extra truncation to 64 LLaMA-3 tokens is ``max_new_tokens``
here).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from transformers import DynamicCache

from largefedbench.errors import InputError, MethodError
from largefedbench.models.device import model_device
from largefedbench.models.precision import generation_dtype, inference_copy
from largefedbench.synthetic.prompts import STOP, prompt_stop
from largefedbench.timing import timed

__all__ = ["as_samples", "cache_keyword", "decode_batch", "nucleus_sample", "clean_completion", "context_length", "decode_continuations", "decode_samples", "fit_prompt_ids", "generate", "generate_flat", "generate_ids", "seed_for"]


def context_length(model) -> int:
    """The number of positions the model can attend to (``n_positions`` or ``max_position_embeddings``)."""
    config = model.config
    for key in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise InputError(f"cannot tell the context length of {type(model).__name__}: its config has no n_positions")


def fit_prompt_ids(tokenizer, prompts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """Token ids of each prompt, keeping only its last ``max_tokens`` ids (left truncation); an empty prompt
    becomes the BOS (or EOS) token so that the model has something to condition on."""
    if max_tokens < 1:
        raise InputError(f"no room for the prompt: {max_tokens} tokens left after the new tokens; lower max_new_tokens")
    ids = tokenizer(list(prompts))["input_ids"] if prompts else []
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    return [list(seq[-max_tokens:]) if len(seq) else [start] for seq in ids]


def clean_completion(text: str, stop: Sequence[str] = STOP) -> str:
    """Cut ``text`` at the first stop string, turn newlines into spaces and strip it (reference, spec item 5)."""
    for s in stop:
        if s:
            text = text.split(s, 1)[0]
    text = text.strip().strip("\n").replace("\n\n", " ").replace("\n", " ")
    return text.strip()


def as_samples(prompts: Sequence[str], raw: Sequence[str], prompt_format: str, n_per_prompt: int = 1) -> list[str]:
    """The synthetic samples that raw continuations (prompt-major, ``n_per_prompt`` per prompt, already cut at
    :func:`~largefedbench.synthetic.prompts.prompt_stop`) make: the continuation alone for a few-shot or instruction
    prompt, prompt + continuation for a continuation prompt; cleaned as :func:`clean_completion`."""
    if prompt_format != "continuation":
        return [clean_completion(t, ()) for t in raw]
    return [clean_completion(prompts[i // n_per_prompt] + t, ()) for i, t in enumerate(raw)]


def decode_samples(tokenizer, ids: Sequence[Sequence[int]], prompts: Sequence[str], prompt_format: str,
                   n_per_prompt: int = 1) -> tuple[list[str], list[str]]:
    """(raw continuations, synthetic samples) of :func:`generate_ids` output for prompts of ``prompt_format``: the
    raw text is cut at the format's stop (for DPO or SFT to train on), the samples are :func:`as_samples`."""
    raw = decode_continuations(tokenizer, ids, clean=False, stop=prompt_stop(prompt_format))
    return raw, as_samples(prompts, raw, prompt_format, n_per_prompt)


def _left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.as_tensor(r, dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids, mask


def _eos_ids(model, tokenizer) -> set[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen, int):
        ids.add(gen)
    elif gen:
        ids.update(gen)
    return ids


@timed("generation")
@torch.inference_mode()
def generate_ids(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    n_per_prompt: int = 1,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 32,
    seed: int = 0,
    progress: bool = False,
    desc: str = "generating",
    dtype: torch.dtype | None | Literal["auto"] = "auto",
) -> list[list[int]]:
    """New token ids (cut before the first EOS) for every prompt repeated ``n_per_prompt`` times, prompt-major.

    ``dtype``: what the model samples in; ``"auto"`` is :func:`~largefedbench.models.precision.generation_dtype`,
    None the model as it is."""
    if n_per_prompt < 1 or max_new_tokens < 1 or batch_size < 1:
        raise InputError(f"n_per_prompt={n_per_prompt}, max_new_tokens={max_new_tokens} and batch_size={batch_size} must be >= 1")
    if temperature < 0 or not 0 < top_p <= 1:
        raise InputError(f"temperature={temperature} must be >= 0 and top_p={top_p} in (0, 1]")
    if not prompts:
        return []
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    prompt_ids = fit_prompt_ids(tokenizer, prompts, context_length(model) - max_new_tokens)
    requests = [p for p in range(len(prompts)) for _ in range(n_per_prompt)]
    order = sorted(range(len(requests)), key=lambda i: len(prompt_ids[requests[i]]))
    eos = _eos_ids(model, tokenizer)
    out: list[list[int]] = [[] for _ in requests]
    from tqdm.auto import tqdm

    sampler = inference_copy(model, generation_dtype(device) if dtype == "auto" else dtype)
    was_training = sampler.training
    sampler.eval()
    gen = torch.Generator(device=device).manual_seed(int(seed))
    try:
        with tqdm(total=len(requests), desc=desc, disable=not progress, leave=False) as bar:
            for lo in range(0, len(order), batch_size):
                chunk = order[lo : lo + batch_size]
                new = decode_batch(sampler, [prompt_ids[requests[i]] for i in chunk], max_new_tokens=max_new_tokens,
                                   temperature=temperature, top_p=top_p, generator=gen, pad_id=pad_id, eos=eos)
                for i, row in zip(chunk, new):
                    cut = next((k for k, t in enumerate(row) if t in eos), len(row))
                    out[i] = row[:cut]
                bar.update(len(chunk))
    finally:
        sampler.train(was_training)
    return out


NUCLEUS_TOP = 1024  # nucleus sampling sorts this many probabilities first (all of them where these hold < top_p)


def nucleus_sample(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row of ``logits`` [B, V]: greedy for ``temperature == 0``, else from softmax(logits / T)
    restricted to its nucleus — the most probable tokens whose probabilities before them sum to < ``top_p`` (HF's
    top-p set; ``top_p = 1`` keeps every token) — by inverse CDF with one uniform draw per row (drawn before any
    row's path is chosen, so the stream does not depend on which rows needed the full sort)."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device)
    if top_p >= 1:
        return _inverse_cdf(probs, None, u)
    vals, idx = probs.topk(min(NUCLEUS_TOP, probs.shape[-1]), dim=-1)
    token = _inverse_cdf(vals, idx, u, top_p)
    short = (vals.sum(-1) < top_p).nonzero().squeeze(-1)  # rows whose nucleus reaches past the top ones
    if len(short):
        full, order = probs[short].sort(dim=-1, descending=True)
        token[short] = _inverse_cdf(full, order, u[short], top_p)
    return token


def _inverse_cdf(vals: torch.Tensor, idx: torch.Tensor | None, u: torch.Tensor, top_p: float = 1.0) -> torch.Tensor:
    """The token at quantile ``u`` of each row of ``vals`` (descending probabilities, token ids ``idx``; None: the
    row itself is the vocabulary), cut to the top-p nucleus when ``top_p < 1``."""
    if top_p < 1:
        vals = vals * ((vals.cumsum(-1) - vals) < top_p)
    cdf = vals.cumsum(-1)
    pick = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_(max=cdf.shape[-1] - 1)
    return (pick if idx is None else idx.gather(-1, pick)).squeeze(-1)


def cache_keyword(model) -> str:
    """The keyword the model's ``forward`` takes its KV cache by: ``cache`` in newer transformers, ``past_key_values``
    before the rename (5.17 swallowed ``cache=`` in ``**kwargs``, and the model then decoded every step from its last
    token alone). A wrapper that hides the signature (a peft model, ``torch.compile``) is looked through."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base = getattr(base, "_orig_mod", base)
    for forward in (base.forward, type(base).forward):
        params = inspect.signature(forward).parameters
        for name in ("cache", "past_key_values"):
            if name in params:
                return name
    return "cache"


@torch.inference_mode()
def decode_batch(model, rows: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 generator: torch.Generator, pad_id: int, eos: set[int]) -> list[list[int]]:
    """``max_new_tokens`` sampled ids after each prompt of ``rows`` (token id lists; repeats allowed), padded with
    ``pad_id`` after a row's EOS. Each distinct prompt is prefilled once; the loop stops when every row has ended."""
    device = model_device(model)
    distinct: dict[tuple[int, ...], int] = {}
    owner = [distinct.setdefault(tuple(r), len(distinct)) for r in rows]
    ids, mask = _left_pad(list(distinct), pad_id)
    ids, mask = ids.to(device), mask.to(device)
    position = (mask.cumsum(-1) - 1).clamp_(min=0)
    cache = DynamicCache()
    kv = {cache_keyword(model): cache}
    # the last position by index, not by slice: a sliced (non-contiguous) hidden state sends a bf16 LM head on a CPU
    # through a batched matmul that copies the head's weight once per row (seconds per batch)
    last = torch.tensor([ids.shape[1] - 1], device=device)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=last,
                   **kv).logits[:, -1]
    if cache.get_seq_length() != ids.shape[1]:
        raise MethodError(f"{type(model).__name__} ignored its KV cache ({cache.get_seq_length()} of {ids.shape[1]} "
                          f"prompt positions cached, passed as `{next(iter(kv))}=`): its samples would continue from "
                          "one token at a time. Report the model and your transformers version "
                          "(`pip show transformers`)")
    expand = torch.as_tensor(owner, device=device)
    if len(distinct) < len(rows):  # copy each prompt's cache to its samples
        cache.batch_select_indices(expand)
        logits, mask, position = logits[expand], mask[expand], position[expand]
    position = position[:, -1:]
    eos_ids = torch.as_tensor(sorted(eos), device=device, dtype=torch.long)
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    steps: list[torch.Tensor] = []
    for step in range(max_new_tokens):
        token = nucleus_sample(logits, temperature, top_p, generator).masked_fill_(done, pad_id)
        steps.append(token)
        done |= torch.isin(token, eos_ids)
        if step == max_new_tokens - 1 or bool(done.all()):
            break
        mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
        position = position + 1
        logits = model(input_ids=token[:, None], attention_mask=mask, position_ids=position, use_cache=True,
                       logits_to_keep=1, **kv).logits[:, -1]
    return torch.stack(steps, dim=1).tolist()


def generate(model, tokenizer, prompts: Sequence[str], *, n_per_prompt: int = 1, stop: Sequence[str] = STOP,
             **sampling: Any) -> list[list[str]]:
    """``n_per_prompt`` cleaned continuations of each prompt: ``result[i][j]`` is the j-th sample of prompt i.

    ``sampling`` takes :func:`generate_ids`'s keywords (``max_new_tokens``, ``temperature`` — 0 decodes greedily —,
    ``top_p``, ``batch_size``, ``seed``, ``progress``, ``desc``, ``dtype``). ``stop=()`` keeps text after "Orig…" (for
    prompts of another shape).
    """
    ids = generate_ids(model, tokenizer, prompts, n_per_prompt=n_per_prompt, **sampling)
    texts = decode_continuations(tokenizer, ids, stop=stop)
    return [texts[i * n_per_prompt : (i + 1) * n_per_prompt] for i in range(len(prompts))]


def decode_continuations(tokenizer, ids: Sequence[Sequence[int]], *, stop: Sequence[str] = STOP, clean: bool = True) -> list[str]:
    """Decode continuation ids (from :func:`generate_ids`), cut at the first stop string; ``clean`` also turns
    newlines into spaces and strips (:func:`clean_completion`). ``clean=False`` keeps the exact text that followed the
    prompt (leading space included), which is what a preference or SFT update should train on: prompt + raw
    continuation re-tokenises as the model produced it, where a stripped continuation would merge with the prompt's
    last token."""
    texts = tokenizer.batch_decode([list(i) for i in ids], skip_special_tokens=True) if len(ids) else []
    if clean:
        return [clean_completion(t, stop) for t in texts]
    out = []
    for t in texts:
        for s in stop:
            if s:
                t = t.split(s, 1)[0]
        out.append(t)
    return out


def generate_flat(model, tokenizer, prompts: Sequence[str], **kwargs) -> list[str]:
    """:func:`generate` flattened prompt-major: the ``n_per_prompt`` samples of prompt 0, then of prompt 1, …"""
    return [t for group in generate(model, tokenizer, prompts, **kwargs) for t in group]


def seed_for(*parts: int) -> int:
    """A 31-bit generation seed derived from integers (e.g. run seed, round, purpose)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)
