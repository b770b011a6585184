"""The client update of full-model federated fine-tuning (DP-FedAvg and DP-FTRL of the downstream model; POPri
App. C.1: batch size 2, sequence length 64, one local epoch): each cohort client starts from the broadcast weights,
runs :func:`~largefedbench.fedtrain.local_sgd.local_updates` over its own spans — framed as the evaluation frames them
(``[BOS] + tokens + [EOS]``, padding out of the loss) — and reports Δ = local − global, all weights flattened.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain.flat import FlatParams
from largefedbench.fedtrain.local_sgd import (
    LocalSGD,
    Rngs,
    lm_examples,
    lm_loss,
    local_updates,
)
from largefedbench.rounds import record_unreleased

__all__ = ["CohortUpdate", "ModelUpdate", "UpdateNormTally", "record_update_norms"]


class ModelUpdate:
    """Every client's Δ of a full model from given global weights, on its own copy of ``model`` (the caller's model
    is never touched)."""

    def __init__(self, model: torch.nn.Module, tokenizer, local: LocalSGD, max_len: int) -> None:
        self.local, self.tokenizer, self.max_len = local, tokenizer, int(max_len)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.flat = FlatParams(copy.deepcopy(model).eval())

    def __call__(self, weights: torch.Tensor, spans_per_client: Sequence[Sequence[str]], rng: Rngs) -> torch.Tensor:
        """``(n_clients, n_params)``: each client's Δ after local training on its spans (batch order from ``rng``: one
        generator per client, or one shared)."""
        flat_examples = lm_examples(self.tokenizer, [s for spans in spans_per_client for s in spans], self.max_len)
        clients, start = [], 0
        for spans in spans_per_client:
            clients.append(flat_examples[start : start + len(spans)])
            start += len(spans)
        self.flat.set(weights)
        model = self.flat.model
        return local_updates(self.flat, clients, lambda batch: lm_loss(model, batch, self.pad_id), self.local, rng)


class UpdateNormTally:
    """Running raw-update-norm statistics of one round (sum of norms, number above ``clip``), kept inside the client
    function: an aggregate, never per-client rows. Not differentially private (an unreleased diagnostic), and only
    filled on the ``local`` executor (a Ray worker fills its own copy)."""

    def __init__(self, clip: float) -> None:
        self.clip, self.n, self.norm_sum, self.clipped = float(clip), 0, 0.0, 0

    def add(self, updates: torch.Tensor) -> None:
        norms = torch.linalg.vector_norm(updates.float(), dim=1)
        self.n += len(norms)
        self.norm_sum += float(norms.sum())
        self.clipped += int((norms > self.clip).sum())

    def summary(self) -> dict[str, float]:
        if self.n == 0:
            return {"mean_update_norm": 0.0, "fraction_clipped": 0.0}
        return {"mean_update_norm": self.norm_sum / self.n, "fraction_clipped": self.clipped / self.n}


@dataclass
class CohortUpdate:
    """The batched client function for ``fed.private_sum(…, batched=True)``: every client of a chunk trains from
    ``weights`` on its own spans and returns Δ; ``tally`` (optional) accumulates the raw update norms. Each client's
    batch order comes from its own generator (``chunk.rng(i)``: federation seed, round, client id), so the sum is the
    same on every executor and for every chunking."""

    update: ModelUpdate
    weights: torch.Tensor
    tally: UpdateNormTally | None = None

    def __call__(self, chunk: Any) -> torch.Tensor:
        updates = self.update(self.weights, chunk.spans, [chunk.rng(i) for i in range(len(chunk))])
        if self.tally is not None:
            self.tally.add(updates)
        return updates


def record_update_norms(update: CohortUpdate, cohort, public, round_: int) -> None:
    """After a round's release: the raw-norm diagnostic of ``update.tally`` written to the run folder's unreleased
    file (never the entry; nothing when there is no tally)."""
    if update.tally is None:
        return
    if update.tally.n != len(cohort):
        raise InputError("record_update_norms needs the local executor: the raw update norms are a diagnostic "
                         "kept in this process and never leave a Ray worker; turn it off or use --executor local")
    record_unreleased(public, round_, update.tally.summary())
