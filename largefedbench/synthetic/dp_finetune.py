"""User-level DP fine-tuning of a LoRA adapter with DP-FedAvg, shared by the methods that train a model privately
(DP instruction resampling, CTCL, weak-client voting's strong clients, FedBis/FedBiscuit's selectors).

One round (McMahan et al. 2018, "Learning differentially private recurrent language models", Alg. 1 with the
fixed-denominator estimator):

1. ``fed.sample(q)`` draws a Poisson cohort (q = expected clients per round / number of clients: the rate the
   accountant uses);
2. each cohort client starts from the global adapter and runs local SGD on its own examples (for a generator: its
   spans, each after its conditioning prefix, loss on the span only); it reports Δ = local − global adapter weights,
   flattened;
3. ``fed.noisy_sum`` clips every Δ to L2 ≤ ``clip``, sums, adds N(0, (σ·clip)²) and records a
   ``PoissonGaussianEvent(σ, q)``;
4. the server divides by the *expected* cohort size q·N and takes a server step (SGD with optional momentum).

Only the adapter moves; the base model is frozen. σ comes from the method's composed plan: :meth:`DPFedAvg.events`
gives the planned ledger events of the rounds so a method can add its other releases and calibrate once.

Sequence format (training and generation must agree): ``[BOS] + prefix + text + [EOS]`` with the loss on text and
EOS; generation prompts are :func:`conditional_prompt` (the BOS as text when the tokenizer does not add one itself,
then the prefix), so the generator continues exactly where training put the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from largefedbench.errors import InputError
from largefedbench.privacy import PoissonGaussianEvent

__all__ = [
    "AdapterVector",
    "DPFedAvg",
    "FedAvgServer",
    "LMExample",
    "conditional_prompt",
    "conditional_sequences",
    "generator_update",
    "lm_loss",
    "local_updates",
    "local_steps",
    "run_round",
    "start_text",
]


@dataclass(frozen=True)
class DPFedAvg:
    """DP-FedAvg settings: rounds, expected cohort, clip, client SGD, server step."""

    rounds: int
    clients_per_round: float
    clip: float
    client_lr: float
    local_epochs: int = 1
    local_batch_size: int = 8
    max_local_steps: int | None = None
    server_lr: float = 1.0
    server_momentum: float = 0.0
    max_len: int = 96

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.clients_per_round <= 0 or self.clip <= 0:
            raise InputError(f"DP-FedAvg needs rounds >= 1, clients_per_round > 0 and clip > 0; got {self}")
        if self.local_epochs < 1 or self.local_batch_size < 1 or (self.max_local_steps is not None and self.max_local_steps < 1):
            raise InputError("local epochs, local batch size and max_local_steps must be at least 1")

    def sample_rate(self, n_clients: int) -> float:
        """Poisson rate q = clients_per_round / n_clients (capped at 1)."""
        if n_clients < 1:
            raise InputError("DP-FedAvg needs at least one client")
        return min(1.0, float(self.clients_per_round) / n_clients)

    def events(self, noise_multiplier: float, n_clients: int, rounds: int | None = None) -> list[PoissonGaussianEvent]:
        """The ledger events of ``rounds`` (default: all) rounds at ``noise_multiplier``: what ``run_round`` records."""
        n = self.rounds if rounds is None else rounds
        return [PoissonGaussianEvent(noise_multiplier, self.sample_rate(n_clients), n)] if n > 0 else []


# -- the adapter as one flat vector -------------------------------------------------------------------------
class AdapterVector:
    """The trainable parameters of ``model`` (its LoRA adapter) read and written as one flat float32 vector."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise InputError("the model has no trainable parameters: add a LoRA adapter first")
        self.numel = sum(p.numel() for p in self.params)

    def get(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).float() for p in self.params]).clone()

    def set(self, vector: torch.Tensor) -> None:
        with torch.no_grad():
            start = 0
            for p in self.params:
                p.copy_(vector[start : start + p.numel()].view_as(p).to(p.dtype))
                start += p.numel()


