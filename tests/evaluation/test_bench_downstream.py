"""Benchmark: batched next-token accuracy vs a naive one-text-at-a-time loop (same numbers, DESIGN.md §9).

Run for real with ``pytest --benchmark-enable tests/evaluation/test_bench_downstream.py``; the ratio of the
two means is the speed-up of batching.
"""

from __future__ import annotations

import pytest
import torch

from largefedbench.evaluation import next_token_accuracy

N_TEXTS = 120


@pytest.fixture(scope="module")
def task(tiny):
    fd, bundle, _ = tiny
    return bundle.new_downstream(), bundle.tokenizer, fd.test.all_spans()[:N_TEXTS]


def token_ids(tokenizer, text, max_len: int) -> list[int]:
    """What the metric scores of one text (spec item 12): BOS, its tokens, EOS, cut at max_len."""
    ids = [tokenizer.bos_token_id] + tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    return ids[:max_len]


class Tally:
    """Top-1/3/5 hits, scored positions and summed loss; :meth:`result` is the metric's dict (means per position)."""

    def __init__(self):
        self.hits, self.n, self.loss = {1: 0, 3: 0, 5: 0}, 0, 0.0

    def result(self) -> dict[str, float]:
        return {f"top{k}": h / self.n for k, h in self.hits.items()} | {"n_tokens": self.n, "loss": self.loss / self.n}


@torch.inference_mode()
def naive_accuracy(model, tokenizer, texts, max_len: int = 64) -> dict[str, float]:
    """The naive loop: one text per forward pass (no padding), its positions scored together."""
    tally = Tally()
    for text in texts:
        ids = torch.tensor([token_ids(tokenizer, text, max_len)])
        logits = model(input_ids=ids).logits[0, :-1]
        targets = ids[0, 1:]
        top = logits.topk(5, dim=-1).indices == targets[:, None]
        for k in tally.hits:
            tally.hits[k] += int(top[:, :k].any(dim=-1).sum())
        tally.loss += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
        tally.n += len(targets)
    return tally.result()


@torch.inference_mode()
def plain_definition(model, tokenizer, texts, max_len: int = 64) -> dict[str, float]:
    """Spec item 12 written out plainly: one text, one forward pass, then position by position."""
    tally = Tally()
    for text in texts:
        ids = token_ids(tokenizer, text, max_len)
        logits = model(input_ids=torch.tensor([ids])).logits[0]
        for t in range(len(ids) - 1):
            target = ids[t + 1]
            order = torch.argsort(logits[t], descending=True).tolist()
            for k in tally.hits:
                tally.hits[k] += target in order[:k]
            tally.loss += float(torch.logsumexp(logits[t], 0) - logits[t, target])
            tally.n += 1
    return tally.result()


@pytest.fixture(scope="module")
def reference(task):
    return plain_definition(*task)


def check(result, reference):
    assert {k: result[k] for k in ("top1", "top3", "top5", "n_tokens")} == {k: reference[k] for k in ("top1", "top3", "top5", "n_tokens")}
    assert result["loss"] == pytest.approx(reference["loss"], rel=1e-5)


@pytest.mark.benchmark(group="next-token-accuracy")
def test_bench_batched_accuracy(benchmark, task, reference):
    model, tok, texts = task
    result = benchmark.pedantic(next_token_accuracy, args=(model, tok, texts), kwargs={"batch_size": 64}, rounds=5, iterations=1)
    check(result, reference)


@pytest.mark.benchmark(group="next-token-accuracy")
def test_bench_naive_accuracy(benchmark, task, reference):
    model, tok, texts = task
    result = benchmark.pedantic(naive_accuracy, args=(model, tok, texts), rounds=3, iterations=1)
    check(result, reference)
