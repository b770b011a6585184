"""Benchmark: a cohort's client updates vectorised with torch.func (vmap + grad over per-client weights) vs the
plain per-client loop, on the tiny downstream model (DESIGN.md §9: "where that is faster than a loop; measure it").

Run for real with ``pytest tests/methods/test_bench_cohort_update.py --benchmark-enable``; the printed ratio
(loop time / vmap time) is what ``DPFedAvgConfig.vectorize``'s default rests on. No timing assertion.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from largefedbench.methods._local_training import (
    CohortTrainer,
    LocalSGD,
    client_batches,
    local_updates_loop,
)

N_CLIENTS = 32
LOCAL = LocalSGD(lr=0.03, batch_size=2, epochs=1, max_len=64)  # POPri App. C.1 client settings


@pytest.fixture(scope="module")
def cohort(tiny):
    fd, bundle, _ = tiny
    spans = [fd.train.spans(cid) for cid in fd.train.ids[:N_CLIENTS]]
    return bundle, spans


def test_bench_vmap_vs_loop(benchmark, cohort):
    bundle, spans = cohort
    model, tok = bundle.new_downstream(), bundle.tokenizer
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    vectorised = CohortTrainer(model, tok, LOCAL)
    batches = client_batches(tok, spans, LOCAL, np.random.default_rng(0))

    def loop() -> torch.Tensor:
        return local_updates_loop(model, batches, lr=LOCAL.lr, pad_id=tok.pad_token_id)

    def vmap() -> torch.Tensor:
        return vectorised(weights, spans, np.random.default_rng(0))  # same batches as ``loop``

    reference = loop()  # also warms up both paths
    vmap()
    loop_times: list[float] = []

    def time_the_loop() -> None:  # pedantic's untimed setup: each vmap round follows a loop round, so both
        start = time.perf_counter()  # see the same machine load
        loop()
        loop_times.append(time.perf_counter() - start)

    result = benchmark.pedantic(vmap, setup=time_the_loop, rounds=1 if benchmark.disabled else 7, iterations=1)
    assert torch.allclose(result, reference, rtol=0, atol=1e-5)
    if benchmark.disabled:
        return
    steps = sum(len(b) for b in batches)
    vmap_min, vmap_median = benchmark.stats.stats.min, benchmark.stats.stats.median
    loop_min, loop_median = min(loop_times), float(np.median(loop_times))
    benchmark.extra_info.update(clients=N_CLIENTS, local_steps=steps, loop_min_seconds=loop_min,
                                loop_median_seconds=loop_median, ratio_loop_over_vmap_min=loop_min / vmap_min,
                                ratio_loop_over_vmap_median=loop_median / vmap_median)
    print(f"\ncohort update, {N_CLIENTS} clients ({steps} local steps, tiny model), min / median of {len(loop_times)}: "
          f"vmap {vmap_min:.3f} / {vmap_median:.3f} s, loop {loop_min:.3f} / {loop_median:.3f} s, "
          f"loop/vmap = {loop_min / vmap_min:.2f} / {loop_median / vmap_median:.2f}")
