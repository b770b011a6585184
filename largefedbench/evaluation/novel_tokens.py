"""Window-novel tokens (issue 25): what the private window adds beyond its genre, as a set of target tokens.

A token is *window-novel* when its relative frequency in the private train clients is at least ``k`` times its
relative frequency in the domain's pre-window records (add-one smoothed) and it occurs at least ``min_count`` times
in the train clients. Next-token accuracy on the test clients' positions whose target is such a token measures what
a method learned of the window's new content, where top-1 over all tokens is dominated by style. The harness
computes the list from the downstream tokenizer's ids; no method ever sees it. Entries record ``k``, ``min_count``
and the list's size.
"""

from __future__ import annotations

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
    pre_window_tokens: int

    def describe(self) -> dict:
        return {"k": self.k, "min_count": self.min_count, "n_tokens": len(self.ids), "train_tokens": self.train_tokens,
                "pre_window_tokens": self.pre_window_tokens}


def token_counts(tokenizer, texts: Iterable[str]) -> Counter:
    """How often each token id occurs in ``texts`` (the clean encoding, no special tokens)."""
    counts: Counter = Counter()
    texts = list(texts)
    for start in range(0, len(texts), 1024):
        for ids in tokenizer(texts[start : start + 1024], add_special_tokens=False)["input_ids"]:
            counts.update(ids)
    return counts


def window_novel_tokens(tokenizer, train_texts: Iterable[str], pre_window_texts: Iterable[str], *, k: float = K_RATIO,
                        min_count: int = MIN_COUNT) -> NovelTokens:
    """The ids whose train frequency is >= ``k`` × their (add-one smoothed) pre-window frequency, with at least
    ``min_count`` train occurrences."""
    train, pre = token_counts(tokenizer, train_texts), token_counts(tokenizer, pre_window_texts)
    n_train, n_pre = max(sum(train.values()), 1), max(sum(pre.values()), 1)
    ids = sorted(t for t, c in train.items() if c >= min_count and (c / n_train) >= k * ((pre.get(t, 0) + 1) / n_pre))
    return NovelTokens(tuple(ids), float(k), int(min_count), n_train, n_pre)
