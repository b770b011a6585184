"""Benchmark: batched generation with the KV cache vs one sample at a time (tokens per second, DESIGN.md §9).

Run with ``pytest tests/synthetic/test_bench_generation.py --benchmark-enable -s``: 64 POPri prompts (2 public
examples each) × 64 new tokens with the tiny generator, batch 64 against batch 1. Disabled, it runs a few prompts
once to check that greedy decoding gives the same tokens both ways.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from largefedbench.synthetic.generation import generate_ids
from largefedbench.synthetic.prompts import build_prompts


def test_batched_generation_tokens_per_second(benchmark, tiny):
    fd, bundle, _ = tiny
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    n = 6 if benchmark.disabled else 64
    prompts = build_prompts(fd.public.all_spans(), n, examples_per_prompt=2, rng=np.random.default_rng(0))
    # greedy in float32: identical tokens in both runs, a fair comparison (bf16 rounding depends on the batch's shapes)
    kwargs = {"max_new_tokens": 64, "temperature": 0, "dtype": torch.float32}
    batched = benchmark.pedantic(generate_ids, args=(model, tok, prompts), kwargs={**kwargs, "batch_size": 64},
                                 rounds=1 if benchmark.disabled else 3, iterations=1)
    t0 = time.perf_counter()
    single = generate_ids(model, tok, prompts, batch_size=1, **kwargs)
    single_seconds = time.perf_counter() - t0
    assert batched == single
    tokens = sum(len(t) for t in batched)
    assert tokens > 0
    if not benchmark.disabled:
        tps, single_tps = tokens / benchmark.stats.stats.mean, tokens / single_seconds
        benchmark.extra_info.update(prompts=n, tokens=tokens, tokens_per_s=round(tps), single_tokens_per_s=round(single_tps),
                                    speedup=round(tps / single_tps, 2))
        print(f"\ngeneration: {tokens} tokens, batched {tps:,.0f} tokens/s, one at a time {single_tps:,.0f} tokens/s, "
              f"x{tps / single_tps:.1f}")
