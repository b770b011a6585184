"""The generator's sampling settings that a method's config inherits, and the keywords they give the samplers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from largefedbench.errors import InputError

__all__ = ["GenerationSettings"]


@dataclass(frozen=True)
class GenerationSettings:
    """``max_new_tokens`` per sample at ``temperature`` and nucleus ``top_p``, ``generation_batch_size`` sequences a
    forward pass. A config overrides a default by declaring the field again (e.g. ``top_p: float = 0.95``)."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    generation_batch_size: int = 64

    def __post_init__(self) -> None:
        if min(self.max_new_tokens, self.generation_batch_size) < 1 or self.temperature < 0 or not 0 < self.top_p <= 1:
            raise InputError(f"max_new_tokens={self.max_new_tokens} and generation_batch_size="
                             f"{self.generation_batch_size} must be >= 1, temperature={self.temperature} >= 0 (0: "
                             f"greedy) and top_p={self.top_p} in (0, 1]")

    def generation_kwargs(self) -> dict[str, Any]:
        """The keywords of :func:`~largefedbench.synthetic.generation.generate` (and its siblings) these settings give."""
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "batch_size": self.generation_batch_size}
