"""The client update shared by DP-FedAvg and DP-FTRL, and their rounds loop (resume, validation selection).

Each cohort client starts from the global weights and runs local SGD over its own spans (McMahan et al. 2018,
Alg. 1 ``ClientUpdate``; POPri App. C.1: batch size 2, sequence length 64, one local epoch), then reports
Δ = local − global flattened to one vector. Spans are framed as the evaluation frames them
(``lm_sequences``: BOS + tokens + EOS, truncated to ``max_len``) and padding is excluded from the loss.

Two implementations give the same Δ (to float rounding):

- :func:`local_updates_loop` — the plain reference: one client after another, the HF model's own loss;
- :func:`local_updates_vmap` — the cohort at once (DESIGN.md §9): ``torch.func.functional_call`` + ``vmap`` +
  ``grad`` over per-client stacked weights, in chunks of clients so memory stays bounded. Step 0 is taken at
  the shared global weights (``in_dims=None``: plain matrix products). Clients have different numbers of
  batches: they are sorted by it, so at step ``s`` the clients that still train are a suffix of the chunk;
  the step runs on that suffix and the others' weights stay as they are (their step is masked out without
  being computed), so the result equals the loop.

Dropout is off (the model stays in eval mode) so local training is deterministic and vmap-able; the batch order
of each client comes from its own generator (inside ``fed.private_sum``: ``chunk.rng(i)``, seeded by the federation
seed, the round and the client id), so a client's Δ does not depend on the executor or on how the cohort is chunked.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap
from torch.nn.utils import parameters_to_vector

from largefedbench.errors import InputError, MethodError
from largefedbench.models.tokenizer import lm_sequences, pad_batch
from largefedbench.synthetic.dp_finetune import per_client
from largefedbench.synthetic.rounds import record_unreleased

__all__ = [
    "ClientBatches",
    "CohortTrainer",
    "CohortUpdate",
    "LocalSGD",
    "RoundRun",
    "UpdateNormTally",
    "client_batches",
    "flat_weights",
    "load_flat_weights",
    "local_updates_loop",
    "local_updates_vmap",
    "private_cohort_update",
    "update_norm_stats",
]

#: per client, its local steps in order; each step a batch of token-id sequences.
ClientBatches = list[list[list[list[int]]]]


@dataclass(frozen=True)
class LocalSGD:
    """Local training settings of one client (POPri App. C.1: SGD, batch 2, length 64, lr in [0.01, 0.06])."""

    lr: float
    batch_size: int
    epochs: int
    max_len: int
    max_steps: int | None = None  # cap on local steps per client (None: every batch of every local epoch)
    vectorize: bool = True
    chunk_clients: int = 16

    def __post_init__(self) -> None:
        if not self.lr >= 0:
            raise InputError(f"client lr={self.lr} must be >= 0")
        if self.batch_size < 1 or self.epochs < 1 or self.chunk_clients < 1:
            raise InputError("client batch size, local epochs and chunk_clients must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise InputError(f"max_local_steps={self.max_steps} must be at least 1 (or None for no cap)")


# -- weights as one flat vector ---------------------------------------------------------------------------
def flat_weights(model: torch.nn.Module) -> torch.Tensor:
    """The model's distinct parameters (tied weights once, in ``parameters()`` order) as one detached vector."""
    return parameters_to_vector(model.parameters()).detach().clone()


def load_flat_weights(model: torch.nn.Module, vector: torch.Tensor) -> torch.nn.Module:
    """Write a :func:`flat_weights` vector back into ``model`` (in place); returns the model."""
    with torch.no_grad():
        start = 0
        for p in model.parameters():
            p.copy_(vector[start : start + p.numel()].view_as(p))
            start += p.numel()
    return model


# -- the clients' batches ---------------------------------------------------------------------------------
Rngs = np.random.Generator | Sequence[np.random.Generator]


def client_batches(tokenizer, spans_per_client: Sequence[Sequence[str]], local: LocalSGD, rng: Rngs) -> ClientBatches:
    """Each client's local steps: per local epoch its sequences reshuffled and cut into batches, capped at
    ``local.max_steps``. One draw per client per epoch from that client's generator (``rng``: one per client, or
    one shared, drawn in cohort order)."""
    counts = [len(s) for s in spans_per_client]
    flat = lm_sequences(tokenizer, [s for spans in spans_per_client for s in spans], local.max_len)
    out: ClientBatches = []
    start = 0
    for n, own in zip(counts, per_client(rng, len(counts))):
        seqs, start = flat[start : start + n], start + n
        steps: list[list[list[int]]] = []
        for _ in range(local.epochs if n else 0):
            order = own.permutation(n)
            steps.extend([seqs[i] for i in order[b : b + local.batch_size]] for b in range(0, n, local.batch_size))
        out.append(steps[: local.max_steps] if local.max_steps is not None else steps)
    return out


