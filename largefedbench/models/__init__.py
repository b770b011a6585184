"""Model profiles (paper, small, cpu, tiny), tokenizers, the tiny profile's pretrained GPT-2s, embeddings (DESIGN.md §7).

One job a module: ``profiles`` (what each profile loads), ``hub`` (loading through the Hugging Face code path),
``gguf`` (the cpu profile's packaged LLM), ``tiny`` (building and pretraining the tiny GPT-2s), ``embedder``,
``tokenizer``, ``identity`` (digests and sizes for entries) and ``bundle`` (all of a profile, loaded for a snapshot).

>>> from largefedbench.data import load_snapshot
>>> from largefedbench.models import load_models
>>> bundle = load_models("tiny", load_snapshot("demo"))      # offline; builds the tiny models once per snapshot
>>> model = bundle.new_downstream()                          # the eps=0 public checkpoint, a fresh copy
"""

from __future__ import annotations

from largefedbench.models.bundle import ModelBundle, load_models
from largefedbench.models.device import get_device, model_device
from largefedbench.models.embedder import embed, embedding_cache_path, load_embedder, span_embeddings
from largefedbench.models.hub import HubLoadError, load_hub_causal_lm, load_hub_tokenizer
from largefedbench.models.identity import n_params
from largefedbench.models.profiles import (
    PROFILES,
    DownstreamTraining,
    HubModel,
    ModelProfile,
    PackagedEmbedder,
    PackagedGGUF,
    TinyGPT2,
    TrainedBPE,
    get_profile,
    list_profiles,
)
from largefedbench.models.tiny import build_tiny_gpt2, prepare_tiny_models, pretrain_lm, tiny_cache_dir
from largefedbench.models.tokenizer import (
    EOT,
    ensure_special_tokens,
    lm_sequences,
    load_tiktoken,
    load_trained_tokenizer,
    pad_batch,
    save_tiktoken,
    save_trained_tokenizer,
    train_bpe,
)

__all__ = [
    "EOT", "PROFILES", "DownstreamTraining", "HubLoadError", "HubModel", "ModelBundle", "ModelProfile", "PackagedEmbedder", "PackagedGGUF", "TinyGPT2",
    "TrainedBPE", "build_tiny_gpt2", "embed", "embedding_cache_path", "ensure_special_tokens", "get_device",
    "get_profile", "list_profiles", "lm_sequences", "load_embedder", "load_hub_causal_lm", "load_hub_tokenizer",
    "load_models", "load_tiktoken", "load_trained_tokenizer", "model_device", "n_params", "pad_batch",
    "prepare_tiny_models", "pretrain_lm", "save_tiktoken", "save_trained_tokenizer", "span_embeddings",
    "tiny_cache_dir", "train_bpe",
]
