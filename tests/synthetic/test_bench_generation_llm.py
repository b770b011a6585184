"""Benchmark: the ``cpu`` profile's real LLM (SmolLM2-135M) sampling with the KV cache, by batch size, against one
sample at a time and against the compute limit (≈ 2 × parameters FLOPs per new token at this machine's fp32 GEMM
rate, measured with torch in the same run).

Run with ``pytest tests/synthetic/test_bench_generation_llm.py --benchmark-enable -s``: 32 prompts × 32 new tokens,
greedy, at batch 1, 8, 32 and 64, in both prompt formats: the paper's few-shot list (3 public examples, about 250
tokens of prompt) and the cpu presets' continuation of a public example's first 12 words. Disabled (the default test run), it generates a
few tokens for 3 prompts and checks that batching gives the same tokens as one at a time.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from largefedbench.models import n_params
from largefedbench.synthetic.generation import generate_ids
from largefedbench.synthetic.prompts import build_prompts

pytestmark = pytest.mark.slow


def torch_gemm_flops(dim: int = 576, out: int = 1536, rows: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` fp32 GEMM rate in FLOP/s on a Llama-sized projection, (rows × dim) @ (dim × out)."""
    a, b = torch.randn(rows, dim), torch.randn(dim, out)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * rows * dim * out / best


@pytest.mark.parametrize("prompt_format", ["few-shot", "continuation"])
def test_llm_generation_tokens_per_second(benchmark, cpu_llm, prompt_format):
    fd, bundle, _ = cpu_llm
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    n, new = (3, 4) if benchmark.disabled else (32, 32)
    prompts = build_prompts(fd.public.all_spans(), n, examples_per_prompt=3, rng=np.random.default_rng(0),
                            prompt_format=prompt_format)
    kwargs = {"max_new_tokens": new, "temperature": 0}  # greedy: the same tokens at every batch size
    batch = 32 if not benchmark.disabled else n
    batched = benchmark.pedantic(generate_ids, args=(model, tok, prompts), kwargs={**kwargs, "batch_size": batch},
                                 rounds=1 if benchmark.disabled else 2, iterations=1)
    timings = {}
    for size in ([1] if benchmark.disabled else [1, 8, 64]):
        start = time.perf_counter()
        ids = generate_ids(model, tok, prompts, batch_size=size, **kwargs)
        timings[size] = time.perf_counter() - start
        assert ids == batched
    tokens = sum(len(t) for t in batched)
    assert tokens > 0
    if not benchmark.disabled:
        flops = torch_gemm_flops()
        limit = flops / (2 * n_params(model))  # tokens/s if every FLOP of the forward pass ran at the GEMM rate
        rates = {size: tokens / seconds for size, seconds in timings.items()}
        rates[batch] = tokens / benchmark.stats.stats.mean
        benchmark.extra_info.update(tokens=tokens, gemm_gflops=round(flops / 1e9, 1), limit_tokens_per_s=round(limit),
                                    **{f"tokens_per_s_batch_{k}": round(v, 1) for k, v in sorted(rates.items())})
        print(f"\nSmolLM2-135M, {n} {prompt_format} prompts × {new} tokens: " + ", ".join(
            f"batch {k}: {v:.1f} tok/s" for k, v in sorted(rates.items())) +
              f"; best ×{max(rates.values()) / rates[1]:.1f} over one at a time; limit {limit:.0f} tok/s at "
              f"{flops / 1e9:.1f} GFLOP/s (best = {max(rates.values()) / limit:.0%} of it)")