# -- sequences ----------------------------------------------------------------------------------------------
def start_text(tokenizer) -> str:
    """Text that starts a sequence: empty when the tokenizer adds a BOS itself (LLaMA), else the BOS token (GPT-2)."""
    if tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id] and tokenizer.bos_token_id is not None:
        return ""
    if tokenizer.bos_token is None:
        raise InputError("the generator tokenizer has no BOS token; pass it through ensure_special_tokens first")
    return tokenizer.bos_token


def conditional_prompt(tokenizer, prefix: str = "") -> str:
    """The generation prompt whose tokens are ``[BOS] + prefix``: the start of a training sequence."""
    return start_text(tokenizer) + prefix


@dataclass(frozen=True)
class LMExample:
    """Token ids of one training sequence and how many leading ids (BOS + prefix) carry no loss."""

    ids: list[int]
    n_context: int


def conditional_sequences(tokenizer, prefixes: Sequence[str], texts: Sequence[str], max_len: int) -> list[LMExample]:
    """``[BOS] + prefix + text + [EOS]`` per pair, the text (with EOS) truncated to ``max_len`` ids."""
    if len(prefixes) != len(texts):
        raise InputError(f"{len(prefixes)} prefixes for {len(texts)} texts")
    if max_len < 2:
        raise InputError(f"max_len={max_len} must leave room for a token and EOS")
    if not texts:
        return []
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is None or eos is None:
        raise InputError("the tokenizer needs BOS and EOS tokens")
    body = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    unique = sorted(set(prefixes))
    heads = dict(zip(unique, tokenizer(unique, add_special_tokens=False)["input_ids"])) if any(unique) else {"": []}
    out = []
    for prefix, ids in zip(prefixes, body):
        head = [bos] + list(heads.get(prefix, []))
        out.append(LMExample(head + (list(ids)[: max_len - 1] + [eos]), len(head)))
    return out


