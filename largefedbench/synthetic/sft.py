"""One supervised fine-tuning update of the generator with trl's ``SFTTrainer`` (PE+SFT, POPri §3 "(2) SFT").

"One could directly finetune the LLM Ψ on the highest scoring samples using next-word-prediction loss." With
``prompts`` the examples are prompt→completion pairs and only the completion is trained on (trl's
``completion_only_loss``), i.e. the generator learns to answer its own few-shot prompt with the selected samples;
without, each text is a plain language-modelling example. trl appends EOS to every text/completion.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from largefedbench.errors import InputError
from largefedbench.synthetic._trainer import base_training_args, log_series, silence_trainer, trainer_run
from largefedbench.synthetic.dpo import fit_prompts
from largefedbench.synthetic.generation import context_length
from largefedbench.timing import timed

__all__ = ["sft_update"]


@timed("sft")
def sft_update(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    lr: float,
    epochs: int,
    batch_size: int,
    seed: int = 0,
    progress: bool = False,
    prompts: Sequence[str] | None = None,
    output_dir: str | Path | None = None,
    max_length: int | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model`` (a LoRA model, or a full model) in place on ``texts``; return the training metrics.

    Metrics: ``n_texts``, ``steps``, ``train_loss``, ``loss_first``, ``loss_last``, ``seconds``.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    texts = [t for t in texts]
    if not texts:
        raise InputError("no texts to fine-tune on")
    if prompts is not None and len(prompts) != len(texts):
        raise InputError(f"{len(prompts)} prompts for {len(texts)} texts: give one prompt per text or none")
    max_length = int(max_length or context_length(model))
    if prompts is not None:
        data = Dataset.from_dict({"prompt": fit_prompts(tokenizer, prompts, [texts], max_length), "completion": texts})
    else:
        data = Dataset.from_dict({"text": texts})
    start = time.perf_counter()
    with trainer_run(model, progress, output_dir) as out:
        args = SFTConfig(
            **base_training_args(lr=lr, epochs=epochs, batch_size=batch_size, seed=seed, progress=progress, output_dir=out),
            max_length=max_length, packing=False, completion_only_loss=prompts is not None,
        )
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        silence_trainer(trainer, progress)
        result = trainer.train()
    model.eval()
    losses = log_series(trainer, "loss")
    return {"n_texts": len(texts), "steps": int(result.global_step), "train_loss": float(result.training_loss),
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
            "seconds": round(time.perf_counter() - start, 3)}
