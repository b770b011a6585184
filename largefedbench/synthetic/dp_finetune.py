"""User-level DP fine-tuning of a LoRA adapter with DP-FedAvg, shared by the methods that train a model privately
(DP instruction resampling, CTCL, weak-client voting's strong clients, FedBis/FedBiscuit's selectors).

One round (McMahan et al. 2018, "Learning differentially private recurrent language models", Alg. 1 with the
fixed-denominator estimator):

1. ``fed.sample(q)`` draws a Poisson cohort (q = expected clients per round / number of clients: the rate the
   accountant uses);
2. each cohort client starts from the global adapter and runs local SGD on its own examples (for a generator: its
   spans, each after its conditioning prefix, loss on the span only); it reports Δ = local − global adapter weights,
   flattened;
3. ``fed.private_sum`` (mechanism ``Gaussian(σ)``) runs the client updates on the clients, clips every Δ to L2 ≤
   ``clip``, sums, adds N(0, (σ·clip)²) and records a ``PoissonGaussianEvent(σ, q)``;
4. the server divides by the *expected* cohort size q·N and takes a server step: SGD with optional momentum on the
   mean Δ (DP-FedAvg), or Adam on it (DP-FedAdam; with one local step of client lr 1 this is user-level DP-Adam where
   one client's averaged gradient is one "example": the cheapest faithful user-level form of a paper's DP-Adam).

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

from largefedbench.errors import InputError, MethodError
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.privacy.mechanisms import Gaussian
from largefedbench.synthetic.rounds import cohort_fields

__all__ = [
    "AdapterVector",
    "DPFedAvg",
    "FedAvgServer",
    "LMExample",
    "attention_targets",
    "conditional_prompt",
    "conditional_sequences",
    "generator_update",
    "lm_loss",
    "local_steps",
    "local_updates",
    "lora_generator",
    "per_client",
    "pretrain_on_public",
    "require_private_budget",
    "run_round",
    "start_text",
    "train_adapter",
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
    server_optimizer: str = "sgd"  # "sgd" (with momentum) or "adam"
    client_optimizer: str = "sgd"  # "sgd" or "adamw" (a fresh AdamW per client and round, no weight decay)
    client_betas: tuple[float, float] = (0.9, 0.999)
    max_len: int = 96

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.clients_per_round <= 0 or self.clip <= 0:
            raise InputError(f"DP-FedAvg needs rounds >= 1, clients_per_round > 0 and clip > 0; got {self}")
        if self.local_epochs < 1 or self.local_batch_size < 1 or (self.max_local_steps is not None and self.max_local_steps < 1):
            raise InputError("local epochs, local batch size and max_local_steps must be at least 1")
        if self.server_optimizer not in ("sgd", "adam"):
            raise InputError(f"server_optimizer={self.server_optimizer!r}; choose 'sgd' or 'adam'")
        if self.client_optimizer not in ("sgd", "adamw"):
            raise InputError(f"client_optimizer={self.client_optimizer!r}; choose 'sgd' or 'adamw'")

    def sample_rate(self, n_clients: int) -> float:
        """Poisson rate q = clients_per_round / n_clients (capped at 1)."""
        if n_clients < 1:
            raise InputError("DP-FedAvg needs at least one client")
        return min(1.0, float(self.clients_per_round) / n_clients)

    def events(self, noise_multiplier: float, n_clients: int, rounds: int | None = None) -> list[PoissonGaussianEvent]:
        """The ledger events of ``rounds`` (default: all) rounds at ``noise_multiplier``: what ``run_round`` records."""
        n = self.rounds if rounds is None else rounds
        return [PoissonGaussianEvent(noise_multiplier, self.sample_rate(n_clients), n)] if n > 0 else []


def require_private_budget(budget, method: str) -> None:
    """Stop unless 0 < ε < ∞: the references are the methods 'public' (ε = 0) and 'non-private' (ε = ∞)."""
    if budget.is_public or budget.is_non_private:
        raise MethodError(f"{method} runs at 0 < ε < ∞, got ε = {budget.epsilon}; the ε = 0 and ε = ∞ points are the "
                          "methods 'public' and 'non-private'")


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


def per_client(rng: np.random.Generator | Sequence[np.random.Generator], n: int) -> Sequence[np.random.Generator]:
    """One generator per client: ``rng`` itself if it is ``n`` generators (each client's own), or one shared generator
    drawn client after client."""
    if isinstance(rng, np.random.Generator):
        return [rng] * n
    if len(rng) != n:
        raise InputError(f"{len(rng)} generators for {n} clients: pass one generator per client (or one shared)")
    return rng


def local_updates(adapter: AdapterVector, clients: Sequence[Sequence[Any]], loss_fn: Callable[[Sequence[Any]], torch.Tensor],
                  settings: DPFedAvg, rng: np.random.Generator | Sequence[np.random.Generator]) -> torch.Tensor:
    """Δ of every client from the adapter's current weights (restored afterwards): ``(len(clients), adapter.numel)``.

    ``clients[i]`` is client i's examples; ``loss_fn(batch)`` is the mean loss of a batch of them under the model's
    current weights. SGD (or a fresh AdamW) with ``settings.client_lr``; a client without examples reports Δ = 0.
    Batch order: ``rng[i]`` is client i's own generator (inside ``private_sum``: ``chunk.rng(i)``), or one shared
    generator is drawn client after client."""
    base = adapter.get()
    rows = torch.zeros((len(clients), adapter.numel))
    rngs = per_client(rng, len(clients))
    was_training = adapter.model.training
    adapter.model.eval()  # dropout off: a client's update is a deterministic function of its data and its batch order
    try:
        for i, examples in enumerate(clients):
            steps = local_steps(len(examples), settings, rngs[i])
            if not steps:
                continue
            adapter.set(base)
            opt = (torch.optim.AdamW(adapter.params, lr=settings.client_lr, betas=settings.client_betas, weight_decay=0.0)
                   if settings.client_optimizer == "adamw" else None)
            for step in steps:
                loss = loss_fn([examples[j] for j in step])
                grads = torch.autograd.grad(loss, adapter.params)
                with torch.no_grad():
                    for p, g in zip(adapter.params, grads):
                        if opt is None:
                            p.sub_(settings.client_lr * g)
                        else:
                            p.grad = g
                if opt is not None:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            rows[i] = adapter.get() - base
    finally:
        adapter.set(base)
        adapter.model.train(was_training)
    return rows


# -- the server ---------------------------------------------------------------------------------------------
class FedAvgServer:
    """The global adapter and the server optimizer, applied to the mean update (the negated pseudo-gradient)."""

    ADAM_BETAS = (0.9, 0.999)
    ADAM_EPS = 1e-8

    def __init__(self, adapter: AdapterVector, settings: DPFedAvg) -> None:
        self.adapter = adapter
        self.settings = settings
        self.momentum = torch.zeros(adapter.numel)
        self.second = torch.zeros(adapter.numel)
        self.steps = 0

    def step(self, noisy_sum: torch.Tensor, expected_clients: float) -> float:
        """Apply one round's released sum; returns the L2 norm of the noisy mean update (post-processing only)."""
        mean = torch.as_tensor(noisy_sum, dtype=torch.float32).reshape(-1) / max(float(expected_clients), 1e-12)
        self.steps += 1
        if self.settings.server_optimizer == "adam":
            b1, b2 = self.ADAM_BETAS
            self.momentum = b1 * self.momentum + (1 - b1) * mean
            self.second = b2 * self.second + (1 - b2) * mean * mean
            m_hat = self.momentum / (1 - b1**self.steps)
            v_hat = self.second / (1 - b2**self.steps)
            move = m_hat / (v_hat.sqrt() + self.ADAM_EPS)
        else:
            self.momentum = self.settings.server_momentum * self.momentum + mean
            move = self.momentum
        self.adapter.set(self.adapter.get() + self.settings.server_lr * move)
        return float(torch.linalg.vector_norm(mean))

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.adapter.get(), "momentum": self.momentum.clone(), "second": self.second.clone(),
                "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.adapter.set(state["weights"])
        self.momentum = state["momentum"].clone()
        self.second = state["second"].clone()
        self.steps = int(state["steps"])


#: clients per chunk of a round's ``private_sum`` (memory holds this many Δ rows)
CHUNK_CLIENTS = 64

#: a client update: ``client_update(chunk, spans)`` → one Δ row per client of the chunk (a ``ChunkView``), trained on
#: ``spans`` (the chunk's own spans, or a subset a method keeps); runs inside ``Federation.private_sum``
ClientUpdate = Callable[[Any, list[list[str]]], torch.Tensor]


def run_round(fed, server: FedAvgServer, sigma: float, client_update: ClientUpdate, *, rate: float | None = None,
              expected_clients: float | None = None, download_floats: int = 0,
              chunk_clients: int = CHUNK_CLIENTS) -> dict[str, Any]:
    """One DP-FedAvg round: Poisson cohort at ``rate`` (default the settings' q), ``client_update(chunk, spans)`` → Δ
    rows inside ``fed.private_sum`` (clipped, summed, ``Gaussian(σ)``: one ledger event; ``chunk_clients`` clients a
    chunk), server step dividing by ``expected_clients`` (default q·N). ``download_floats`` is what a client downloads
    besides the adapter. Returns the round's public record."""
    settings = server.settings
    q = settings.sample_rate(fed.n_clients) if rate is None else rate
    cohort = fed.sample(q)
    width = server.adapter.numel

    def client_fn(chunk) -> torch.Tensor:
        return client_update(chunk, chunk.spans) if len(chunk) else torch.zeros((0, width))

    noisy = fed.private_sum(cohort, client_fn, clip=settings.clip, mechanism=Gaussian(sigma), batched=True,
                            chunk_clients=chunk_clients, download_floats=width + int(download_floats))
    norm = server.step(noisy, q * fed.n_clients if expected_clients is None else expected_clients)
    return {"round": int(cohort.round), **cohort_fields(cohort, fed.n_clients), "noisy_update_norm": round(norm, 6)}


def generator_update(adapter: AdapterVector, tokenizer, settings: DPFedAvg, *, seed: int,
                     prefixes: Callable[[Any], Sequence[str]] | None = None) -> ClientUpdate:
    """The ``client_update`` of generator fine-tuning: each client trains on its spans, each after its conditioning
    prefix (``prefixes(chunk)[i]`` is chunk client i's own prefix, computed on the client from its own data or
    metadata, e.g. ``chunk.metadata``; none for an unconditional generator). Each client's batch order comes from
    its own generator (``chunk.rng(i, seed, …)``: federation seed, round, client id and ``seed``), so a resumed run
    repeats it and neither the executor nor the chunking changes it."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def client_update(chunk, spans: list[list[str]]) -> torch.Tensor:
        heads = list(prefixes(chunk)) if prefixes is not None else [""] * len(spans)
        flat = conditional_sequences(tokenizer, [h for h, s in zip(heads, spans) for _ in s],
                                     [t for s in spans for t in s], settings.max_len)
        bounds = np.cumsum([0] + [len(s) for s in spans])
        clients = [flat[bounds[i] : bounds[i + 1]] for i in range(len(spans))]
        rngs = [chunk.rng(i, int(seed), 0x10CA1) for i in range(len(spans))]
        return local_updates(adapter, clients, lambda batch: lm_loss(adapter.model, batch, pad_id), settings, rngs)

    return client_update


# -- the generator's adapter and the fine-tuning loop -------------------------------------------------------
def attention_targets(model) -> list[str]:
    """LoRA on the attention weights only (Yu et al. 2024 App. F.2, following Hu et al. 2022): GPT-2's fused q/k/v
    ``c_attn`` and attention output ``attn.c_proj``; q, k, v, o projections elsewhere."""
    if getattr(model.config, "model_type", "") == "gpt2":
        return ["c_attn", "attn.c_proj"]
    return ["q_proj", "k_proj", "v_proj", "o_proj"]


def lora_generator(models, *, rank: int, alpha: int, dropout: float = 0.0, attention_only: bool = False):
    """A fresh copy of the profile's generator with a new LoRA adapter (identical to the public model at first)."""
    from largefedbench.synthetic.lora import add_lora

    model = models.new_generator()
    targets = attention_targets(model) if attention_only else None
    return add_lora(model, rank=rank, alpha=alpha, dropout=dropout, target_modules=targets)


def train_adapter(fed, public, server: FedAvgServer, sigma: float, client_update: ClientUpdate, *,
                  desc: str = "DP fine-tuning", phase: str = "generator", rate: float | None = None,
                  expected_clients: float | None = None, download_floats: int = 0,
                  chunk_clients: int = CHUNK_CLIENTS) -> list[dict[str, Any]]:
    """``server.settings.rounds`` DP-FedAvg rounds (see :func:`run_round` for ``rate``/``expected_clients``/
    ``download_floats``/``chunk_clients``) with a checkpoint after each (``public.save_round``); an interrupted run
    resumes from its last completed round (``public.resume``). Returns one public record per round."""
    rounds = server.settings.rounds
    history: list[dict[str, Any]] = []
    start = 0
    resumed = public.resume(fed)
    if resumed is not None:
        state = resumed[1]
        server.load_state_dict(state["server"])
        history, start = list(state["history"]), int(state["rounds_done"])
    with public.bar(total=rounds, desc=desc, initial=start) as bar:
        for r in range(start, rounds):
            record = run_round(fed, server, sigma, client_update, rate=rate, expected_clients=expected_clients,
                               download_floats=download_floats, chunk_clients=chunk_clients)
            history.append({"phase": phase, **record})
            public.save_round(fed, r, {"server": server.state_dict(), "history": history, "rounds_done": r + 1})
            bar.update(1)
    return history


def pretrain_on_public(model, tokenizer, prefixes: Sequence[str], texts: Sequence[str], *, steps: int, batch_size: int,
                       lr: float, seed: int, max_len: int, progress: bool = False) -> dict[str, Any]:
    """Non-private training of ``model``'s trainable parameters on public (prefix, text) pairs, in the same sequence
    format as DP fine-tuning (AdamW, batches drawn without replacement per step). Returns the mean loss of the first
    and of the last five steps."""
    examples = conditional_sequences(tokenizer, prefixes, texts, max_len)
    if not examples or steps < 1:
        return {"steps": 0}
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x9B11C]))
    losses = []
    model.eval()  # no dropout, as in the DP rounds
    from tqdm.auto import tqdm

    for _ in tqdm(range(steps), desc="public pretraining", disable=not progress, leave=False):
        idx = rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)
        loss = lm_loss(model, [examples[i] for i in idx], pad_id)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return {"steps": steps, "loss_first": round(float(np.mean(losses[:5])), 4),
            "loss_last": round(float(np.mean(losses[-5:])), 4)}
