"""Fine-tuning the downstream on-device model and choosing its epoch on the validation clients.

POPri §5 ("During training, we evaluate the models on the validation dataset and select the checkpoint that
achieves the best validation performance as the model that is evaluated on the test set") and App. B.1 (AdamW,
lr 2e-4, batch 160, 80 epochs, max length 64 in the paper profile). Training examples use the evaluation's
framing, ``[BOS] + tokens + [EOS]`` truncated to ``max_len`` with pads masked out of the loss. The pretrained
model is evaluated first (epoch 0), so the result never is worse on validation than the starting checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm

from largefedbench.errors import InputError
from largefedbench.evaluation.accuracy import next_token_accuracy
from largefedbench.models.device import model_device
from largefedbench.models.tokenizer import lm_sequences, pad_batch
from largefedbench.timing import timed


@dataclass
class EpochRecord:
    """One row of the training history: mean training loss of the epoch and validation metrics after it."""

    epoch: int
    train_loss: float | None
    validation: dict[str, float]
    seconds: float


@dataclass
class DownstreamResult:
    """A fine-tuned downstream model holding the weights of its best validation epoch, and how it got there."""

    model: Any
    best_epoch: int
    best_validation: dict[str, float]
    history: list[EpochRecord]
    config: dict[str, Any]
    n_train_texts: int
    n_train_tokens: int  # ids in one pass over the training set (BOS and EOS included)
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the model)."""
        return {
            "best_epoch": self.best_epoch, "best_validation": self.best_validation, "config": self.config,
            "n_train_texts": self.n_train_texts, "n_train_tokens": self.n_train_tokens, "seconds": round(self.seconds, 3),
            "history": [{"epoch": r.epoch, "train_loss": r.train_loss, "validation": r.validation, "seconds": round(r.seconds, 3)}
                        for r in self.history],
        }


def _validate_args(train_texts: Sequence[str], validation_texts: Sequence[str], epochs: int, batch_size: int, lr: float) -> None:
    if not train_texts:
        raise InputError("no training texts for the downstream model (an empty method output or split?)")
    if not validation_texts:
        raise InputError("no validation texts: the epoch is chosen on the validation clients; the snapshot's validation split is empty")
    if epochs < 0:
        raise InputError(f"epochs={epochs} must be >= 0 (0 evaluates the starting checkpoint only)")
    if batch_size < 1:
        raise InputError(f"batch_size={batch_size} must be at least 1")
    if not lr > 0:
        raise InputError(f"lr={lr} must be positive")


@timed("downstream")
def train_downstream(model, tokenizer, train_texts: Sequence[str], validation_texts: Sequence[str], *, epochs: int,
                     batch_size: int, lr: float, seed: int, max_len: int = 64, eval_batch_size: int = 64,
                     progress: bool = True) -> DownstreamResult:
    """Fine-tune ``model`` on ``train_texts`` with AdamW and keep the epoch with the best validation top-1.

    The model is trained in place and returned holding the best epoch's weights (epoch 0 = as given). The
    batch order and dropout are seeded by ``seed``, so a CPU run is deterministic; the global RNG is untouched.
    """
    _validate_args(train_texts, validation_texts, epochs, batch_size, lr)
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    seqs = lm_sequences(tokenizer, train_texts, max_len)
    n_batches = (len(seqs) + batch_size - 1) // batch_size
    config = {"epochs": epochs, "batch_size": batch_size, "lr": lr, "seed": seed, "max_len": max_len, "optimizer": "AdamW"}

    def validate() -> dict[str, float]:
        return next_token_accuracy(model, tokenizer, validation_texts, max_len=max_len, batch_size=eval_batch_size)

    start = time.perf_counter()
    history = [EpochRecord(0, None, validate(), time.perf_counter() - start)]
    best_epoch, best = 0, history[0].validation
    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    bar = tqdm(total=epochs * n_batches, desc="downstream training", disable=not progress, leave=False)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            model.train()
            order = torch.randperm(len(seqs), generator=gen).tolist()
            loss_sum, n_loss = 0.0, 0
            for b in range(n_batches):
                ids, mask = pad_batch([seqs[i] for i in order[b * batch_size : (b + 1) * batch_size]], pad_id)
                ids, mask = ids.to(device), mask.to(device)
                loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                loss_sum, n_loss = loss_sum + loss.item(), n_loss + 1
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
            metrics = validate()
            history.append(EpochRecord(epoch, loss_sum / n_loss, metrics, time.perf_counter() - t0))
            bar.set_postfix(epoch=epoch, val_top1=f"{metrics['top1']:.4f}")
            if metrics["top1"] > best["top1"]:
                best_epoch, best = epoch, metrics
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return DownstreamResult(
        model=model, best_epoch=best_epoch, best_validation=best, history=history, config=config,
        n_train_texts=len(seqs), n_train_tokens=sum(len(s) for s in seqs), seconds=time.perf_counter() - start,
    )


def evaluate_downstream(model_or_result, tokenizer, test_texts: Sequence[str], *, max_len: int = 64,
                        batch_size: int = 64, progress: bool = False) -> dict[str, float]:
    """Test metrics (top-1/3/5, tokens, loss) of a model or of a :class:`DownstreamResult`'s best-validation model."""
    model = model_or_result.model if isinstance(model_or_result, DownstreamResult) else model_or_result
    return next_token_accuracy(model, tokenizer, test_texts, max_len=max_len, batch_size=batch_size, progress=progress)
