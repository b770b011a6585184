"""Loading models, tokenizers and their identity through the Hugging Face code path (a hub id or a local folder).

The hub is unreachable on the machines that build and test the project: every failure becomes a
:class:`HubLoadError` that names the model and says how to make it available.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from largefedbench.errors import InputError, LfbError
from largefedbench.models.device import get_device
from largefedbench.models.identity import n_params, weights_digest
from largefedbench.models.profiles import HubModel
from largefedbench.models.tokenizer import ensure_special_tokens

__all__ = ["HubLoadError", "check_local", "hub_advice", "hub_identity", "load_hub_causal_lm", "load_hub_tokenizer",
           "offline_note"]


def hub_advice(model_ids: Sequence[str]) -> str:
    """What to do when hub models cannot be loaded here."""
    downloads = ", ".join(f"`hf download {m}`" for m in dict.fromkeys(model_ids))
    return (
        f"To fix it: on a machine with internet access run {downloads} (gated models such as meta-llama/* also "
        "need their licence accepted on huggingface.co and `hf auth login` or HF_TOKEN) and keep the same HF_HOME; "
        "or point the profile at local folders written by save_pretrained(); or run fully offline with --profile tiny."
    )


def offline_note() -> str:
    """A sentence for error messages when HF_HUB_OFFLINE restricted the search to the local cache (else "")."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return " HF_HUB_OFFLINE is set, so only the local Hugging Face cache was searched."
    return ""


class HubLoadError(LfbError):
    """A model, tokenizer or embedder could not be obtained through the Hugging Face code path."""

    def __init__(self, role: str, source: HubModel, exc: BaseException) -> None:
        rev = f"@{source.revision}" if source.revision else ""
        detail = (str(exc).strip().splitlines() or [""])[0][:300]
        self.role, self.source = role, source
        self.line = f"{role} {source.id}{rev} ({type(exc).__name__}: {detail})"
        super().__init__(f"could not load the {self.line} through the Hugging Face Hub.{offline_note()} "
                         + hub_advice([source.id]))


def check_local(source: HubModel, role: str) -> None:
    """Refuse a local path (``/``, ``./``, ``../``, ``~``) that is not a folder, before the hub is asked."""
    path = Path(source.id).expanduser()
    if source.id.startswith(("/", "./", "../", "~")) and not path.is_dir():
        raise InputError(f"the {role} folder {path} does not exist; give a folder written by save_pretrained() or a hub id")


def load_hub_causal_lm(source: HubModel, *, device: torch.device | str | None = None, role: str = "model",
                       dtype: str | torch.dtype | None = None):
    """A causal LM through ``AutoModelForCausalLM.from_pretrained`` (hub id or local folder), on ``device``, in eval mode.

    ``dtype=None`` loads float32 (for training); ``"auto"`` keeps the checkpoint's dtype (bf16 for LLaMA-3, Qwen2.5).
    """
    from transformers import AutoModelForCausalLM

    check_local(source, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(source.id, revision=source.revision, dtype=dtype)
    except Exception as exc:  # OSError, huggingface_hub errors, ValueError: all mean "not obtainable here"
        raise HubLoadError(role, source, exc) from exc
    return model.to(get_device(device)).eval()


def load_hub_tokenizer(source: HubModel, *, role: str = "tokenizer"):
    """A tokenizer through ``AutoTokenizer.from_pretrained``, with BOS and padding set (see ``ensure_special_tokens``)."""
    from transformers import AutoTokenizer

    check_local(source, role)
    try:
        tok = AutoTokenizer.from_pretrained(source.id, revision=source.revision)
    except Exception as exc:
        raise HubLoadError(role, source, exc) from exc
    return ensure_special_tokens(tok)


def hub_identity(source: HubModel, model=None) -> dict[str, Any]:
    """How an entry names a hub model: id and revision (commit), or a local folder's weights digest; its size."""
    info: dict[str, Any] = {"id": source.id, "source": "huggingface"}
    path = Path(source.id).expanduser()
    if path.is_dir():
        info["source"] = "local folder"
        info["sha256"] = weights_digest(path)
    else:
        commit = getattr(getattr(model, "config", None), "_commit_hash", None) if model is not None else None
        info["revision"] = commit or source.revision
    if model is not None:
        info["n_params"] = n_params(model)
    return info
