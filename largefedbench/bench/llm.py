"""``lfb bench llm``: the ``cpu`` profile's generator (SmolLM2-135M) sampling and a DPO step, against this machine's
limit, measured in the same run (docs/speed.md).

- **Limit.** A new token costs ≈ 2 × parameters FLOPs (every weight once in a multiply-add); a DPO step on a LoRA
  generator ≈ 4 × parameters FLOPs per token of the policy's chosen and rejected sequences (forward, and the
  backward pass to the activations; the frozen weights get no gradient) plus 2 × per token for the reference
  policy's forward. The limit divides those FLOPs by the GEMM rate measured here on a Llama-sized projection, in
  float32 and in bf16 — the rate of the dtype the work ran in — with 2,048 rows (the machine's peak; with AMX, bf16
  reaches it only on large products) and with as many rows as the batch (``limit_at_batch``: the rate a decode
  step's matrix products can reach at that batch size).
- **Sampling** (``continuation``, ``few_shot``, ``instruction``): new tokens/s per batch size, for the prompt formats
  of the presets, at the cpu preset's sampling (temperature 0.8, top-p 0.95), through ``generate_ids`` as methods
  call it; and the same for HF ``generate`` at float32 (the naive reference this replaced).
- **Quality** of sampling in bf16 against float32: greedy continuations of continuation prompts in float32;
  each position re-scored by the bf16 copy given the float32 prefix (teacher-forced top-1 agreement, mean KL), the
  bf16 copy's own greedy continuation (free-running agreement: one near-tie changes all later tokens), and the FID
  to the generic corpus of sampled continuations in each dtype over 3 seeds (the shift of the mean against the
  standard error of the difference).
- Tokens/s counts new tokens; ``work_tokens_per_s`` adds each distinct prompt's tokens (prefilled once), which is
  what few-shot prompts of ~600 tokens spend most of their time on.
- **DPO**: seconds a step (batch 2 pairs, as the cpu preset) with the reference scored at every step and with it
  precomputed once (the default).
- **Backends** (``--backend``, ``bench/backends.py``): the continuation prompts at the same batch sizes and sampling
  through each installed backend beside our loop: new tokens/s, the fraction of the float32 limit, the one-off
  conversion (a LoRA merged into the weights, the folder saved, converted and loaded: what a method pays per round
  that changes its adapter), the speed-up over our loop in the dtype runs sample in, and the quality rule against
  float32 torch (top-1 agreement >= 95 %, teacher-forced where the backend scores a given prefix). A backend is
  selectable for runs at >= 1.5x our loop at every batch size measured and passing the rule.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from largefedbench.models.precision import forget_copies, inference_copy

SAMPLING = {"temperature": 0.8, "top_p": 0.95}
DPO_EPOCHS = 2  # the cpu preset's
CASES = ("continuation", "few_shot", "instruction")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SELECTABLE_SPEEDUP = 1.5  # a backend's speed-up over our loop, at every batch size measured, to be selectable in runs


def gemm_rate(dtype: torch.dtype, dim: int = 576, out: int = 1536, rows: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` GEMM rate in FLOP/s of (rows × dim) @ (dim × out) in ``dtype``."""
    a, b = torch.randn(rows, dim, dtype=dtype), torch.randn(dim, out, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * rows * dim * out / best


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def sampling_rates(model, tokenizer, prompts: Sequence[str], *, n_per_prompt: int, new_tokens: int,
                   batch_sizes: Sequence[int], dtype: torch.dtype | None, seed: int = 0) -> dict[int, tuple[float, float]]:
    """(new tokens/s, work tokens/s) of ``generate_ids`` at each batch size: tokens actually generated (EOS cut),
    and those plus the prompts' tokens (each distinct prompt is prefilled once per batch it appears in; counted once)."""
    from largefedbench.synthetic.generation import generate_ids

    prompt_tokens = sum(len(ids) for ids in tokenizer(list(prompts))["input_ids"])
    rates = {}
    for size in batch_sizes:
        forget_copies()  # each timing pays for its bf16 copy, as a method's sampling call after a DPO epoch does
        ids, seconds = _timed(lambda size=size: generate_ids(model, tokenizer, prompts, n_per_prompt=n_per_prompt, max_new_tokens=new_tokens,
                                                   batch_size=size, seed=seed, dtype=dtype, **SAMPLING))
        new = sum(map(len, ids))
        rates[size] = (new / seconds, (new + prompt_tokens) / seconds)
    return rates


@torch.inference_mode()
def hf_generate_rate(model, tokenizer, prompts: Sequence[str], *, n_per_prompt: int, new_tokens: int, batch_size: int) -> float:
    """New tokens/s of HF ``generate`` (float32, top-p over the sorted vocabulary) — the path ``generate_ids`` replaced."""
    rows = [p for p in prompts for _ in range(n_per_prompt)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    tokens, seconds = 0, 0.0
    for lo in range(0, len(rows), batch_size):
        enc = tokenizer(rows[lo:lo + batch_size], return_tensors="pt", padding=True, padding_side="left")
        out, dt = _timed(lambda enc=enc: model.generate(**enc, max_new_tokens=new_tokens, do_sample=True, top_k=0, pad_token_id=pad,
                                                **SAMPLING))
        new = out[:, enc["input_ids"].shape[1]:]
        tokens += int((new != pad).sum())
        seconds += dt
    return tokens / seconds


def backend_rates(backend, rows: Sequence[Sequence[int]], *, new_tokens: int, batch_sizes: Sequence[int], eos: set[int],
                  seed: int = 0) -> dict[int, tuple[float, float]]:
    """(new tokens/s, work tokens/s) of a converted ``backend`` (``bench/backends.py``) sampling one continuation of
    each prompt of ``rows`` (token ids, distinct) at :data:`SAMPLING`, at each batch size, counted as
    :func:`sampling_rates` counts ours."""
    prompt_tokens = sum(map(len, rows))
    rates = {}
    for size in batch_sizes:
        ids, seconds = _timed(lambda size=size: backend.generate(rows, max_new_tokens=new_tokens, batch_size=size, seed=seed,
                                                                 eos=eos, **SAMPLING))
        new = sum(map(len, ids))
        rates[size] = (new / seconds, (new + prompt_tokens) / seconds)
    return rates


@torch.inference_mode()
def bf16_agreement(model, tokenizer, prompts: Sequence[str], new_tokens: int = 32) -> dict[str, float]:
    """bf16 against float32 on float32's greedy continuations of ``prompts``: teacher-forced top-1 agreement, mean
    KL(float32 ‖ bf16) in nats per token, and the free-running greedy agreement over the first ``new_tokens``."""
    from largefedbench.synthetic.generation import generate_ids

    low = inference_copy(model, torch.bfloat16)
    greedy = generate_ids(model, tokenizer, prompts, max_new_tokens=new_tokens, temperature=0, dtype=None)
    own = generate_ids(low, tokenizer, prompts, max_new_tokens=new_tokens, temperature=0, dtype=None)
    free = [a == b for x, y in zip(greedy, own) for a, b in zip(x + [-1] * (new_tokens - len(x)), y + [-2] * (new_tokens - len(y)))]
    agree, kl, n = 0, 0.0, 0
    for prompt, cont in zip(prompts, greedy):
        if not cont:
            continue
        ids = torch.as_tensor([tokenizer(prompt)["input_ids"] + cont])
        start = ids.shape[1] - len(cont) - 1
        hi = model(input_ids=ids).logits[0, start:-1].float()
        lo = low(input_ids=ids).logits[0, start:-1].float()
        agree += int((hi.argmax(-1) == lo.argmax(-1)).sum())
        p, q = torch.log_softmax(hi, -1), torch.log_softmax(lo, -1)
        kl += float((p.exp() * (p - q)).sum())
        n += len(cont)
    return {"teacher_forced_agreement": agree / max(n, 1), "kl_nats_per_token": kl / max(n, 1),
            "free_running_agreement": float(np.mean(free)) if free else float("nan"), "tokens": n}


def fid_shift(model, tokenizer, prompts: Sequence[str], embedder, reference: np.ndarray, *, new_tokens: int,
              batch_size: int, seeds: Sequence[int] = (0, 1, 2)) -> dict[str, float]:
    """FID to ``reference`` of one sampled continuation per prompt in float32 and in bf16, for each of ``seeds``:
    the shift of the mean and the standard error of that difference (the sampling noise it is judged against)."""
    from largefedbench.evaluation.fid import fid_to
    from largefedbench.models import embed
    from largefedbench.synthetic.generation import decode_continuations, generate_ids

    def fid(dtype, seed):
        ids = generate_ids(model, tokenizer, prompts, max_new_tokens=new_tokens, batch_size=batch_size, seed=seed, dtype=dtype,
                           **SAMPLING)
        return fid_to(embed(decode_continuations(tokenizer, ids, stop=()), embedder), reference)

    fp32 = np.array([fid(torch.float32, s) for s in seeds])
    bf16 = np.array([fid(torch.bfloat16, s) for s in seeds])
    se = float(np.sqrt((fp32.var(ddof=1) + bf16.var(ddof=1)) / len(seeds))) if len(seeds) > 1 else float("nan")
    return {"fid_float32": float(fp32.mean()), "fid_bf16": float(bf16.mean()), "fid_shift": float(abs(bf16.mean() - fp32.mean())),
            "fid_shift_se": se, "fid_float32_sd": float(fp32.std(ddof=1)) if len(seeds) > 1 else float("nan"),
            "samples": len(prompts), "seeds": len(seeds)}


def dpo_seconds_per_step(model, tokenizer, prompts, chosen, rejected, *, precompute_reference: bool) -> tuple[float, int, dict]:
    """Seconds a DPO step (batch 2, 2 epochs, the cpu preset's β and lr) on a fresh LoRA copy of ``model``; the
    whole update divided by its steps, reference scoring included."""
    from largefedbench.synthetic.dpo import dpo_update
    from largefedbench.synthetic.lora import add_lora

    policy = add_lora(copy.deepcopy(model), rank=4, alpha=8, seed=0)
    metrics, seconds = _timed(lambda: dpo_update(policy, tokenizer, prompts, chosen, rejected, beta=0.1, lr=5e-4, epochs=DPO_EPOCHS,
                                                 batch_size=2, seed=0, precompute_reference=precompute_reference))
    return seconds / metrics["steps"], metrics["steps"], metrics


def dpo_step_flops(tokenizer, prompts, chosen, rejected, n_params: int, *, precomputed: bool, batch_size: int = 2,
                   epochs: int = DPO_EPOCHS) -> float:
    """FLOPs of one DPO step on a LoRA model, averaged over the update's steps: 4·P per policy token every epoch,
    2·P per reference token every epoch (once when ``precomputed``)."""
    tokens = sum(len(tokenizer(p + c)["input_ids"]) + len(tokenizer(p + r)["input_ids"]) for p, c, r in zip(prompts, chosen, rejected))
    steps = epochs * -(-len(prompts) // batch_size)
    return n_params * tokens * (4 * epochs + 2 * (1 if precomputed else epochs)) / steps


class _Clients:
    """What a client update reads of its chunk: each client's own generator (as the federation seeds it)."""

    def rng(self, i: int, *salt: int) -> np.random.Generator:
        return np.random.default_rng([i, *salt])


def dp_client_step(model, tokenizer, clients: Sequence[Sequence[str]], settings) -> tuple[float, float]:
    """Seconds and FLOPs of one cohort's client updates of DP generator fine-tuning under ``settings``
    (``FedAvgSettings``: dp-resample's cpu preset in :func:`run_llm_bench`), on a fresh rank-4 LoRA copy of
    ``model`` on its attention weights; FLOPs ≈ 4 × parameters per trained token (the forward pass, and the backward
    pass to the activations: the frozen weights get no gradient; the adapter's own are negligible)."""
    from largefedbench.fedtrain import FlatParams
    from largefedbench.fedtrain.generator import attention_targets, conditional_sequences, generator_update
    from largefedbench.models import n_params
    from largefedbench.synthetic.lora import add_lora

    policy = add_lora(copy.deepcopy(model), rank=4, alpha=8, seed=0, target_modules=attention_targets(model))
    update = generator_update(FlatParams(policy), tokenizer, settings, seed=0)
    spans = [list(c) for c in clients]
    tokens = sum(len(e.ids) for e in conditional_sequences(tokenizer, [""] * sum(map(len, spans)),
                                                           [t for c in spans for t in c], settings.max_len))
    update(_Clients(), spans[:1])  # warm-up: the first call builds the kernels
    _, seconds = _timed(lambda: update(_Clients(), spans))
    return seconds, 4.0 * n_params(model) * tokens


def format_table(report: dict[str, Any]) -> str:
    """The report as a plain-text table (what ``lfb bench llm`` prints)."""
    lines = [f"GEMM: float32 {report['gemm_gflops']['float32']:.1f} GFLOP/s, bf16 {report['gemm_gflops']['bfloat16']:.1f} "
             f"GFLOP/s; generator {report['n_params'] / 1e6:.1f}M parameters; {report['threads']} threads"]
    if any(report.get(name) for name in CASES):
        f32_limit = report["gemm_gflops"]["float32"] * 1e9 / (2 * report["n_params"])
        lines.append("limit: new tokens/s at the GEMM rate of the row's own dtype (bf16 is the fastest arithmetic where "
                     "the CPU has it natively, and what runs sample in there); of f32: the same tokens/s against "
                     "float32's limit, beside it")
        lines.append(f"{'case':<14}{'dtype':<10}{'batch':>6}{'tok/s':>9}{'limit':>9}{'of limit':>10}{'of f32':>8}{'at batch':>10}"
                     f"{'of it':>10}{'work t/s':>10}{'of limit':>9}")
    for name in CASES:
        case = report.get(name)
        if not case:
            continue
        for row in case["rows"]:
            lines.append(f"{name:<14}{row['dtype']:<10}{row['batch']:>6}{row['tokens_per_s']:>9.1f}{row['limit']:>9.0f}"
                         f"{row['fraction_of_limit']:>10.1%}{row['tokens_per_s'] / f32_limit:>8.1%}"
                         f"{row['limit_at_batch']:>10.0f}{row['fraction_of_limit_at_batch']:>10.1%}"
                         + (f"{row['work_tokens_per_s']:>10.1f}{row['work_fraction_of_limit']:>9.1%}" if row["work_tokens_per_s"] else ""))
    if "dpo" in report:
        for row in report["dpo"]["rows"]:
            lines.append(f"{'dpo step':<14}{row['variant']:<24}{row['seconds_per_step']:>7.2f} s (limit {row['limit']:.2f} s, "
                         f"{row['fraction_of_limit']:.1%})")
    if "dp_client_step" in report:
        c = report["dp_client_step"]
        lines.append(f"{'dp client step':<14}{c['dtype']:<10}{c['clients']:>6} clients, {c['seconds_per_client']:.2f} s a client "
                     f"(limit {c['limit_seconds_per_client']:.2f} s, {c['fraction_of_limit']:.1%}; of the bf16 limit "
                     f"{c['fraction_of_bf16_limit']:.1%})")
    if "quality" in report:
        q = report["quality"]
        lines.append(f"bf16 vs float32: teacher-forced top-1 agreement {q['teacher_forced_agreement']:.1%}, KL "
                     f"{q['kl_nats_per_token']:.4f} nats/token, free-running greedy agreement {q['free_running_agreement']:.1%}"
                     + (f"; mean FID over {q['seeds']} seeds {q['fid_float32']:.4f} (float32) vs {q['fid_bf16']:.4f} (bf16), "
                        f"shift {q['fid_shift']:.4f} ± {q['fid_shift_se']:.4f}" if "fid_shift" in q else "")
                     + f" -> {'PASS' if q['passed'] else 'FAIL'}")
    if "backends" in report:
        lines += _backends_table(report["backends"])
    return "\n".join(lines)


def _backends_table(b: dict[str, Any]) -> list[str]:
    lines = [f"backends: {b['prompts']} continuation prompts × {b['new_tokens']} new tokens, temperature "
             f"{b['sampling']['temperature']}, top-p {b['sampling']['top_p']}, {b['threads']} threads; x torch: against "
             f"{b['baseline']}; convert: merge a LoRA + save + convert + load",
             f"{'generator':<18}{'batch':>6}{'tok/s':>9}{'of limit':>10}{'at batch':>10}{'x torch':>9}{'convert s':>11}  quality"]
    for g in b["generators"]:
        if not g.get("installed") or "error" in g:
            lines.append(f"{g['label']:<18}{'-':>6}  {g.get('reason') or g.get('error')}")
            continue
        q = g.get("quality") or {}
        if "teacher_forced_agreement" in q:
            verdict = f"teacher-forced {q['teacher_forced_agreement']:.1%}, free-running {q['free_running_agreement']:.1%}"
        elif "free_running_agreement" in q:
            verdict = f"free-running {q['free_running_agreement']:.1%}"
        else:
            verdict = q.get("measure", "not checked")
        verdict += f" -> {'PASS' if q.get('passed') else 'FAIL'}" if q else ""
        verdict += ("; baseline" if g["backend"] == "torch" else "; selectable" if g["selectable"] else "; not selectable")
        verdict += "".join(f" ({g[k]})" for k in ("note", "note_rows") if g.get(k))
        for i, r in enumerate(g["rows"]):
            lines.append(f"{g['label']:<18}{r['batch']:>6}{r['tokens_per_s']:>9.1f}{r['fraction_of_limit']:>10.1%}"
                         f"{r['fraction_of_limit_at_batch']:>10.1%}{r['speedup_over_torch']:>9.2f}"
                         f"{g['conversion_seconds']:>11.1f}" + (f"  {verdict}" if i == 0 else ""))
    lines.append(f"selectable for runs: {b['selectable_rule']}; quality: {b['quality_rule']}")
    return lines


def run_llm_bench(*, prompts: int = 64, new_tokens: int = 48, batch_sizes: Sequence[int] = (16, 64),
                  fid_samples: int = 256, dpo_pairs: int = 8, clients: int = 16, cases: Sequence[str] = CASES,
                  dtypes: Sequence[str] = tuple(DTYPES), backends: Sequence[str] = ("torch",), root=None,
                  log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Everything above on the cpu profile's generator; returns the report (``--json``). ``cases`` and ``dtypes``
    choose the sampling cases and their dtypes (the bf16 quality check runs where bfloat16 is among them);
    ``backends`` the backends beside ours (``bench/backends.py``; torch, the baseline, always)."""
    from largefedbench.data.public_corpus import read_generic
    from largefedbench.models import n_params
    from largefedbench.models.gguf import prepare_gguf_model
    from largefedbench.models.hub import load_hub_causal_lm, load_hub_tokenizer
    from largefedbench.models.profiles import SMOLLM2_135M, HubModel
    from largefedbench.synthetic.generation import decode_continuations, generate_ids
    from largefedbench.synthetic.prompts import build_prompts

    folder, _, _ = prepare_gguf_model(SMOLLM2_135M, root=root)
    local = HubModel(str(folder))
    tok = load_hub_tokenizer(local, role="generator tokenizer")
    model = load_hub_causal_lm(local, device="cpu", role="generator").eval()
    params = n_params(model)
    corpus = read_generic()
    rates = {"float32": gemm_rate(torch.float32), "bfloat16": gemm_rate(torch.bfloat16)}
    report: dict[str, Any] = {"model": SMOLLM2_135M.model_id, "n_params": params, "threads": torch.get_num_threads(),
                              "gemm_gflops": {k: round(v / 1e9, 2) for k, v in rates.items()}, "sampling": dict(SAMPLING),
                              "new_tokens": new_tokens, "batch_sizes": list(batch_sizes)}
    # samples per prompt as the presets draw them: PE's variations and final sets 1, POPri's K × J 6 (the cpu preset's J)
    formats = {"continuation": ("continuation", 1), "few_shot": ("few-shot", 6), "instruction": ("instruction", 6)}
    for name, (fmt, per_prompt) in formats.items():
        if name not in cases:
            continue
        n = max(1, prompts // per_prompt)
        texts = build_prompts(corpus, n, examples_per_prompt=3, rng=np.random.default_rng(0), prompt_format=fmt, tokenizer=tok)
        rows = []
        for dtype_name in dtypes:
            dtype = DTYPES[dtype_name]
            log(f"{name}: sampling {n} × {per_prompt} × {new_tokens} tokens in {dtype_name} at batch {', '.join(map(str, batch_sizes))}")
            for size, (rate, work) in sampling_rates(model, tok, texts, n_per_prompt=per_prompt, new_tokens=new_tokens,
                                                     batch_sizes=batch_sizes, dtype=dtype).items():
                limit = rates[dtype_name] / (2 * params)
                shaped = gemm_rate(dtype, rows=size) / (2 * params)  # a decode step's GEMMs have `size` rows
                rows.append({"dtype": dtype_name, "batch": size, "tokens_per_s": round(rate, 2), "limit": round(limit, 1),
                             "fraction_of_limit": round(rate / limit, 4),
                             "fraction_of_float32_limit": round(rate / (rates["float32"] / (2 * params)), 4),
                             "limit_at_batch": round(shaped, 1),
                             "fraction_of_limit_at_batch": round(rate / shaped, 4), "work_tokens_per_s": round(work, 2),
                             "work_fraction_of_limit": round(work / limit, 4)})
        log(f"{name}: HF generate, float32, batch {max(batch_sizes)}")
        hf = hf_generate_rate(model, tok, texts, n_per_prompt=per_prompt, new_tokens=new_tokens, batch_size=max(batch_sizes))
        limit = rates["float32"] / (2 * params)
        shaped = gemm_rate(torch.float32, rows=max(batch_sizes)) / (2 * params)
        rows.append({"dtype": "hf-float32", "batch": max(batch_sizes), "tokens_per_s": round(hf, 2), "limit": round(limit, 1),
                     "fraction_of_limit": round(hf / limit, 4), "limit_at_batch": round(shaped, 1),
                     "fraction_of_limit_at_batch": round(hf / shaped, 4), "work_tokens_per_s": None,
                     "work_fraction_of_limit": None})
        best = max(rows, key=lambda r: r["tokens_per_s"])
        report[name] = {"rows": rows, "tokens_per_s": best["tokens_per_s"], "limit": best["limit"],
                        "fraction_of_limit": best["fraction_of_limit"], "dtype": best["dtype"], "batch": best["batch"],
                        "speedup_over_hf": round(best["tokens_per_s"] / hf, 2)}
    instruction = build_prompts(corpus, 16, rng=np.random.default_rng(0), prompt_format="instruction", tokenizer=tok)
    continuations = build_prompts(corpus, 16, rng=np.random.default_rng(1), prompt_format="continuation")
    if "bfloat16" in dtypes:
        report["quality"] = _bf16_quality(model, tok, corpus, continuations, fid_samples=fid_samples,
                                          new_tokens=new_tokens, batch_size=max(batch_sizes), log=log)
    texts = build_prompts(corpus, prompts, examples_per_prompt=3, rng=np.random.default_rng(0),
                          prompt_format="continuation", tokenizer=tok)  # the continuation case's
    measured = {(r["dtype"], r["batch"]): (r["tokens_per_s"], r["work_tokens_per_s"])
                for r in report.get("continuation", {}).get("rows", [])}
    report["backends"] = backends_report(model, tok, texts, continuations, backends, new_tokens=new_tokens,
                                          batch_sizes=batch_sizes, rates=rates, params=params, measured=measured,
                                          bf16_quality=report.get("quality"), log=log)
    if dpo_pairs:
        log(f"dpo: {dpo_pairs} pairs of instruction samples, batch 2")
        ids = generate_ids(model, tok, instruction[:dpo_pairs], n_per_prompt=2, max_new_tokens=48, seed=3, **SAMPLING)
        raw = decode_continuations(tok, ids, clean=False, stop=())
        pr, ch, rj = instruction[:dpo_pairs], raw[0::2], raw[1::2]
        rows = []
        for variant, pre in (("reference every step", False), ("reference precomputed", True)):
            seconds, steps, _ = dpo_seconds_per_step(model, tok, pr, ch, rj, precompute_reference=pre)
            flops = dpo_step_flops(tok, pr, ch, rj, params, precomputed=pre)
            limit = flops / rates["float32"]
            rows.append({"variant": variant, "seconds_per_step": round(seconds, 3), "steps": steps, "limit": round(limit, 3),
                         "fraction_of_limit": round(limit / seconds, 4)})
        best = min(rows, key=lambda r: r["seconds_per_step"])
        report["dpo"] = {"rows": rows, "seconds_per_step": best["seconds_per_step"], "limit": best["limit"],
                         "fraction_of_limit": best["fraction_of_limit"], "pairs": dpo_pairs, "batch_pairs": 2,
                         "epochs": DPO_EPOCHS}
    if clients:
        report["dp_client_step"] = _client_step_report(model, tok, corpus, clients, rates, log)
    return report


def _bf16_quality(model, tok, corpus, continuations, *, fid_samples: int, new_tokens: int, batch_size: int, log) -> dict[str, Any]:
    """:func:`bf16_agreement` on ``continuations`` and, with ``fid_samples``, :func:`fid_shift`; with the verdict."""
    from largefedbench.models import embed, load_embedder
    from largefedbench.models.profiles import PackagedEmbedder
    from largefedbench.synthetic.prompts import build_prompts

    log("quality: bf16 against float32 (greedy, teacher-forced)")
    quality = bf16_agreement(model, tok, continuations, new_tokens=32)
    if fid_samples:
        log(f"quality: FID of {fid_samples} sampled continuations, float32 (2 seeds) and bf16")
        embedder, _ = load_embedder(PackagedEmbedder(), device="cpu")
        reference = embed(corpus[:2048], embedder)
        many = build_prompts(corpus, fid_samples, examples_per_prompt=3, rng=np.random.default_rng(2), prompt_format="continuation")
        quality.update(fid_shift(model, tok, many, embedder, reference, new_tokens=new_tokens, batch_size=batch_size))
    quality["passed"] = bool(quality["teacher_forced_agreement"] >= 0.95
                             and quality.get("fid_shift", 0.0) < max(0.01, 2 * quality.get("fid_shift_se", 0.0)))
    quality["rule"] = ("teacher-forced top-1 agreement >= 95 % and the shift of the mean FID (3 seeds each) below "
                       "max(0.01, 2 standard errors of the difference)")
    return quality


def backends_report(model, tok, texts: Sequence[str], quality_prompts: Sequence[str], names: Sequence[str], *,
                     new_tokens: int, batch_sizes: Sequence[int], rates: dict[str, float], params: int,
                     measured: dict[tuple[str, int], tuple[float, float]], bf16_quality: dict | None, log,
                     lora_rank: int = 4) -> dict[str, Any]:
    """Our loop and each backend of ``names`` on the continuation prompts ``texts`` (one sample each): a row per
    generator. Our loop's rates are the continuation case's where it ran in that dtype (``measured``), else measured
    here; our loop runs in float32 and, where runs sample in another dtype (bf16 on a CPU with native bf16), in that
    one too, and speed-ups are against the latter. Each backend converts ``model`` with a fresh rank-``lora_rank``
    adapter merged in (B = 0: the float32 model's weights), is judged on ``quality_prompts`` and timed."""
    import tempfile
    from pathlib import Path

    from largefedbench.bench import backends as bk
    from largefedbench.models.precision import generation_dtype
    from largefedbench.synthetic.generation import context_length, fit_prompt_ids
    from largefedbench.synthetic.lora import add_lora

    limit = rates["float32"] / (2 * params)
    shaped = {size: gemm_rate(torch.float32, rows=size) / (2 * params) for size in batch_sizes}
    run_dtype = generation_dtype(torch.device("cpu")) or torch.float32
    run_name = next(k for k, v in DTYPES.items() if v == run_dtype)
    ours: dict[str, dict[int, tuple[float, float]]] = {}
    for dname in dict.fromkeys(("float32", run_name)):
        ours[dname] = {s: measured[(dname, s)] for s in batch_sizes if (dname, s) in measured}
        if len(ours[dname]) < len(batch_sizes):
            log(f"backends: our loop, {len(texts)} × {new_tokens} tokens in {dname} at batch {', '.join(map(str, batch_sizes))}")
            ours[dname] = sampling_rates(model, tok, texts, n_per_prompt=1, new_tokens=new_tokens, batch_sizes=batch_sizes,
                                         dtype=DTYPES[dname])

    def timed_rows(got: dict[int, tuple[float, float]]) -> list[dict[str, Any]]:
        return [{"batch": s, "tokens_per_s": round(rate, 2), "fraction_of_limit": round(rate / limit, 4),
                 "fraction_of_limit_at_batch": round(rate / shaped[s], 4), "work_tokens_per_s": round(work, 2),
                 "speedup_over_torch": round(rate / ours[run_name][s][0], 3),
                 "speedup_over_torch_float32": round(rate / ours["float32"][s][0], 3)} for s, (rate, work) in got.items()]

    generators: list[dict[str, Any]] = [
        {"backend": "torch", "label": f"torch {d}", "installed": True, "version": torch.__version__, "dtype": d,
         "conversion_seconds": 0.0, "rows": timed_rows(got), "same_generator": True,
         "quality": ({"measure": "the float32 reference", "passed": True} if d == "float32" else bf16_quality)}
        for d, got in ours.items()]
    rows = fit_prompt_ids(tok, texts, context_length(model) - new_tokens)
    ref = None
    with tempfile.TemporaryDirectory(prefix="lfb-bench-backends-") as tmp:
        workdir, folder, export_seconds = Path(tmp), Path(tmp) / "hf", None
        for name in names:
            if name == "torch":
                continue
            why = bk.missing(name)
            if why:
                generators.append({"backend": name, "label": name, "installed": False, "reason": why})
                continue
            if export_seconds is None:
                log(f"backends: merge a rank-{lora_rank} LoRA into the weights and save the folder")
                lora = add_lora(copy.deepcopy(model), rank=lora_rank, alpha=2 * lora_rank, seed=0)
                export_seconds = bk.export_merged(lora, tok, folder)
                del lora
                log(f"backends: float32 reference on {len(quality_prompts)} prompts × 32 greedy tokens")
                ref = bk.float32_reference(model, tok, quality_prompts, new_tokens=32)
            for label, open_backend in bk.variants(name, folder, workdir, tok, threads=torch.get_num_threads()):
                log(f"backends: {label}: convert, quality, sampling at batch {', '.join(map(str, batch_sizes))}")
                generators.append(_backend_row(bk, name, label, open_backend, ref, rows, export_seconds, timed_rows,
                                               new_tokens=new_tokens, batch_sizes=batch_sizes))
    for g in generators:
        speedups = [r["speedup_over_torch"] for r in g.get("rows", [])]
        g["selectable"] = bool(g["backend"] != "torch" and speedups and min(speedups) >= SELECTABLE_SPEEDUP
                               and (g.get("quality") or {}).get("passed"))
    return {"prompts": len(texts), "prompt_format": "continuation", "samples_per_prompt": 1, "new_tokens": new_tokens,
            "batch_sizes": list(batch_sizes), "sampling": dict(SAMPLING), "threads": torch.get_num_threads(),
            "limit": round(limit, 1), "baseline": f"torch {run_name} (generate_ids)", "generators": generators,
            "quality_rule": f"top-1 agreement with float32 torch >= {bk.AGREEMENT:.0%} on {len(quality_prompts)} continuation "
                            "prompts × 32 greedy tokens: teacher-forced where the backend scores a given prefix, else "
                            "free-running",
            "selectable_rule": f">= {SELECTABLE_SPEEDUP}x our loop at every batch size measured, and the quality rule"}


def _backend_row(bk, name: str, label: str, open_backend, ref, rows, export_seconds: float, timed_rows, *,
                 new_tokens: int, batch_sizes: Sequence[int]) -> dict[str, Any]:
    """One converted generator's row: its conversion, quality and rates; why not, where it failed."""
    row: dict[str, Any] = {"backend": name, "label": label, "installed": True, "version": bk.version(name)}
    try:
        backend = open_backend()
    except bk.BackendError as err:
        return {**row, "error": str(err)}
    except Exception as err:  # noqa: BLE001 - a third-party runtime's failure is this row's result, not the bench's end
        return {**row, "error": f"{type(err).__name__}: {err}"}
    try:
        conversion = {"merge_and_save": export_seconds, **backend.seconds}
        quality = bk.agreement(backend, ref, batch_size=max(batch_sizes))
        got = backend_rates(backend, rows, new_tokens=new_tokens, batch_sizes=batch_sizes, eos=ref.eos)
    except bk.BackendError as err:
        return {**row, "error": str(err)}
    except Exception as err:  # noqa: BLE001 - as above: the rows already measured stay in the report
        return {**row, "error": f"{type(err).__name__}: {err}"}
    finally:
        backend.close()
    cap = getattr(backend, "MAX_ROWS", None)
    if cap is not None and max(batch_sizes) > cap:
        row["note_rows"] = f"{backend.label} runs at most {cap} rows a generator: a larger batch runs as batches of {cap}"
    row.update(dtype=backend.dtype, conversion_seconds=round(sum(conversion.values()), 2),
               conversion={k: round(v, 2) for k, v in conversion.items()}, rows=timed_rows(got), quality=quality,
               same_generator=bool(backend.same_weights or quality["passed"]))
    if not row["same_generator"]:
        row["note"] = f"another generator: its {backend.dtype} weights fail the quality rule"
    return row


def _client_step_report(model, tok, corpus: Sequence[str], clients: int, rates: dict[str, float], log) -> dict[str, Any]:
    """:func:`dp_client_step` for ``clients`` clients of 5 generic spans each (a Congress client's mean is 4.6) under
    dp-resample's cpu preset, in float32 (the clients' dtype), against float32's limit and bf16's."""
    from largefedbench.methods.dp_resample import DPResampleConfig

    settings = DPResampleConfig.cpu().fedavg(1000)
    texts = [t for t in corpus if len(t.split()) >= 40]
    cohort = [texts[5 * i : 5 * i + 5] for i in range(clients)]
    log(f"dp client step: {clients} clients of 5 spans, dp-resample's cpu preset, float32")
    seconds, flops = dp_client_step(model, tok, cohort, settings)
    per_client = seconds / clients
    return {"clients": clients, "spans_per_client": 5, "dtype": "float32", "seconds_per_client": round(per_client, 4),
            "flops_per_client": flops / clients, "limit_seconds_per_client": round(flops / clients / rates["float32"], 4),
            "fraction_of_limit": round(flops / seconds / rates["float32"], 4),
            "fraction_of_bf16_limit": round(flops / seconds / rates["bfloat16"], 4),
            "preset": "dp-resample cpu (rank-4 LoRA on attention, local SGD lr 1 batch 8, 80 tokens)"}
