"""The harness's side of a sandboxed method: start its process (behind the OS guard where the platform has one),
send it the run's public description, answer its requests with the real federation and selection, and take back the
artifact it wrote. The harness never imports what the process sends: messages are tensors and JSON, the artifact
is read the same way, and a client function is forwarded as bytes to the client workers."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.contract import Artifact
from largefedbench.errors import InputError, LfbError, MethodError
from largefedbench.privacy.mechanisms import Gaussian, NoNoise
from largefedbench.rounds.artifact_state import join_model
from largefedbench.rounds.state_file import read_state, write_state
from largefedbench.sandbox.jail import JAIL, NO_JAIL, jail_available, jailed_command, kept_environment
from largefedbench.sandbox.wire import Channel, ChannelClosed, SealedFunction

__all__ = ["SandboxRun", "code_folders", "describe_sandboxed", "run_sandboxed"]

_TOKEN = re.compile(r"[0-9a-f]{64}\Z")
METHOD_FOLDER = "method"  # the one folder of the seed the method's process may write (its round checkpoints)
ARTIFACT_FILE = "artifact.safetensors"  # what the method's process writes there when train() returns
DESCRIBE_SECONDS = 300.0  # the longest a method's module may take to import and describe itself
HOST = "largefedbench.run.method_host"  # the method's process's module (run by name: the harness never imports it)


@dataclass
class SandboxRun:
    """What the method's process returned and how it was guarded."""

    artifact: Any
    calibrations: list
    method_seconds: float
    method_stages: dict[str, float]
    selections: list[dict[str, Any]] = field(default_factory=list)
    guard: str = JAIL  # "namespaces" or "process"
    carried_seconds: float = 0.0  # what earlier processes spent on the rounds this one resumed after
    accuracy_queries: int = 0  # fed.selection.accuracy calls the harness answered (this process only)

    def __post_init__(self) -> None:
        self.selections = with_counted_queries(self.selections, self.accuracy_queries)


#: the selection record of the harness's count of a sandboxed method's held-out accuracy queries (chosen: -1, a count)
COUNTED_QUERIES = "held-out accuracy queries of the method's process, counted by the harness (a count, no choice)"


def with_counted_queries(records: list[dict[str, Any]], queries: int) -> list[dict[str, Any]]:
    """The method's own selection records, plus the count of held-out accuracy queries the harness answered it: what
    a method reports of its choices is its own word, the count is not (it states how often the held-out data was
    read, whatever the records say)."""
    if not queries:
        return list(records)
    return [*records, {"by": "harness", "what": COUNTED_QUERIES, "metric": "top1", "chosen": -1,
                       "candidates": int(queries)}]


