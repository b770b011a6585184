"""arXiv quantitative-biology abstracts from a mirror of daily listings (``lfb refresh --sources arxiv --mirror DIR``).

**A stand-in in the genre of bioRxiv abstracts (biology preprints), not bioRxiv.** The mirror
(``shared/real/arxiv-qbio``, yukari502/Daily-Bio-Arxiv) holds one JSON Lines file per listing day,
``YYYY-MM-DD.jsonl``, one object a line: ``{id, pdf, abs, authors, title, categories, comment, summary}``, where
``summary`` is the abstract. Listings overlap, so an id is one client, dated by the first day it was listed (the
file's name). As for bioRxiv, one abstract is one client; the text is the abstract through the shared cleaning
(white space, entities, the 30% non-letter sentence rule, which drops formula-heavy sentences). arXiv releases its
metadata, abstracts included, under CC0, recorded on every record.

Rejected by reason: ``malformed_listing_line`` (not a JSON object with a string ``id`` and ``summary``),
``duplicate_listing`` (an id listed again on a later day), ``empty_after_cleaning``. A listing file that is not
JSON Lines at all, and a folder without listing files, are refused.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

from largefedbench.data.records import Record
from largefedbench.data.windows import Window
from largefedbench.errors import InputError

from .cleaning import clean_text, normalize_whitespace
from .mirror import MirrorSource

log = logging.getLogger(__name__)

LICENSE = "cc0 (arXiv metadata, CC0 1.0)"
LISTING_FILE = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})\.jsonl\Z")
_ARXIV_ID = re.compile(r"^(?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})\Z")
ABS_URL = "https://arxiv.org/abs/{id}"


class ArxivMirror(MirrorSource):
    source = "arxiv"
    dataset = "arxiv-qbio"
    version = "1.0"
    license_note = (
        "arXiv quantitative-biology abstracts (q-bio.QM, q-bio.GN, q-bio.NC and cross-lists) from a mirror of daily "
        "arXiv listings: a stand-in in the genre of bioRxiv abstracts, not bioRxiv. arXiv metadata, abstracts "
        "included, is released under CC0 1.0; source: arxiv.org."
    )
    what = "arXiv listing files named YYYY-MM-DD.jsonl"

    def listings(self) -> list[tuple[dt.date, Path]]:
        found = []
        for path in self.folder.iterdir():
            if m := LISTING_FILE.match(path.name):
                try:
                    found.append((dt.date.fromisoformat(m["day"]), path))
                except ValueError:
                    raise InputError(f"{path}: {m['day']} is not a date; listing files are named YYYY-MM-DD.jsonl") from None
        if not found:
            raise InputError(f"--mirror {self.folder} holds no {self.what}; is it the right folder?")
        return sorted(found)

    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        rejected: Counter = Counter()
        records: dict[str, Record] = {}
        days = [(day, path) for day, path in self.listings() if window.fetch_from <= day <= window.until]
        for day, path in tqdm(days, desc="arXiv listing days", unit="day", disable=not progress):
            for raw in self.read_listing(path):
                record = self.to_record(raw, day, rejected)
                if record is None:
                    continue
                if record.id in records:
                    rejected["duplicate_listing"] += 1
                    continue
                records[record.id] = record
        return list(records.values()), rejected

    def read_listing(self, path: Path) -> list[Any]:
        """The objects of one listing file; :class:`InputError` if no line of it is JSON."""
        lines = [line for line in self.read_bytes(path).decode("utf-8", errors="replace").splitlines() if line.strip()]
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                rows.append(None)
        if lines and all(row is None for row in rows):
            raise InputError(f"{path} is not an arXiv listing: none of its {len(lines)} lines is a JSON object. "
                             "Remove the file from the mirror folder")
        return rows

    @staticmethod
    def to_record(raw: Any, day: dt.date, rejected: Counter) -> Record | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("summary"), str):
            rejected["malformed_listing_line"] += 1
            return None
        arxiv_id = raw["id"].strip()
        if not _ARXIV_ID.match(arxiv_id):
            rejected["malformed_listing_line"] += 1
            return None
        text, _ = clean_text(raw["summary"])
        if not text:
            rejected["empty_after_cleaning"] += 1
            return None
        categories = raw.get("categories") if isinstance(raw.get("categories"), list) else []
        return Record(
            id=f"arxiv:{arxiv_id}",
            source=ArxivMirror.source,
            date=day.isoformat(),
            title=normalize_whitespace(str(raw.get("title") or "")),
            text=text,
            url=ABS_URL.format(id=arxiv_id),
            license=LICENSE,
            category=str(categories[0]).strip() if categories else None,
        )
