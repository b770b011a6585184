"""Early stopping of a generator's rounds on the validation clients (POPri §5.2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from largefedbench.evaluation.fid import fid_to
from largefedbench.models import embed
from largefedbench.synthetic.lora import load_lora_state, lora_state

__all__ = ["keep_lowest_fid_adapter"]


def keep_lowest_fid_adapter(loop, model, texts: Sequence[str], embedder, validation: np.ndarray, round_index: int) -> None:
    """Early stopping on the validation clients (POPri §5.2): the FID of ``texts`` (sampled from the generator after
    the last round) joins ``loop``'s history and its selection, then the lowest-FID adapter is loaded into ``model``."""
    value = fid_to(embed(list(texts), embedder), validation)
    loop.history.append({"round": round_index, "fid": value, "evaluation_only": True})
    loop.offer(value, round_index, lora_state(model))
    load_lora_state(model, loop.best.weights)
