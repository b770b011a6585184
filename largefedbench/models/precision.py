"""The dtype the generator samples in, and the inference copy that samples in it (docs/speed.md).

On a CPU with native bf16 matrix instructions (``amx_bf16`` or ``avx512_bf16``) the generator samples from a bf16
copy: its matrix products run 3–4× faster than float32 (``lfb bench llm`` measures both on the machine at hand),
and its next-token choices stay float32's but for near-ties (``lfb bench llm`` measures the agreement and the KL).
Training keeps its float32 weights: the copy (LoRA merged in, cast) is made for one sampling call and dropped.
DPO and SFT keep float32 on a CPU (:func:`train_in_bf16`).
On CUDA the model samples as loaded. ``LFB_GENERATION_DTYPE=float32`` (or ``bfloat16``) overrides the choice, e.g.
to reproduce an entry made before the bf16 copy; ``LFB_TRAINING_DTYPE`` does the same for training. Entries record
both (:func:`precision_record`, ``environment.precision``) and ``lfb leaderboard reproduce`` re-runs under them
(:func:`precision_env`).
"""

from __future__ import annotations

import copy
import os
import weakref

import torch

from largefedbench.environment import cpu_bf16
from largefedbench.errors import InputError

__all__ = ["AS_LOADED", "DTYPES", "ENV_VAR", "TRAINING_ENV_VAR", "default_precision", "forget_copies",
           "generation_dtype", "inference_copy", "precision_env", "precision_record", "train_in_bf16"]

ENV_VAR = "LFB_GENERATION_DTYPE"
TRAINING_ENV_VAR = "LFB_TRAINING_DTYPE"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _requested(var: str) -> torch.dtype | None:
    name = os.environ.get(var, "").strip().lower()
    if not name:
        return None
    if name not in DTYPES:
        raise InputError(f"{var}={name!r}; choose one of {', '.join(DTYPES)} (or unset it: bf16 where the hardware "
                         "has native bf16 instructions)")
    return DTYPES[name]


def generation_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype to sample in on ``device``, or None to sample with the model as it is (CUDA, or a CPU without bf16)."""
    requested = _requested(ENV_VAR)
    if requested is not None:
        return requested
    if device.type == "cpu" and cpu_bf16() is not None:
        return torch.bfloat16
    return None


def train_in_bf16() -> bool:
    """Whether trl/transformers updates (DPO, SFT) run under bf16 autocast (float32 weights and optimizer state): on
    a CUDA device that supports it. Not on a CPU unless ``LFB_TRAINING_DTYPE=bfloat16``: there autocast re-casts the
    weights at every step, and a DPO step of the cpu preset was only 16 % faster and ended with other margins (issue
    26's closing note); ``LFB_TRAINING_DTYPE=float32`` turns it off on CUDA too."""
    requested = _requested(TRAINING_ENV_VAR)
    if requested is not None:
        return requested == torch.bfloat16
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


AS_LOADED = "as loaded"  # CUDA with generation_dtype None: the model samples in the dtype it was loaded in


def precision_record(device: torch.device) -> dict[str, str]:
    """What a run on ``device`` samples and trains in (trl's DPO/SFT; a method's own settings are in its config), as
    its entry records it (``environment.precision``). Every generator loads in float32 on a CPU."""
    dtype = generation_dtype(device)
    if dtype is None and device.type == "cpu":
        dtype = torch.float32
    names = {v: k for k, v in DTYPES.items()}
    return {"generation": names[dtype] if dtype is not None else AS_LOADED,
            "training": "bfloat16" if train_in_bf16() else "float32"}


def precision_env(recorded: dict[str, str] | None) -> dict[str, str | None]:
    """The environment variables under which this machine samples and trains as ``recorded`` (an entry's
    ``environment.precision``): a dtype pins its variable, "as loaded" unsets it; None (an entry from before they were
    recorded) pins nothing."""
    if recorded is None:
        return {}
    wanted = {ENV_VAR: recorded.get("generation"), TRAINING_ENV_VAR: recorded.get("training")}
    return {var: name if name in DTYPES else None for var, name in wanted.items()}


def default_precision(device: torch.device) -> dict[str, str]:
    """:func:`precision_record` with neither variable set: this machine's own choice."""
    saved = {var: os.environ.pop(var, None) for var in (ENV_VAR, TRAINING_ENV_VAR)}
    try:
        return precision_record(device)
    finally:
        os.environ.update({var: value for var, value in saved.items() if value is not None})


_copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (state key, dtype, its copy)


def _state_key(model: torch.nn.Module) -> tuple:
    """Changes whenever a parameter is replaced or modified: each parameter's storage and version counter
    (``load_state_dict``, an in-place op), and the sum and norm of each trainable one. The version counter alone
    missed trl's DPO steps (transformers' Trainer, as trl runs it, writes the adapter without bumping it): with it
    alone the inference copy kept sampling (FedBis's final set) from the adapter as it was before DPO."""
    with torch.no_grad():
        return tuple((p.data_ptr(), p._version) + ((float(p.sum(dtype=torch.float64)),
                                                    float(torch.linalg.vector_norm(p, dtype=torch.float64)))
                                                   if p.requires_grad else ())
                     for p in model.parameters())


def inference_copy(model: torch.nn.Module, dtype: torch.dtype | None) -> torch.nn.Module:
    """``model`` itself when ``dtype`` is None or already its dtype; else a copy in ``dtype`` with any LoRA adapter
    merged into its weights (one matrix product a layer instead of three), in eval mode. The copy is kept while the
    model's parameters stay as they are (PE's generator never changes; POPri's changes every DPO epoch)."""
    first = next(model.parameters(), None)
    if dtype is None or first is None or first.dtype == dtype:
        return model
    key = _state_key(model)
    kept = _copies.get(model)
    if kept is not None and kept[0] == key and kept[1] == dtype:
        return kept[2]
    twin = copy.deepcopy(model)
    if hasattr(twin, "merge_and_unload"):  # a peft model: fold the adapter in
        twin = twin.merge_and_unload()
    twin = twin.to(dtype).eval()
    _copies[model] = (key, dtype, twin)
    return twin


def forget_copies() -> None:
    """Drop every kept inference copy (a benchmark that times the copy, or to free memory)."""
    _copies.clear()
