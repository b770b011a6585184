"""The rounds loop every method runs its rounds in (DESIGN.md §4): resume, checkpoint, progress bar, history and the
best state on validation. A method writes no resume code of its own.

A method keeps what must survive a kill in a dataclass, its *state*; the loop checkpoints it with the history, the
best state so far and the federation (RNG, ledger, costs) after every completed round, and a killed run resumes
after its last completed round with all of it restored::

    loop = RoundsLoop(fed, public, MyState(weights=w0), rounds=cfg.rounds, desc="my rounds", select="max")
    for r in loop:                                # the rounds still to run
        ...                                       # one round: read and replace loop.state's fields
        loop.history.append({"round": r, ...})    # the public record of the round (+ its releases' SNR)
        loop.offer(validation_score, r, weights)  # best-state selection (optional)
    # a round is checkpointed when its body completes; one that raises is re-run on resume

``fingerprint`` (config, σ, …) is stored with the checkpoint; a checkpoint with another fingerprint is refused
rather than silently mixed. A method with a long phase before its rounds (CTCL's public pretraining) runs that phase
in a loop of its own ``stage``: each stage keeps its own checkpoint, and a finished stage resumes as finished.

The loop also owns the server's time: a round's wall seconds less those spent in the federation's door
(``private_sum``: the clients' side) are the server's, added to the round's costs (``fed.costs``, POPri's Table 2)
and to its history record as ``server_seconds``; server work after the last round (a final model selection) runs in
``with loop.server_work():``. A method times nothing itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Iterator
from typing import Any, Generic, Literal, TypeVar

from largefedbench.errors import InputError, MethodError
from largefedbench.rounds.checkpoints import checkpoint_name
from largefedbench.rounds.records import releases_of

__all__ = ["Best", "RoundsLoop", "selection_of"]

S = TypeVar("S")


@dataclasses.dataclass
class Best:
    """The best state seen on validation: its score, its round and what the method keeps of it (weights)."""

    score: float = math.nan
    round: int | None = None
    weights: Any = None
    offers: int = 0  # candidates offered so far (an older checkpoint has none: 0)


class RoundsLoop(Generic[S]):
    """Rounds ``first … first + rounds - 1`` of a method whose resumable state is the dataclass ``state``.

    ``select`` is how :meth:`offer` ranks validation scores: "max" (accuracy), "min" (FID) or None (no selection);
    ``metric`` names the score for the entry's record of the choice (``fed.selection``, when the run has one).
    Constructing the loop resumes an interrupted run (``resumed`` says whether it did)."""

    def __init__(self, fed, public, state: S, *, rounds: int, desc: str, first: int = 0,
                 select: Literal["max", "min"] | None = None, fingerprint: dict[str, Any] | None = None,
                 stage: str | None = None, metric: str | None = None) -> None:
        if not dataclasses.is_dataclass(state) or isinstance(state, type):
            raise MethodError(f"a rounds loop keeps its state in a dataclass instance, got {type(state).__name__}")
        if rounds < 0:
            raise InputError(f"rounds={rounds} must be >= 0")
        if select not in ("max", "min", None):
            raise MethodError(f"select={select!r}; choose 'max', 'min' or None")
        self.fed, self.public, self.state, self.desc, self.stage = fed, public, state, desc, stage
        self.rounds, self.select, self.fingerprint = range(first, first + rounds), select, fingerprint
        self.metric = metric or f"score ({select} kept)"
        self.history: list[dict[str, Any]] = []
        self.best = Best()
        self.next_round = first
        self.resumed = self._resume()
        selection = getattr(fed, "selection", None)
        if select is not None and selection is not None:
            selection.watch(self)  # the entry records the choice this loop makes

    def _resume(self) -> bool:
        resumed = self.public.resume(self.fed, self.stage)
        if resumed is None:
            return False
        last, saved = resumed
        if saved.get("fingerprint") != self.fingerprint or "state" not in saved:
            raise MethodError(f"the checkpoint {checkpoint_name(self.stage)} in {self.public.run_dir} was written by "
                              f"another configuration or version ({saved.get('fingerprint')} vs {self.fingerprint}); "
                              "use a new run folder or delete that file")
        self.state = type(self.state)(**saved["state"])
        self.history, self.best = list(saved["history"]), Best(**saved["best"])
        self.next_round = last + 1
        return True

    def __iter__(self) -> Iterator[int]:
        bar = self.public.bar(total=len(self.rounds), desc=self.desc, initial=self.next_round - self.rounds.start)
        try:
            for r in range(self.next_round, self.rounds.stop):
                released, recorded = len(releases_of(self.fed)), len(self.history)
                with self._server_clock() as clock:
                    yield r
                if len(self.history) > recorded and isinstance(self.history[-1], dict):
                    self.history[-1].setdefault("server_seconds", round(clock.seconds, 3))
                self._attach_releases(released, recorded)
                self._checkpoint(r)
                bar.update(1)
                if self.best.round is not None:
                    bar.set_postfix(best=f"{self.best.score:.4f}", best_round=self.best.round)
        finally:
            bar.close()

    @contextlib.contextmanager
    def server_work(self) -> Iterator[None]:
        """Server work after the rounds (e.g. choosing the final model): its seconds go to the last round's costs."""
        with self._server_clock():
            yield

    @contextlib.contextmanager
    def _server_clock(self) -> Iterator[_Clock]:
        """Times the block's server seconds (wall less the federation's door and the work redone after a resume,
        :meth:`~largefedbench.timing.JobClock.redoing`) and adds them to the costs of the last
        round the federation has started by the end of the block."""
        clock, start, door, redone = _Clock(), time.perf_counter(), _door_seconds(self.fed), _redone_seconds(self.fed)
        yield clock
        elsewhere = _door_seconds(self.fed) - door + _redone_seconds(self.fed) - redone
        clock.seconds = max(0.0, time.perf_counter() - start - elsewhere)
        costs, round_ = getattr(self.fed, "costs", None), getattr(self.fed, "round", -1)
        if costs is not None and isinstance(round_, int) and round_ >= 0:
            costs.add(round_, server_seconds=clock.seconds)

    def _attach_releases(self, released: int, recorded: int) -> None:
        """Give the round's last history record the signal-to-noise numbers of the releases the round made."""
        new = releases_of(self.fed)[released:]
        if new and len(self.history) > recorded and isinstance(self.history[-1], dict):
            self.history[-1].setdefault("releases", new)

    def _checkpoint(self, r: int) -> None:
        state = {f.name: getattr(self.state, f.name) for f in dataclasses.fields(self.state)}  # type: ignore[arg-type]
        best = {"score": self.best.score, "round": self.best.round, "weights": self.best.weights,
                "offers": self.best.offers}
        self.public.save_round(self.fed, r, {"fingerprint": self.fingerprint, "state": state, "history": self.history,
                                             "best": best}, self.stage)
        self.next_round = r + 1

    def offer(self, score: float, round_index: int, weights: Any) -> bool:
        """Keep ``weights`` as the best state if ``score`` beats the best so far (NaN never does, except when
        nothing is kept yet); True if kept."""
        if self.select is None:
            raise MethodError("this rounds loop selects nothing: give select='max' or 'min'")
        best, offers = self.best.score, self.best.offers + 1
        if self.best.round is None or (math.isfinite(score) and
                                       (not score >= best if self.select == "min" else not score <= best)):
            self.best = Best(float(score), int(round_index), weights, offers)
            return True
        self.best.offers = offers
        return False

    def selection_record(self) -> dict[str, Any] | None:
        """The choice this loop made (its kept round among the candidates offered, by :attr:`metric`), or None
        when nothing was offered."""
        if self.select is None or self.best.round is None:
            return None
        what = f"round of {self.desc}" + (f" ({self.stage})" if self.stage else "")
        return {"by": "method", "what": what, "metric": self.metric, "chosen": int(self.best.round),
                "candidates": int(self.best.offers)}


@dataclasses.dataclass
class _Clock:
    seconds: float = 0.0


def _door_seconds(fed) -> float:
    return float(getattr(fed, "door_seconds", 0.0))


def _redone_seconds(fed) -> float:
    clock = getattr(fed, "clock", None)  # a test's stand-in federation may have none
    return 0.0 if clock is None else float(clock.redone_seconds)


def selection_of(fed):
    """``fed.selection`` (``contract.Selection``: model selection on held-out data, every choice recorded), or a
    clear error where the run has none (a bare federation)."""
    selection = getattr(fed, "selection", None)
    if selection is None:
        raise MethodError("this run has no held-out data to select on (fed.selection is unset): model selection runs "
                          "under lfb eval, which sets it (--select-on private|public)")
    return selection
