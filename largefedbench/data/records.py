"""The record: one abstract or one speech, which is one client (DESIGN.md §3)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from largefedbench.errors import InputError

COUNTRIES = ("USA", "GBR", "CAN")


@dataclass(frozen=True)
class Record:
    """One client's raw material before it is cut into spans.

    ``id`` is unique within a snapshot and stable across refreshes (a DOI, a speech id); the client id and
    the split are derived from it. bioRxiv records also fill ``doi``, ``version`` and ``category``;
    parliamentary records fill ``country``, ``chamber``, ``speaker`` (and ``speaker_id``/``language``
    where the source has them).
    """

    id: str
    source: str
    date: str  # ISO day, YYYY-MM-DD
    title: str
    text: str
    url: str
    license: str
    country: str | None = None
    chamber: str | None = None
    speaker: str | None = None
    speaker_id: str | None = None
    language: str | None = None
    doi: str | None = None
    version: int | None = None
    category: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise InputError(f"a {self.source} record has an empty id; every record needs a stable id")
        try:
            dt.date.fromisoformat(self.date)
        except (TypeError, ValueError):
            raise InputError(
                f"record {self.id!r} ({self.source}) has date {self.date!r}; dates must be ISO days YYYY-MM-DD"
            ) from None
        if self.country is not None and self.country not in COUNTRIES:
            raise InputError(f"record {self.id!r} has country {self.country!r}; use one of {', '.join(COUNTRIES)}")

    @property
    def day(self) -> dt.date:
        return dt.date.fromisoformat(self.date)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Record:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Record))
