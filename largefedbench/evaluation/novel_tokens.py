"""Window-novel tokens: what the private window adds beyond what a method can know, as a set of target tokens.

A token is *window-novel* when its relative frequency in the private train clients is at least ``k`` times its
relative frequency in the run's public corpus (the ``--public`` resources every method is given, add-one smoothed)
and it occurs at least ``min_count`` times in the train clients. Next-token accuracy on the test clients' positions
whose target is such a token measures what a method learned of the window that public data could not teach, where
top-1 over all tokens is dominated by style. The harness computes the list from the downstream tokenizer's ids; no
method ever sees it. Entries record ``k``, ``min_count``, the list's size, the reference corpus and the scored
positions with the 95 % interval they allow.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

# Measured on demo-prose with the cpu profile's BPE (trained on the generic corpus): k = 10 leaves 5-9 tokens and
# 27-32 test positions, too few to measure; k = 3 with at least 10 train occurrences gives 76 tokens (" AI",
# " safety", " farm", " weight", " diet", " deep" …) and 231 scored test positions; k = 2 adds common pieces (" app").
K_RATIO = 3.0
MIN_COUNT = 10


@dataclass(frozen=True)
class NovelTokens:
    """The window-novel token ids and how they were chosen."""

    ids: tuple[int, ...]
    k: float
    min_count: int
    train_tokens: int
    reference_tokens: int
    reference: str  # what the frequencies are compared with: the run's public corpus

    def describe(self) -> dict:
        return {"k": self.k, "min_count": self.min_count, "n_tokens": len(self.ids), "train_tokens": self.train_tokens,
                "reference_tokens": self.reference_tokens, "reference": self.reference}


def token_counts(tokenizer, texts: Iterable[str]) -> Counter:
    """How often each token id occurs in ``texts`` (the clean encoding, no special tokens)."""
    counts: Counter = Counter()
    texts = list(texts)
    for start in range(0, len(texts), 1024):
        for ids in tokenizer(texts[start : start + 1024], add_special_tokens=False)["input_ids"]:
            counts.update(ids)
    return counts


def window_novel_tokens(tokenizer, train_texts: Iterable[str], reference_texts: Iterable[str], *, reference: str,
                        k: float = K_RATIO, min_count: int = MIN_COUNT) -> NovelTokens:
    """The ids whose train frequency is >= ``k`` × their (add-one smoothed) frequency in ``reference_texts`` (the
    run's public corpus, described by ``reference``), with at least ``min_count`` train occurrences."""
    train, ref = token_counts(tokenizer, train_texts), token_counts(tokenizer, reference_texts)
    n_train, n_ref = max(sum(train.values()), 1), max(sum(ref.values()), 1)
    ids = sorted(t for t, c in train.items() if c >= min_count and (c / n_train) >= k * ((ref.get(t, 0) + 1) / n_ref))
    return NovelTokens(tuple(ids), float(k), int(min_count), n_train, n_ref, reference)


def interval95(top1: float, n_positions: int) -> float:
    """Half-width of the 95 % (Wald) interval of a top-1 measured on ``n_positions`` scored positions, taken as
    independent: the resolution of one seed's number (positions within a text correlate, so it is a lower bound)."""
    if n_positions <= 0:
        return math.inf
    return 1.96 * math.sqrt(max(top1 * (1.0 - top1), 0.0) / n_positions)
