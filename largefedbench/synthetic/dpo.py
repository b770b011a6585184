"""One preference-optimisation update of the LoRA generator with trl's ``DPOTrainer`` (POPri §3.1 step 3).

The loss (``loss_type``):

- ``"sigmoid"`` — DPO (Rafailov et al. 2023), the paper's choice;
- ``"ipo"`` — IPO (Gheshlaghi Azar et al. 2024; POPri App. E.4), trl's length-normalised form, β = τ;
- ``"cdpo"`` — conservative DPO (Mitchell 2023; POPri App. E.4, Fig. 8), which assumes each preference label is
  flipped with probability ε = ``label_smoothing``. trl 1.x's sigmoid loss ignores label smoothing, so cDPO is
  implemented as its definition: each pair's labels are swapped with probability ε (drawn from ``seed``) and
  the sigmoid loss is applied; the expected loss is exactly cDPO's
  −(1−ε)·log σ(βh) − ε·log σ(−βh);
- ``"robust"`` — trl's rDPO (Chowdhury et al. 2024), an unbiased variant with the same ε.

Reference policy (``reference``): ``"base"`` (default) is the public checkpoint with the adapter disabled, as in
the paper's loss ("we use the public checkpoint of the LLM") and the reference code (``ref_model=None`` with a
peft config); ``"start"`` is the policy as it was when this update began (trl 1.x's default for a model that
already has an adapter: a frozen copy of the adapter).

Prompts are truncated from the left so that prompt + completion + EOS fit ``max_length`` (the model's
context by default); trl would otherwise cut the completion or drop the pair.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from largefedbench.errors import InputError
from largefedbench.synthetic._trainer import base_training_args, log_series, silence_trainer, trainer_run
from largefedbench.synthetic.generation import context_length
from largefedbench.synthetic.lora import is_lora_model
from largefedbench.timing import timed

__all__ = ["LOSS_TYPES", "dpo_update", "fit_prompts", "label_flips"]

LossType = Literal["sigmoid", "ipo", "cdpo", "robust"]
LOSS_TYPES: tuple[str, ...] = ("sigmoid", "ipo", "cdpo", "robust")


def fit_prompts(tokenizer, prompts: Sequence[str], completions: Sequence[Sequence[str]], max_length: int) -> list[str]:
    """Each prompt cut from the left so that its tokens plus the longest of its completions (+ EOS) fit ``max_length``."""
    out = []
    for prompt, comps in zip(prompts, zip(*completions)):
        need = max(len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in comps) + 2
        budget = max_length - need
        if budget < 1:
            raise InputError(f"a completion of {need - 2} tokens leaves no room for its prompt within max_length={max_length}")
        full = ids = tokenizer(prompt)["input_ids"]
        keep = budget
        while len(ids) > budget and keep > 0:  # decode/re-encode can merge differently at the cut: keep fewer
            prompt = tokenizer.decode(full[len(full) - keep:], skip_special_tokens=True)
            ids = tokenizer(prompt)["input_ids"]
            keep -= 1
        out.append(prompt)
    return out


def label_flips(n: int, epsilon: float, seed: int) -> np.ndarray:
    """cDPO's label noise: which of ``n`` pairs swap chosen and rejected, each with probability ``epsilon``."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCD]))
    return rng.random(n) < epsilon


