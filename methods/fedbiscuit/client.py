"""The client side of a selector round: each cohort client labels its own training pairs, trains its selector from
the broadcast weights and returns its update in that selector's slot."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from largefedbench.methods.fedbiscuit.agreement import AgreementTally
from largefedbench.methods.fedbiscuit.pairs import PairPool, own_pairs
from largefedbench.methods.fedbiscuit.selector import PairTask

from largefedbench.fedtrain import FedAvgSettings, FlatParams, local_updates

__all__ = ["SelectorUpdate"]


@dataclass
class SelectorUpdate:
    """The client function of a selector round (``fed.private_sum``, batched): every client of a chunk labels its own
    training pairs from its own span embeddings (:func:`own_pairs`), trains its selector from the broadcast
    ``weights`` with local AdamW and puts Δ in that selector's slot (one slot per selector of ``slots``). Each client's
    batch order comes from its own generator (``chunk.rng(i, 0x5E1)``: federation seed, round, client id), so neither
    the executor nor the chunking changes the sum."""

    adapter: FlatParams
    task: PairTask
    pool: PairPool
    settings: FedAvgSettings
    weights: list[torch.Tensor]  # the broadcast selectors
    slots: list[int]  # the selectors trained this round, one slot each
    selector_of: dict[str, int]  # public: each cohort client's selector
    position: dict[str, int]  # public: each cohort client's place in the federation (seeds its pairs)
    train_pairs: int
    n_pairs: int  # train + validation pairs per client
    seed: int
    tally: AgreementTally | None = None  # the unreleased agreement diagnostic (``record_agreement``)

    def __call__(self, chunk) -> torch.Tensor:
        d = self.adapter.numel
        # on the model's device (the broadcast weights may sit on the CPU after a resume: checkpoints load there)
        out = torch.zeros((len(chunk), len(self.slots) * d), device=self.adapter.params[0].device)
        if not len(chunk):
            return out
        pairs, labels = own_pairs(chunk, self.position, self.pool, self.n_pairs, self.seed)
        selector = np.asarray([self.selector_of[c] for c in chunk.ids])
        rngs = [chunk.rng(i, 0x5E1) for i in range(len(chunk))]
        model, k = self.adapter.model, self.train_pairs
        for slot, u in enumerate(self.slots):
            rows = np.flatnonzero(selector == u)
            if not len(rows):
                continue
            self.adapter.set(self.weights[u])
            if self.tally is not None:
                self.tally.add(self.task, model, pairs[rows, k:], labels[rows, k:])
            clients = [self.task.examples(pairs[i, :k], labels[i, :k]) for i in rows]
            out[rows, slot * d : (slot + 1) * d] = local_updates(
                self.adapter, clients, lambda batch: self.task.loss(model, batch), self.settings.local, [rngs[i] for i in rows])
        return out
