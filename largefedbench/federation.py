"""The federation: the only door through which a method touches private client data (DESIGN.md §5).

A method gets a :class:`Federation` over the private train clients and may only

- ``sample(rate)`` a Poisson cohort (each client in independently with probability ``rate``: the rate the
  accountant uses), take ``everyone()``, or cut a shuffled ``epoch`` into fixed-size cohorts;
- ``private_sum(cohort, client_fn, clip=…, mechanism=…)`` — **the one door**: ``client_fn`` runs on each client's
  own view (``ClientView``, or a ``ChunkView`` of many clients with ``batched=True``: spans, cached span
  embeddings, metadata), each client's vector is clipped to L2 ≤ ``clip`` and only the running sum is kept, chunk by
  chunk (on the ``local`` or ``ray`` executor); the mechanism (``Gaussian(σ)``, ``TreeAggregation``, ``NoNoise``
  from ``largefedbench.privacy.mechanisms``) adds its noise and appends one ledger event whose sampling matches
  how the cohort was drawn; only the noised sum is returned.

Nothing public returns per-client rows: client data leaves only as a mechanism's noised sum (or, for the ε = ∞
reference alone, through ``release_without_noise``, recorded as a noiseless release).

The ledger is what the entry's ε is computed from, so a release that does not go through ``private_sum`` is
impossible to hide. The federation also counts the costs of POPri's Table 2: floats downloaded and uploaded
per client per round, client and server compute seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from largefedbench.client_views import ClientStore, all_finite
from largefedbench.data.federated import ClientSplit
from largefedbench.errors import InputError, PrivacyError
from largefedbench.executors import Executor, make_executor
from largefedbench.privacy import PrivacyLedger
from largefedbench.privacy.mechanisms import Gaussian, Mechanism, NoNoise, TreePrefixSum  # TreePrefixSum: re-exported
from largefedbench.timing import JobClock, timed
from largefedbench.worker_checks import check_bounded, pick_probe, probe_sensitivity

__all__ = ["Cohort", "CostMeter", "Federation", "SpanEmbeddings", "TreePrefixSum", "payload_floats", "release_snr"]


@dataclass(frozen=True)
class Cohort:
    """The clients of one round, the rate they were sampled with and how: ``poisson`` (``sample``, ``everyone``)
    or ``fixed`` (a fixed-size cohort of a shuffled ``epoch``: no amplification by sampling)."""

    indices: np.ndarray  # positions in the federation's client list
    ids: tuple[str, ...]
    sample_rate: float
    round: int
    sampling: str = "poisson"

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class SpanEmbeddings:
    """Embeddings of every span of a split, client by client: client ``i`` owns rows ``offsets[i]:offsets[i+1]``."""

    vectors: np.ndarray  # (n_spans, d)
    offsets: np.ndarray  # (n_clients + 1,)

    def __post_init__(self) -> None:
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.vectors) or np.any(np.diff(self.offsets) < 0):
            raise InputError("span embedding offsets must start at 0, be non-decreasing and end at the number of rows")


@dataclass
class CostMeter:
    """What the federation cost, round by round (the POPri paper's Table 2 columns)."""

    rounds: list[dict[str, float]] = field(default_factory=list)

    def _current(self, round_: int) -> dict[str, float]:
        while len(self.rounds) <= round_:
            self.rounds.append({"clients": 0, "floats_down_per_client": 0.0, "floats_up_per_client": 0.0,
                                "client_seconds": 0.0, "server_seconds": 0.0})
        return self.rounds[round_]

    def add(self, round_: int, **amounts: float) -> None:
        row = self._current(round_)
        for key, value in amounts.items():
            row[key] += value

    def set(self, round_: int, **values: float) -> None:
        self._current(round_).update(values)

    def summary(self) -> dict[str, Any]:
        """Means per round (and per client where the paper reports per-client costs), plus totals."""
        if not self.rounds:
            return {"rounds": 0}
        n = len(self.rounds)
        clients = [max(r["clients"], 1) for r in self.rounds]
        return {
            "rounds": n,
            "floats_down_per_client_per_round": sum(r["floats_down_per_client"] for r in self.rounds) / n,
            "floats_up_per_client_per_round": sum(r["floats_up_per_client"] for r in self.rounds) / n,
            "client_seconds_per_client_per_round": sum(r["client_seconds"] / c for r, c in zip(self.rounds, clients)) / n,
            "server_seconds_per_round": sum(r["server_seconds"] for r in self.rounds) / n,
            "client_seconds_total": sum(r["client_seconds"] for r in self.rounds),
            "server_seconds_total": sum(r["server_seconds"] for r in self.rounds),
        }


class Federation:
    """Private clients behind the DP interface; see the module docstring."""

    def __init__(
        self,
        clients: ClientSplit,
        *,
        ledger: PrivacyLedger | None = None,
        seed: int = 0,
        embeddings: SpanEmbeddings | None = None,
        executor: Executor | str | None = None,
        noise_free: bool = False,
        shuffle_releases: bool = False,
    ) -> None:
        self._clients = clients
        #: the noise-free diagnostic (``lfb eval --noise-free``): every release is the exact clipped sum, recorded
        #: as noiseless (NoNoise), so the ledger's ε is infinite: what the method does with σ = 0, never ranked
        self.noise_free = bool(noise_free)
        #: the shuffled-feedback control (``lfb eval --shuffled-releases``): every noised sum is released and accounted
        #: as usual, then its values are randomly permuted (public randomness: seed and release index)
        #: before the method sees them, so it keeps their size and noise but no longer says which client preferred
        #: what: what the method does with feedback that carries no information, never ranked
        self.shuffle_releases = bool(shuffle_releases)
        if self.noise_free and self.shuffle_releases:
            raise InputError("--noise-free and --shuffled-releases are two diagnostics: run one at a time")
        self._seed = int(seed)
        self._executor: Executor = make_executor(executor) if executor is None or isinstance(executor, str) else executor
        self._ids: list[str] = list(clients.ids)
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        self.costs = CostMeter()
        #: the method's wall time and stage seconds; the harness starts it, round checkpoints carry it
        self.clock = JobClock()
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1FB]))
        self._noise_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xD9]))
        self._torch_generators: dict[str, Any] = {}
        self._embeddings = embeddings
        if embeddings is not None and len(embeddings.offsets) != len(self._ids) + 1:
            raise InputError(f"span embeddings cover {len(embeddings.offsets) - 1} clients, the federation has {len(self._ids)}")
        self._store = ClientStore(clients, embeddings)
        self._round = -1
        #: every release's public signal-to-noise numbers, in order (:func:`release_snr`)
        self.releases: list[dict[str, Any]] = []
        #: model selection on held-out data (``contract.Selection``: the validation clients or a held-out public
        #: slice), set by the harness; every choice made through it is recorded in the entry
        self.selection = None

    # -- who takes part --------------------------------------------------------------------------------
    @property
    def n_clients(self) -> int:
        return len(self._ids)

    @property
    def client_ids(self) -> tuple[str, ...]:
        """Every client's id in federation order (public, as every cohort's ``ids``); a client's data stays private."""
        return tuple(self._ids)

    @property
    def round(self) -> int:
        """Index of the current round (the last cohort drawn); -1 before the first."""
        return self._round

    @property
    def clients_run_here(self) -> bool:
        """Whether client functions run in this process (``--executor local``), so what they keep besides their
        update (an unreleased diagnostic) is seen here; on the process and Ray executors it stays in the workers."""
        return self._executor.name == "local"

    def sample(self, rate: float) -> Cohort:
        """A Poisson cohort: every client joins independently with probability ``rate`` (starts a round)."""
        if not 0.0 < rate <= 1.0:
            raise InputError(f"sampling rate {rate} must be in (0, 1]; it is clients per round / number of clients")
        chosen = np.flatnonzero(self._rng.random(self.n_clients) < rate)
        return self._new_round(chosen, rate)

    def epoch(self, per_round: int) -> list[PlannedCohort]:
        """One DP-FTRL epoch: the clients shuffled and cut into ``n_clients // per_round`` disjoint cohorts of
        ``per_round`` clients (the remainder sits the epoch out), so each client takes part at most once per
        epoch — the participation the tree-aggregation accountant assumes. Each cohort starts a round when used."""
        if not 1 <= per_round <= self.n_clients:
            raise InputError(f"per_round={per_round} must be between 1 and the number of clients ({self.n_clients})")
        order = self._rng.permutation(self.n_clients)
        n = self.n_clients // per_round
        return [PlannedCohort(self, order[i * per_round : (i + 1) * per_round], per_round / self.n_clients) for i in range(n)]

    def everyone(self) -> Cohort:
        """Every client, sampling rate 1 (full participation)."""
        return self._new_round(np.arange(self.n_clients), 1.0)

    def _new_round(self, indices: np.ndarray, rate: float, sampling: str = "poisson") -> Cohort:
        self._round += 1
        self.costs.set(self._round, clients=float(len(indices)))
        return Cohort(indices, tuple(self._ids[i] for i in indices), rate, self._round, sampling)

    # -- the one door ----------------------------------------------------------------------------------
    @timed("clients")
    def private_sum(self, cohort: Cohort, client_fn: Callable[[Any], Any], *, clip: float, mechanism: Mechanism,
                    batched: bool = False, chunk_clients: int | None = None, shape: tuple[int, ...] | None = None,
                    broadcast: Any = None, progress: Callable[[int], None] | None = None) -> Any:
        """The noised sum of the cohort's clipped client vectors; the only thing that leaves the clients.

        ``client_fn(ClientView)`` returns one client's vector, or with ``batched=True`` ``client_fn(ChunkView)``
        returns one row per client of a chunk of ``chunk_clients`` clients (default 64 per client, 2048 batched).
        Each vector is clipped to L2 ≤ ``clip`` and added to a running sum (chunks run on this federation's
        executor; a library client function with an exact ``clipped_sum`` shortcut is summed algebraically).
        ``mechanism`` adds its noise and appends its event to the ledger, with the cohort's sampling.
        ``shape`` (one client's vector shape) is needed only for an empty cohort in per-client mode.
        ``broadcast`` is what the server sends every cohort client this round (arrays, tensors, or lists/tuples/dicts
        of them: the samples' embeddings, the global weights); the costs count its floats as each client's download.
        ``progress(n)`` is called after each chunk with its number of clients.
        """
        clip = float(clip)
        if not (np.isfinite(clip) and clip > 0):
            raise InputError(f"clip={clip!r} must be finite and > 0: it is each client's L2 sensitivity")
        if not isinstance(mechanism, Mechanism):
            raise InputError(f"mechanism={mechanism!r} must be a mechanism from largefedbench.privacy.mechanisms: "
                             "Gaussian(noise_multiplier), TreeAggregation(noise_multiplier, tree) or NoNoise()")
        size = int(chunk_clients or (2048 if batched else 64))
        if size < 1:
            raise InputError(f"chunk_clients={chunk_clients} must be at least 1")
        chunks = [cohort.indices[lo : lo + size] for lo in range(0, len(cohort), size)]
        if not chunks and batched:
            chunks = [cohort.indices[:0]]  # a batched function tells the sum's shape from an empty chunk
        door, down = time.perf_counter(), payload_floats(broadcast)
        total, width, seconds = None, 0, 0.0
        if self.client_outputs is not None:  # an audit: canary clients return their canary vector (no shortcut)
            client_fn = _with_own_outputs(client_fn, self.client_outputs, batched)
        task = {"round_": cohort.round, "fed_seed": self._seed, "client_fn": client_fn, "clip": clip, "batched": batched}
        probe = pick_probe(chunks) if getattr(self._executor, "confined", False) else None  # a sandboxed plug-in's clients
        probed: Any = None
        for i, part in enumerate(self._executor.map_chunks(self._store, chunks, **task)):
            check_bounded(part, clip)
            if probe is not None and i == probe[0]:
                probed = part.total
            if part.total is not None:
                total = part.total if total is None else total + part.total
            width, seconds = max(width, part.width), seconds + part.seconds
            if progress is not None:
                progress(part.n_clients)
        if probe is not None:
            probe_sensitivity(self._executor, self._store, chunks[probe[0]], probe[1], probed, task, clip)
        if total is None:
            if shape is None:
                raise InputError("the cohort is empty, so the sum has no shape: pass shape= (one client's vector "
                                 "shape) or use batched=True")
            total, width = np.zeros(shape), int(np.prod(shape))
        start = time.perf_counter()
        if (self.noise_free or self.shuffle_releases) and not isinstance(mechanism, (Gaussian, NoNoise)):
            flag, kind = ("--noise-free", "noise-free") if self.noise_free else ("--shuffled-releases", "shuffled")
            raise InputError(f"{flag}: this method releases through {mechanism!r}, which has no {kind} variant yet "
                             "(DP-FTRL's tree sums running totals); run the diagnostic on a method with Gaussian "
                             "releases")
        if self.noise_free:
            mechanism = NoNoise()
        if self.budget is not None and not self.noise_free:  # stop before a release that breaks the budget
            self.budget.check_release(self.ledger.events, mechanism.events(sampling=cohort.sampling,
                                                                           sample_rate=cohort.sample_rate))
        noisy = mechanism.release(total, clip=clip, sampling=cohort.sampling, sample_rate=cohort.sample_rate,
                                  ledger=self.ledger, generator=self._generator_for(total))
        if not all_finite(noisy):  # every row was finite (else zeroed) and clipped: only an overflow gets here
            raise PrivacyError(f"the release is not finite: the clipped sum (each entry at most {len(cohort)} × clip "
                               f"= {len(cohort) * clip:g}) or its noise (σ·clip) overflowed {noisy.dtype}; have the "
                               "client function return float32 or float64 vectors, or lower the clip")
        if self.shuffle_releases:
            noisy = self._shuffled(noisy)
        self.costs.add(cohort.round, client_seconds=seconds, server_seconds=time.perf_counter() - start,
                       floats_down_per_client=float(down), floats_up_per_client=float(width))
        sigma = 0.0 if self.noise_free else float(getattr(mechanism, "noise_multiplier", 0.0))
        self.releases.append(release_snr(cohort.round, sigma, clip, cohort.sample_rate * self.n_clients))
        if self.on_release is not None:  # an audit scores its canaries against every noised sum
            self.on_release(client_fn=client_fn, clip=clip, batched=batched, round_=cohort.round, fed_seed=self._seed,
                            noisy=noisy)
        self.door_seconds += time.perf_counter() - door
        return noisy

    #: wall seconds spent inside ``private_sum`` so far (the clients' side of every round and the noise): the rounds
    #: loop counts the rest of a round as server time
    door_seconds: float = 0.0
    #: the run's ``PrivacyBudget`` (set by the harness): a release that would spend beyond it is refused before it
    #: happens (``PrivacyBudget.check_release``)
    budget: Any = None
    #: privacy auditing (``largefedbench.audit``): ``fn(client_ids, outputs) -> outputs`` lets canary clients return
    #: their canary vector as their client computation; the outputs are then clipped and noised like every other.
    client_outputs: Callable[[Sequence[str], Any], Any] | None = None
    #: privacy auditing of releases: ``fn(client_fn=, clip=, batched=, round_=, fed_seed=, noisy=)`` sees each noised
    #: sum (what the run released) and the client function that made it, never a client's row
    on_release: Callable[..., None] | None = None

    # -- the ε = ∞ reference ---------------------------------------------------------------------------
    def release_without_noise(self) -> list[str]:
        """Every span of every client, in the clear: only the ε = ∞ (non-private) reference may call this.
        The release is recorded in the ledger as a noiseless Gaussian event, so its ε is computed as infinite."""
        for event in NoNoise().events(sampling="poisson", sample_rate=1.0):  # ε = ∞, as private_sum with NoNoise
            self.ledger.append(event)
        return self._clients.all_spans()

    # -- resume ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: RNG states, round, ledger, costs, releases (the
        method's time so far is its clock's, which round checkpoints store beside this)."""
        return {
            "round": self._round,
            "rng": self._rng.bit_generator.state,
            "noise_rng": self._noise_rng.bit_generator.state,
            "torch_generators": {dev: g.get_state() for dev, g in self._torch_generators.items()},
            "ledger": self.ledger.to_dict(),
            "costs": [dict(r) for r in self.costs.rounds],
            "releases": [dict(r) for r in self.releases],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._round = int(state["round"])
        self._rng.bit_generator.state = state["rng"]
        self._noise_rng.bit_generator.state = state["noise_rng"]
        if state["torch_generators"]:
            import torch

            self._torch_generators = {}
            for dev, gen_state in state["torch_generators"].items():
                gen = torch.Generator(device=dev)
                gen.set_state(gen_state)
                self._torch_generators[dev] = gen
        self.ledger = PrivacyLedger.from_dict(state["ledger"])
        self.costs.rounds = [dict(r) for r in state["costs"]]
        self.releases = [dict(r) for r in state.get("releases", [])]  # older checkpoints have none

    def _shuffled(self, noisy: Any) -> Any:
        """``noisy`` with its values in a random order drawn from the seed and the release's index (public)."""
        order = np.random.default_rng(np.random.SeedSequence([self._seed, 0x5F1, len(self.releases)]))
        perm = order.permutation(int(np.prod(noisy.shape)))
        if type(noisy).__module__.split(".")[0] == "torch":
            import torch

            return noisy.reshape(-1)[torch.as_tensor(perm, device=noisy.device)].reshape(noisy.shape)
        return np.asarray(noisy).reshape(-1)[perm].reshape(noisy.shape)

    def _generator_for(self, values: Any) -> Any:
        if type(values).__module__.split(".")[0] != "torch":
            return self._noise_rng
        import torch

        device = str(values.device)
        if device not in self._torch_generators:
            gen = torch.Generator(device=values.device)
            gen.manual_seed(int(self._noise_rng.integers(2**62)))
            self._torch_generators[device] = gen
        return self._torch_generators[device]