@timed("dpo")
def dpo_update(
    model,
    tokenizer,
    prompts: Sequence[str],
    chosen: Sequence[str],
    rejected: Sequence[str],
    *,
    beta: float,
    lr: float,
    epochs: int,
    batch_size: int,
    loss_type: LossType = "sigmoid",
    label_smoothing: float = 0.0,
    seed: int = 0,
    progress: bool = False,
    output_dir: str | Path | None = None,
    reference: Literal["base", "start"] = "base",
    max_length: int | None = None,
    gradient_accumulation_steps: int = 1,
    eval_margin: bool = False,
    epoch_end: Callable[[], None] | None = None,
    precompute_reference: bool = True,
    bf16: bool | None = None,
) -> dict[str, Any]:
    """Train ``model``'s LoRA adapter in place on (prompt, chosen, rejected) pairs; return the training metrics.

    ``epoch_end()`` is called after every epoch (e.g. to keep each epoch's checkpoint, as POPri App. B.1 picks the
    round's best checkpoint by FID). ``precompute_reference`` scores every pair under the reference policy once, in
    one no-grad pass before the first step (trl's ``precompute_ref_log_probs``), instead of at every step of every
    epoch; the reference is frozen, so the loss is the same. ``bf16`` (None: where the hardware has native bf16)
    runs the steps under bf16 autocast.

    Metrics: ``n_pairs``, ``steps``, ``train_loss``, ``loss_first``/``loss_last`` and ``margin_first``/``margin_last``
    (the chosen-minus-rejected reward margin β·[(log π(c|x) − log π_ref(c|x)) − (log π(r|x) − log π_ref(r|x))]
    of the first and last logged step), ``reward_accuracy_last``, ``seconds``, and with ``eval_margin`` the mean
    margin over all pairs before and after the update (``margin_before``, ``margin_after``).
    """
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    n = len(prompts)
    if not (n == len(chosen) == len(rejected)):
        raise InputError(f"{n} prompts, {len(chosen)} chosen and {len(rejected)} rejected completions: one of each per pair")
    if n == 0:
        raise InputError("no preference pairs to train on")
    if loss_type not in LOSS_TYPES:
        raise InputError(f"loss_type={loss_type!r}; choose one of {', '.join(LOSS_TYPES)}")
    if reference not in ("base", "start"):
        raise InputError(f"reference={reference!r}; choose 'base' (public checkpoint) or 'start' (policy before this update)")
    if loss_type in ("cdpo", "robust") and not 0 <= label_smoothing < 0.5:
        raise InputError(f"label_smoothing={label_smoothing} (the label-flip probability) must be in [0, 0.5)")
    if not is_lora_model(model):
        raise InputError("dpo_update trains a LoRA adapter: wrap the generator with add_lora first")
    chosen, rejected = list(chosen), list(rejected)
    if loss_type == "cdpo":
        for i in np.flatnonzero(label_flips(n, label_smoothing, seed)):
            chosen[i], rejected[i] = rejected[i], chosen[i]
    max_length = int(max_length or context_length(model))
    prompts = fit_prompts(tokenizer, prompts, [chosen, rejected], max_length)
    start = time.perf_counter()
    with trainer_run(model, progress, output_dir) as out:
        args = DPOConfig(
            **base_training_args(lr=lr, epochs=epochs, batch_size=batch_size, seed=seed, progress=progress, output_dir=out,
                                 gradient_accumulation_steps=gradient_accumulation_steps, bf16=bf16),
            precompute_ref_log_probs=False,  # see _precompute_reference
            beta=float(beta), loss_type=["robust" if loss_type == "robust" else "ipo" if loss_type == "ipo" else "sigmoid"],
            label_smoothing=float(label_smoothing) if loss_type == "robust" else 0.0, max_length=max_length,
        )
        data = Dataset.from_dict({"prompt": list(prompts), "chosen": chosen, "rejected": rejected})
        trainer = DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        if epoch_end is not None:
            trainer.add_callback(_EpochEnd(epoch_end))
        silence_trainer(trainer, progress)
        if reference == "base" and "ref" in model.peft_config:
            model.delete_adapter("ref")  # trl then scores the reference with the adapter disabled: the public model
            model.set_adapter("default")
        if precompute_reference:
            _precompute_reference(trainer)
        metrics: dict[str, Any] = {}
        if eval_margin:
            metrics["margin_before"] = float(trainer.evaluate(data)["eval_rewards/margins"])
        result = trainer.train()
        if eval_margin:
            metrics["margin_after"] = float(trainer.evaluate(data)["eval_rewards/margins"])
        if "ref" in model.peft_config:
            model.delete_adapter("ref")
            model.set_adapter("default")
    model.eval()
    losses, margins = log_series(trainer, "loss"), log_series(trainer, "rewards/margins")
    accuracies = log_series(trainer, "rewards/accuracies")
    metrics.update({
        "n_pairs": n, "n_trained_pairs": len(trainer.train_dataset), "steps": int(result.global_step),
        "train_loss": float(result.training_loss), "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None, "margin_first": margins[0] if margins else None,
        "margin_last": margins[-1] if margins else None, "reward_accuracy_last": accuracies[-1] if accuracies else None,
        "loss_type": loss_type, "reference": reference, "seconds": round(time.perf_counter() - start, 3),
    })
    return metrics


def _precompute_reference(trainer) -> None:
    """trl's ``precompute_ref_log_probs`` — every pair scored under the reference once, in no-grad batches, stored as
    dataset columns the loss reads — run once the reference is settled. trl runs it inside ``__init__``, before
    ``reference="base"`` has removed the adapter copy trl makes, which would score the policy instead of the public
    model."""
    from trl.trainer.utils import hash_module

    trainer.precompute_ref_logps = trainer.args.precompute_ref_log_probs = True
    trainer._precompute_model_hash = hash_module(trainer.model)  # keys trl's cache of scored datasets
    batch = trainer.args.precompute_ref_batch_size or trainer.args.per_device_train_batch_size
    trainer.train_dataset = trainer._precompute_ref_logps(trainer.train_dataset, "train", batch)


def _EpochEnd(fn: Callable[[], None]):
    """A transformers callback that calls ``fn()`` at the end of every training epoch."""
    from transformers import TrainerCallback

    class EpochEnd(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            fn()

    return EpochEnd()
