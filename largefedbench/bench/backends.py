"""Generation backends beside our torch loop, for ``lfb bench llm --backend`` (docs/speed.md). Each one converts
the generator — any LoRA adapter merged into its weights first, which a method would pay after every round that
changes the adapter —, samples new tokens at given settings, and, where it can, gives its next-token logits after a
given prefix (the quality rule's teacher-forced measure).

- ``torch``: our loop (``generate_ids``); nothing to convert. It is the baseline and the float32 reference.
- ``ct2``: CTranslate2. ``ctranslate2.converters.TransformersConverter`` reads the saved Hugging Face folder,
  ``ctranslate2.Generator`` samples (``sampling_temperature``, ``sampling_topp``, ``sampling_topk=0``: the whole
  vocabulary); ``forward_batch`` gives the logits of every position of a prefix. float32, and int8 weights as another
  generator (they are not the model's weights; the quality rule says whether they may stand for it).
- ``ort-genai``: ONNX Runtime GenAI. Its model builder (``python -m onnxruntime_genai.models.builder -p fp32 -e
  cpu``; it imports torch, transformers, ``onnx`` and ``onnx_ir``) writes an ONNX model and ``genai_config.json``;
  ``og.Generator`` samples (``do_sample``, ``temperature``, ``top_p``, ``top_k=0``: no top-k cut). A batch is padded
  on the right with the config's pad id, which the runtime masks. A prefix is scored by appending it one token at a
  time and reading the last position's logits.

A backend runs on torch's thread count (``torch.get_num_threads()``), so speed-ups compare like with like.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from largefedbench.errors import InputError

BACKENDS = ("torch", "ct2", "ort-genai")
#: the importable modules each backend needs, and how to install them
MODULES = {"ct2": ("ctranslate2",), "ort-genai": ("onnxruntime_genai", "onnx", "onnx_ir")}
INSTALL = {"ct2": "pip install ctranslate2", "ort-genai": "pip install onnxruntime-genai onnx onnx-ir"}
DISTRIBUTION = {"torch": "torch", "ct2": "ctranslate2", "ort-genai": "onnxruntime-genai"}
AGREEMENT = 0.95  # the quality rule: top-1 agreement with float32 torch (as for bf16, llm.bf16_agreement)


class BackendError(RuntimeError):
    """A backend is installed but could not convert or load the model (the row says why)."""


def parse_backends(values: Sequence[str] | None) -> list[str]:
    """Backend names from repeated and/or comma-separated ``--backend`` values, in order, once each; torch first
    (the baseline every speed-up is against)."""
    names = ["torch"]
    for value in values or ():
        for name in (n.strip().lower() for n in value.split(",")):
            if name and name not in BACKENDS:
                raise InputError(f"--backend {name!r}: choose from {', '.join(BACKENDS)}")
            if name and name not in names:
                names.append(name)
    return names


def missing(name: str) -> str | None:
    """Why ``name`` cannot run here (its packages are not installed), or None."""
    absent = [m for m in MODULES.get(name, ()) if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return f"not installed (no {', '.join(absent)}): {INSTALL[name]}, or pip install 'largefedbench[backends]'"


def version(name: str) -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION[name])
    except importlib.metadata.PackageNotFoundError:
        return None


def export_merged(model, tokenizer, folder: Path) -> float:
    """Save ``model`` as a Hugging Face folder with its tokenizer, what the converters read; a LoRA adapter is merged
    into a copy's weights first (the model keeps its adapter, as a method that trains it on). Returns the seconds."""
    start = time.perf_counter()
    plain = copy.deepcopy(model).merge_and_unload() if hasattr(model, "merge_and_unload") else model
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return time.perf_counter() - start


class Backend:
    """A converted generator. ``seconds``: the one-off conversion by stage (``convert``, ``load``)."""

    name = ""
    label = ""
    dtype = ""
    same_weights = True  # False: quantized weights, another generator unless it passes the quality rule
    scoring = ""  # how prefix_logits scores a given prefix ("" when it cannot)

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def generate(self, rows: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 batch_size: int, seed: int, eos: set[int]) -> list[list[int]]:
        """New token ids after each prompt of ``rows`` (cut before the first of ``eos``); greedy at temperature 0."""
        raise NotImplementedError

    def prefix_logits(self, prompt: Sequence[int], continuation: Sequence[int]) -> np.ndarray | None:
        """[len(continuation), vocab]: row k is the next-token logits after ``prompt + continuation[:k]``; None where
        the backend cannot score a given prefix."""
        return None

    def close(self) -> None:
        """Free the converted model."""


def _cut(row: Sequence[int], eos: set[int]) -> list[int]:
    row = [int(t) for t in row]
    return row[: next((k for k, t in enumerate(row) if t in eos), len(row))]