def payload_floats(payload: Any) -> int:
    """How many numbers ``payload`` holds: an array's or tensor's size, summed over lists, tuples and dict values."""
    if payload is None:
        return 0
    if isinstance(payload, dict):
        return sum(payload_floats(v) for v in payload.values())
    if isinstance(payload, (list, tuple)):
        return sum(payload_floats(v) for v in payload)
    size = getattr(payload, "numel", None)
    if callable(size):  # a torch tensor
        return int(size())
    if hasattr(payload, "size") and hasattr(payload, "dtype"):  # a numpy array
        return int(payload.size)
    raise InputError(f"broadcast holds a {type(payload).__name__}; give arrays or tensors (or lists/dicts of them)")


def release_snr(round_: int, sigma: float, clip: float, expected_clients: float) -> dict[str, Any]:
    """One release's signal-to-noise numbers, as pfl logs them but from public numbers only (the signal's own norm
    is private): the noise std σ·clip, the signal bound clip × the expected cohort size (rate × clients), and their
    ratio; ``snr`` is None for a noiseless release. For tree aggregation σ·clip is the std of each tree node."""
    noise_std, bound = float(sigma) * float(clip), float(clip) * float(expected_clients)
    return {"round": int(round_), "noise_multiplier": float(sigma), "clip": float(clip),
            "expected_clients": float(expected_clients), "noise_std": noise_std, "signal_bound": bound,
            "snr": bound / noise_std if noise_std > 0 else None}


class PlannedCohort:
    """A cohort of a shuffled DP-FTRL epoch; ``start()`` makes it the current round and returns the :class:`Cohort`."""

    def __init__(self, fed: Federation, indices: np.ndarray, rate: float) -> None:
        self._fed, self._indices, self._rate = fed, indices, rate

    def __len__(self) -> int:
        return len(self._indices)

    def start(self) -> Cohort:
        return self._fed._new_round(self._indices, self._rate, "fixed")


def _with_own_outputs(client_fn: Callable, hook: Callable, batched: bool) -> Callable:
    """``client_fn`` whose outputs pass through the audit ``hook`` (canary rows replaced), per client or per chunk."""
    if batched:
        return lambda view: hook(view.ids, client_fn(view))
    return lambda view: hook([view.id], _stack([client_fn(view)]))[0]


def _stack(rows: Sequence[Any]) -> Any:
    if rows and type(rows[0]).__module__.split(".")[0] == "torch":
        import torch

        return torch.stack(list(rows))
    return np.stack([np.asarray(r) for r in rows]) if rows else np.zeros((0, 0))