def code_folders() -> list[str]:
    """The folders the harness's code was imported from (each module's top-level package or file folder), the
    Python install and the environment: what the method's process must read to import the same code."""
    folders = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            folders.add(str(Path(path).resolve().parent))
    kept: list[str] = []
    for folder in sorted(folders, key=len):  # a folder inside one already kept (the environment) is covered by it
        if not any(folder == k or folder.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(folder)
    return kept


class _Server:
    def __init__(self, fed, selection, seed_dir: Path, log: Callable[[str], None]) -> None:
        self.fed, self.selection, self.log = fed, selection, log
        self.states = seed_dir / "federation-states"  # outside the method's folder: it cannot edit a ledger it resumes
        self.cohorts: dict[int, Any] = {}
        self.plans: dict[int, Any] = {}
        self.accuracy_queries = 0  # counted here: what the method reports of its choices is its own word

    def handle(self, request: dict[str, Any]) -> Any:
        op = request.get("op")
        fed = self.fed
        if op == "sample":
            return self._cohort(fed.sample(float(request["rate"])))
        if op == "everyone":
            return self._cohort(fed.everyone())
        if op == "epoch":
            planned = fed.epoch(int(request["per_round"]))
            first = len(self.plans)
            self.plans.update({first + i: p for i, p in enumerate(planned)})
            return [{"plan": first + i, "size": len(p)} for i, p in enumerate(planned)]
        if op == "start_planned":
            plan = self.plans.pop(int(request["plan"]), None)
            if plan is None:
                raise InputError("that planned cohort was started already or never drawn")
            return self._cohort(plan.start())
        if op == "private_sum":
            return self._private_sum(request)
        if op == "release_without_noise":
            return fed.release_without_noise()
        if op == "save_state":
            return self._save_state()
        if op == "load_state":
            return self._load_state(str(request["token"]))
        if op == "costs_add":
            fed.costs.add(int(request["round"]), server_seconds=max(0.0, float(request.get("server_seconds", 0.0))))
            return None
        if op == "selection":
            return self._selection(request)
        raise InputError(f"unknown request {op!r} from the method's process")

    def _cohort(self, cohort) -> dict[str, Any]:
        self.cohorts[cohort.round] = cohort
        return {"indices": np.asarray(cohort.indices, dtype=np.int64), "round": int(cohort.round),
                "sample_rate": float(cohort.sample_rate), "sampling": cohort.sampling}

    def _private_sum(self, request: dict[str, Any]) -> dict[str, Any]:
        cohort = self.cohorts.get(int(request["round"]))
        if cohort is None:
            raise InputError(f"round {request['round']}: no cohort of that round was drawn")
        spec = request["mechanism"]
        if spec.get("kind") == "gaussian":
            mechanism = Gaussian(float(spec["noise_multiplier"]))
        elif spec.get("kind") == "none":
            mechanism = NoNoise()
        else:
            raise InputError(f"mechanism {spec!r}: a sandboxed method releases through Gaussian or NoNoise")
        shape = request.get("shape")
        floats = int(request.get("broadcast_floats") or 0)
        noisy = self.fed.private_sum(
            cohort, SealedFunction(np.asarray(request["client_fn"], dtype=np.uint8).tobytes()), clip=float(request["clip"]),
            mechanism=mechanism, batched=bool(request["batched"]), chunk_clients=request.get("chunk_clients"),
            shape=tuple(int(s) for s in shape) if shape is not None else None,
            broadcast=np.broadcast_to(np.float32(0), (floats,)) if floats else None)  # counted, never copied
        return {"noisy": noisy, "release": dict(self.fed.releases[-1])}

    def _save_state(self) -> str:
        from largefedbench.rounds.state_file import state_bytes

        data = state_bytes(self.fed.state_dict(), what="the federation's state")
        token = hashlib.sha256(data).hexdigest()
        path = self.states / f"{token}.safetensors"
        if not path.exists():
            self.states.mkdir(parents=True, exist_ok=True)
            write_state(path, self.fed.state_dict(), what="the federation's state")
        return token

    def _load_state(self, token: str) -> None:
        path = self.states / f"{token}.safetensors"
        if not _TOKEN.match(token) or not path.exists():
            raise InputError(f"the checkpoint names a federation state the harness did not save ({token[:16]}…): "
                             "delete the seed's folder to run it again")
        self.fed.load_state_dict(read_state(path, fix=f"Delete {path.parent.parent} to run the seed again.", device="cpu"))

    def _selection(self, request: dict[str, Any]) -> Any:
        sel, call = self.selection, request.get("call")
        if call == "accuracy":
            self.accuracy_queries += 1
            return sel.accuracy(self._model(request["weights"]))
        if call == "train_downstream":
            model = sel.train_downstream(list(request["texts"]))
            return {k: v.detach().cpu() for k, v in model.state_dict().items()}
        if call == "replay":
            return sel.replay(int(request["n_texts"]), int(request["seed"]))
        if call == "embeddings":
            if sel.on != "public":
                raise InputError("the held-out embeddings are the validation clients': run with --select-on public")
            return sel.embeddings()
        if call == "record":  # the method's own choice: recorded as the method's, never as the harness's
            if str(request["what"]) == COUNTED_QUERIES:
                raise InputError("that selection record is the harness's own: record the method's choices only")
            sel.record(by="method", what=str(request["what"]), metric=str(request["metric"]),
                       chosen=int(request["chosen"]), candidates=int(request["candidates"]))
            return None
        raise InputError(f"unknown selection call {call!r}")

    def _model(self, weights: dict[str, Any]):
        model = self.selection._new_downstream()
        model.load_state_dict(weights)  # strict: the profile's downstream architecture only
        return model


def _start(argv: list[str], *, root: str, read_only: list[str], writable: list[str], hidden: list[str],
           env: dict[str, str], guard: str) -> subprocess.Popen:
    if guard == JAIL:
        argv = jailed_command(argv, root=root, read_only=read_only, writable=writable, hidden=hidden, env=env)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=None if guard == JAIL else env)


