"""The ``selector="embedding"`` ablation (ours, not the paper's method): each selector is a linear model on the
pair's embedding difference, the space in which the clients' preferences are defined, trained by the same rounds,
clipping and noise as the LoRA selector."""

from __future__ import annotations

import numpy as np
import torch
from largefedbench.methods.fedbiscuit.selector import PairTask

__all__ = ["EMBEDDING_SELECTOR_DEVIATION", "EmbeddingSelectorTask"]

EMBEDDING_SELECTOR_DEVIATION = (
    "selector='embedding' (an ablation, not the paper's method): each selector is a linear model on the pair's "
    "embedding difference, log-odds(A) = w·(e_A − e_B) with the public embedder's unit embeddings, trained by the same "
    "rounds, clipping and noise as the LoRA selector, instead of an LLM reading both texts")


class EmbeddingSelectorTask(PairTask):
    """The ``selector="embedding"`` ablation (ours): the selector is ``torch.nn.Linear(dim, 1, bias=False)`` on the
    pair's embedding difference, log-odds(A) = w·(e_A − e_B), so the swapped order's log-odds is exactly the negative.
    The clients' preferences are defined in this space (:func:`.pairs.client_preferences`), where a linear model
    learns them from a few hundred pairs (docs/profiles.md: 0.82 agreement with the majority, the LoRA selector 0.60);
    the rows are pair indices into the stacked differences, ``n + p`` for pair p swapped."""

    def __init__(self, emb_a: np.ndarray, emb_b: np.ndarray) -> None:
        diff = torch.as_tensor(np.asarray(emb_a, dtype=np.float32) - np.asarray(emb_b, dtype=np.float32))
        self.x = torch.cat([diff, -diff])
        self.ab, self.ba = list(range(len(diff))), list(range(len(diff), 2 * len(diff)))

    @staticmethod
    def model(dim: int) -> torch.nn.Module:
        """A selector at chance: every log-odds 0."""
        linear = torch.nn.Linear(dim, 1, bias=False)
        torch.nn.init.zeros_(linear.weight)
        return linear

    def freeze_prefix(self, model, batch_size: int, progress: bool = False) -> int:
        return 0  # no layers to run once

    def _odds(self, model, rows: list[int]) -> torch.Tensor:
        return model(self.x[rows].to(model.weight.device)).squeeze(-1)

    def loss(self, model, batch: list[tuple[int, int]]) -> torch.Tensor:
        """The same cross-entropy as the LLM selector's over (" A", " B") with logits (w·x, 0): label 0 is A."""
        target = torch.as_tensor([float(y == 0) for _, y in batch], device=model.weight.device)
        return torch.nn.functional.binary_cross_entropy_with_logits(self._odds(model, [r for r, _ in batch]), target)

    @torch.no_grad()
    def log_odds(self, model, rows: list[int], batch_size: int) -> np.ndarray:
        return self._odds(model, list(rows)).cpu().numpy()
