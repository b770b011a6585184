"""Benchmark: span building (tokens/s) over the demo corpus scaled to 100k clients, vs a naive loop.

Run with ``pytest tests/data/test_bench_spans.py --benchmark-enable`` for the real figures (100k clients);
with benchmarks disabled (the default test run) it runs once on 2,000 clients to check it still works.
"""

from __future__ import annotations

import time

from largefedbench.data.demo import demo_records
from largefedbench.data.spans import SpanSettings, cut_spans, get_span_tokenizer

SETTINGS = SpanSettings(tokenizer="minilm-wordpiece")


def naive_cut_spans(texts, settings):
    """Reference: one text at a time, every token's offset looked up in Python."""
    tok = get_span_tokenizer(settings.tokenizer).tokenizer
    out = []
    for text in texts:
        offsets = tok.encode(text, add_special_tokens=False).offsets
        starts = [o[0] for o in offsets]
        spans = []
        for i in range(0, len(starts), settings.span_tokens):
            chunk = starts[i : i + settings.span_tokens]
            if len(chunk) < settings.span_tokens and len(chunk) < settings.last_span_min_tokens:
                break
            end = starts[i + settings.span_tokens] if i + settings.span_tokens < len(starts) else len(text)
            spans.append(text[chunk[0] : end].strip())
        out.append((spans, len(starts)))
    return out


def test_span_building_throughput(benchmark):
    n_clients = 2_000 if benchmark.disabled else 100_000
    texts = [r.text for r in demo_records(n_clients)]
    result = benchmark.pedantic(cut_spans, args=(texts, SETTINGS), rounds=1 if benchmark.disabled else 3, iterations=1)
    tokens = sum(n for _, n in result)

    sample = texts[:5_000]
    t0 = time.perf_counter()
    naive = naive_cut_spans(sample, SETTINGS)
    naive_tps = sum(n for _, n in naive) / (time.perf_counter() - t0)
    assert naive == cut_spans(sample, SETTINGS)  # same spans, so the comparison is fair

    if not benchmark.disabled:
        tps = tokens / benchmark.stats.stats.mean
        benchmark.extra_info.update(clients=n_clients, tokens=tokens, tokens_per_s=round(tps), naive_tokens_per_s=round(naive_tps),
                                    speedup=round(tps / naive_tps, 2))
        print(f"\nspan building: {n_clients} clients, {tokens} tokens, {tps:,.0f} tokens/s; naive {naive_tps:,.0f} tokens/s; "
              f"x{tps / naive_tps:.2f}")
