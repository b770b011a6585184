"""PrivacyLedger: the append-only record of every private release, the accountant's input."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from largefedbench.errors import PrivacyError
from largefedbench.privacy.accountants import epsilon_of
from largefedbench.privacy.events import (
    EVENT_TYPES,
    Event,
    GaussianEvent,
    PoissonGaussianEvent,
    TreeAggregationEvent,
    event_from_dict,
)

__all__ = ["PrivacyLedger", "LEDGER_FORMAT"]

LEDGER_FORMAT = "lfb-privacy-ledger/1"


class PrivacyLedger:
    """An append-only list of privacy events; consecutive events that differ only in their count
    (steps / epochs / count) are merged into one."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._events: list[Event] = []
        for event in events:
            self.append(event)

    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PrivacyLedger) and self._events == other._events

    def __repr__(self) -> str:
        return f"PrivacyLedger({self._events!r})"

    def append(self, event: Event) -> None:
        """Add ``event``, merging it into the last event when only the count differs."""
        if not isinstance(event, tuple(EVENT_TYPES.values())):
            raise PrivacyError(f"a privacy ledger holds privacy events, got {event!r}.")
        merged = self._events[-1].merged_with(event) if self._events else None
        if merged is None:
            self._events.append(event)
        else:
            self._events[-1] = merged

    def record(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """One (or ``steps``) noisy sums over a Poisson-sampled cohort: the federation's call."""
        self.append(PoissonGaussianEvent(noise_multiplier, sample_rate, steps))

    def record_tree(self, *, noise_multiplier: float, rounds_per_epoch: int, epochs: int = 1) -> None:
        """``epochs`` DP-FTRL tree-aggregation epochs of ``rounds_per_epoch`` rounds each."""
        self.append(TreeAggregationEvent(noise_multiplier, rounds_per_epoch, epochs))

    def record_gaussian(self, *, noise_multiplier: float, count: int = 1) -> None:
        """``count`` plain Gaussian releases over all clients (e.g. a DP histogram)."""
        self.append(GaussianEvent(noise_multiplier, count))

    def epsilon(self, delta: float, accountant: str = "auto") -> float:
        """ε spent so far at ``delta`` (see ``accountants.ACCOUNTANTS``)."""
        return epsilon_of(self._events, delta, accountant)

    def to_dict(self) -> dict[str, Any]:
        return {"format": LEDGER_FORMAT, "events": [e.to_dict() for e in self._events]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
        if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise PrivacyError(
                f"not a privacy ledger: expected format {LEDGER_FORMAT!r}, found {found!r}."
            )
        return cls(event_from_dict(e) for e in data.get("events", []))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PrivacyLedger:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise PrivacyError(f"the privacy ledger is not valid JSON: {err}.") from err
        return cls.from_dict(data)
