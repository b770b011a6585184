"""One client's local training (McMahan et al. 2018, Alg. 1 ``ClientUpdate``): from the global weights, local SGD
(or a fresh AdamW) over the client's own examples; the client reports Δ = local − global.

One loop serves every model: the downstream model (all its weights) and LoRA adapters of generators and selectors
(the adapter only); the caller gives the examples and the loss of a batch of them.

Why a loop and not ``torch.func.vmap`` over the cohort: on 32 tiny-model clients (45 local steps) vmap + grad over
stacked client weights was 1.13× faster than the loop (0.42 vs 0.48 s), and profiled, its matrix products alone took
half its time: a step's work is FLOPs (the 4096 × 64 LM head holds 71% of the weights), which batching clients does
not remove, so no vectorised update could be 3× faster here. ``tests/fedtrain/test_bench_local_sgd.py`` measures the
loop against the GEMM limit of this machine.

Dropout is off (eval mode) so a client's Δ is a deterministic function of its data and its batch order; the batch
order comes from the client's own generator (inside ``fed.private_sum``: ``chunk.rng(i)``, seeded by the federation
seed, the round and the client id), so Δ depends neither on the executor nor on how the cohort is chunked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain.flat import FlatParams

__all__ = ["LMExample", "LocalSGD", "lm_examples", "lm_loss", "local_steps", "local_updates", "per_client"]

Rngs = np.random.Generator | Sequence[np.random.Generator]


@dataclass(frozen=True)
class LocalSGD:
    """A client's local training: optimizer ("sgd", or "adamw": a fresh AdamW per client and round, no weight decay),
    learning rate, batch size, local epochs, and a cap on local steps (None: every batch of every epoch)."""

    lr: float
    batch_size: int = 2
    epochs: int = 1
    max_steps: int | None = None
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self) -> None:
        if not self.lr >= 0:
            raise InputError(f"client lr={self.lr} must be >= 0")
        if self.batch_size < 1 or self.epochs < 1:
            raise InputError(f"client batch size ({self.batch_size}) and local epochs ({self.epochs}) must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise InputError(f"max_local_steps={self.max_steps} must be at least 1 (or None for no cap)")
        if self.optimizer not in ("sgd", "adamw"):
            raise InputError(f"client_optimizer={self.optimizer!r}; choose 'sgd' or 'adamw'")


def per_client(rng: Rngs, n: int) -> Sequence[np.random.Generator]:
    """One generator per client: ``rng`` itself if it is ``n`` generators (each client's own), or one shared generator
    drawn client after client."""
    if isinstance(rng, np.random.Generator):
        return [rng] * n
    if len(rng) != n:
        raise InputError(f"{len(rng)} generators for {n} clients: pass one generator per client (or one shared)")
    return rng


def local_steps(n_examples: int, local: LocalSGD, rng: np.random.Generator) -> list[list[int]]:
    """A client's local steps as example indices: per local epoch a fresh shuffle cut into batches, capped."""
    steps: list[list[int]] = []
    for _ in range(local.epochs if n_examples else 0):
        order = rng.permutation(n_examples)
        steps.extend(order[b : b + local.batch_size].tolist() for b in range(0, n_examples, local.batch_size))
    return steps[: local.max_steps] if local.max_steps is not None else steps


def local_updates(flat: FlatParams, clients: Sequence[Sequence[Any]], loss_fn: Callable[[Sequence[Any]], torch.Tensor],
                  local: LocalSGD, rng: Rngs) -> torch.Tensor:
    """Δ of every client from the model's current trainable weights (restored afterwards):
    ``(len(clients), flat.numel)``.

    ``clients[i]`` is client i's examples; ``loss_fn(batch)`` is the mean loss of a batch of them under the model's
    current weights. A client without examples reports Δ = 0. Batch order: ``rng[i]`` is client i's own generator,
    or one shared generator is drawn client after client."""
    base = flat.get()
    rows = base.new_zeros((len(clients), flat.numel))
    rngs = per_client(rng, len(clients))
    was_training = flat.model.training
    flat.model.eval()
    try:
        for i, examples in enumerate(clients):
            steps = local_steps(len(examples), local, rngs[i])
            if not steps:
                continue
            flat.set(base)
            opt = (torch.optim.AdamW(flat.params, lr=local.lr, betas=local.betas, weight_decay=0.0)
                   if local.optimizer == "adamw" else None)
            for step in steps:
                grads = torch.autograd.grad(loss_fn([examples[j] for j in step]), flat.params)
                with torch.no_grad():
                    for p, g in zip(flat.params, grads):
                        if opt is None:
                            p.sub_(local.lr * g)
                        else:
                            p.grad = g
                if opt is not None:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            rows[i] = flat.get() - base
    finally:
        flat.set(base)
        flat.model.train(was_training)
    return rows


# -- language-model examples --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LMExample:
    """Token ids of one training sequence and how many leading ids (BOS, a conditioning prefix) carry no loss."""

    ids: list[int]
    n_context: int


def lm_examples(tokenizer, texts: Sequence[str], max_len: int) -> list[LMExample]:
    """Each text framed as the evaluation frames it (``[BOS] + tokens + [EOS]``, at most ``max_len`` ids), the loss
    on every token after BOS."""
    from largefedbench.models.tokenizer import lm_sequences

    return [LMExample(list(seq), 1) for seq in lm_sequences(tokenizer, list(texts), max_len)]


def _pad(examples: Sequence[LMExample], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for r, e in enumerate(examples):
        row = torch.as_tensor(e.ids, dtype=torch.long)
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
        labels[r, e.n_context : len(row)] = row[e.n_context :]
    return ids.to(device), mask.to(device), labels.to(device)


def lm_loss(model, batch: Sequence[LMExample], pad_id: int) -> torch.Tensor:
    """Mean next-token cross-entropy over the non-context tokens of ``batch`` (right-padded; pads carry no loss)."""
    device = next(model.parameters()).device
    ids, mask, labels = _pad(batch, pad_id, device)
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss
