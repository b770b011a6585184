"""Date windows (``--since/--until``) and the registry of LLM knowledge cutoffs (``--after-cutoff-of``).

Records dated inside the window are the private clients; records before it are public (DESIGN.md §3).
"""

from __future__ import annotations

import calendar
import datetime as dt
import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from largefedbench.errors import InputError

_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?\Z")


def parse_date(value: str, *, end_of_month: bool = False, flag: str = "--since") -> dt.date:
    """Parse ``YYYY-MM`` or ``YYYY-MM-DD``; a month means its first day, or its last with ``end_of_month``."""
    m = _DATE.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise InputError(f"{flag} {value!r} is not a date; write YYYY-MM or YYYY-MM-DD, e.g. {flag} 2024-09")
    year, month, day = int(m[1]), int(m[2]), m[3]
    try:
        if day is not None:
            return dt.date(year, month, int(day))
        last = calendar.monthrange(year, month)[1] if 1 <= month <= 12 else 0
        return dt.date(year, month, last if end_of_month else 1)
    except ValueError:
        raise InputError(f"{flag} {value!r} is not a calendar date; check the month and day") from None


@dataclass(frozen=True)
class Window:
    """Private clients are dated in ``[since, until]``; public ones in ``[public_since, since)``."""

    since: dt.date
    until: dt.date
    public_since: dt.date | None = None

    def __post_init__(self) -> None:
        if self.since > self.until:
            raise InputError(f"the window starts ({self.since}) after it ends ({self.until}); swap --since and --until")
        if self.public_since is not None and self.public_since > self.since:
            raise InputError(f"the public period starts ({self.public_since}) after the window ({self.since})")

    @classmethod
    def parse(
        cls, since: str, until: str | None = None, *, public_months: int = 1, today: dt.date | None = None
    ) -> Window:
        """Build a window from CLI strings; ``public_months`` before ``since`` are fetched as public records."""
        start = parse_date(since, flag="--since")
        end = parse_date(until, end_of_month=True, flag="--until") if until else (today or dt.date.today())
        if public_months < 0:
            raise InputError(f"--public-months {public_months} must be 0 or more")
        return cls(start, end, _months_before(start, public_months) if public_months else None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Window:
        """The inverse of :meth:`to_dict` (a manifest's ``window``); raises :class:`InputError` if it is invalid."""
        try:
            public = data.get("public_since")
            return cls(dt.date.fromisoformat(data["since"]), dt.date.fromisoformat(data["until"]),
                       dt.date.fromisoformat(public) if public else None)
        except InputError:  # a reversed window: the message says which dates
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"the window {data!r} is not since/until ISO dates ({exc})") from None

    def classify(self, day: dt.date) -> str | None:
        """'private', 'public', or None (outside both periods)."""
        if self.since <= day <= self.until:
            return "private"
        if self.public_since is not None and self.public_since <= day < self.since:
            return "public"
        return None

    @property
    def fetch_from(self) -> dt.date:
        return self.public_since or self.since

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "public_since": self.public_since.isoformat() if self.public_since else None,
        }


def _months_before(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 - months
    return dt.date(index // 12, index % 12 + 1, 1)


def month_ranges(start: dt.date, end: dt.date) -> list[tuple[dt.date, dt.date]]:
    """Split ``[start, end]`` into calendar-month pieces (the unit of fetching and resuming)."""
    out = []
    cur = start
    while cur <= end:
        last = dt.date(cur.year, cur.month, calendar.monthrange(cur.year, cur.month)[1])
        out.append((cur, min(last, end)))
        cur = last + dt.timedelta(days=1)
    return out


# --- knowledge cutoffs -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Cutoff:
    model: str
    cutoff: str | None  # YYYY-MM
    kind: str
    source: str
    effective_cutoff: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def binding(self) -> str | None:
        """The later of the reported and the measured effective cutoff (what a window must start after)."""
        dates = [d for d in (self.cutoff, self.effective_cutoff) if d]
        return max(dates) if dates else None

    def window_start(self) -> dt.date | None:
        """First day of the month after the binding cutoff."""
        if not self.binding:
            return None
        last = parse_date(self.binding, end_of_month=True)
        return last + dt.timedelta(days=1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "cutoff": self.cutoff,
            "kind": self.kind,
            "effective_cutoff": self.effective_cutoff,
            "window_start": self.window_start().isoformat() if self.window_start() else None,
            "source": self.source,
            "aliases": list(self.aliases),
        }


@lru_cache(maxsize=1)
def cutoff_registry() -> dict[str, Cutoff]:
    """All registered models, by name and by alias (lower-case)."""
    raw = json.loads(resources.files("largefedbench.data").joinpath("cutoffs.json").read_text())
    table: dict[str, Cutoff] = {}
    for row in raw["models"]:
        entry = Cutoff(
            model=row["model"], cutoff=row["cutoff"], kind=row["kind"], source=row["source"],
            effective_cutoff=row.get("effective_cutoff"), aliases=tuple(row.get("aliases", ())),
        )
        for name in (entry.model, *entry.aliases):
            table[name.lower()] = entry
    return table


def list_cutoffs() -> list[Cutoff]:
    seen, out = set(), []
    for entry in cutoff_registry().values():
        if entry.model not in seen:
            seen.add(entry.model)
            out.append(entry)
    return out


def get_cutoff(model: str) -> Cutoff:
    """Look a model up by id or alias; unknown models get the closest names."""
    table = cutoff_registry()
    entry = table.get(model.lower())
    if entry is None:
        close = difflib.get_close_matches(model.lower(), list(table), n=3, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise InputError(
            f"no knowledge cutoff is registered for {model!r}.{hint} `lfb cutoffs` lists the registry; "
            "pass --since with a date after the model's cutoff instead."
        )
    return entry


def after_cutoff(window_since: dt.date, model: str) -> bool | None:
    """Whether a window starting on ``window_since`` starts after ``model``'s cutoff (None when unknown)."""
    start = get_cutoff(model).window_start()
    return None if start is None else window_since >= start
