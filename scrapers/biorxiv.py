"""bioRxiv abstracts through the public API: ``/details/{server}/{from}/{to}/{cursor}/json``.

Facts this client is built on (``shared/reference/sources.md`` §1):

- pages start at cursor 0 and advance by the number of records actually returned (the docs say 100 per
  page, the live service returns 30); paging stops at an empty collection or once ``total`` (a string,
  sometimes absent) is reached;
- the interval matches each *version*'s posting date, so a preprint appears once per version: one client per
  DOI, its latest version in the fetched range; the DOI prefix varies (10.1101/…, 10.64898/…);
- licences: only {cc_by, cc_by_nc, cc_by_nd, cc_by_nc_nd, cc0} are kept; ``cc_no``, missing and unknown
  licences are dropped and counted;
- abstracts carry JATS-flattening artefacts (see :func:`clean_jats_abstract`);
- HTTP 200 with an empty body happens under load: it is retried, never read as "no results".

The range is fetched month by month; each month's pages are cached and checkpointed, so a killed refresh
resumes without the network for what it already has.
"""

from __future__ import annotations

import html
import json
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from largefedbench.data.records import Record
from largefedbench.data.windows import Window, month_ranges
from largefedbench.errors import SourceError

from .base import Scraper
from .cleaning import clean_jats_abstract, clean_text, normalize_whitespace

log = logging.getLogger(__name__)

LICENSE_ALLOWLIST = frozenset({"cc_by", "cc_by_nc", "cc_by_nd", "cc_by_nc_nd", "cc0"})
NO_POSTS = "no posts found"


@dataclass
class Page:
    status: str
    records: list[dict[str, Any]]
    total: int | None


def parse_page(body: bytes) -> Page:
    """Parse one ``/details`` response; ``ValueError`` if it is not a well-formed page."""
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list) or not data["messages"]:
        raise ValueError("the JSON has no 'messages' list")
    message = data["messages"][0]
    if not isinstance(message, dict):
        raise ValueError("messages[0] is not an object")
    records = data.get("collection", [])
    if not isinstance(records, list):
        raise ValueError("'collection' is not a list")
    total = message.get("total")
    try:
        total = int(total) if total not in (None, "") else None
    except (TypeError, ValueError):
        raise ValueError(f"messages[0].total is {total!r}, not a number") from None
    return Page(str(message.get("status", "")).strip().lower(), records, total)


class BiorxivScraper(Scraper):
    source = "biorxiv"
    dataset = "biorxiv"
    version = "1.0"
    default_url = "https://api.biorxiv.org"
    url_env = "LFB_BIORXIV_URL"
    license_note = (
        "bioRxiv abstracts under the authors' Creative Commons licences (cc_by, cc_by_nc, cc_by_nd, cc_by_nc_nd, "
        "cc0; each record's licence is kept); attribution: the record's authors, DOI and URL."
    )

    def __init__(self, client, *, refresh: bool = False, server: str = "biorxiv") -> None:
        super().__init__(client, refresh=refresh)
        if server not in ("biorxiv", "medrxiv"):
            raise SourceError(f"unknown preprint server {server!r}; use biorxiv or medrxiv")
        self.server = server

    # -- paging -------------------------------------------------------------------------------------
    def iter_range(self, start: str, end: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Yield ``(page url, records)`` for every page of one interval, from cursor 0."""
        checkpoint = self.checkpoint(f"details_{self.server}_{start}_{end}")
        cursor = 0
        while True:
            path = f"details/{self.server}/{start}/{end}/{cursor}/json"
            url = self.client.display_url(path)
            page = self.client.fetch(path, parse_page, refresh=self.refresh)
            if page.status not in ("ok", NO_POSTS):
                raise SourceError(f"{url}: the API answered status {page.status!r}; check the dates and server name")
            if not page.records:
                checkpoint.save({"next_cursor": cursor, "total": page.total, "complete": True})
                return
            yield url, page.records
            cursor += len(page.records)
            complete = page.total is not None and cursor >= page.total
            checkpoint.save({"next_cursor": cursor, "total": page.total, "complete": complete})
            if complete:
                return

    # -- records ------------------------------------------------------------------------------------
    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        rejected: Counter = Counter()
        latest: dict[str, dict[str, Any]] = {}
        months = month_ranges(window.fetch_from, window.until)
        for start, end in tqdm(months, desc=f"{self.server} months", unit="month", disable=not progress):
            for url, raws in self.iter_range(start.isoformat(), end.isoformat()):
                for raw in raws:
                    key = self._version_key(raw, url, rejected)
                    if key is None:
                        continue
                    doi = raw["doi"].strip()
                    if doi in latest:
                        rejected["superseded_version"] += 1
                        if key < self._version_key(latest[doi], url, Counter()):
                            continue
                    latest[doi] = raw
        records = []
        for raw in latest.values():
            rec = self.to_record(raw, rejected)
            if rec is not None:
                records.append(rec)
        return records, rejected

    @staticmethod
    def _version_key(raw: Any, url: str, rejected: Counter) -> tuple[int, str] | None:
        try:
            if not isinstance(raw, dict) or not str(raw.get("doi", "")).strip():
                raise ValueError("no doi")
            return int(str(raw["version"]).strip()), str(raw["date"])
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("%s: skipping a malformed record (%s)", url, exc)
            rejected["malformed_record"] += 1
            return None

    def to_record(self, raw: dict[str, Any], rejected: Counter) -> Record | None:
        """The client record of one API record, or None (counted in ``rejected`` by reason)."""
        license_ = str(raw.get("license") or "").strip().lower()
        if license_ not in LICENSE_ALLOWLIST:
            rejected[f"license:{license_ or 'missing'}" if license_ in ("", "cc_no") else "license:unknown"] += 1
            return None
        abstract = raw.get("abstract")
        if not isinstance(abstract, str) or not abstract.strip():
            rejected["missing_abstract"] += 1
            return None
        text, _ = clean_text(clean_jats_abstract(abstract))
        if not text:
            rejected["empty_after_cleaning"] += 1
            return None
        doi = raw["doi"].strip()
        version = int(str(raw["version"]).strip())
        host = "www.medrxiv.org" if self.server == "medrxiv" else "www.biorxiv.org"
        try:
            return Record(
                id=f"{self.server}:{doi}",
                source=self.server,
                date=str(raw["date"]).strip(),
                title=normalize_whitespace(html.unescape(str(raw.get("title") or ""))),
                text=text,
                url=f"https://{host}/content/{doi}v{version}",
                license=license_,
                doi=doi,
                version=version,
                category=str(raw.get("category") or "").strip().lower() or None,
            )
        except ValueError:  # InputError: a malformed date
            rejected["malformed_record"] += 1
            return None
