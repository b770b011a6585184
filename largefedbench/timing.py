"""Where a seed's time goes: wall seconds per stage, each second counted once, in the innermost stage running.

Library code wraps its expensive steps — ``with stage("generation"):`` around sampling, ``"embedding"``,
``"clients"`` (a release's client computation, clipping and noise), ``"dpo"``, ``"sft"``, ``"downstream"`` (training
the on-device model), ``"evaluation"`` (next-token accuracy, FID) — and the pipeline reads them per seed (into
the entry's ``costs.stage_seconds``): the method's through a :class:`JobClock`, which a resumed run carries through
its round checkpoint, the evaluation's from two :func:`totals` readings. Stages nest: FID's embedding inside a POPri
round counts as embedding, not twice. Time outside every stage is the rest (the method's own bookkeeping). Work a
resumed process does again because an earlier one did it but did not checkpoint it (FedBiscuit's public pair pool) runs
in :meth:`JobClock.redoing` and is not counted twice.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

F = TypeVar("F", bound=Callable)

__all__ = ["STAGES", "JobClock", "join_stages", "stage", "stage_breakdown", "timed", "totals"]

STAGES = ("generation", "embedding", "clients", "dpo", "sft", "downstream", "evaluation")

_totals: dict[str, float] = defaultdict(float)
_local = threading.local()


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the wall time of the block to ``name`` (less the time of stages nested inside it)."""
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; one of {', '.join(STAGES)}")
    stack = _local.__dict__.setdefault("stack", [])
    now = time.perf_counter()
    if stack:  # pause the enclosing stage
        outer, since = stack[-1]
        _totals[outer] += now - since
    stack.append([name, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        inner, since = stack.pop()
        _totals[inner] += now - since
        if stack:
            stack[-1][1] = now  # the enclosing stage resumes


def totals() -> dict[str, float]:
    """Seconds spent in each stage so far in this process, the running stage's up to now (subtract two readings for
    one seed)."""
    out = {name: _totals.get(name, 0.0) for name in STAGES}
    stack = _local.__dict__.get("stack")
    if stack:  # the innermost open stage is the one running (the ones around it are paused)
        name, since = stack[-1]
        out[name] += time.perf_counter() - since
    return out


def timed(name: str) -> Callable[[F], F]:
    """Decorator: every call of the function runs in :func:`stage` ``name``."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with stage(name):
                return fn(*args, **kwargs)
        return inner  # type: ignore[return-value]
    return wrap


def add_stages(*breakdowns: dict[str, float]) -> dict[str, float]:
    """The stage-by-stage sum of :func:`stage_breakdown` results (e.g. a method's, then its evaluation's)."""
    return {name: round(sum(b.get(name, 0.0) for b in breakdowns), 3) for name in [*STAGES, "other"]}


def join_stages(*parts: dict[str, float], seconds: float) -> dict[str, float]:
    """One job's stages timed in several processes at once (a sandboxed method's process, and the harness serving its
    releases while it waits): the named stages added, ``other`` the rest of the job's ``seconds``."""
    out = {name: round(sum(p.get(name, 0.0) for p in parts), 3) for name in STAGES}
    out["other"] = round(max(0.0, seconds - sum(out.values())), 3)
    return out


def stage_breakdown(before: dict[str, float], after: dict[str, float], wall_seconds: float) -> dict[str, float]:
    """Seconds per stage between two :func:`totals` readings, and ``other``: the rest of ``wall_seconds``."""
    out = {name: round(after.get(name, 0.0) - before.get(name, 0.0), 3) for name in STAGES}
    out["other"] = round(max(0.0, wall_seconds - sum(out.values())), 3)
    return out


@dataclass
class JobClock:
    """Wall seconds and seconds per stage of one job (a method's run for one seed) over every process that ran it.

    :meth:`start` in each process; :meth:`state` goes into the job's round checkpoint and :meth:`resume` adds it back,
    counting from the moment of the resume. So a run killed and resumed reports the time of the work its result is
    made of — each completed round once, as if it had run without a stop — not only its last process's time."""

    before_seconds: float = 0.0
    before_stages: dict[str, float] = field(default_factory=dict)
    #: seconds (and per stage) this process spent in :meth:`redoing`, left out of the job's time (only ever grow)
    redone_seconds: float = 0.0
    redone_stages: dict[str, float] = field(default_factory=dict)
    _started: float | None = None
    _stages_at_start: dict[str, float] = field(default_factory=dict)
    _redone_at_start: tuple[float, dict[str, float]] = field(default_factory=lambda: (0.0, {}))

    def start(self) -> None:
        self._started, self._stages_at_start = time.perf_counter(), totals()
        self._redone_at_start = (self.redone_seconds, dict(self.redone_stages))

    def seconds(self) -> float:
        if self._started is None:
            return self.before_seconds
        redone = self.redone_seconds - self._redone_at_start[0]
        return self.before_seconds + time.perf_counter() - self._started - redone

    @contextlib.contextmanager
    def redoing(self) -> Iterator[None]:
        """Work that an earlier process of this job did, and counted, but did not checkpoint, done again after a
        resume: its seconds are left out, so the job reports the time of one run without a stop. A clock not started
        counts nothing, so it leaves nothing out."""
        if self._started is None:
            yield
            return
        start, stages_before = time.perf_counter(), totals()
        try:
            yield
        finally:
            self.redone_seconds += time.perf_counter() - start
            for name, seconds in stage_breakdown(stages_before, totals(), 0.0).items():
                if name in STAGES:
                    self.redone_stages[name] = self.redone_stages.get(name, 0.0) + seconds

    def stages(self) -> dict[str, float]:
        """Seconds per stage and ``other``, as :func:`stage_breakdown`, earlier processes included, redone work not."""
        here = {name: 0.0 for name in STAGES} if self._started is None else \
            stage_breakdown(self._stages_at_start, totals(), 0.0)
        redone = {name: self.redone_stages.get(name, 0.0) - self._redone_at_start[1].get(name, 0.0) for name in STAGES}
        out = {name: round(here[name] - redone[name] + self.before_stages.get(name, 0.0), 3) for name in STAGES}
        out["other"] = round(max(0.0, self.seconds() - sum(out.values())), 3)
        return out

    def state(self) -> dict[str, object]:
        stages = self.stages()
        return {"seconds": sum(stages.values()), "stages": {name: stages[name] for name in STAGES}}

    def resume(self, state: dict[str, object] | None) -> None:
        """Continue from a checkpoint's :meth:`state` (None: a checkpoint older than the clock, counted from here)."""
        if state is not None:
            self.before_seconds = float(state["seconds"])  # type: ignore[arg-type]
            self.before_stages = {k: float(v) for k, v in dict(state["stages"]).items()}  # type: ignore[arg-type]
            self.start()