class CT2(Backend):
    """CTranslate2's ``Generator`` on the folder converted with ``quantization=compute_type``."""

    name = "ct2"
    scoring = "teacher-forced: Generator.forward_batch's logits at every position of the float32 prefix"

    def __init__(self, folder: Path, out: Path, tokenizer, *, compute_type: str = "float32", threads: int = 1) -> None:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter

        super().__init__()
        self.dtype, self.label, self.same_weights = compute_type, f"ct2 {compute_type}", compute_type == "float32"
        self.tokenizer = tokenizer
        start = time.perf_counter()
        try:
            TransformersConverter(str(folder)).convert(str(out), quantization=compute_type, force=True)
        except (ValueError, NotImplementedError, RuntimeError) as err:
            raise BackendError(f"TransformersConverter failed: {type(err).__name__}: {err}") from err
        converted = time.perf_counter()
        self.generator = ctranslate2.Generator(str(out), device="cpu", compute_type=compute_type, intra_threads=threads)
        self.seconds = {"convert": converted - start, "load": time.perf_counter() - converted}

    def generate(self, rows, *, max_new_tokens, temperature, top_p, batch_size, seed, eos):
        import ctranslate2

        ctranslate2.set_random_seed(int(seed))
        greedy = temperature == 0
        # generate_batch takes token strings: the tokenizer's own, from which the converter built the vocabulary;
        # include_prompt_in_result=False prefills the prompts and makes max_length the new tokens alone
        results = self.generator.generate_batch(
            [self.tokenizer.convert_ids_to_tokens(list(r)) for r in rows], max_batch_size=batch_size,
            max_length=max_new_tokens, include_prompt_in_result=False, end_token=sorted(eos),
            sampling_topk=1 if greedy else 0, sampling_topp=1.0 if greedy else top_p,
            sampling_temperature=1.0 if greedy else temperature)
        return [_cut(r.sequences_ids[0], eos) for r in results]

    def prefix_logits(self, prompt, continuation):
        ids = [int(t) for t in (*prompt, *continuation[:-1])]
        return np.asarray(self.generator.forward_batch([ids]))[0, len(prompt) - 1:]

    def close(self) -> None:
        del self.generator


