"""Next-token accuracy exactly as the POPri reference defines it (popri-reference.md, spec items 12 and 13).

Each text becomes ``[BOS] + tokens + [EOS]``, truncated to ``max_len`` (64) ids and right-padded; the model
predicts position ``t+1`` from positions ``<= t`` (``logits[:, :-1]`` against ``ids[:, 1:]``); every non-pad
target counts, so the first input position is never a target and EOS is one unless truncated away. Accuracy is
the token-level micro-average over the whole set: hits summed over all texts / targets summed over all texts.
Loss is the summed cross-entropy over the same targets divided by their number.

Clean mode only: tokens come from ``tokenizer(text, add_special_tokens=False)``. The reference's quirk (the slow
GPT-2 tokenizer re-tokenising its own token strings through ``is_split_into_words=True``, which inflates
sequences 2-3x with easy ``Ġ``/``Ä``/``ł`` tokens) is not reproduced, so numbers are not comparable with the
paper's published accuracies, only with each other. Pads are excluded by the attention mask, so a pad id equal
to EOS is safe. Batching (texts sorted by length, padded to the longest in the batch) does not change any count.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from largefedbench.errors import InputError
from largefedbench.models.device import model_device
from largefedbench.models.tokenizer import lm_sequences, pad_batch
from largefedbench.timing import timed


def _check_topk(topk: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(sorted({int(k) for k in topk}))
    if not ks or ks[0] < 1:
        raise InputError(f"topk={tuple(topk)} must list positive integers, e.g. (1, 3, 5)")
    return ks


@torch.inference_mode()
def accuracy_counts(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, topk: Sequence[int] = (1, 3, 5),
                    targets: torch.Tensor | None = None) -> dict[str, float]:
    """Hit counts, target count and summed cross-entropy of one right-padded batch (the unit of the metric).
    ``targets`` (a boolean vector over the vocabulary) counts only the positions whose target token it marks."""
    ks = _check_topk(topk)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logits = logits[:, :-1].float()
    labels = input_ids[:, 1:]
    valid = attention_mask[:, 1:].bool()
    if targets is not None:
        valid &= targets.to(labels.device)[labels]
    lg, lb = logits[valid], labels[valid]
    out: dict[str, float] = {"n_tokens": int(lb.numel()), "loss_sum": float(F.cross_entropy(lg, lb, reduction="sum")) if lb.numel() else 0.0}
    if lb.numel():
        kmax = min(ks[-1], lg.shape[-1])
        hits = lg.topk(kmax, dim=-1).indices == lb[:, None]
        for k in ks:
            out[f"hits{k}"] = int(hits[:, :k].any(dim=-1).sum())
    else:
        for k in ks:
            out[f"hits{k}"] = 0
    return out


@timed("evaluation")
def next_token_accuracy(model, tokenizer, texts: Sequence[str], max_len: int = 64, topk: Sequence[int] = (1, 3, 5),
                        batch_size: int = 64, progress: bool = False, targets: Sequence[int] | None = None) -> dict[str, float]:
    """Top-k next-token accuracies, target count and mean loss of ``model`` on ``texts`` (POPri spec item 12).

    Returns ``{"top1": …, "top3": …, "top5": …, "n_tokens": N, "loss": …}`` (one ``top{k}`` per ``k`` in ``topk``).
    ``targets`` (token ids) restricts every count to the positions whose target is one of them (the window-novel
    accuracy); with no such position the accuracies are NaN and ``n_tokens`` is 0.
    """
    ks = _check_topk(topk)
    if batch_size < 1:
        raise InputError(f"batch_size={batch_size} must be at least 1")
    seqs = lm_sequences(tokenizer, texts, max_len)
    if not seqs:
        raise InputError("no texts to evaluate next-token accuracy on (the split is empty?)")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = model_device(model)
    was_training = getattr(model, "training", False)
    model.eval()
    seqs = sorted(seqs, key=len, reverse=True)
    totals = {"n_tokens": 0, "loss_sum": 0.0, **{f"hits{k}": 0 for k in ks}}
    mask_vector = None
    if targets is not None:
        mask_vector = torch.zeros(_vocab_size(tokenizer, [int(t) for t in targets]), dtype=torch.bool)
        mask_vector[torch.as_tensor(sorted(set(int(t) for t in targets)), dtype=torch.long)] = True
    try:
        for start in tqdm(range(0, len(seqs), batch_size), desc="next-token accuracy", disable=not progress, leave=False):
            ids, mask = pad_batch(seqs[start : start + batch_size], pad_id)
            counts = accuracy_counts(model, ids.to(device), mask.to(device), ks, targets=mask_vector)
            for key in totals:
                totals[key] += counts[key]
    finally:
        model.train(was_training)
    n = totals["n_tokens"]
    result = {f"top{k}": totals[f"hits{k}"] / n if n else float("nan") for k in ks}
    result["n_tokens"] = n
    result["loss"] = totals["loss_sum"] / n if n else float("nan")
    return result


def _vocab_size(tokenizer, targets: Sequence[int]) -> int:
    """The number of ids a target can take: the tokenizer's ids (and any larger id in ``targets``)."""
    return max(len(tokenizer), max(targets, default=-1) + 1)
