"""`lfb smoke METHOD`: a few seconds on the demo snapshot with the tiny profile, before a full `lfb eval`.

It checks that the method follows the contract, that it reaches private data only through the federation (and
never the test clients), that every DP release went through the ledger (a private method's ledger is not empty
and its ε fits the budget), and that two runs with one seed agree. The first run on a machine builds the demo
snapshot and the tiny models (a minute or two, cached); after that a smoke run takes seconds.

A plug-in runs as `lfb eval` runs it: described and run in its sandbox (:mod:`largefedbench.run.sandboxed`), twice,
its client functions in the harness's worker processes. A built-in (or any method with ``sandbox="off"``) runs in
this process, where the guards below watch the federation.

It also tries the ways out of the federation that the guards cannot watch. In this process the method runs three
times: twice with its client functions in worker processes (as `lfb eval` runs it) and once with them in this process; a client
function that keeps what it sees (in a closure, a module global, the view) changes what the method reads only in
this process, so the results differ ("isolation"). And a few canary clients, whose spans are secret random words,
join the train split: after the runs every output (the artifact's texts, info, history and model, the method class,
the run and board folders, the temp folder) is searched for those words and for any private word run
(:mod:`largefedbench.data.private_text`) ("leaks").
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench.data.private_text import LeakSearch, PrivateRuns, canary_texts
from largefedbench.leaderboard.check_privacy import BUDGET_SLACK
from largefedbench.leaderboard.schema import is_safe_id
from largefedbench.run.guards import watch_federation, watched_private

#: two runs with one seed agree if model weights differ by at most this (texts, ledgers, costs: exactly)
WEIGHT_ATOL = 1e-6
#: a smoke run slower than this gets a note: `Config.tiny()` should stay CPU-sized
SLOW_SECONDS = 60.0
#: canary clients added to the train split (their spans are secret random words)
SMOKE_CANARIES = 3


@dataclass(frozen=True)
class SmokeCheck:
    name: str
    ok: bool
    detail: str


@dataclass
class SmokeReport:
    method: str
    checks: list[SmokeCheck] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    epsilon: float | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(SmokeCheck(name, ok, detail))
        return ok

    def to_dict(self) -> dict[str, Any]:
        eps = self.epsilon
        return {"method": self.method, "ok": self.ok, "seconds": self.seconds,
                "epsilon": "inf" if eps is not None and math.isinf(eps) else eps,
                "checks": [c.__dict__ for c in self.checks]}

    def format(self) -> str:
        lines = [f"{'ok ' if c.ok else 'FAIL'} {c.name:<13}{c.detail}" for c in self.checks]
        verdict = "passed" if self.ok else "FAILED"
        runs = ", ".join(f"{s:.1f} s" for s in self.seconds)
        lines.append(f"smoke test of {self.method} {verdict}" + (f" (runs: {runs})" if runs else ""))
        return "\n".join(lines)


@dataclass
class _Run:
    artifact: Any = None
    ledger: dict[str, Any] = field(default_factory=dict)
    costs: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    error: str | None = None


def _check_contract(report: SmokeReport, method: str) -> type | None:
    from largefedbench.contract import config_to_dict
    from largefedbench.errors import LfbError
    from largefedbench.registry import get_method

    try:
        cls = get_method(method)
        cfg = cls.Config.tiny()
        if not isinstance(cfg, cls.Config):
            raise TypeError(f"Config.tiny() returned {type(cfg).__name__}, not {cls.Config.__name__}")
        json.dumps(config_to_dict(cfg))
    except (LfbError, ImportError, SyntaxError, AttributeError, TypeError, ValueError) as exc:
        report.add("contract", False, f"{type(exc).__name__}: {exc}" if not isinstance(exc, LfbError) else str(exc))
        return None
    if not is_safe_id(cls.name):
        report.add("contract", False, f"name {cls.name!r} is not a safe id (lower-case letters, digits, '.', '_', '-')")
        return None
    report.add("contract", True, f"{cls.__module__}:{cls.__qualname__} (name {cls.name!r}, output {cls.output!r})")
    return cls


@dataclass(frozen=True)
class _Clients:
    """The train split the smoke runs use (the demo's, plus the canary clients) and its span embeddings."""

    split: Any
    embeddings: Any  # SpanEmbeddings or None
    canaries: dict[str, list[str]]


def _clients(prep, bundle, cls: type) -> _Clients:
    import numpy as np

    from largefedbench.audit.canaries import with_clients
    from largefedbench.federation import SpanEmbeddings
    from largefedbench.models import embed

    rng = np.random.default_rng(secrets.randbits(64))  # new secrets on every smoke: no two runs share canaries
    canaries = {f"lfb-smoke-canary-{j}": spans for j, spans in enumerate(canary_texts(rng, SMOKE_CANARIES))}
    split = with_clients(prep.fd.train, canaries)
    embeddings = None
    if getattr(cls, "needs_span_embeddings", False):
        base = bundle.span_embeddings(prep.fd, "train", progress=False)
        extra = embed([t for spans in canaries.values() for t in spans], bundle.embedder).astype(base.dtype)
        offsets = np.concatenate([[0], np.cumsum(split.span_counts())])
        embeddings = SpanEmbeddings(np.concatenate([base, extra]), offsets)
    return _Clients(split, embeddings, canaries)


def _run_once(prep, bundle, evaluator, seed: int, run_dir: Path, clients: _Clients, executor: Any,
              sandboxed: bool = False) -> _Run:
    from largefedbench.contract import PublicResources
    from largefedbench.federation import Federation
    from largefedbench.run.sandboxed import run_method_sandboxed

    run = _Run()
    cls = prep.method_cls
    embeddings = None if clients.embeddings is None else watched_private(clients.embeddings, "fed._embeddings",
                                                                           run.violations)
    fed = watch_federation(Federation(watched_private(clients.split, "fed._clients", run.violations), seed=seed,
                                      embeddings=embeddings, executor=executor), run.violations)
    fed.budget = prep.budget  # a release that would break the budget stops the run, as in lfb eval
    fed.selection = evaluator.selection(seed)  # model selection, as in lfb eval
    public = PublicResources(models=bundle, seed=seed, run_dir=run_dir, progress=False,
                             corpus=evaluator.public_corpus, snapshot=prep.fd.manifest)  # public data only
    start = time.perf_counter()
    try:
        if sandboxed:  # as lfb eval runs a plug-in: its own guarded process, the federation served from here
            run_dir.mkdir(parents=True, exist_ok=True)
            run.artifact = run_method_sandboxed(prep, evaluator, fed, public, seed, run_dir, lambda msg: None).artifact
        else:
            run.artifact = cls().train(fed, public, prep.config, prep.budget)
    except Exception as exc:  # noqa: BLE001 - the smoke test reports whatever the method raised
        run.error = f"{type(exc).__name__}: {exc}"
    run.seconds = time.perf_counter() - start
    run.ledger = fed.ledger.to_dict()
    run.costs = [{k: v for k, v in r.items() if "seconds" not in k} for r in fed.costs.rounds]
    return run


def _weights_gap(a: Any, b: Any) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys():
        return math.inf
    gap = 0.0
    for key, value in sa.items():
        other = sb[key]
        if value.shape != other.shape:
            return math.inf
        if value.numel():
            gap = max(gap, float((value.double() - other.double()).abs().max()))
    return gap


def _check_artifact(report: SmokeReport, cls: type, run: _Run) -> bool:
    from largefedbench.contract import Artifact

    a = run.artifact
    if not isinstance(a, Artifact):
        return report.add("artifact", False, f"train() returned {type(a).__name__}, not an Artifact")
    if a.kind != cls.output:
        return report.add("artifact", False, f"the class says output {cls.output!r} but train() returned {a.kind!r}")
    if a.kind == "synthetic text":
        if not a.texts or not all(isinstance(t, str) for t in a.texts):
            return report.add("artifact", False, "synthetic text artifact without a list of texts")
        detail = f"{len(a.texts)} synthetic texts"
    else:
        if not callable(getattr(a.model, "state_dict", None)):
            return report.add("artifact", False, "model artifact without state_dict() (a torch module is expected)")
        detail = f"a trained {type(a.model).__name__}"
    try:
        json.dumps(a.info, default=str)
        if not all(isinstance(h, dict) for h in a.history):
            raise TypeError("history must be a list of dicts, one per round")
        json.dumps(a.history, default=str)
    except (TypeError, ValueError) as exc:
        return report.add("artifact", False, f"info/history are not JSON-ready: {exc}")
    return report.add("artifact", True, detail)


def _check_ledger(report: SmokeReport, prep, run: _Run) -> None:
    from largefedbench.privacy import PrivacyLedger, resolve_accountant

    cls, budget = prep.method_cls, prep.budget
    ledger = PrivacyLedger.from_dict(run.ledger)
    if cls.fixed_epsilon == 0:
        report.epsilon = 0.0
        report.add("ledger", not len(ledger), "empty, as the ε = 0 reference must be" if not len(ledger)
                   else f"the ε = 0 reference recorded {len(ledger)} release(s)")
        return
    if not len(ledger):
        report.add("ledger", False, "empty: the method released nothing through fed.private_sum, so its result does "
                   "not depend on the private clients, or it bypassed the federation")
        return
    accountant = resolve_accountant(ledger.events)
    report.epsilon = ledger.epsilon(budget.delta, accountant)
    limit = budget.epsilon * (1 + BUDGET_SLACK)
    ok = report.epsilon <= limit + 1e-9
    report.add("ledger", ok, f"{len(ledger)} ledger event(s), ε = {report.epsilon:.4g} at δ = {budget.delta:g} "
               f"({accountant}) {'≤' if ok else '>'} target {budget.epsilon:g} (+{BUDGET_SLACK:.0%})")


def _differences(a: _Run, b: _Run) -> list[str]:
    """How two runs' results differ (errors, ledgers, costs, artifacts); empty when they agree."""
    if a.error or b.error:
        return [] if a.error == b.error else [f"one run raised ({a.error or b.error}), the other "
                                              + ("did not" if not (a.error and b.error) else f"raised {b.error}")]
    problems = []
    if a.ledger != b.ledger:
        problems.append("the privacy ledgers differ")
    if a.costs != b.costs:
        problems.append("the communication costs differ")
    x, y = a.artifact, b.artifact
    if type(x) is not type(y) or getattr(x, "kind", None) != getattr(y, "kind", None):
        return [*problems, "the artifacts differ in kind"]
    if getattr(x, "kind", None) == "synthetic text" and x.texts != y.texts:
        n, m = len(x.texts or ()), len(y.texts or ())
        problems.append("the synthetic texts differ" + (f" ({n} against {m} texts)" if n != m else ""))
    if getattr(x, "kind", None) == "model" and callable(getattr(x.model, "state_dict", None)):
        gap = _weights_gap(x.model, y.model)
        if gap > WEIGHT_ATOL:
            problems.append(f"the model weights differ by up to {gap:.3g} (tolerance {WEIGHT_ATOL:g})")
    return problems


def _check_same(report: SmokeReport, a: _Run, b: _Run) -> bool:
    problems = _differences(a, b)
    detail = "; ".join(problems) + ": draw randomness from public.rng(...) / the seed, never from global RNG state" \
        if problems else "two runs with the same seed gave the same ledger, costs and artifact"
    return report.add("determinism", not problems, detail)


def _check_isolated(report: SmokeReport, isolated: _Run, in_process: _Run) -> bool:
    problems = _differences(isolated, in_process)
    detail = ("the client function changed state the method reads: with client functions in worker processes "
              "(as lfb eval runs them) and in this process the results differ — " + "; ".join(problems) +
              ". A client function may only return its vector; what it keeps (a list it appends to, a global, an "
              "attribute of the view or of the method) must not reach train()") if problems else \
        "client functions in worker processes and in this process gave the same results"
    return report.add("isolation", not problems, detail)


def _search_leaks(prep, clients: _Clients, runs: list[_Run], folders: list[Path], since: float,
                  cls: type) -> LeakSearch:
    """Every output of the runs searched for private word runs and the canaries' secret words."""
    fd = prep.fd
    readable = [t for split in ("public", "validation") for t in fd[split].all_spans()]
    private = [t for spans in clients.canaries.values() for t in spans] + fd.train.all_spans()
    search = LeakSearch(PrivateRuns(private, readable), [w for spans in clients.canaries.values()
                                                         for t in spans for w in t.split()])
    for k, run in enumerate(runs, 1):
        a = run.artifact
        if a is None:
            continue
        texts = getattr(a, "texts", None)
        if isinstance(texts, (list, tuple)):
            search.texts(texts, f"run {k}: artifact.texts")
        search.value(getattr(a, "info", None), f"run {k}: artifact.info")
        search.value(getattr(a, "history", None), f"run {k}: artifact.history")
        model = getattr(a, "model", None)
        if model is not None:
            search.value(_model_strings(model), f"run {k}: artifact.model")
    search.value({k: v for k, v in vars(cls).items() if isinstance(v, (str, list, tuple, dict))},
                 f"the method class {cls.__name__}")
    for folder in folders:
        search.folder(folder)
    system_tmp = Path(tempfile.gettempdir())  # files another process (a worker) left there during the runs:
    canaries_only = LeakSearch(None, search.canaries)  # its secrets only (other jobs share the folder)
    canaries_only.folder(system_tmp, newer_than=since, depth=2)
    search.leaks += canaries_only.leaks
    return search


def _model_strings(model: Any) -> dict[str, Any]:
    """The strings a model carries: its config and the plain attributes of each of its modules."""
    out: dict[str, Any] = {}
    config = getattr(model, "config", None)
    if hasattr(config, "to_dict"):
        out["config"] = config.to_dict()
    modules = model.named_modules() if callable(getattr(model, "named_modules", None)) else [("", model)]
    for name, module in modules:
        plain = {k: v for k, v in vars(module).items()
                 if isinstance(v, (str, list, tuple, dict)) and not k.startswith("_")}
        if plain:
            out[name or "model"] = plain
    return out


def _check_leaks(report: SmokeReport, search: LeakSearch) -> None:
    if search.leaks:
        places: dict[str, Any] = {}  # one leak per place (the runs and the rows of one output are one place)
        for leak in search.leaks:
            places.setdefault(re.sub(r"^run \d+: |\[\d+\]", "", leak.where), leak)
        shown = "; ".join(str(leak) for leak in list(places.values())[:4])
        more = f" (and {len(places) - 4} more places)" if len(places) > 4 else ""
        report.add("leaks", False, f"private client text left the federation other than as a noised sum: {shown}"
                   f"{more}. Only fed.private_sum's noised result may depend on the clients")
        return
    n = search.runs.n if search.runs is not None else 0
    report.add("leaks", True, f"no private {n}-word run and no canary secret in {len(search.searched)} outputs "
               "(texts, info, history, model, class, run, board and temp folders)")


def smoke(method: str, *, epsilon: float | None = None, delta: float | None = None,
          overrides: dict[str, str] | None = None, seed: int = 0, dataset: str = "demo", home: Path | None = None,
          log: Callable[[str], None] | None = None, sandbox: str = "auto") -> SmokeReport:
    """Smoke-test ``method`` (a registered name, ``module:Class`` or ``file.py:Class``) with the snapshots and caches
    of ``home`` (default ``$LFB_HOME``); see the module docstring. ``sandbox`` is ``lfb eval``'s: ``auto`` runs a
    plug-in in its sandbox, ``off`` every method in this process."""
    from largefedbench.errors import LfbError, MethodError
    from largefedbench.models import load_models
    from largefedbench.registry import method_target
    from largefedbench.run.eval import EvalRequest, prepare
    from largefedbench.run.evaluator import Evaluator

    log = log or (lambda msg: None)
    report = SmokeReport(method)
    try:
        sandboxed = sandbox != "off" and method_target(method)[1] != "built-in"  # as lfb eval runs it
    except MethodError as exc:
        report.add("contract", False, str(exc))
        return report
    cls = None if sandboxed else _check_contract(report, method)
    if cls is None and not sandboxed:
        return report
    from largefedbench.executors import LocalExecutor, ProcessExecutor

    since = time.time()
    with tempfile.TemporaryDirectory(prefix="lfb-smoke-") as tmp:
        try:
            prep = prepare(EvalRequest(method=method, dataset=dataset, epsilon=epsilon, delta=delta, profile="tiny",
                                       seeds=(seed,), overrides=dict(overrides or {}), preset="tiny",
                                       out=Path(tmp) / "board", home=home, progress=False,
                                       sandbox="off" if sandbox == "off" else "auto"))
        except MethodError as exc:  # a plug-in's contract, checked where it was imported: its sandbox
            report.add("contract" if sandboxed else "request", False, str(exc))
            return report
        except LfbError as exc:
            report.add("request", False, str(exc))
            return report
        if sandboxed:
            cls = prep.method_cls
            if not is_safe_id(cls.name):
                report.add("contract", False, f"name {cls.name!r} is not a safe id (lower-case letters, digits, '.', "
                           "'_', '-')")
                return report
            report.add("contract", True, f"{prep.method.target} (name {cls.name!r}, output {cls.output!r}), "
                       "described by its sandboxed process")
        report.method = cls.name
        log("loading the demo snapshot's tiny models (built and cached on first use)")
        bundle = load_models(prep.profile, prep.fd, device="cpu", progress=False, home=home)
        evaluator = Evaluator(prep, bundle, log)
        clients = _clients(prep, bundle, cls)
        workers = ProcessExecutor()
        runs = []
        own_tmp = Path(tmp) / "tmp"
        own_tmp.mkdir()
        # the temp files of the method and of its workers (started below) land in the searched folder
        saved_tmp, tempfile.tempdir = tempfile.tempdir, str(own_tmp)
        saved_env, os.environ["TMPDIR"] = os.environ.get("TMPDIR"), str(own_tmp)
        try:
            plan = [(workers, "worker processes"), (workers, "worker processes")]
            if not sandboxed:  # a sandboxed method cannot share a process with its client functions
                plan.append((LocalExecutor(), "this process"))
            for k, (executor, where) in enumerate(plan, 1):
                log(f"run {k} of {len(plan)} with seed {seed}, client functions in {where}"
                    + (", the method in its sandbox" if sandboxed else ""))
                runs.append(_run_once(prep, bundle, evaluator, seed, Path(tmp) / f"run-{k}", clients, executor,
                                      sandboxed))
        finally:
            tempfile.tempdir = saved_tmp
            if saved_env is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved_env
            workers.shutdown()
        search = _search_leaks(prep, clients, runs, [Path(tmp)], since, cls)
    report.seconds = [r.seconds for r in runs]
    first = runs[0]
    violations = sorted({v for r in runs for v in r.violations})
    report.add("private-data", not violations, "; ".join(violations) if violations else
               "private clients were read through the federation only; the test split was never touched")
    _check_leaks(report, search)
    if any(r.error for r in runs[:2]):
        report.add("train", False, next(r.error for r in runs if r.error))
        return report
    if not _check_artifact(report, cls, first):
        return report
    deterministic = _check_same(report, runs[0], runs[1])
    if sandboxed:
        report.add("isolation", True, "the method ran in its sandboxed process and its client functions in the "
                   "harness's worker processes: nothing a client function keeps can reach train(). Not checked here: "
                   "state a client function keeps in its worker from one client to the next (`lfb smoke --sandbox "
                   "off` compares the runs with the client functions in one process)")
    elif deterministic:
        _check_isolated(report, first, runs[2])
    else:
        report.add("isolation", False, "not checked: two runs with client functions in worker processes already "
                   "differ (see determinism)")
    _check_ledger(report, prep, first)
    slow = max(report.seconds) > SLOW_SECONDS
    report.add("time", True, f"{max(report.seconds):.1f} s per run" + (
        f" (over {SLOW_SECONDS:.0f} s: make Config.tiny() smaller)" if slow else ""))
    return report