class OrtGenAI(Backend):
    """ONNX Runtime GenAI on the folder its model builder writes (fp32, CPU execution provider)."""

    name, label, dtype = "ort-genai", "ort-genai fp32", "float32"
    scoring = "teacher-forced: the float32 prefix appended one token at a time, og.Generator.get_logits after each"
    #: the runtime refuses a generator of more rows ("batch_size (64) must be in [1, 32]", 0.18): a larger batch runs
    #: as consecutive generators of at most this many rows, and the report says so
    MAX_ROWS = 32

    def __init__(self, folder: Path, out: Path, *, threads: int = 1) -> None:
        import onnxruntime_genai as og

        super().__init__()
        start = time.perf_counter()
        command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(folder), "-o", str(out),
                   "-p", "fp32", "-e", "cpu", "-c", str(out.parent / f"{out.name}-cache")]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode or not (out / "genai_config.json").is_file():
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            raise BackendError(f"the model builder failed (exit {done.returncode}): {' | '.join(lines[-3:]) or 'no output'}")
        converted = time.perf_counter()
        config = og.Config(str(out))
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": int(threads)}}}}))
        self.model = og.Model(config)
        self.pad_id = int(json.loads((out / "genai_config.json").read_text())["model"]["pad_token_id"])
        self.seconds = {"convert": converted - start, "load": time.perf_counter() - converted}

    def _generator(self, batch: int, max_length: int, **search):
        import onnxruntime_genai as og

        params = og.GeneratorParams(self.model)
        params.set_search_options(batch_size=batch, max_length=max_length, **search)
        return og.Generator(self.model, params)

    def generate(self, rows, *, max_new_tokens, temperature, top_p, batch_size, seed, eos):
        if any(self.pad_id in r for r in rows):
            raise BackendError(f"a prompt holds the pad id {self.pad_id}, which ort-genai masks as padding")
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out: list[list[int]] = [[] for _ in rows]
        search = ({"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0} if temperature > 0
                  else {"do_sample": False})
        for lo in range(0, len(order), min(batch_size, self.MAX_ROWS)):
            chunk = order[lo : lo + min(batch_size, self.MAX_ROWS)]
            width = max(len(rows[i]) for i in chunk)
            ids = np.full((len(chunk), width), self.pad_id, dtype=np.int32)
            for k, i in enumerate(chunk):
                ids[k, : len(rows[i])] = rows[i]
            extra = {"random_seed": int(seed) + lo} if temperature > 0 else {}
            gen = self._generator(len(chunk), width + max_new_tokens, **search, **extra)
            gen.append_tokens(ids)
            while not gen.is_done():
                gen.generate_next_token()
            for k, i in enumerate(chunk):
                out[i] = _cut(gen.get_sequence(k)[width:], eos)
        return out

    def prefix_logits(self, prompt, continuation):
        gen = self._generator(1, len(prompt) + len(continuation) + 1, do_sample=False)
        gen.append_tokens(np.asarray([prompt], dtype=np.int32))
        rows = [gen.get_logits()[0, -1].copy()]
        for token in continuation[:-1]:
            gen.append_tokens(np.asarray([[token]], dtype=np.int32))
            rows.append(gen.get_logits()[0, -1].copy())
        return np.stack(rows)

    def close(self) -> None:
        del self.model


def variants(name: str, folder: Path, workdir: Path, tokenizer, *, threads: int) -> list[tuple[str, Callable[[], Backend]]]:
    """``(label, open)`` for each generator of backend ``name``: ``open()`` converts the Hugging Face ``folder`` into
    ``workdir`` and loads it (BackendError where that fails). ct2 gives float32 and int8, ort-genai fp32; one at a
    time, so a run holds one converted copy beside the torch model."""
    if name == "ct2":
        return [(f"ct2 {t}", lambda t=t: CT2(folder, workdir / f"ct2-{t}", tokenizer, compute_type=t, threads=threads))
                for t in ("float32", "int8")]
    if name == "ort-genai":
        return [(OrtGenAI.label, lambda: OrtGenAI(folder, workdir / "ort-genai", threads=threads))]
    raise InputError(f"no converted generator for backend {name!r}")


@dataclass
class Reference:
    """float32 torch on some prompts: their ids, its greedy continuations, and its next-token log-probabilities at
    each position of them (``[len(continuation), vocab]``, None for an empty continuation)."""

    rows: list[list[int]]
    greedy: list[list[int]]
    log_probs: list[torch.Tensor | None]
    eos: set[int]
    new_tokens: int


@torch.inference_mode()
def float32_reference(model, tokenizer, prompts: Sequence[str], new_tokens: int = 32) -> Reference:
    """The reference every backend is judged against: ``model`` (float32) as our loop runs it."""
    from largefedbench.synthetic.generation import _eos_ids, context_length, fit_prompt_ids, generate_ids

    rows = fit_prompt_ids(tokenizer, prompts, context_length(model) - new_tokens)
    greedy = generate_ids(model, tokenizer, prompts, max_new_tokens=new_tokens, temperature=0, dtype=None)
    log_probs: list[torch.Tensor | None] = []
    for row, cont in zip(rows, greedy):
        if not cont:
            log_probs.append(None)
            continue
        logits = model(input_ids=torch.as_tensor([row + cont[:-1]])).logits[0, len(row) - 1:].float()
        log_probs.append(torch.log_softmax(logits, -1))
    return Reference(rows, greedy, log_probs, _eos_ids(model, tokenizer), new_tokens)


def agreement(backend: Backend, ref: Reference, *, batch_size: int = 16) -> dict:
    """``backend`` against float32 torch on ``ref``'s prompts: teacher-forced top-1 agreement and mean KL(float32 ‖
    backend) in nats per token where the backend scores a given prefix, and the free-running greedy agreement (one
    near-tie changes every later token). The verdict reads the teacher-forced measure where there is one."""
    own = backend.generate(ref.rows, max_new_tokens=ref.new_tokens, temperature=0, top_p=1.0, batch_size=batch_size,
                           seed=0, eos=ref.eos)
    n_new = ref.new_tokens
    free = [a == b for x, y in zip(ref.greedy, own) for a, b in zip(x + [-1] * (n_new - len(x)), y + [-2] * (n_new - len(y)))]
    agree, kl, n = 0, 0.0, 0
    scored = bool(backend.scoring)
    for row, cont, hi in zip(ref.rows, ref.greedy, ref.log_probs):
        if hi is None or not scored:
            continue
        lo = torch.log_softmax(torch.as_tensor(backend.prefix_logits(row, cont), dtype=torch.float32), -1)
        agree += int((hi.argmax(-1) == lo.argmax(-1)).sum())
        kl += float((hi.exp() * (hi - lo)).sum())
        n += len(cont)
    result = {"free_running_agreement": float(np.mean(free)) if free else float("nan"),
              "measure": backend.scoring or "free-running: the backend's own greedy continuation (no prefix scoring)",
              "prompts": len(ref.rows), "new_tokens": n_new}
    if scored:
        result.update(teacher_forced_agreement=agree / max(n, 1), kl_nats_per_token=kl / max(n, 1), tokens=n)
    value = result["teacher_forced_agreement"] if scored else result["free_running_agreement"]
    result["passed"] = bool(value >= AGREEMENT)
    return result
