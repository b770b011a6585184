"""Next-token accuracy on hand-computed cases: a fake model whose logits we control (POPri spec item 12)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from largefedbench.errors import InputError
from largefedbench.evaluation import next_token_accuracy
from largefedbench.models import TinyGPT2, build_tiny_gpt2

VOCAB = {"<e>": 0, "a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "[UNK]": 8}
V = len(VOCAB)
# RANKING[x] = the next-token ids the fake model prefers after input id x, best first.
RANKING = {
    0: [1, 2, 3, 4, 5, 6, 7, 8, 0],  # after <e>: a, b, c, d, e, ...
    1: [2, 3, 4, 5, 6, 7, 8, 0, 1],  # after a: b first; <e> is 8th
    2: [3, 4, 5, 6, 7, 8, 0, 1, 2],  # after b: c first
    3: [0, 1, 2, 3, 4, 5, 6, 7, 8],  # after c: <e> first, a second
    **{x: [8, 7, 6, 5, 4, 3, 2, 1, 0] for x in range(4, 9)},  # after d..[UNK]: <e> last
}


class BigramModel(torch.nn.Module):
    """logits[b, t] depend only on input_ids[b, t]: rank r (1 = best) gets logit V - r + 1."""

    def __init__(self) -> None:
        super().__init__()
        table = torch.zeros(V, V)
        for x, order in RANKING.items():
            for rank, y in enumerate(order, start=1):
                table[x, y] = V - rank + 1
        self.register_buffer("table", table)
        self.calls: list[tuple[int, ...]] = []

    def forward(self, input_ids, attention_mask=None, **kwargs):
        self.calls.append(tuple(input_ids.shape))
        return SimpleNamespace(logits=self.table[input_ids])


@pytest.fixture(scope="module")
def toy_tokenizer():
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<e>", eos_token="<e>", pad_token="<e>", unk_token="[UNK]")


def ce(rank: int) -> float:
    """Cross-entropy of a target at ``rank``: every row holds the logits 1..V once."""
    return math.log(sum(math.exp(v) for v in range(1, V + 1))) - (V - rank + 1)


# Hand-derived target ranks per text, sequence [<e>] + words + [<e>]:
#   "a b c" -> <e>->a r1, a->b r1, b->c r1, c-><e> r1          (4 targets, the last one is EOS = the pad id)
#   "c a"   -> <e>->c r3, c->a r2, a-><e> r8                   (3 targets)
#   "e"     -> <e>->e r5, e-><e> r9                            (2 targets)
TEXTS = ["a b c", "c a", "e"]
RANKS = [1, 1, 1, 1, 3, 2, 8, 5, 9]


def test_hand_computed_micro_average(toy_tokenizer):
    model = BigramModel()
    out = next_token_accuracy(model, toy_tokenizer, TEXTS, max_len=64, topk=(1, 3, 5), batch_size=3)
    assert out["n_tokens"] == 9
    assert out["top1"] == pytest.approx(4 / 9)  # a per-text mean would give (1 + 0 + 0) / 3
    assert out["top3"] == pytest.approx(6 / 9)
    assert out["top5"] == pytest.approx(7 / 9)
    assert out["loss"] == pytest.approx(sum(ce(r) for r in RANKS) / 9, rel=1e-6)
    assert model.calls == [(3, 5)]  # one right-padded batch: pads (id 0 = EOS) excluded by the mask, EOS kept


def test_batching_and_padding_do_not_change_the_numbers(toy_tokenizer):
    together = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, batch_size=64)
    one_by_one = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, batch_size=1)
    assert together == pytest.approx(one_by_one)


def test_truncation_drops_eos_and_late_targets(toy_tokenizer):
    # max_len 3: "a b c" -> [<e> a b] (targets a r1, b r1); "c a" -> [<e> c a] (c r3, a r2); "e" -> [<e> e <e>] (r5, r9)
    out = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, max_len=3)
    assert out["n_tokens"] == 6
    assert (out["top1"], out["top3"], out["top5"]) == pytest.approx((2 / 6, 4 / 6, 5 / 6))
    # max_len 2: one target per text, the first word (ranks 1, 3, 5)
    out = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, max_len=2, topk=(1, 3))
    assert out == pytest.approx({"top1": 1 / 3, "top3": 2 / 3, "n_tokens": 3, "loss": (ce(1) + ce(3) + ce(5)) / 3})


def test_empty_text_counts_only_its_eos(toy_tokenizer):
    out = next_token_accuracy(BigramModel(), toy_tokenizer, [""], topk=(1,))
    assert out["n_tokens"] == 1 and out["top1"] == 0.0  # <e> -> <e> is ranked 9th


def test_argument_errors(toy_tokenizer):
    model = BigramModel()
    with pytest.raises(InputError, match="no texts"):
        next_token_accuracy(model, toy_tokenizer, [])
    with pytest.raises(InputError, match="at least 2"):
        next_token_accuracy(model, toy_tokenizer, TEXTS, max_len=1)
    with pytest.raises(InputError, match="positive integers"):
        next_token_accuracy(model, toy_tokenizer, TEXTS, topk=(0, 1))


def test_a_real_gpt2_gives_the_same_counts_batched_or_not(toy_tokenizer):
    model = build_tiny_gpt2(TinyGPT2(n_embd=16, n_head=2, n_layer=1, n_positions=16, max_len=16), V, 0)
    model.train()
    texts = ["a b c d e f g", "c", "g f e d", "b b b b b b b b b b b b b b b b b b"]
    batched = next_token_accuracy(model, toy_tokenizer, texts, max_len=16, batch_size=4)
    single = next_token_accuracy(model, toy_tokenizer, texts, max_len=16, batch_size=1)
    assert {k: batched[k] for k in ("top1", "top3", "top5", "n_tokens")} == {k: single[k] for k in ("top1", "top3", "top5", "n_tokens")}
    assert batched["loss"] == pytest.approx(single["loss"], rel=1e-5)
    assert batched["n_tokens"] == 8 + 2 + 5 + 15
    assert model.training  # restored


def test_window_novel_targets_count_only_the_positions_whose_target_they_name(toy_tokenizer):
    # targets "c" (3) and "e" (5): "a b c" has b->c (rank 1), "c a" has <e>->c (rank 3), "e" has <e>->e (rank 5)
    out = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, targets=[3, 5], topk=(1, 3, 5))
    assert out["n_tokens"] == 3
    assert out["top1"] == pytest.approx(1 / 3) and out["top3"] == pytest.approx(2 / 3) and out["top5"] == pytest.approx(1)
    assert out["loss"] == pytest.approx((ce(1) + ce(3) + ce(5)) / 3, rel=1e-6)
    none = next_token_accuracy(BigramModel(), toy_tokenizer, TEXTS, targets=[7])
    assert none["n_tokens"] == 0 and math.isnan(none["top1"])


def test_window_novel_tokens_are_frequent_in_the_window_and_rare_in_the_public_corpus(toy_tokenizer):
    from largefedbench.evaluation.novel_tokens import window_novel_tokens

    train = ["a b c d"] * 30 + ["d d d d"] * 10  # d: 70 of 160 tokens in the window
    public = ["a b c"] * 100 + ["d"]  # d: once in 301 tokens of the public corpus
    novel = window_novel_tokens(toy_tokenizer, train, public, reference="generic", k=10, min_count=20)
    assert novel.ids == (4,)  # only d; a, b, c are as frequent in the public corpus as in the window
    assert novel.describe() == {"k": 10.0, "min_count": 20, "n_tokens": 1, "train_tokens": 160,
                                "reference_tokens": 301, "reference": "generic"}
    assert window_novel_tokens(toy_tokenizer, train, public, reference="generic", k=10, min_count=100).ids == ()
    # against a corpus where d is common and b, c absent, the set turns over: it depends on what methods were given
    assert window_novel_tokens(toy_tokenizer, train, ["d a"] * 50, reference="other", k=10, min_count=20).ids == (2, 3)


def test_novel_interval_narrows_with_positions():
    from largefedbench.evaluation.novel_tokens import interval95

    assert interval95(0.3, 231) == pytest.approx(1.96 * math.sqrt(0.21 / 231))
    assert interval95(0.3, 4 * 231) == pytest.approx(interval95(0.3, 231) / 2)
    assert interval95(0.3, 0) == math.inf
