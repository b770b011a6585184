"""What a sandboxed method gets as ``fed`` and ``fed.selection``: the federation's public face, every call a request
to the harness over the channel (:mod:`.wire`). The private splits, the ledger and the noise stay in the harness;
client functions leave as pickled bytes that only client workers unpickle."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.federation import Cohort, CostMeter, payload_floats
from largefedbench.privacy.mechanisms import Gaussian, Mechanism, NoNoise
from largefedbench.sandbox.wire import Channel
from largefedbench.timing import JobClock

__all__ = ["FederationProxy", "SelectionProxy", "mechanism_spec"]


class PlannedCohort:
    """One cohort of a DP-FTRL epoch, drawn by the harness; :meth:`start` begins its round there."""

    def __init__(self, fed: FederationProxy, plan: int, size: int) -> None:
        self._fed, self._plan, self._size = fed, plan, size

    def __len__(self) -> int:
        return self._size

    def start(self) -> Cohort:
        return self._fed._cohort(self._fed._ask({"op": "start_planned", "plan": self._plan}))


def mechanism_spec(mechanism: Mechanism) -> dict[str, Any]:
    """The mechanism as the harness rebuilds it: Gaussian(σ) or NoNoise()."""
    if isinstance(mechanism, Gaussian):
        return {"kind": "gaussian", "noise_multiplier": float(mechanism.noise_multiplier)}
    if isinstance(mechanism, NoNoise):
        return {"kind": "none"}
    raise MethodError(f"{mechanism!r}: a sandboxed method releases through Gaussian(σ) or NoNoise(); the tree "
                      "aggregation of DP-FTRL keeps its noise across rounds and runs only for the built-in dp-ftrl")


class FederationProxy:
    """``fed`` in a method's process (see :class:`largefedbench.federation.Federation` for each call)."""

    clients_run_here = False  # client functions run in the harness's client workers

    def __init__(self, channel: Channel, *, n_clients: int, client_ids: tuple[str, ...], selection: SelectionProxy | None) -> None:
        self._channel, self._ids = channel, tuple(client_ids)
        self._n = int(n_clients)
        self._round = -1
        self.releases: list[dict[str, Any]] = []
        self.costs = _ForwardedCosts(self)
        self.clock = JobClock()
        self.door_seconds = 0.0
        self.selection = selection

    def _ask(self, request: dict[str, Any]) -> Any:
        self._channel.send(request)
        reply = self._channel.recv()
        if reply.get("error"):
            raise (InputError if reply.get("kind") == "input" else MethodError)(reply["error"])
        return reply.get("value")

    def _cohort(self, value: dict[str, Any]) -> Cohort:
        self._round = int(value["round"])
        return Cohort(np.asarray(value["indices"], dtype=np.int64), tuple(self._ids[i] for i in value["indices"]),
                      float(value["sample_rate"]), self._round, value["sampling"])

    @property
    def n_clients(self) -> int:
        return self._n

    @property
    def client_ids(self) -> tuple[str, ...]:
        return self._ids

    @property
    def round(self) -> int:
        return self._round

    def sample(self, rate: float) -> Cohort:
        return self._cohort(self._ask({"op": "sample", "rate": float(rate)}))

    def everyone(self) -> Cohort:
        return self._cohort(self._ask({"op": "everyone"}))

    def epoch(self, per_round: int) -> list[PlannedCohort]:
        plans = self._ask({"op": "epoch", "per_round": int(per_round)})
        return [PlannedCohort(self, int(p["plan"]), int(p["size"])) for p in plans]

    def private_sum(self, cohort: Cohort, client_fn: Callable[[Any], Any], *, clip: float, mechanism: Mechanism,
                    batched: bool = False, chunk_clients: int | None = None, shape: tuple[int, ...] | None = None,
                    broadcast: Any = None, progress: Callable[[int], None] | None = None) -> Any:
        import cloudpickle

        from largefedbench.process_executor import _by_value_modules

        if not isinstance(mechanism, Mechanism):
            raise InputError(f"mechanism={mechanism!r} must be a mechanism from largefedbench.privacy.mechanisms")
        start = time.perf_counter()
        _by_value_modules(cloudpickle, client_fn)  # the method's own modules travel with it: workers cannot import them
        try:
            payload = cloudpickle.dumps(client_fn)
        except Exception as exc:  # noqa: BLE001 - what the client function holds decides whether it pickles
            raise MethodError(f"the client function cannot be sent to the clients ({type(exc).__name__}: {exc})") from None
        value = self._ask({"op": "private_sum", "round": int(cohort.round), "clip": float(clip),
                           "mechanism": mechanism_spec(mechanism), "batched": bool(batched),
                           "chunk_clients": chunk_clients, "shape": list(shape) if shape is not None else None,
                           "broadcast_floats": int(payload_floats(broadcast)), "client_fn": np.frombuffer(bytearray(payload), np.uint8)})
        self.releases.append(value["release"])
        if progress is not None:
            progress(len(cohort))
        self.door_seconds += time.perf_counter() - start
        return value["noisy"]

    def release_without_noise(self) -> list[str]:
        return list(self._ask({"op": "release_without_noise"}))

    def state_dict(self) -> dict[str, Any]:
        """A token naming the harness's copy of the federation's state (RNG, ledger, costs) at this point: a
        checkpoint carries the token, never the ledger, so a resumed run cannot bring back an edited one."""
        return {"token": self._ask({"op": "save_state"}), "round": self._round, "releases": list(self.releases),
                "door_seconds": self.door_seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._ask({"op": "load_state", "token": str(state["token"])})
        self._round, self.releases = int(state["round"]), [dict(r) for r in state["releases"]]
        self.door_seconds = float(state.get("door_seconds", 0.0))


class _ForwardedCosts(CostMeter):
    """The rounds loop's server seconds, counted here and sent to the harness's cost meter."""

    def __init__(self, fed: FederationProxy) -> None:
        super().__init__()
        self._fed = fed

    def add(self, round_: int, **amounts: float) -> None:
        self._fed._ask({"op": "costs_add", "round": int(round_), **{k: float(v) for k, v in amounts.items()}})


class SelectionProxy:
    """``fed.selection`` in a method's process: model selection through the harness, which holds the held-out texts
    and records each choice. Models cross as their weights; the held-out texts and their embeddings reach the method
    only when they are public (``--select-on public``)."""

    def __init__(self, channel: Channel, *, on: str, source: str, new_downstream: Callable[[], Any],
                 texts: list[str] | None) -> None:
        self._channel, self.on, self.source = channel, on, source
        self._new_downstream, self._texts = new_downstream, texts
        self._loops: list[Any] = []

    def _ask(self, call: str, **args: Any) -> Any:
        self._channel.send({"op": "selection", "call": call, **args})
        reply = self._channel.recv()
        if reply.get("error"):
            raise MethodError(reply["error"])
        return reply.get("value")

    @property
    def texts(self) -> list[str]:
        if self._texts is None:
            raise MethodError("the held-out texts are the validation clients' (--select-on private): a sandboxed "
                              "method scores on them through fed.selection.accuracy(model), never reads them")
        return list(self._texts)

    def _model(self, weights: dict[str, Any]):
        model = self._new_downstream()
        model.load_state_dict(weights)
        return model

    def accuracy(self, model) -> dict[str, float]:
        return dict(self._ask("accuracy", weights=_weights(model)))

    def train_downstream(self, texts: list[str]):
        return self._model(self._ask("train_downstream", texts=list(texts)))

    def replay(self, n_texts: int, seed: int) -> list[str]:
        return list(self._ask("replay", n_texts=int(n_texts), seed=int(seed)))

    def embeddings(self) -> np.ndarray:
        if self._texts is None:
            raise MethodError("the held-out embeddings are the validation clients' (--select-on private): a sandboxed "
                              "method cannot read them; run with --select-on public")
        return np.asarray(self._ask("embeddings"))

    def record(self, *, by: str, what: str, metric: str, chosen: int, candidates: int) -> None:
        self._ask("record", by=str(by), what=str(what), metric=str(metric), chosen=int(chosen), candidates=int(candidates))

    def watch(self, loop) -> None:
        self._loops.append(loop)

    def loop_records(self) -> list[dict[str, Any]]:
        return [rec for loop in self._loops if (rec := loop.selection_record()) is not None]


def _weights(model) -> dict[str, Any]:
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}
