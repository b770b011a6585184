"""Lists of texts: picked by index, and a large count cut into generation chunks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["FINAL_CHUNK", "chunks", "take"]

#: final synthetic sets (10^6 samples in the paper) are generated this many prompts at a time, bounding memory
FINAL_CHUNK = 8192


def take(texts: Sequence[str], indices: Sequence[int]) -> list[str]:
    """``[texts[i] for i in indices]``."""
    return [texts[int(i)] for i in indices]


def chunks(total: int, size: int = FINAL_CHUNK) -> Iterator[tuple[int, int]]:
    """``(index, n)`` for consecutive pieces of ``total`` items, ``size`` at most each."""
    for i, lo in enumerate(range(0, total, size)):
        yield i, min(size, total - lo)
