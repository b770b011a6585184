"""`lfb smoke METHOD`: a few seconds on the demo snapshot with the tiny profile, before a full `lfb eval`.

It checks that the method follows the contract, that it reaches private data only through the federation (and
never the test clients), that every DP release went through the ledger (a private method's ledger is not empty
and its ε fits the budget), and that two runs with one seed agree. The first run on a machine builds the demo
snapshot and the tiny models (a minute or two, cached); after that a smoke run takes seconds.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench.leaderboard.check_privacy import BUDGET_SLACK
from largefedbench.leaderboard.schema import is_safe_id
from largefedbench.run.guards import WatchedSnapshot, watch_federation, watched_private

#: two runs with one seed agree if model weights differ by at most this (texts, ledgers, costs: exactly)
WEIGHT_ATOL = 1e-6
#: a smoke run slower than this gets a note: `Config.tiny()` should stay CPU-sized
SLOW_SECONDS = 60.0


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


def _run_once(prep, bundle, evaluator, seed: int, run_dir: Path) -> _Run:
    import numpy as np

    from largefedbench.contract import PublicResources
    from largefedbench.federation import Federation, SpanEmbeddings

    run = _Run()
    cls, fd = prep.method_cls, prep.fd
    embeddings = None
    if getattr(cls, "needs_span_embeddings", False):
        vectors = bundle.span_embeddings(fd, "train", progress=False)
        offsets = np.concatenate([[0], np.cumsum(fd.train.span_counts())])
        embeddings = watched_private(SpanEmbeddings(vectors, offsets), "fed._embeddings", run.violations)
    fed = watch_federation(Federation(watched_private(fd.train, "fed._clients", run.violations), seed=seed,
                                      embeddings=embeddings), run.violations)
    public = PublicResources(
        fd=WatchedSnapshot(fd, run.violations), models=bundle, seed=seed, run_dir=run_dir, progress=False,
        validation_accuracy=lambda m: evaluator.accuracy(m, evaluator.validation_texts),
        train_downstream=lambda texts: evaluator.train_on(texts, seed),
    )
    start = time.perf_counter()
    try:
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


def _check_same(report: SmokeReport, a: _Run, b: _Run) -> None:
    problems = []
    if a.ledger != b.ledger:
        problems.append("the privacy ledgers differ")
    if a.costs != b.costs:
        problems.append("the communication costs differ")
    x, y = a.artifact, b.artifact
    if x.kind == "synthetic text" and x.texts != y.texts:
        problems.append("the synthetic texts differ")
    if x.kind == "model":
        gap = _weights_gap(x.model, y.model)
        if gap > WEIGHT_ATOL:
            problems.append(f"the model weights differ by up to {gap:.3g} (tolerance {WEIGHT_ATOL:g})")
    detail = "; ".join(problems) + ": draw randomness from public.rng(...) / the seed, never from global RNG state" \
        if problems else "two runs with the same seed gave the same ledger, costs and artifact"
    report.add("determinism", not problems, detail)


def smoke(method: str, *, epsilon: float | None = None, delta: float | None = None,
          overrides: dict[str, str] | None = None, seed: int = 0, dataset: str = "demo", home: Path | None = None,
          log: Callable[[str], None] | None = None, root: Path | None = None) -> SmokeReport:
    """Smoke-test ``method`` (a registered name, ``module:Class`` or ``file.py:Class``) with the snapshots and caches
    of ``home`` (default ``$LFB_HOME``; ``root`` is its deprecated name); see the module docstring."""
    from largefedbench.deprecation import renamed_path

    home = renamed_path("smoke", "home", home, "root", root)
    from largefedbench.errors import LfbError
    from largefedbench.models import load_models
    from largefedbench.run.eval import EvalRequest, _Evaluator, prepare

    log = log or (lambda msg: None)
    report = SmokeReport(method)
    cls = _check_contract(report, method)
    if cls is None:
        return report
    report.method = cls.name
    with tempfile.TemporaryDirectory(prefix="lfb-smoke-") as tmp:
        try:
            prep = prepare(EvalRequest(method=method, dataset=dataset, epsilon=epsilon, delta=delta, profile="tiny",
                                       seeds=(seed,), overrides=dict(overrides or {}), preset="tiny",
                                       out=Path(tmp) / "board", home=home, progress=False))
        except LfbError as exc:
            report.add("request", False, str(exc))
            return report
        log("loading the demo snapshot's tiny models (built and cached on first use)")
        bundle = load_models(prep.profile, prep.fd, device="cpu", progress=False, home=home)
        evaluator = _Evaluator(prep, bundle, log)
        runs = []
        for k in (1, 2):
            log(f"run {k} of 2 with seed {seed}")
            runs.append(_run_once(prep, bundle, evaluator, seed, Path(tmp) / f"run-{k}"))
    report.seconds = [r.seconds for r in runs]
    first = runs[0]
    violations = sorted({v for r in runs for v in r.violations})
    report.add("private-data", not violations, "; ".join(violations) if violations else
               "private clients were read through the federation only; the test split was never touched")
    if any(r.error for r in runs):
        report.add("train", False, next(r.error for r in runs if r.error))
        return report
    if not _check_artifact(report, cls, first):
        return report
    _check_ledger(report, prep, first)
    _check_same(report, *runs)
    slow = max(report.seconds) > SLOW_SECONDS
    report.add("time", True, f"{max(report.seconds):.1f} s per run" + (
        f" (over {SLOW_SECONDS:.0f} s: make Config.tiny() smaller)" if slow else ""))
    return report
