"""The tiny and cpu profiles' GPT-2s: built from a config, pretrained on the run's public corpus, cached.

Cache layout of the tiny profile (one folder per profile, snapshot and model config; written to a temporary
folder and published with one rename, so a killed build never leaves a half-written cache)::

    $LFB_HOME/models/<profile>/<snapshot content sha256[:16] | public kind-corpus sha256[:16]>/<config fingerprint[:12]>/
        manifest.json            configs, snapshot, digests, parameter counts, pretraining statistics
        tokenizer/tokenizer.json the trained byte-level BPE (HF tokenizers)
        tokenizer/bpe.tiktoken   the same BPE for tiktoken (identical ids)
        generator/               save_pretrained() of the pretrained generator
        downstream/              save_pretrained() of the pretrained downstream model (the eps=0 checkpoint)

The cpu profile's downstream on the generic corpus is not pretrained: its checkpoint ships in ``checkpoints/``
(see :data:`SHIPPED_CHECKPOINTS`) and is copied into the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from largefedbench.environment import cpu_bf16
from largefedbench.errors import InputError
from largefedbench.io import atomic_write_json, build_dir_once
from largefedbench.models.identity import n_params, weights_digest
from largefedbench.models.profiles import ModelProfile, TinyGPT2, TrainedBPE
from largefedbench.models.tokenizer import (
    lm_sequences,
    load_trained_tokenizer,
    pad_batch,
    save_trained_tokenizer,
    train_bpe,
)
from largefedbench.paths import home_root

__all__ = ["TINY_DOWNSTREAM_ID", "TINY_GENERATOR_ID", "build_tiny_gpt2", "built_roles", "load_tiny_lm",
           "prepare_tiny_models", "pretrain_lm", "pretraining_sequences", "tiny_cache_dir", "tiny_fingerprint"]

log = logging.getLogger(__name__)
CACHE_VERSION = 1
TINY_GENERATOR_ID = "lfb/tiny-gpt2"  # the id the cutoff registry knows
TINY_DOWNSTREAM_ID = "lfb/tiny-gpt2-downstream"


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


#: CPU threads every pretraining runs on. The weights depend on how float sums are split across threads (3,600
#: steps of the cpu downstream on 1 thread and on 2 end 0.4 points of top-1 apart), and the board's ε = 0 model is
#: one checkpoint: a fixed count gives it on every machine with the same CPU kernels, whatever its core count.
PRETRAIN_THREADS = 2


@contextmanager
def cpu_threads(device: torch.device, n: int):
    """Run the block on ``n`` torch threads when ``device`` is the CPU (CUDA kernels do not use them)."""
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pretrain_lm(model, sequences: Sequence[Sequence[int]], *, steps: int, batch_size: int, lr: float, seed: int,
                pad_id: int, schedule: str = "constant", progress: bool = True, desc: str = "pretraining") -> dict[str, Any]:
    """Train a causal LM with AdamW for ``steps`` batches drawn without replacement (reshuffled each pass), at a
    constant ``lr`` or one that decays to 0 on a cosine (``schedule="cosine"``); on a CPU on
    :data:`PRETRAIN_THREADS` threads, so the weights do not depend on the machine's core count."""
    if not sequences:
        raise InputError("no pretraining sequences (the public split is empty?)")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if schedule == "cosine" else None
    model.train()
    losses, tokens, order, pos = [], 0, torch.empty(0, dtype=torch.long), 0
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]), cpu_threads(device, PRETRAIN_THREADS):
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
            if decay is not None:
                decay.step()
            losses.append(loss.item())
            tokens += int(mask.sum())
    model.eval()
    return {"steps": steps, "batch_size": batch_size, "lr": lr, "schedule": schedule, "tokens": tokens,
            "threads": PRETRAIN_THREADS if device.type == "cpu" else None, "device": device.type,
            "cpu_bf16": cpu_bf16() if device.type == "cpu" else None,  # the kernels the weights came from
            "seconds": round(time.perf_counter() - start, 3),
            "first_loss": round(losses[0], 4), "final_loss": round(float(np.mean(losses[-10:])), 4)}


def built_roles(profile: ModelProfile) -> list[tuple[str, TinyGPT2]]:
    """The models LargeFedBench itself builds and pretrains for ``profile`` (the downstream, and a tiny generator)."""
    return [(role, spec) for role, spec in (("generator", profile.generator), ("downstream", profile.downstream))
            if isinstance(spec, TinyGPT2)]


