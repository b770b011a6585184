"""One client's local training (McMahan et al. 2018, Alg. 1 ``ClientUpdate``): from the global weights, local SGD
(or a fresh AdamW) over the client's own examples; the client reports Δ = local − global.

One loop serves every model: the downstream model (all its weights) and LoRA adapters of generators and selectors
(the adapter only); the caller gives the examples and the loss of a batch of them.

Why a loop and not ``torch.func.vmap`` over the cohort: on 32 tiny-model clients (45 local steps) vmap + grad over
stacked client weights was 1.13× faster than the loop (0.42 vs 0.48 s), and profiled, its matrix products alone took
half its time: a step's work is FLOPs (the 4096 × 64 LM head holds 71% of the weights), which batching clients does
not remove, so no vectorised update could be 3× faster here. ``tests/fedtrain/test_bench_local_sgd.py`` measures the
loop against the GEMM limit of this machine.

One case is batched: clients that take a single SGD step from the global weights (CTCL's and DP instruction
resampling's generator rounds, weak-client voting's clients with at most one batch). Their steps are independent
given the global weights, so with ``row_losses`` their examples run through the model together, length-sorted, in
batches of :data:`BATCH_ROWS` rows (by device), and opacus' per-sample gradients (``GradSampleModule``) give each
client exactly its own gradient; Δ = −lr · g. Measured on SmolLM2-135M with a LoRA adapter and demo-prose's
clients: on 2 idle cores, 64 clients took 31.1 s one at a time and 22.7 s in length-sorted batches of 16 rows (one
53-row batch gained nothing: padding, and a 49,152-wide LM head over every row); on an H100, 256 clients took 161 ms
a client one at a time, 32 ms in batches of 16 rows, 8.6 ms in batches of 64 and 3.3 ms in batches of 256.

Dropout is off (eval mode) so a client's Δ is a deterministic function of its data and its batch order; the batch
order comes from the client's own generator (inside ``fed.private_sum``: ``chunk.rng(i)``, seeded by the federation
seed, the round and the client id), so Δ depends neither on the executor nor on how the cohort is chunked.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain.flat import FlatParams

__all__ = ["BATCH_ROWS", "LMExample", "LocalSGD", "lm_examples", "lm_loss", "lm_row_losses", "local_steps",
           "local_updates", "one_step_gradients", "per_client"]

Rngs = np.random.Generator | Sequence[np.random.Generator]
#: rows per pass of single-step clients, length-sorted, by device type (see the module docstring for the measurements):
#: on a CPU larger batches pad more and gain nothing; on CUDA more rows pay until memory runs out
BATCH_ROWS = {"cpu": 16, "cuda": 64}
#: and at most this many float32 logits per pass (rows × tokens × vocabulary: 1 GiB a copy; the loss keeps about
#: three): 64 rows of 80 tokens for SmolLM2's 49,152 ids, about 18 rows of 96 for Qwen2.5's 151,936
LOGITS_PER_PASS = 2**28
RowLosses = Callable[[Sequence[Any]], tuple[torch.Tensor, torch.Tensor]]


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
                  local: LocalSGD, rng: Rngs, *, row_losses: RowLosses | None = None) -> torch.Tensor:
    """Δ of every client from the model's current trainable weights (restored afterwards):
    ``(len(clients), flat.numel)``.

    ``clients[i]`` is client i's examples; ``loss_fn(batch)`` is the mean loss of a batch of them under the model's
    current weights. A client without examples reports Δ = 0. Batch order: ``rng[i]`` is client i's own generator,
    or one shared generator is drawn client after client. ``row_losses(batch)`` (each row's summed loss and its
    number of loss terms, so that ``loss_fn`` = sum / count) lets single-step SGD clients run batched."""
    base = flat.get()
    rows = base.new_zeros((len(clients), flat.numel))
    rngs = per_client(rng, len(clients))
    plans = [local_steps(len(examples), local, rngs[i]) for i, examples in enumerate(clients)]  # draws as the loop did
    batched = row_losses is not None and local.optimizer == "sgd"
    one_step = [i for i, steps in enumerate(plans) if len(steps) == 1] if batched else []
    was_training = flat.model.training
    flat.model.eval()
    try:
        if one_step:
            grads = one_step_gradients(flat, [[clients[i][j] for j in plans[i][0]] for i in one_step], row_losses)
            rows[one_step] = -local.lr * grads
        for i, examples in enumerate(clients):
            steps = plans[i]
            if not steps or (one_step and len(steps) == 1):
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


def one_step_gradients(flat: FlatParams, batches: Sequence[Sequence[Any]], row_losses: RowLosses) -> torch.Tensor:
    """``(len(batches), flat.numel)``: the gradient of each client's mean loss over its ``batches[i]`` at the current
    weights, from length-sorted batches of :data:`BATCH_ROWS` rows (by device) that mix clients, split back per
    client by opacus' per-sample gradients (each row's own)."""
    from opacus import GradSampleModule

    owner = [i for i, batch in enumerate(batches) for _ in batch]
    examples = [e for batch in batches for e in batch]
    order = sorted(range(len(examples)), key=lambda r: len(getattr(examples[r], "ids", ())))
    grads = torch.zeros((len(batches), flat.numel), device=flat.params[0].device)
    cap = BATCH_ROWS.get(grads.device.type, BATCH_ROWS["cpu"])
    vocab = int(getattr(flat.model.config, "vocab_size", 0) or 1)
    passes: list[list[int]] = [[]]
    for r in order:  # ascending length: a pass is full at ``cap`` rows or at LOGITS_PER_PASS logits at this row's width
        width = len(getattr(examples[r], "ids", ())) or 1
        if passes[-1] and (len(passes[-1]) >= cap or (len(passes[-1]) + 1) * width * vocab > LOGITS_PER_PASS):
            passes.append([])
        passes[-1].append(r)
    passes = [part for part in passes if part]
    counts = torch.zeros(len(batches), device=grads.device)
    leaves = [m for m in flat.model.modules() if any(p.requires_grad for p in m.parameters(recurse=False))]
    hooked = GradSampleModule(flat.model, batch_first=True, loss_reduction="sum")
    for m in leaves:
        m.train()  # opacus records activations of modules in training mode only (dropout is off: see the docstring)
    try:
        with warnings.catch_warnings():  # a LoRA layer's input (the frozen model's) needs no gradient; opacus reads
            warnings.filterwarnings("ignore", message="Full backward hook is firing")  # only its output's
            for part in passes:
                who = torch.as_tensor([owner[r] for r in part], device=grads.device)
                total, count = row_losses([examples[r] for r in part])
                total.sum().backward()  # each row's gradient of its own summed loss; a client's mean divides below
                per_row = [p.grad_sample.reshape(len(part), -1).float() for p in flat.params]
                grads.index_add_(0, who, torch.cat(per_row, dim=1))
                counts.index_add_(0, who, count.to(counts.dtype))
                for p in flat.params:
                    p.grad_sample, p.grad = None, None
    finally:
        hooked._close()
        for m in leaves:  # what opacus' close leaves behind when a pass failed between forward and backward
            m.eval()
            for name in ("activations", "max_batch_len"):
                if hasattr(m, name):
                    delattr(m, name)
        for p in flat.params:
            p.grad_sample, p.grad = None, None
    return grads / counts.clamp(min=1)[:, None]


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


def lm_row_losses(model, batch: Sequence[LMExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``batch``: the summed next-token cross-entropy over its non-context tokens and their number
    (:func:`lm_loss` is the sum of the first over the sum of the second)."""
    device = next(model.parameters()).device
    ids, mask, labels = _pad(batch, pad_id, device)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    target = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=-100, reduction="none")
    return loss.sum(dim=1), (target != -100).sum(dim=1)