def _guard(log: Callable[[str], None], require_jail: bool) -> str:
    why = jail_available()
    if why is not None and require_jail:
        raise InputError(f"the method sandbox needs Linux namespaces and cannot have them here: {why}")
    if why is not None:
        log(f"method sandbox: {why}; the method runs in its own process without the OS guard (the entry says so)")
    return JAIL if why is None else NO_JAIL


def _readable(home: Path, code: list[str]) -> list[str]:
    """What a confined process reads: the harness's code and Python, ``sys.path`` (where a plug-in's own dependencies
    may be installed), the plug-in's ``code`` folders and the model caches."""
    models = Path(home).resolve() / "models"
    hf_cache = Path(kept_environment().get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    on_path = [p for p in sys.path if p and os.path.isdir(p)]
    return [*code_folders(), *on_path, *code, str(models), str(hf_cache)]


def _host(*, home: Path, hidden: list[Path], code: list[str], writable: list[str], guard: str) -> tuple[subprocess.Popen, str]:
    """The method's process (:data:`HOST`) and the empty folder its namespace mounts its root on."""
    root = tempfile.mkdtemp(prefix="lfb-jail-")  # stays empty here: the tmpfs root is mounted in the namespace only
    proc = _start([sys.executable, "-m", HOST], root=root, read_only=_readable(home, code), writable=writable,
                  hidden=[str(Path(h).resolve()) for h in hidden],
                  env=kept_environment({"LFB_HOME": str(Path(home).resolve())}), guard=guard)
    return proc, root


def worker_launcher(*, home: Path, hidden: list[Path], code: list[str]):
    """Starts a client worker behind the method's guard: the same namespaces and view as the method's process (the
    home, the snapshot and the board hidden, no network), nothing writable but its own /tmp. It reads the clients it
    is sent (``files``: the train split's Arrow files the client store maps) and can keep or send nothing elsewhere."""
    readable, hide = _readable(home, code), [str(Path(h).resolve()) for h in hidden]

    def launch(argv: list[str], env: dict[str, str], files: Sequence[str]):
        root = tempfile.mkdtemp(prefix="lfb-worker-jail-")
        confined = jailed_command(argv, root=root, read_only=[*readable, *files], writable=[], hidden=hide,
                                  env=kept_environment({k: env[k] for k in ("PYTHONPATH", "OMP_NUM_THREADS",
                                                                            "MKL_NUM_THREADS") if k in env}))
        return confined, None, lambda: os.rmdir(root)

    return launch


def _stop(proc: subprocess.Popen, root: str) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    os.rmdir(root)


def describe_sandboxed(init: dict[str, Any], *, home: Path, hidden: list[Path], log: Callable[[str], None]) -> dict[str, Any]:
    """What the method ``init["method"]`` is (``method_host.describe``), imported in its own process behind the same
    guard as its run, so the harness never runs a plug-in's code; the guard used is in ``"guard"``."""
    guard = _guard(log, require_jail=False)
    proc, root = _host(home=home, hidden=hidden, code=list(init.get("sys_path", [])), writable=[], guard=guard)
    channel = Channel(proc.stdout, proc.stdin)
    deadline = threading.Timer(DESCRIBE_SECONDS, proc.kill)  # a module that hangs on import stops here
    deadline.start()
    try:
        channel.send({**init, "op": "describe"})
        try:
            answer = channel.recv()
        except ChannelClosed:
            raise MethodError(f"the method's process exited (code {proc.wait()}) before it described the method "
                              f"(within {DESCRIBE_SECONDS:.0f} s); its output above says why") from None
    finally:
        deadline.cancel()
        _stop(proc, root)
    if answer.get("op") == "failed":
        error = answer["error"].partition(": ")[2] or answer["error"]
        if answer.get("kind") == "InputError":
            raise InputError(error)
        trace = f"\n{answer['traceback']}" if answer.get("traceback") else ""
        raise MethodError(error if answer.get("kind") == "MethodError" else f"{answer['error']}{trace}")
    if answer.get("op") != "described":
        raise MethodError(f"the method's process answered {answer.get('op')!r} where it should describe the method")
    return {**answer, "guard": guard}


def run_sandboxed(init: dict[str, Any], *, fed, seed_dir: Path, home: Path, hidden: list[Path], device,
                  new_model: Callable[[], Any], log: Callable[[str], None], require_jail: bool = False) -> SandboxRun:
    """Run the method ``init`` describes in its own process and serve it until it returns; see the module docstring.
    ``hidden`` (the home, the snapshot, the board) is absent from the process's view; ``require_jail`` refuses to
    run without the OS guard."""
    if getattr(getattr(fed, "_executor", None), "name", "") == "local":
        raise InputError("a sandboxed method's client functions run in client worker processes: drop --executor local")
    guard = _guard(log, require_jail)
    # the client workers run the plug-in's client functions on private data: behind the same guard
    confine = getattr(getattr(fed, "_executor", None), "confine", None) if guard == JAIL else None
    if guard == JAIL and confine is None:
        raise InputError("a sandboxed method's client functions run behind its guard only on the process executor "
                         "(Ray's workers cannot be confined): drop --executor ray, or run with --sandbox off, which the "
                         "entry records")
    method_dir = seed_dir / METHOD_FOLDER
    method_dir.mkdir(parents=True, exist_ok=True)
    init = {**init, "method_dir": str(method_dir.resolve()), "home": str(Path(home).resolve())}
    proc, root = _host(home=home, hidden=hidden, code=list(init.get("sys_path", [])), writable=[str(method_dir)],
                       guard=guard)
    channel, server = Channel(proc.stdout, proc.stdin), _Server(fed, fed.selection, seed_dir, log)
    try:
        if confine is not None:
            confine(worker_launcher(home=home, hidden=hidden, code=list(init.get("sys_path", []))))
        channel.send(init)
        while True:
            try:
                request = channel.recv()
            except ChannelClosed:
                raise MethodError(f"the method's process exited (code {proc.wait()}) before it returned an artifact; "
                                  "its output above says why") from None
            op = request.get("op")
            if op == "done":
                break
            if op == "failed":
                trace = f"\n{request['traceback']}" if request.get("traceback") else ""
                raise MethodError(f"the method failed in its process: {request['error']}{trace}")
            try:
                channel.send({"value": server.handle(request)})
            except LfbError as exc:  # the method's mistake: it gets the message, as it would in-process
                channel.send({"error": str(exc), "kind": "input" if isinstance(exc, InputError) else "method"})
    finally:
        try:
            _stop(proc, root)
        finally:
            if confine is not None:
                confine(None)  # the next run's workers (a built-in's) start as plain processes again
    return _collect(request, method_dir, device, new_model, guard, server.accuracy_queries)


def _collect(done: dict[str, Any], method_dir: Path, device, new_model: Callable[[], Any], guard: str,
             queries: int) -> SandboxRun:
    path = method_dir / ARTIFACT_FILE
    saved = read_state(path, fix="Run the seed again.") if path.exists() else None
    artifact = None if saved is None else saved.get("artifact")
    if not isinstance(artifact, Artifact):
        raise MethodError(f"the method's process returned no artifact ({path}): train() must return an Artifact")
    if not join_model(artifact, saved.get("model"), new_model, device):
        raise MethodError("the method's model is not the profile's downstream model (another class or layout of weights)")
    path.unlink()
    return SandboxRun(artifact, list(done.get("calibrations") or []), float(done.get("method_seconds", 0.0)),
                      {str(k): float(v) for k, v in (done.get("method_stages") or {}).items()},
                      [dict(r) for r in done.get("selections") or []], guard, float(done.get("carried_seconds", 0.0)),
                      queries)
