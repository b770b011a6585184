"""LoRA adapters on the generator (peft), their weights as plain tensors for checkpoints and early stopping.

POPri App. B.1 / §3.1: LoRA on "all the attention matrices and up/down projection matrices", rank 4, α 8 (the
reference code used r = 16, α = 16 on q, k, v, o, gate, up, down; popri-reference.md spec item 9). The default
targets follow the paper for each architecture: GPT-2's fused ``c_attn`` (q, k, v), ``c_proj`` (attention output
and MLP down projection) and ``c_fc`` (MLP up projection); LLaMA/Qwen/Mistral's q, k, v, o, gate, up and down
projections; any other architecture gets peft's ``"all-linear"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from largefedbench.errors import InputError

__all__ = ["LORA_TARGETS", "LoraState", "add_lora", "default_target_modules", "is_lora_model", "load_lora_state",
           "lora_state", "top_layer_indices"]

_LLAMA_LIKE = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
#: Default LoRA target modules per ``config.model_type``.
LORA_TARGETS: dict[str, list[str]] = {
    "gpt2": ["c_attn", "c_proj", "c_fc"],
    "llama": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    "gemma2": _LLAMA_LIKE,
}


def default_target_modules(model) -> list[str] | str:
    """The paper's LoRA targets for ``model``'s architecture (see the module docstring)."""
    return LORA_TARGETS.get(getattr(model.config, "model_type", ""), "all-linear")


def is_lora_model(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


def top_layer_indices(model, k: int) -> list[int]:
    """The indices of ``model``'s top ``k`` decoder layers (``config.num_hidden_layers``)."""
    n = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    if not n:
        raise InputError(f"{type(model).__name__}'s config names no number of layers; use a LoRA in every layer")
    if not 1 <= k <= n:
        raise InputError(f"a LoRA in the top {k} layers needs 1 <= k <= {n} (the model's layers)")
    return list(range(n - k, n))


def add_lora(model, *, rank: int, alpha: int, dropout: float = 0.0, target_modules: Sequence[str] | str | None = None,
             seed: int = 0, layers: Sequence[int] | None = None):
    """``model`` wrapped in a fresh LoRA adapter (B = 0, so initially identical; A drawn from ``seed`` without
    touching the global RNG), in the decoder layers ``layers`` only when given; a ``PeftModel``."""
    from peft import LoraConfig, get_peft_model

    if rank < 1 or alpha <= 0 or not 0 <= dropout < 1:
        raise InputError(f"LoRA needs rank >= 1, alpha > 0 and 0 <= dropout < 1; got rank={rank}, alpha={alpha}, dropout={dropout}")
    if is_lora_model(model):
        raise InputError("the model already has a LoRA adapter; load new weights with load_lora_state instead")
    targets = default_target_modules(model) if target_modules is None else target_modules
    config = LoraConfig(
        r=int(rank), lora_alpha=alpha, lora_dropout=float(dropout), bias="none", task_type="CAUSAL_LM",
        target_modules=list(targets) if not isinstance(targets, str) else targets,
        fan_in_fan_out=getattr(model.config, "model_type", "") == "gpt2",  # GPT-2's Conv1D stores weights transposed
        layers_to_transform=list(layers) if layers is not None else None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return get_peft_model(model, config)


def lora_state(model) -> dict[str, torch.Tensor]:
    """The adapter's weights (CPU copies), e.g. to keep the best round's generator or to checkpoint a round."""
    from peft import get_peft_model_state_dict

    if not is_lora_model(model):
        raise InputError("lora_state needs a model with a LoRA adapter (see add_lora)")
    return {k: v.detach().to("cpu", copy=True) for k, v in get_peft_model_state_dict(model).items()}


def load_lora_state(model, state: Mapping[str, torch.Tensor]) -> None:
    """Load adapter weights saved by :func:`lora_state` into ``model``'s adapter (in place)."""
    from peft import set_peft_model_state_dict

    if not is_lora_model(model):
        raise InputError("load_lora_state needs a model with a LoRA adapter (see add_lora)")
    result = set_peft_model_state_dict(model, dict(state))
    unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
    if unexpected:
        raise InputError(f"the LoRA state does not fit this adapter (unexpected keys such as {unexpected[0]}); "
                         "was it saved with another rank or other target modules?")


@dataclass
class LoraState:
    """The rounds-loop state of a method that moves a generator's adapter between rounds (POPri, PE+SFT)."""

    lora: dict[str, torch.Tensor]
