"""The server of the selector rounds: FedBis's R rounds of DP-FedAvg on one selector, or FedBiscuit's schedule of
warm-up rounds, private groupings and clustered rounds on U selectors, each round one release of the driver
(:mod:`largefedbench.fedtrain.driver`) with a checkpoint after it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from largefedbench.methods.fedbiscuit.agreement import AgreementTally, record_agreement
from largefedbench.methods.fedbiscuit.client import SelectorUpdate
from largefedbench.methods.fedbiscuit.config import FedBisConfig
from largefedbench.methods.fedbiscuit.embedding_selector import EmbeddingSelectorTask
from largefedbench.methods.fedbiscuit.grouping import clustered_step, grouping_rows, private_grouping
from largefedbench.methods.fedbiscuit.pairs import PairPool, own_pairs
from largefedbench.methods.fedbiscuit.selector import PairTask, SelectorTask

from largefedbench.errors import MethodError
from largefedbench.fedtrain import CHUNK_CLIENTS, FlatParams, Release, Server, train_rounds
from largefedbench.models import embed
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.rounds import cohort_fields

__all__ = ["SelectorServer", "SelectorState", "selector_task"]


def selector_task(cfg: FedBisConfig, public, a: list[str], b: list[str], emb_a: np.ndarray | None = None,
                  emb_b: np.ndarray | None = None) -> PairTask:
    """The selector's view of the pairs (a[i], b[i]) for ``cfg.selector``; the embedding selector embeds the texts
    with the public embedder unless their embeddings are given."""
    if cfg.selector == "embedding":
        if emb_a is None or emb_b is None:
            emb = embed(list(a) + list(b), public.models.embedder)
            emb_a, emb_b = emb[: len(a)], emb[len(a):]
        return EmbeddingSelectorTask(emb_a, emb_b)
    return SelectorTask(public.models.generator_tokenizer, a, b, cfg.candidate_tokens, cfg.selector_dtype)


@dataclass
class SelectorState:
    """The selector rounds' state: every selector's adapter weights, each client's selector (a function of the noisy
    grouping release), the public group sizes (⌈n/U⌉ or ⌊n/U⌋ each), and the public pair pool's size and the
    selector layers run once over it (None in a checkpoint of an earlier version)."""

    weights: list[torch.Tensor]
    group: np.ndarray | None
    sizes: np.ndarray | None
    pool_pairs: int | None = None
    frozen_layers: int | None = None


class SelectorServer(Server):
    """The server of FedBis's selector rounds (U = 1) or FedBiscuit's schedule (warm-up, grouping and clustered
    rounds), run by the one federated-training driver with per-round checkpoints."""

    def __init__(self, name: str, n_selectors: int, fed, public, cfg: FedBisConfig, make_pool: Callable[[], PairPool],
                 adapter: FlatParams, sigma: float, sigma_g: float) -> None:
        super().__init__(None)
        self.name, self.fed, self.public, self.cfg = name, fed, public, cfg
        self.make_pool, self.adapter = make_pool, adapter
        self.pool: PairPool | None = None
        self.task: PairTask | None = None
        self.sigma, self.sigma_g = sigma, sigma_g
        self.n_sel = n_selectors
        self.settings = cfg.fedavg(fed.n_clients)
        self.state = SelectorState([adapter.get() for _ in range(self.n_sel)], None, None)
        self.history: list[dict[str, Any]] = []
        self.pairs_total = cfg.pairs_per_client + cfg.validation_pairs
        self.steps = [("selector", 0)] * cfg.rounds if self.n_sel == 1 else cfg.schedule()

    def train(self) -> None:
        loop = train_rounds(self.fed, self.public, self, rounds=len(self.steps), desc=f"{self.name}: selectors")
        self.history = loop.history

    def pool_info(self) -> tuple[int, int]:
        """The pair pool's size and the selector layers run once over it (a checkpoint of an earlier version does not
        carry them: the pool is built again)."""
        if self.state.pool_pairs is None:
            self._prepare()
        return int(self.state.pool_pairs), int(self.state.frozen_layers)

    def _prepare(self) -> None:
        """The public pair pool and the selector's frozen layers run once over it, before the first round this process
        runs: a run resumed after its last selector round (in DPO) needs neither, and skips their minutes. A run
        resumed between selector rounds builds them again (the checkpoint keeps their sizes, not the tensors); those
        minutes were counted when they were first spent, so they are not counted again."""
        if self.pool is not None:
            return
        clock = getattr(self.fed, "clock", None)  # a test's stand-in federation may have none
        with clock.redoing() if clock is not None and self.state.pool_pairs is not None else nullcontext():
            self._build_pool()

    def _build_pool(self) -> None:
        cfg = self.cfg
        pool = self.make_pool()
        if len(pool) < self.pairs_total:
            raise MethodError(f"only {len(pool)} distinct candidate pairs were generated but each client needs "
                              f"{self.pairs_total}; raise pool_pairs or lower pairs_per_client")
        self.task = selector_task(cfg, self.public, pool.a, pool.b, pool.emb_a, pool.emb_b)
        self.state.frozen_layers = self.task.freeze_prefix(self.adapter.model, cfg.selector_batch_size,
                                                           self.public.progress)
        self.state.pool_pairs, self.pool = len(pool), pool

    def scores(self, task: PairTask, u: int) -> np.ndarray:
        """Selector u's averaged log-odds for A on every pair of ``task``."""
        self.adapter.set(self.state.weights[u])
        return task.prefers_a(self.adapter.model, np.arange(len(task.ab)), self.cfg.selector_batch_size)

    # -- the driver's server interface ---------------------------------------------------------------------
    def release(self, i: int) -> Release:
        self._prepare()
        kind, index = self.current = self.steps[i]
        return self._grouping(index) if kind == "group" else self._selector_round(kind, index)

    def step(self, noisy, release: Release) -> dict[str, Any]:
        kind, index = self.current
        record_agreement(self.public, release, self.current[0])
        if kind == "group":  # the reference's balanced grouping on the noisy rankings, in a public shuffled order
            shuffle = np.random.default_rng(np.random.SeedSequence([self.public.seed, 0xC015, index]))
            order = shuffle.permutation(len(release.cohort))  # public: the reference's random.shuffle of the clients
            self.state.group = private_grouping(noisy, self.n_sel, order)
            self.state.sizes = np.bincount(self.state.group, minlength=self.n_sel)
            return {"group_sizes": self.state.sizes.tolist()}
        noisy = torch.as_tensor(noisy)
        if kind in ("selector", "warmup"):  # Eq. 8: the mean of the participants' models
            self.state.weights[index] = self.state.weights[index] + noisy / max(self.cfg.sample_rate * self.fed.n_clients, 1e-12)
            return {"selectors": [index]}
        # Eq. 6: φ_u += Σ_{m ∈ A_u} p_m Δ_m
        self.state.weights = clustered_step(self.state.weights, noisy, self.fed.n_clients, self.state.sizes,
                                            self.cfg.selector_weights)
        return {"selectors": list(range(self.n_sel))}

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self.state))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = SelectorState(**state)

    # -- releases ------------------------------------------------------------------------------------------
    def _selector_round(self, kind: str, index: int) -> Release:
        fed, cfg = self.fed, self.cfg
        q = cfg.sample_rate  # exactly the planned rate (not clients_per_round / n, which may differ in the last bit)
        cohort = fed.sample(q)
        single = kind in ("selector", "warmup")  # one selector trained by every cohort client
        position = dict(zip(cohort.ids, cohort.indices.tolist()))  # public: where each client sits in the federation
        # public: each cohort client's selector (in FedBiscuit's clustered rounds a function of the noisy grouping)
        selector_of = {c: index if single else int(self.state.group[p]) for c, p in position.items()}
        update = SelectorUpdate(self.adapter, self.task, self.pool, self.settings, list(self.state.weights),
                                [index] if single else list(range(self.n_sel)), selector_of, position,
                                cfg.pairs_per_client, self.pairs_total, self.public.seed,
                                AgreementTally(cfg.selector_batch_size) if cfg.record_agreement else None)
        width = len(update.slots) * self.adapter.numel
        # what every client downloads: the selectors it may train and the public pool's embeddings
        broadcast = ([update.weights[u] for u in update.slots], (self.pool.emb_a, self.pool.emb_b))
        return Release(cohort, update, Gaussian(self.sigma), cfg.clip, broadcast=broadcast,
                       chunk_clients=max(1, min(CHUNK_CLIENTS, (1 << 24) // width)),
                       row={"phase": kind, "round": int(cohort.round), **cohort_fields(cohort, fed.n_clients)})

    def _grouping(self, index: int) -> Release:
        """The selectors' log-odds on the public pairs are broadcast; each client computes, on its own data, its
        validation loss for every selector and its ranking (:func:`preference_scores`), placed in its own slot of an
        n·U vector; one release of their sum (every ranking + N(0, σ_g²) noise, sensitivity 1); the grouping is
        :meth:`step`'s."""
        fed, n_sel, k = self.fed, self.n_sel, self.cfg.pairs_per_client
        cohort = fed.everyone()
        n = len(cohort)
        batch = self.cfg.selector_batch_size
        # public: each selector's log-odds for A in both presentation orders of every pool pair, broadcast
        odds_ab = np.stack([self.task.log_odds(self._model_with(u), self.task.ab, batch) for u in range(n_sel)])
        odds_ba = np.stack([self.task.log_odds(self._model_with(u), self.task.ba, batch) for u in range(n_sel)])
        position = dict(zip(cohort.ids, cohort.indices.tolist()))
        slot = dict(zip(cohort.ids, range(n)))  # client i of the cohort writes slot i
        pool, n_pairs, seed = self.pool, self.pairs_total, self.public.seed

        def client_fn(chunk) -> np.ndarray:  # client side: its own validation losses and ranking, nothing else
            rows = np.zeros((len(chunk), n * n_sel), dtype=np.float32)
            if not len(chunk):
                return rows
            pairs, labels = own_pairs(chunk, position, pool, n_pairs, seed)
            val_pairs, val_labels = pairs[:, k:], labels[:, k:]
            sign = np.where(val_labels == 0, 1.0, -1.0)  # mean cross-entropy per selector, both orders
            losses = np.stack([(np.logaddexp(0.0, -sign * odds_ab[u][val_pairs]) +
                                np.logaddexp(0.0, sign * odds_ba[u][val_pairs])).mean(1) / 2 for u in range(n_sel)],
                              axis=1)
            return grouping_rows(losses, [slot[cid] for cid in chunk.ids], n)

        chunk = max(1, min(1024, (1 << 22) // max(n * n_sel, 1)))  # bounds the chunk's rows in memory
        return Release(cohort, client_fn, Gaussian(self.sigma_g), 1.0, chunk_clients=chunk, broadcast=(odds_ab, odds_ba),
                       row={"phase": "group", "round": int(cohort.round), "grouping": index})

    def _model_with(self, u: int):
        self.adapter.set(self.state.weights[u])
        return self.adapter.model