def tiny_fingerprint(profile: ModelProfile) -> str:
    """A digest of everything that shapes the tiny cache (tokenizer and both model specs)."""
    payload = {"v": CACHE_VERSION, "tokenizer": asdict(profile.tokenizer), "generator": _spec(profile.generator),
               "downstream": _spec(profile.downstream)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _spec(spec) -> dict[str, Any]:
    """A model spec as fingerprinted: the constant schedule (the default before it was a setting) is left out, so
    the caches built before keep their folders."""
    out = asdict(spec)
    if out.get("pretrain_schedule") == "constant":
        del out["pretrain_schedule"]
    return out


#: ε = 0 checkpoints published with the package, one folder per (profile, public corpus, model config): pretrained
#: again, the weights differ on a CPU whose kernels round otherwise (AMX or not) or on another thread count, and every
#: entry's references start from them, so the checkpoint is shipped rather than rebuilt (docs/evaluation.md)
SHIPPED_CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def shipped_downstream(profile: ModelProfile, kind: str, corpus_sha256: str | None = None) -> Path | None:
    """The folder of the ε = 0 checkpoint the package ships for ``profile`` on public corpora of ``kind`` (and with
    that ``corpus_sha256``, when given), or None where the checkpoint is built where the run happens."""
    if kind == "split":
        return None
    corpus = corpus_sha256[:16] if corpus_sha256 else "*"
    found = sorted(folder for folder in SHIPPED_CHECKPOINTS.glob(
        f"{profile.name}-downstream-{kind}-{corpus}-{tiny_fingerprint(profile)[:12]}")
        if (folder / "model.safetensors").is_file())
    return found[-1] if found else None


def _shipped_for(profile: ModelProfile, corpus) -> Path | None:
    return None if corpus is None else shipped_downstream(profile, corpus.kind, corpus.sha256)


def tiny_cache_dir(profile: ModelProfile, fd, root: Path | None = None, corpus=None) -> Path:
    """Where the tiny models of ``profile`` trained on the public corpus ``corpus`` (default: ``fd``'s public split)
    live (see the module docstring): a ``split`` corpus is keyed by the snapshot, another by its kind and hash; a
    shipped checkpoint gets a folder of its own, so a cache pretrained here before never stands in for it."""
    key = fd.manifest["content_sha256"][:16] if corpus is None or corpus.kind == "split" else f"{corpus.kind}-{corpus.sha256[:16]}"
    shipped = "-shipped" if _shipped_for(profile, corpus) is not None else ""
    return home_root(root) / "models" / profile.name / key / (tiny_fingerprint(profile)[:12] + shipped)


def _install_shipped(shipped: Path, target: Path) -> dict[str, Any]:
    """Copy a shipped checkpoint into the cache (checking its hash); returns its manifest entry."""
    import shutil

    record = json.loads((shipped / "pretraining.json").read_text())
    target.mkdir(parents=True)
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copyfile(shipped / name, target / name)
    digest = weights_digest(target)
    if digest != record["sha256"]:
        raise InputError(f"the shipped checkpoint {shipped.name} hashes to {digest[:12]}, not {record['sha256'][:12]}: "
                         "the installed package is damaged; reinstall LargeFedBench")
    return {"config": record["config"], "n_params": record["n_params"], "sha256": digest,
            "pretraining": {**record["pretraining"], "shipped": shipped.name}}


def _build_tiny(profile: ModelProfile, fd, folder: Path, progress: bool, corpus=None) -> None:
    """Train the tokenizer and pretrain both models on the public corpus, writing everything into ``folder``."""
    assert isinstance(profile.tokenizer, TrainedBPE)
    public = fd.public.all_spans() if corpus is None else corpus.spans
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
        **({"public": corpus.describe()} if corpus is not None else {}),
        "tokenizer": {"kind": "trained byte-level BPE", "n_vocab": len(tokenizer), "sha256": tok_digests,
                      "seconds": round(time.perf_counter() - t0, 3), "config": asdict(profile.tokenizer)},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    shipped = _shipped_for(profile, corpus)
    for role, spec in built_roles(profile):
        if role == "downstream" and shipped is not None:
            manifest[role] = _install_shipped(shipped, folder / role)
            continue
        model = build_tiny_gpt2(spec, len(tokenizer), tokenizer.eos_token_id)
        stats = pretrain_lm(model, pretraining_sequences(tokenizer, public, spec), steps=spec.pretrain_steps,
                            batch_size=spec.pretrain_batch_size, lr=spec.pretrain_lr, schedule=spec.pretrain_schedule, seed=spec.seed,
                            pad_id=tokenizer.pad_token_id, progress=progress, desc=f"pretraining tiny {role}")
        model.save_pretrained(folder / role)
        manifest[role] = {"config": asdict(spec), "n_params": n_params(model), "sha256": weights_digest(folder / role),
                          "pretraining": stats}
        log.info("pretrained the tiny %s (%d params) in %.1f s, loss %.2f -> %.2f", role, manifest[role]["n_params"],
                 stats["seconds"], stats["first_loss"], stats["final_loss"])
    atomic_write_json(folder / "manifest.json", manifest)


def prepare_tiny_models(profile: ModelProfile, fd, *, root: Path | None = None, progress: bool = True,
                        corpus=None) -> tuple[Path, bool]:
    """The cache folder of the tiny models for ``fd`` trained on ``corpus`` (a ``PublicCorpus``; default ``fd``'s
    public split), building it on first use; returns ``(folder, cache_hit)``."""
    final = tiny_cache_dir(profile, fd, root, corpus)
    hit = build_dir_once(final, "manifest.json", lambda tmp: _build_tiny(profile, fd, tmp, progress, corpus))
    return final, hit


def load_tiny_lm(folder: Path, device: torch.device):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder)).to(device).eval()
