"""Benchmark: a cohort's local training (the loop of fedtrain/local_sgd.py) against the physical limit of this
machine: the step's FLOPs (counted by ``torch.utils.flop_counter``) at the fp32 GEMM rate measured in the same run.

32 tiny-model clients (POPri App. C.1 client settings: batch 2, one epoch). ``loop / limit`` bounds what any
vectorised cohort update could gain: it does the same FLOPs. Run for real with
``pytest tests/fedtrain/test_bench_local_sgd.py --benchmark-enable -s``. No timing assertion.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from largefedbench.fedtrain import FlatParams, LocalSGD, ModelUpdate

N_CLIENTS = 32
LOCAL = LocalSGD(lr=0.03, batch_size=2, epochs=1)


def gemm_flops_per_second(n: int = 1024, repeats: int = 10) -> float:
    """The best of three fp32 ``n × n`` matrix-product rates (2·n³ FLOPs each)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = max(best, repeats * 2 * n**3 / (time.perf_counter() - start))
    return best


def test_bench_local_sgd_vs_gemm_limit(benchmark, tiny):
    fd, bundle, _ = tiny
    model = bundle.new_downstream()
    spans = [fd.train.spans(cid) for cid in fd.train.ids[:N_CLIENTS]]
    update = ModelUpdate(model, bundle.tokenizer, LOCAL, 64)
    weights = FlatParams(model).get()

    def cohort() -> torch.Tensor:
        return update(weights, spans, np.random.default_rng(0))

    with FlopCounterMode(display=False) as counter:
        reference = cohort()
    flops = counter.get_total_flops()
    rates: list[float] = []
    result = benchmark.pedantic(cohort, setup=lambda: rates.append(gemm_flops_per_second()),
                                rounds=1 if benchmark.disabled else 5, iterations=1)
    assert torch.equal(result, reference)  # the same batch order gives the same updates
    assert flops > 0 and result.norm(dim=1).min() > 0
    if benchmark.disabled:
        return
    limit = flops / max(rates)
    loop = benchmark.stats.stats.min
    benchmark.extra_info.update(clients=N_CLIENTS, gflops=flops / 1e9, gemm_gflops_per_second=max(rates) / 1e9,
                                limit_seconds=limit, ratio_loop_over_limit=loop / limit)
    print(f"\nlocal SGD, {N_CLIENTS} tiny-model clients: {flops / 1e9:.2f} GFLOP in {loop:.3f} s (min of "
          f"{len(rates)}); GEMM {max(rates) / 1e9:.1f} GFLOP/s -> limit {limit:.3f} s; loop / limit = {loop / limit:.2f}")
