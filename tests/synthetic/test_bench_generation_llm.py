"""Benchmark: the ``cpu`` profile's real LLM (SmolLM2-135M) — sampling with our decode loop against HF ``generate``
(the naive reference) and against the compute limit (2 × parameters FLOPs per new token at this machine's GEMM
rate in the dtype the work ran in, measured in the same run), and a DPO step against its FLOP count.

Run with ``pytest tests/synthetic/test_bench_generation_llm.py --benchmark-enable -s``: 32 prompts × 32 new tokens
at the cpu preset's sampling (temperature 0.8, top-p 0.95), batch 32, in each prompt format of the presets; a DPO
update of 8 pairs (batch 2, 2 epochs). ``lfb bench llm`` prints the same figures over batch sizes. Disabled (the
default test run), each generates a few tokens and checks that batching gives one-at-a-time's tokens (float32), and
that precomputing the reference's log-probabilities leaves the DPO loss as it was.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from largefedbench.bench.llm import SAMPLING, dpo_seconds_per_step, dpo_step_flops, gemm_rate, hf_generate_rate
from largefedbench.models import n_params
from largefedbench.models.precision import generation_dtype
from largefedbench.synthetic.generation import decode_continuations, generate_ids
from largefedbench.synthetic.prompts import build_prompts

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("prompt_format", ["few-shot", "continuation", "instruction"])
def test_llm_generation_tokens_per_second(benchmark, cpu_llm, prompt_format):
    fd, bundle, _ = cpu_llm
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    n, new = (3, 4) if benchmark.disabled else (32, 32)
    per_prompt = 6 if prompt_format == "instruction" else 1
    prompts = build_prompts(fd.public.all_spans(), max(1, n // per_prompt), examples_per_prompt=3, rng=np.random.default_rng(0),
                            prompt_format=prompt_format, tokenizer=tok)
    if benchmark.disabled:
        greedy = {"max_new_tokens": new, "temperature": 0, "dtype": torch.float32}
        batched = generate_ids(model, tok, prompts, batch_size=n, **greedy)
        assert batched == [generate_ids(model, tok, [p], batch_size=1, **greedy)[0] for p in prompts]
        assert sum(map(len, batched)) > 0
        return
    kwargs = {"n_per_prompt": per_prompt, "max_new_tokens": new, "batch_size": 32, **SAMPLING}
    ids = benchmark.pedantic(generate_ids, args=(model, tok, prompts), kwargs=kwargs, rounds=2, iterations=1)
    tokens = sum(map(len, ids))
    rate = tokens / benchmark.stats.stats.mean
    dtype = generation_dtype(torch.device("cpu")) or torch.float32
    hf = hf_generate_rate(model, tok, prompts, n_per_prompt=per_prompt, new_tokens=new, batch_size=32)
    peak, at_batch = gemm_rate(dtype), gemm_rate(dtype, rows=32)
    limit, limit_at_batch = peak / (2 * n_params(model)), at_batch / (2 * n_params(model))
    benchmark.extra_info.update(tokens=tokens, dtype=str(dtype), tokens_per_s=round(rate, 1), hf_tokens_per_s=round(hf, 1),
                                limit=round(limit), limit_at_batch=round(limit_at_batch))
    print(f"\nSmolLM2-135M, {len(prompts)} {prompt_format} prompts × {per_prompt} × {new} tokens, batch 32, {dtype}: "
          f"{rate:.1f} tok/s = {rate / hf:.2f} × HF generate ({hf:.1f} tok/s, float32); {rate / limit:.1%} of the "
          f"{limit:.0f} tok/s limit at {peak / 1e9:.0f} GFLOP/s, {rate / limit_at_batch:.1%} of {limit_at_batch:.0f} tok/s at "
          f"the rate of a 32-row product")


def test_dpo_step_seconds(benchmark, cpu_llm):
    fd, bundle, _ = cpu_llm
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    pairs = 2 if benchmark.disabled else 8
    prompts = build_prompts([], pairs, rng=np.random.default_rng(0), prompt_format="instruction", tokenizer=tok)
    new = 8 if benchmark.disabled else 48
    raw = decode_continuations(tok, generate_ids(model, tok, prompts, n_per_prompt=2, max_new_tokens=new, seed=3, **SAMPLING),
                               clean=False, stop=())
    chosen, rejected = raw[0::2], raw[1::2]
    every, _, m_every = dpo_seconds_per_step(model, tok, prompts, chosen, rejected, precompute_reference=False)
    once, steps, m_once = benchmark.pedantic(dpo_seconds_per_step, args=(model, tok, prompts, chosen, rejected),
                                             kwargs={"precompute_reference": True}, rounds=1, iterations=1)
    # the reference is frozen: scoring it once gives the loss of scoring it at every step
    assert m_once["train_loss"] == pytest.approx(m_every["train_loss"], rel=1e-4, abs=1e-6)
    if not benchmark.disabled:
        rate = gemm_rate(torch.float32)
        limit = dpo_step_flops(tok, prompts, chosen, rejected, n_params(model), precomputed=True) / rate
        limit_every = dpo_step_flops(tok, prompts, chosen, rejected, n_params(model), precomputed=False) / rate
        benchmark.extra_info.update(seconds_per_step=round(once, 3), limit=round(limit, 3), every_step=round(every, 3))
        print(f"\nDPO step (batch 2 pairs, {steps} steps): {once:.2f} s with the reference precomputed, {every:.2f} s "
              f"scoring it every step; {limit / once:.1%} and {limit_every / every:.1%} of their float32 FLOP limits")


def test_dp_client_step_against_its_flop_limit(benchmark, cpu_llm):
    """One cohort's client updates of dp-resample's cpu preset (the DP generator fine-tuning): the seconds a client
    against 4 × parameters FLOPs per trained token at this machine's float32 GEMM rate. Disabled: two clients of one
    span each run, and their FLOPs count their tokens."""
    from largefedbench.methods.dp_resample import DPResampleConfig

    from largefedbench.bench.llm import dp_client_step

    fd, bundle, _ = cpu_llm
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    settings = DPResampleConfig.cpu().fedavg(1000)
    spans = [s for s in fd.public.all_spans() if len(s.split()) > 20]
    n, per = (2, 1) if benchmark.disabled else (8, 5)
    clients = [spans[per * i : per * i + per] for i in range(n)]
    seconds, flops = benchmark.pedantic(dp_client_step, args=(model, tok, clients, settings), rounds=1, iterations=1)
    assert seconds > 0 and flops > 4 * n_params(model) * 20 * n  # at least 20 tokens a client
    if not benchmark.disabled:
        rate = gemm_rate(torch.float32)
        benchmark.extra_info.update(seconds_per_client=round(seconds / n, 3), limit=round(flops / n / rate, 3))
        print(f"\nDP client step (dp-resample cpu, {n} clients of {per} spans): {seconds / n:.2f} s a client, "
              f"{flops / seconds / rate:.1%} of the float32 FLOP limit")
