"""The dated records a knowledge-cutoff curve is measured on: a snapshot's or a source mirror's records in a
range of months, each as a :class:`DatedText`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from largefedbench.data.windows import Window, parse_date
from largefedbench.errors import InputError


@dataclass(frozen=True)
class DatedText:
    """One record as the curve needs it: its id, ISO day and cleaned text."""

    id: str
    date: str
    text: str

    @property
    def month(self) -> str:
        return self.date[:7]



def _month_range(since: str | None, until: str | None) -> tuple[dt.date | None, dt.date | None]:
    start = parse_date(since, flag="--since") if since else None
    end = parse_date(until, end_of_month=True, flag="--until") if until else None
    if start and end and start > end:
        raise InputError(f"--since {since} is after --until {until}; swap them")
    return start, end


def records_from_snapshot(name: str, *, since: str | None = None, until: str | None = None,
                          home: Path | None = None) -> tuple[list[DatedText], dict[str, Any]]:
    """Every record of every split of snapshot ``name`` dated in ``[since, until]`` (both optional)."""
    from largefedbench.data.federated import load_snapshot

    fd = load_snapshot(name, home=home)  # an unknown name is a SnapshotError that lists the known ones
    start, end = _month_range(since, until)
    out = []
    for split in fd.splits.values():
        for rid, day, text in zip(split.column("id"), split.column("date"), split.column("text")):
            d = dt.date.fromisoformat(day)
            if (start is None or d >= start) and (end is None or d <= end):
                out.append(DatedText(rid, day, text or ""))
    info = {"kind": "snapshot", "snapshot": fd.name, "content_sha256": fd.manifest.get("content_sha256"),
            "synthetic": fd.synthetic, "since": since, "until": until}
    if not out:
        raise InputError(f"snapshot {fd.name} has no records dated in {since or 'its start'} .. {until or 'its end'}"
                         f" (it holds {fd.manifest.get('counts', {}).get('date_min')} .. "
                         f"{fd.manifest.get('counts', {}).get('date_max')}); change --since/--until")
    return out, info


def records_from_mirror(source: str, folder: Path, *, since: str | None, until: str | None,
                        progress: bool = True) -> tuple[list[DatedText], dict[str, Any]]:
    """The records of mirror ``folder`` (source ``us`` or ``arxiv``) dated in ``[since, until]``, read through the
    source's own parser and cleaning (:mod:`largefedbench.scrapers.mirror`)."""
    from largefedbench.scrapers.mirror import open_mirror

    if not since or not until:
        raise InputError("--mirror needs --since and --until (YYYY-MM): the months to read from the mirror")
    window = Window.parse(since, until, public_months=0)
    mirror = open_mirror(source, folder)
    records, rejected = mirror.fetch(window, progress=progress)
    out = [DatedText(r.id, r.date, r.text) for r in records if window.classify(r.day) == "private"]
    if not out:
        raise InputError(f"the {source} mirror {folder} has no records dated {window.since} .. {window.until} "
                         f"(rejected: {dict(rejected) or 'none'}); check the folder and --since/--until")
    described = mirror.describe()
    info = {"kind": "mirror", "source": source, "folder": str(Path(folder).resolve()), "since": since, "until": until,
            "rejected": dict(rejected), "upstream": described["mirror"]["upstream"],
            "files_digest": described["mirror"]["files_digest"], "files": len(described["mirror"]["files_sha256"]),
            "reader_version": described["scraper_version"]}
    return out, info


def months_between(first: str, last: str) -> list[str]:
    """``YYYY-MM`` labels from ``first`` to ``last`` inclusive."""
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out
