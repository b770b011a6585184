"""Canary clients: made, flipped in or out by seeded coins, added to the train split, scored from a release.

Each of ``m`` canaries is included by its own fair coin (seeded by the audit seed). Included canaries join the
train split as ordinary clients: they are sampled, computed, clipped and noised exactly like the others, and the
accountant counts them. Held-out canaries are never seen by the run; they are the null the scores are compared to.

- **Model-update canaries** (DP-FedAvg, DP-FTRL). A canary client's update is a fixed random unit direction
  ``u_j`` (Gaussian, seeded per canary, over the flat parameter vector) scaled to the method's clip norm. The
  federation knows the canary ids (:meth:`CanaryPlan.federation_hook`) and, whenever a canary is in a cohort,
  its client computation returns ``clip · u_j`` instead of a local-SGD delta; the vector then goes through the
  same clipping and the same noisy sum as every other client's (Andrew et al., ICLR 2024, §3). Score: the cosine
  between ``u_j`` and the released model's delta from the public model, θ_released − θ_0.
- **Text canaries** (synthetic-data methods). A canary client owns three secret, random but well-formed
  sentences (a made-up person, place, object and number), unique to it. Its spans are ordinary spans: embedded,
  voted with, etc. Score: the largest cosine similarity between the canary's own text embedding (its three
  sentences as one text) and the embeddings of the released synthetic set.
- **Text canaries of methods that vote with span embeddings** (PE, PE+SFT, POPri: ``needs_span_embeddings``).
  A canary client owns one distinct span of the snapshot's public split (real text, spread like the data, so
  the canaries' nearest synthetic samples differ). Score: the smallest, over every noised sum the run released,
  inner product of the release with the canary's own clipped vector under that release's client function, / clip²
  (:mod:`largefedbench.audit.releases`).

Scores only read what the run released (the returned model, synthetic texts or noised sums); nothing else of the
run is used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from largefedbench.errors import InputError

__all__ = ["CANARY_PREFIX", "CanaryPlan", "canary_sentences", "text_scores", "update_scores", "with_canaries",
           "with_clients"]

CANARY_PREFIX = "lfb-canary-"

_FIRST = ["Ottilie", "Barnaby", "Zephyrine", "Leopold", "Marisol", "Thaddeus", "Ingrid", "Cosimo", "Philippa",
          "Evander", "Rosalind", "Alaric", "Henrietta", "Caspian", "Wilhelmina", "Florian"]
_PLACES = ["Quillby Marsh", "Upper Tamsworth", "the Vantry Islands", "Lake Orrowin", "Port Merriden",
           "the Glassmoor hills", "Little Hexham", "Saint Olvar", "the Brindle coast", "Kestrel Falls"]
_THINGS = ["brass telescope", "violet umbrella", "clockwork heron", "copper kettle", "woollen map",
           "porcelain lantern", "cedar harpsichord", "silver compass", "painted canoe", "glass accordion"]
_VERBS = ["repaired", "painted", "buried", "polished", "traded", "catalogued", "rescued", "sketched"]
_WHEN = ["every Tuesday at dawn", "during the lantern festival", "each spring before the floods",
         "on the night of the comet", "after the harvest fair", "whenever the ferry was late"]


def canary_sentences(rng: np.random.Generator) -> list[str]:
    """Three grammatical sentences about a made-up person, with a random four-digit number: one canary's secret."""
    pick = lambda words: words[int(rng.integers(len(words)))]  # noqa: E731
    who, where, thing, number = pick(_FIRST), pick(_PLACES), pick(_THINGS), int(rng.integers(1000, 10_000))
    return [f"{who} of {where} {pick(_VERBS)} a {thing} numbered {number} {pick(_WHEN)}.",
            f"The {pick(_THINGS)} that {who} kept near {pick(_PLACES)} was {pick(_VERBS)} {pick(_WHEN)}.",
            f"Nobody in {where} knew that {who} had {pick(_VERBS)} {number - 17} of them."]


