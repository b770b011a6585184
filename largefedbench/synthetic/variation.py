"""Private Evolution's variation operators: new candidates close to given texts (PrE-Text; POPri App. C.3).

- :func:`mask_fill_variation` — PrE-Text's operator (popri-reference.md §3a, spec item 16) for the paper profile:
  a public masked LM (``roberta-large``) sees each text truncated to ``max_length`` (64) of its tokens, a fraction
  (0.3) of the non-special tokens is masked, and the masks are filled one at a time, re-running the model after
  each fill and sampling the token at temperature 1 (no top-k/top-p); the whole is repeated ``passes`` (2) times.
  Deviations: masks are filled one per text per step for a batch of texts at once (PrE-Text: one sample at a
  time), the number of masks is per text (PrE-Text: from the batch's shortest text), and special tokens are never
  sampled.
- :func:`suffix_variation` — the tiny profile's smaller operator (no masked LM is available offline): the last
  ``fraction`` of each text's tokens (at least one) is dropped and re-sampled by the causal generator from the
  kept prefix, to the original length. It is the causal analogue of mask-and-fill: the same fraction of tokens
  changes, conditioned on the rest (the left part only).

:func:`lookahead_embeddings` is PrE-Text's look-ahead: a candidate's embedding is the mean embedding of
``degree`` variations of it (``degree = 0``: its own embedding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from largefedbench.errors import InputError
from largefedbench.models.device import model_device
from largefedbench.synthetic.generation import clean_completion, generate_ids

__all__ = ["Variation", "load_masked_lm", "lookahead_embeddings", "mask_fill_variation", "suffix_variation"]

#: ``vary(texts, seed) -> one variation per text``
Variation = Callable[[Sequence[str], int], list[str]]


def suffix_variation(model, tokenizer, texts: Sequence[str], *, fraction: float = 0.3, temperature: float = 1.0,
                     top_p: float = 1.0, batch_size: int = 64, seed: int = 0, progress: bool = False) -> list[str]:
    """Each text with its last ``fraction`` of tokens re-sampled by the causal LM ``model`` (see the module docstring)."""
    if not 0 < fraction < 1:
        raise InputError(f"fraction={fraction} must be in (0, 1)")
    if not texts:
        return []
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    prefixes, lengths = [], []
    for row in ids:
        n_new = max(1, int(len(row) * fraction))
        keep = max(len(row) - n_new, 0)
        prefixes.append(row[:keep])
        lengths.append(n_new)
    prompts = [tokenizer.decode(p, skip_special_tokens=True) for p in prefixes]
    new = generate_ids(model, tokenizer, prompts, max_new_tokens=max(lengths), temperature=temperature, top_p=top_p,
                       batch_size=batch_size, seed=seed, progress=progress, desc="varying")
    return [clean_completion(tokenizer.decode(p + n[:k], skip_special_tokens=True), ())
            for p, n, k in zip(prefixes, new, lengths)]


@torch.inference_mode()
def mask_fill_variation(mlm, tokenizer, texts: Sequence[str], *, fraction: float = 0.3, passes: int = 2,
                        temperature: float = 1.0, max_length: int = 64, batch_size: int = 64, seed: int = 0) -> list[str]:
    """PrE-Text's masked-LM variation of each text (see the module docstring)."""
    if not 0 < fraction < 1 or passes < 1 or temperature <= 0:
        raise InputError(f"fraction={fraction} must be in (0, 1), passes={passes} >= 1 and temperature={temperature} > 0")
    if tokenizer.mask_token_id is None:
        raise InputError("the variation model's tokenizer has no mask token: use a masked LM such as roberta-large")
    if not texts:
        return []
    device = model_device(mlm)
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
    gen = torch.Generator().manual_seed(int(seed))
    out: list[str] = []
    for lo in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[lo : lo + batch_size]), truncation=True, max_length=max_length, padding=True,
                        return_tensors="pt", return_special_tokens_mask=True)
        ids, attn = enc["input_ids"].clone(), enc["attention_mask"]
        fillable = (attn == 1) & (enc["special_tokens_mask"] == 0)
        for _ in range(passes):
            orders = []
            for row in range(len(ids)):
                cand = torch.nonzero(fillable[row]).flatten()
                k = int(len(cand) * fraction)
                orders.append(cand[torch.randperm(len(cand), generator=gen)[:k]])
                ids[row, orders[-1]] = tokenizer.mask_token_id
            for step in range(max((len(o) for o in orders), default=0)):
                rows = [r for r, o in enumerate(orders) if step < len(o)]
                pos = torch.stack([orders[r][step] for r in rows])
                logits = mlm(input_ids=ids.to(device), attention_mask=attn.to(device)).logits[rows, pos].float().cpu()
                logits[:, special[special < logits.shape[1]]] = -torch.inf
                probs = torch.softmax(logits / temperature, dim=-1)
                ids[rows, pos] = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        out += [clean_completion(t, ()) for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
    return out


def load_masked_lm(model_id: str, *, device: torch.device | str | None = None):
    """``(model, tokenizer)`` of a masked LM from the Hugging Face Hub or a local folder, in eval mode."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from largefedbench.models.device import get_device
    from largefedbench.models.hub import HubLoadError
    from largefedbench.models.profiles import HubModel

    try:
        tok = AutoTokenizer.from_pretrained(model_id)
        model = AutoModelForMaskedLM.from_pretrained(model_id)
    except Exception as exc:  # any failure means "not obtainable here"
        raise HubLoadError("PE variation model", HubModel(model_id), exc) from exc
    return model.to(get_device(device)).eval(), tok


def lookahead_embeddings(texts: Sequence[str], vary: Variation, embed: Callable[[list[str]], np.ndarray], *,
                         degree: int, seed: int) -> np.ndarray:
    """Each text's embedding, or with ``degree > 0`` the mean embedding of ``degree`` variations of it (PrE-Text)."""
    if degree < 0:
        raise InputError(f"lookahead degree={degree} must be >= 0")
    if degree == 0:
        return embed(list(texts))
    total = None
    for k in range(degree):
        e = embed(vary(texts, seed + 7919 * (k + 1)))
        total = e if total is None else total + e
    return (total / degree).astype(np.float32)
