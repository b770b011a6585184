"""The binary selector: a LoRA adapter on the generator that reads two texts and says which is more like the
client's own documents, trained with cross-entropy over the choice tokens " A" and " B"; and the selectors'
majority vote that labels the DPO pairs."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from largefedbench.methods.fedbiscuit.config import SELECTOR_DTYPES

from largefedbench.fedtrain.frozen_prefix import FrozenPrefix, lowest_adapted_layer, pad_rows

__all__ = ["CHOICES", "TEMPLATE_A", "TEMPLATE_B", "TEMPLATE_END", "PairTask", "SelectorTask", "majority_vote"]

TEMPLATE_A, TEMPLATE_B, TEMPLATE_END = "Text A: ", "\nText B: ", "\nWhich text is more like your own documents? Answer:"
CHOICES = (" A", " B")


class PairTask:
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


class SelectorTask(PairTask):
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


def majority_vote(scores: np.ndarray) -> np.ndarray:
    """``scores[u, i] > 0`` is selector u's vote for A on pair i; True where most selectors vote A (U odd: no ties;
    an even split goes to A, the reference's ``bincount().argmax()``)."""
    votes = np.asarray(scores) > 0
    return votes.sum(0) * 2 >= votes.shape[0]