@dataclass(frozen=True)
class CanaryPlan:
    """``m`` canaries of one ``kind`` ("update" or "text"), each included by a coin seeded by ``seed``.

    A text canary's span is its secret sentences, or, given a ``pool`` of public spans, one distinct pool span
    (drawn by ``seed``): real text spread like the data, so that the canaries' nearest synthetic samples differ
    and a release's vote for one canary is not another's (for scoring releases, :mod:`largefedbench.audit.releases`)."""

    m: int
    seed: int
    kind: str
    pool: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.m < 2:
            raise InputError(f"--canaries {self.m}: an audit needs at least 2 canaries (e.g. 100)")
        if self.kind not in ("update", "text"):
            raise InputError(f"canary kind {self.kind!r}: use 'update' (model methods) or 'text' (synthetic data)")
        if self.pool and len(self.pool) < self.m:
            raise InputError(f"--canaries {self.m}: the public split has {len(self.pool)} spans to draw distinct "
                             "canary texts from; use fewer canaries")

    def _rng(self, *stream: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence([self.seed, 0xCA7A, *stream]))

    @property
    def included(self) -> np.ndarray:
        """The coin flips: ``included[j]`` is True when canary ``j`` joins the train split."""
        return self._rng(0).random(self.m) < 0.5

    @property
    def ids(self) -> list[str]:
        return [f"{CANARY_PREFIX}{j:05d}" for j in range(self.m)]

    def texts(self, j: int) -> list[str]:
        """Canary ``j``'s spans: its secret sentences, or its own span of the pool."""
        if self.pool:
            return [self.pool[int(self._pool_picks[j])]]
        return canary_sentences(self._rng(1, j))

    @cached_property
    def _pool_picks(self) -> np.ndarray:
        return self._rng(2).choice(len(self.pool), size=self.m, replace=False)

    def direction(self, j: int, d: int) -> Any:
        """Canary ``j``'s unit direction in R^d (float32 torch tensor), the same on every call."""
        import torch

        digest = hashlib.sha256(f"{self.seed}:{j}".encode()).digest()
        gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)
        u = torch.randn(d, generator=gen, dtype=torch.float32)
        return u / torch.linalg.vector_norm(u)

    def federation_hook(self, norm: float):
        """``fn(client_ids, outputs) -> outputs`` for :attr:`Federation.client_outputs`: every included canary's
        row becomes ``norm · u_j`` (the rows of other clients are left as computed)."""
        index = {cid: j for j, cid in enumerate(self.ids)}

        def hook(ids: Sequence[str], out: Any) -> Any:
            rows = [(k, index[c]) for k, c in enumerate(ids) if c in index]
            if not rows:
                return out
            import torch

            out = out.clone() if isinstance(out, torch.Tensor) else np.array(out, copy=True)
            d = int(np.prod(tuple(out.shape[1:])))
            for k, j in rows:
                u = self.direction(j, d) * float(norm)
                out[k] = (u.to(out) if isinstance(out, torch.Tensor) else u.numpy()).reshape(out.shape[1:])
            return out

        return hook


def with_canaries(split, plan: CanaryPlan):
    """A new :class:`ClientSplit`: ``split``'s clients followed by the included canaries (their spans are their
    secret sentences; other columns empty)."""
    return with_clients(split, {plan.ids[j]: plan.texts(int(j)) for j in np.flatnonzero(plan.included)})


def with_clients(split, clients: dict[str, list[str]]):
    """A new :class:`ClientSplit`: ``split``'s clients followed by ``clients`` (id → spans; other columns empty)."""
    from datasets import concatenate_datasets

    from largefedbench.data.federated import ClientSplit

    clash = [c for c in clients if c in split]
    if clash:
        raise InputError(f"the split already has clients named like canaries ({clash[0]}); rename them")
    if not clients:
        return ClientSplit(split.name, split.table)
    return ClientSplit(split.name, concatenate_datasets([split.table, _client_table(clients, split.table)]))


def canary_split(plan: CanaryPlan, like):
    """Every canary, inserted or not, as a :class:`ClientSplit` with the columns of the split ``like``."""
    from largefedbench.data.federated import ClientSplit

    return ClientSplit("canaries", _client_table({plan.ids[j]: plan.texts(j) for j in range(plan.m)}, like.table))


def _client_table(clients: dict[str, list[str]], like):
    from datasets import Dataset

    rows = []
    for cid, spans in clients.items():
        row = {c: None for c in like.column_names}
        row.update(id=cid, spans=spans, n_spans=len(spans), n_tokens=sum(len(s.split()) for s in spans))
        rows.append(row)
    return Dataset.from_list(rows, features=like.features)


def update_scores(plan: CanaryPlan, delta: Any, *, progress: bool = False) -> np.ndarray:
    """Cosine between the released model delta (flat) and every canary's direction: shape (m,)."""
    import torch
    from tqdm.auto import tqdm

    delta = torch.as_tensor(delta).detach().float().flatten().cpu()
    norm = float(torch.linalg.vector_norm(delta))
    if norm == 0:
        return np.zeros(plan.m)
    bar = tqdm(range(plan.m), desc="scoring canaries", disable=not progress, leave=False)
    return np.array([float(plan.direction(j, delta.numel()) @ delta) / norm for j in bar])


def text_scores(plan: CanaryPlan, synthetic: Sequence[str], embed_fn) -> np.ndarray:
    """Largest cosine between each canary's text and the synthetic set: shape (m,). ``embed_fn`` gives unit rows."""
    if not len(synthetic):
        raise InputError("the run released no synthetic text to score the canaries against")
    canaries = np.asarray(embed_fn([" ".join(plan.texts(j)) for j in range(plan.m)]), dtype=np.float64)
    synth = np.asarray(embed_fn(list(synthetic)), dtype=np.float64)
    return (canaries @ synth.T).max(axis=1)