# -- the reference: one client at a time ------------------------------------------------------------------
def local_updates_loop(model: torch.nn.Module, batches: ClientBatches, *, lr: float, pad_id: int) -> torch.Tensor:
    """Δ of every client, one after another with ``torch.optim.SGD`` and the model's own loss: (n, n_params)."""
    base = flat_weights(model)
    device = base.device
    local = copy.deepcopy(model).eval()
    rows = []
    for steps in batches:
        load_flat_weights(local, base)
        opt = torch.optim.SGD(local.parameters(), lr=lr)
        for batch in steps:
            ids, mask = pad_batch(batch, pad_id)
            ids, mask = ids.to(device), mask.to(device)
            loss = local(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        rows.append(flat_weights(local) - base)
    return torch.stack(rows) if rows else base.new_zeros((0, base.numel()))


# -- the cohort at once -----------------------------------------------------------------------------------
class _FunctionalLM:
    """A weight-free view of a causal LM for torch.func: ``loss(params, ids, targets)`` of one client's batch.

    The forward gets ``inputs_embeds`` (looked up here from the params, so tied input/output embeddings get
    both gradients) and no attention mask: with right padding a causal model's real positions never attend
    to pads, and padded targets are masked out of the loss, so the real tokens' loss is unchanged."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = copy.deepcopy(model).eval()
        if hasattr(self.model, "set_attn_implementation"):
            self.model.set_attn_implementation("eager")  # batching rules exist for every op (not for sdpa's backward)
        self.names = [n for n, _ in self.model.named_parameters()]
        self.shapes = [p.shape for _, p in self.model.named_parameters()]
        self.sizes = [p.numel() for _, p in self.model.named_parameters()]
        emb = self.model.get_input_embeddings().weight
        self.emb_name = next(n for n, p in self.model.named_parameters() if p is emb)
        for p in self.model.parameters():
            p.requires_grad_(False)

    def loss(self, params: dict[str, torch.Tensor], ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of one client's batch; ``targets`` are ``ids`` shifted left, -100 at pads."""
        embeds = F.embedding(ids, params[self.emb_name])
        logits = functional_call(self.model, params, (), {"inputs_embeds": embeds, "use_cache": False}).logits
        total = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100, reduction="sum")
        return total / (targets != -100).sum().clamp(min=1)

    def split(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        return {n: t.view(s) for n, t, s in zip(self.names, vector.split(self.sizes), self.shapes)}


def _step_tensors(clients: ClientBatches, step: int, batch_size: int, pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and shifted targets (C, B, T) of local step ``step`` of ``clients`` (each has that step); rows
    and positions beyond a client's batch are padding with target -100."""
    width = max(len(seq) for c in clients for seq in c[step])
    ids = torch.full((len(clients), batch_size, width), pad_id, dtype=torch.long)
    targets = torch.full((len(clients), batch_size, width), -100, dtype=torch.long)
    for c, client in enumerate(clients):
        for r, seq in enumerate(client[step]):
            row = torch.as_tensor(seq, dtype=torch.long)
            ids[c, r, : len(seq)] = row
            targets[c, r, : len(seq) - 1] = row[1:]
    return ids.to(device), targets.to(device)


def local_updates_vmap(model: torch.nn.Module | _FunctionalLM, batches: ClientBatches, *, lr: float, pad_id: int,
                       batch_size: int, chunk_clients: int = 16) -> torch.Tensor:
    """Δ of every client, ``chunk_clients`` at a time through ``vmap(grad(loss))``: (n, n_params).

    Clients are sorted by number of local steps, so in a chunk the clients still training at step ``s`` are a
    suffix of it: step ``s`` runs on that suffix only and the others keep their weights (their step is masked
    out without being computed). Step 0 is taken at the shared global weights (``in_dims=None``). Rows come back
    in the order of ``batches``. ``model`` may be a prepared :class:`_FunctionalLM` (holding the global weights)
    to skip the copy."""
    fn = model if isinstance(model, _FunctionalLM) else _FunctionalLM(model)
    base = flat_weights(fn.model)
    out = base.new_zeros((len(batches), base.numel()))
    order = [i for i in sorted(range(len(batches)), key=lambda i: len(batches[i])) if batches[i]]
    client_grad = vmap(grad(fn.loss))
    first_grad = vmap(grad(fn.loss), in_dims=(None, 0, 0))  # step 0: every client still holds the global weights
    shared = fn.split(base)
    for lo in range(0, len(order), chunk_clients):
        idx = order[lo : lo + chunk_clients]
        clients = [batches[i] for i in idx]
        first = 0  # clients[first:] have local step s
        with torch.no_grad():
            ids, targets = _step_tensors(clients, 0, batch_size, pad_id, base.device)
            params = {n: shared[n] - lr * g for n, g in first_grad(shared, ids, targets).items()}
            for s in range(1, len(clients[-1])):
                while len(clients[first]) <= s:
                    first += 1
                ids, targets = _step_tensors(clients[first:], s, batch_size, pad_id, base.device)
                grads = client_grad({n: p[first:] for n, p in params.items()}, ids, targets)
                for n, g in grads.items():
                    params[n][first:] -= lr * g
            out[idx] = torch.cat([params[n].flatten(1) for n in fn.names], dim=1) - base
    return out


class CohortTrainer:
    """Runs a round's client updates from given global weights (the body of :class:`CohortUpdate`).

    Holds its own copies of the model (the caller's model is never touched): a plain one for the loop and,
    when ``local.vectorize``, a functional one for vmap."""

    def __init__(self, model: torch.nn.Module, tokenizer, local: LocalSGD) -> None:
        self.local = local
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self._functional = _FunctionalLM(model) if local.vectorize else None
        self._model = None if local.vectorize else copy.deepcopy(model).eval()

    def __call__(self, weights: torch.Tensor, spans_per_client: Sequence[Sequence[str]], rng: Rngs) -> torch.Tensor:
        """Every client's Δ = local − ``weights`` after local SGD on its spans (batch order from ``rng``: one
        generator per client, or one shared): (n_clients, n_params)."""
        batches = client_batches(self.tokenizer, spans_per_client, self.local, rng)
        if self._functional is not None:
            load_flat_weights(self._functional.model, weights)
            return local_updates_vmap(self._functional, batches, lr=self.local.lr, pad_id=self.pad_id,
                                      batch_size=self.local.batch_size, chunk_clients=self.local.chunk_clients)
        load_flat_weights(self._model, weights)
        return local_updates_loop(self._model, batches, lr=self.local.lr, pad_id=self.pad_id)


class UpdateNormTally:
    """Running raw-update-norm statistics of one round (sum of norms, number above ``clip``), kept inside the client
    function: an aggregate, never per-client rows. Like :func:`update_norm_stats`, not differentially private (an
    unreleased diagnostic), and only filled on the ``local`` executor (a Ray worker fills its own copy)."""

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
    """The batched client function of DP-FedAvg and DP-FTRL for ``fed.private_sum(…, batched=True)``: every client
    of a chunk runs local SGD from ``weights`` on its own spans and returns Δ; ``tally`` (optional) accumulates the
    raw update norms. Each client's batch order comes from its own generator (``chunk.rng(i)``: federation seed,
    round, client id), so the sum is the same on every executor and for every chunking."""

    trainer: CohortTrainer
    weights: torch.Tensor
    tally: UpdateNormTally | None = None

    def __call__(self, chunk: Any) -> torch.Tensor:
        updates = self.trainer(self.weights, chunk.spans, [chunk.rng(i) for i in range(len(chunk))])
        if self.tally is not None:
            self.tally.add(updates)
        return updates


def private_cohort_update(fed, cohort, update: CohortUpdate, *, clip: float, mechanism, chunk_clients: int,
                          public=None, round_: int | None = None) -> torch.Tensor:
    """The round's noised sum of clipped client updates through the federation's one door (chunk by chunk: memory
    holds ``chunk_clients`` updates). With ``update.tally`` the raw-norm diagnostic is written to the run folder's
    unreleased file (``public``, ``round_``)."""
    noisy = fed.private_sum(cohort, update, clip=clip, mechanism=mechanism, batched=True, chunk_clients=chunk_clients,
                            download_floats=update.weights.numel())
    if update.tally is not None:
        if update.tally.n != len(cohort):
            raise InputError("record_update_norms needs the local executor: the raw update norms are a diagnostic "
                             "kept in this process and never leave a Ray worker; turn it off or use --executor local")
        record_unreleased(public, round_, update.tally.summary())
    return noisy


def update_norm_stats(updates: torch.Tensor, clip: float) -> dict[str, float]:
    """Mean L2 norm of the raw client updates and the fraction above ``clip``.

    These are computed from the unnoised updates, so they are *not* differentially private: a diagnostic
    for tuning the clip on test data, recorded only when a method's config asks for it."""
    if len(updates) == 0:
        return {"mean_update_norm": 0.0, "fraction_clipped": 0.0}
    norms = torch.linalg.vector_norm(updates.float(), dim=1)
    return {"mean_update_norm": float(norms.mean()), "fraction_clipped": float((norms > clip).float().mean())}


# -- the rounds loop: resume, progress, validation selection, checkpoints ----------------------------------
class RoundRun:
    """The plumbing of a rounds loop shared by DP-FedAvg and DP-FTRL.

    Validation top-1 after round 0 (the public model), every ``eval_every`` rounds and the last round; the best
    round's weights are kept on the CPU (POPri §5 and App. C.1: the reported model is the one with the best
    validation performance). One history row per round, a progress bar, and a checkpoint after every completed
    round (``public.save_round``) that :meth:`resume` continues from exactly. ``fingerprint`` (config, σ, …)
    is stored with it; a checkpoint with another fingerprint is refused rather than silently mixed."""

    def __init__(self, fed, public, *, desc: str, rounds: int, eval_every: int, fingerprint: dict[str, Any]) -> None:
        if rounds < 1 or eval_every < 1:
            raise InputError(f"rounds={rounds} and eval_every={eval_every} must be at least 1")
        self.fed, self.public, self.desc = fed, public, desc
        self.rounds, self.eval_every, self.fingerprint = rounds, eval_every, fingerprint
        self.history: list[dict[str, Any]] = []
        self.last_round = 0
        self.best_round: int | None = None
        self.best_top1 = -float("inf")
        self.best_weights: torch.Tensor | None = None

    def resume(self) -> dict[str, Any] | None:
        """The method's server state after the last completed round of an interrupted run (``fed`` restored),
        or None for a fresh run."""
        resumed = self.public.resume(self.fed)
        if resumed is None:
            return None
        last, state = resumed
        if state.get("fingerprint") != self.fingerprint:
            raise MethodError(f"the round checkpoint in {self.public.run_dir} was written by another configuration "
                              f"({state.get('fingerprint')} vs {self.fingerprint}); use a new run directory or "
                              "clear the checkpoint")
        self.last_round, self.history = last, list(state["history"])
        self.best_round, self.best_top1, self.best_weights = state["best_round"], state["best_top1"], state["best_weights"]
        return state["server"]

    def start(self, model: torch.nn.Module, weights: torch.Tensor) -> None:
        """Round 0 of a fresh run: validate the public model."""
        self.history.append({"round": 0, "cohort_size": 0, "validation_top1": self._validate(0, model, weights)})

    def rounds_left(self) -> Iterator[int]:
        """The round numbers still to run (1-based), with the progress bar."""
        bar = self.public.bar(total=self.rounds, desc=self.desc, initial=self.last_round)
        try:
            for r in range(self.last_round + 1, self.rounds + 1):
                yield r
                bar.update(1)
                bar.set_postfix(best_top1=f"{self.best_top1:.4f}", best_round=self.best_round)
        finally:
            bar.close()

    def complete(self, r: int, row: dict[str, Any], model: torch.nn.Module, weights: torch.Tensor,
                 server: dict[str, Any]) -> None:
        """Finish round ``r``: validate if due (``model`` holds ``weights``), record ``row``, checkpoint."""
        if r % self.eval_every == 0 or r == self.rounds:
            row["validation_top1"] = self._validate(r, model, weights)
        self.history.append({"round": r, **row})
        self.last_round = r
        self.public.save_round(self.fed, r, {
            "fingerprint": self.fingerprint, "history": self.history, "best_round": self.best_round,
            "best_top1": self.best_top1, "best_weights": self.best_weights, "server": server,
        })

    def _validate(self, r: int, model: torch.nn.Module, weights: torch.Tensor) -> float:
        top1 = float(self.public.validation_accuracy(model)["top1"])
        if top1 > self.best_top1:
            self.best_round, self.best_top1, self.best_weights = r, top1, weights.detach().cpu().clone()
        return top1