def _pad(examples: Sequence[LMExample], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for r, e in enumerate(examples):
        row = torch.as_tensor(e.ids, dtype=torch.long)
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
        labels[r, e.n_context : len(row)] = row[e.n_context :]
    return ids.to(device), mask.to(device), labels.to(device)


def lm_loss(model, batch: Sequence[LMExample], pad_id: int) -> torch.Tensor:
    """Mean next-token cross-entropy over the text tokens (and EOS) of ``batch``; context tokens carry no loss."""
    device = next(model.parameters()).device
    ids, mask, labels = _pad(batch, pad_id, device)
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss


# -- local training -----------------------------------------------------------------------------------------
def local_steps(n_examples: int, settings: DPFedAvg, rng: np.random.Generator) -> list[list[int]]:
    """A client's local steps as example indices: per local epoch a fresh shuffle cut into batches, capped."""
    steps: list[list[int]] = []
    for _ in range(settings.local_epochs if n_examples else 0):
        order = rng.permutation(n_examples)
        steps.extend(order[b : b + settings.local_batch_size].tolist() for b in range(0, n_examples, settings.local_batch_size))
    return steps[: settings.max_local_steps] if settings.max_local_steps is not None else steps


def local_updates(adapter: AdapterVector, clients: Sequence[Sequence[Any]], loss_fn: Callable[[Sequence[Any]], torch.Tensor],
                  settings: DPFedAvg, rng: np.random.Generator) -> torch.Tensor:
    """Δ of every client from the adapter's current weights (restored afterwards): ``(len(clients), adapter.numel)``.

    ``clients[i]`` is client i's examples; ``loss_fn(batch)`` is the mean loss of a batch of them under the model's
    current weights. Plain SGD with ``settings.client_lr``; a client without examples reports Δ = 0."""
    base = adapter.get()
    rows = torch.zeros((len(clients), adapter.numel))
    was_training = adapter.model.training
    adapter.model.eval()  # dropout off: a client's update is a deterministic function of its data and its batch order
    try:
        for i, examples in enumerate(clients):
            steps = local_steps(len(examples), settings, rng)
            if not steps:
                continue
            adapter.set(base)
            for step in steps:
                loss = loss_fn([examples[j] for j in step])
                grads = torch.autograd.grad(loss, adapter.params)
                with torch.no_grad():
                    for p, g in zip(adapter.params, grads):
                        p.sub_(settings.client_lr * g)
            rows[i] = adapter.get() - base
    finally:
        adapter.set(base)
        adapter.model.train(was_training)
    return rows


# -- the server ---------------------------------------------------------------------------------------------
class FedAvgServer:
    """The global adapter and the server optimizer (SGD with momentum on the negated mean update)."""

    def __init__(self, adapter: AdapterVector, settings: DPFedAvg) -> None:
        self.adapter = adapter
        self.settings = settings
        self.momentum = torch.zeros(adapter.numel)

    def step(self, noisy_sum: torch.Tensor, expected_clients: float) -> float:
        """Apply one round's released sum; returns the L2 norm of the noisy mean update (post-processing only)."""
        mean = torch.as_tensor(noisy_sum, dtype=torch.float32).reshape(-1) / max(float(expected_clients), 1e-12)
        self.momentum = self.settings.server_momentum * self.momentum + mean
        self.adapter.set(self.adapter.get() + self.settings.server_lr * self.momentum)
        return float(torch.linalg.vector_norm(mean))

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.adapter.get(), "momentum": self.momentum.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.adapter.set(state["weights"])
        self.momentum = state["momentum"].clone()


def run_round(fed, server: FedAvgServer, sigma: float, client_update: Callable[[Any, list[list[str]]], torch.Tensor], *,
              rate: float | None = None) -> dict[str, Any]:
    """One DP-FedAvg round: Poisson cohort, ``client_update(cohort, spans_per_client)`` → Δ rows inside the client
    map, clipped noisy sum (one ledger event), server step. Returns the round's public record."""
    settings = server.settings
    q = settings.sample_rate(fed.n_clients) if rate is None else rate
    cohort = fed.sample(q)
    width = server.adapter.numel

    def batch_fn(spans: list[list[str]]) -> torch.Tensor:
        return client_update(cohort, spans) if spans else torch.zeros((0, width))

    deltas = fed.map(cohort, batch_fn=batch_fn, download_floats=width)
    noisy = fed.noisy_sum(deltas, clip=settings.clip, noise_multiplier=sigma, cohort=cohort)
    norm = server.step(noisy, q * fed.n_clients)
    return {"round": int(cohort.round), "clients": len(cohort), "noisy_update_norm": round(norm, 6)}


def generator_update(adapter: AdapterVector, tokenizer, settings: DPFedAvg, *, seed: int,
                     prefixes: Callable[[Any], Sequence[str]] | None = None) -> Callable[[Any, list[list[str]]], torch.Tensor]:
    """The ``client_update`` of generator fine-tuning: each client trains on its spans, each after its conditioning
    prefix (``prefixes(cohort)[i]`` is cohort client i's own prefix, computed from its own data or metadata; none
    for an unconditional generator). Batch order is seeded by (``seed``, round), so a resumed run repeats it."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def client_update(cohort, spans: list[list[str]]) -> torch.Tensor:
        heads = list(prefixes(cohort)) if prefixes is not None else [""] * len(spans)
        flat = conditional_sequences(tokenizer, [h for h, s in zip(heads, spans) for _ in s],
                                     [t for s in spans for t in s], settings.max_len)
        bounds = np.cumsum([0] + [len(s) for s in spans])
        clients = [flat[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x10CA1, int(cohort.round)]))
        return local_updates(adapter, clients, lambda batch: lm_loss(adapter.model, batch, pad_id), settings, rng)

    return client_update
