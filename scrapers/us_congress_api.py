"""The GovInfo API's JSON listings of the Congressional Record: the pages of daily packages and of a day's granules,
their ``nextPage`` links, and what a listed package's id (its date) and a granule's class or id (its chamber) say.

Facts (``shared/reference/sources.md`` §2, the usgpo/api samples in the shared fixtures):

- ``GET /published/{from}/{to}?collection=CREC&offsetMark=*&pageSize=N`` lists the daily packages issued in
  the range as ``{"count", "message", "nextPage", "previousPage", "packages": [{"packageId": "CREC-YYYY-MM-DD",
  "lastModified", "packageLink", ...}]}``; ``nextPage`` is an absolute URL carrying the next ``offsetMark`` (or,
  in older answers, ``offset``) and is null on the last page;
- ``GET /packages/{pkg}/granules?offsetMark=*&pageSize=N`` lists the day's granules (one per article) as
  ``{"count", "offset", "pageSize", "nextPage", "previousPage", "granules": [{"title", "granuleId",
  "granuleLink"}]}``; newer answers add ``granuleClass`` (HOUSE, SENATE, EXTENSIONS, DAILYDIGEST). Without it
  the page letter of the id decides: ``CREC-{date}-pt{n}-Pg{H|S|E|D}{page}[-{k}]``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_PACKAGE_ID = re.compile(r"^CREC-(\d{4}-\d{2}-\d{2})\Z")
_GRANULE_ID = re.compile(r"^CREC-\d{4}-\d{2}-\d{2}-[A-Za-z0-9]+-Pg([A-Z])[A-Za-z0-9-]*\Z")
GRANULE_CLASSES: dict[str, str | None] = {"HOUSE": "House", "SENATE": "Senate", "EXTENSIONS": None, "DAILYDIGEST": None}
PAGE_LETTERS: dict[str, str | None] = {"H": "House", "S": "Senate", "E": None, "D": None}
_SKIP_REASON = {"EXTENSIONS": "extensions_granule", "DAILYDIGEST": "daily_digest_granule", "E": "extensions_granule",
                "D": "daily_digest_granule"}


@dataclass
class Page:
    """One page of a paged GovInfo listing (packages or granules)."""

    items: list[Any]
    next_page: str | None


def _parse_page(body: bytes, items_key: str) -> Page:
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get(items_key), list):
        raise ValueError(f"the JSON has no {items_key!r} list")
    next_page = data.get("nextPage")
    if next_page is not None and not isinstance(next_page, str):
        raise ValueError(f"nextPage is {next_page!r}, not a URL or null")
    return Page(data[items_key], next_page or None)


def parse_listing(body: bytes) -> Page:
    """A ``/published`` (or ``/collections``) page; ``ValueError`` if it is not one."""
    return _parse_page(body, "packages")


def parse_granule_list(body: bytes) -> Page:
    """A ``/packages/{pkg}/granules`` page; ``ValueError`` if it is not one."""
    return _parse_page(body, "granules")


def next_page_request(url: str, base_url: str) -> tuple[str, dict[str, str]]:
    """The path and query of a ``nextPage`` URL, to re-issue against ``base_url``, without any ``api_key``."""
    parts = urlsplit(url)
    path = parts.path
    prefix = urlsplit(base_url).path.rstrip("/")
    if prefix and path.startswith(prefix + "/"):
        path = path[len(prefix) :]
    params = {k: v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() != "api_key"}
    return path.lstrip("/"), params


def package_day(entry: Any) -> dt.date | None:
    """The issue date of a listed CREC package (from ``packageId``), or None if the entry is malformed."""
    if not isinstance(entry, dict):
        return None
    m = _PACKAGE_ID.match(str(entry.get("packageId", "")).strip())
    if not m:
        return None
    try:
        return dt.date.fromisoformat(m[1])
    except ValueError:
        return None


def granule_chamber(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(chamber, None)`` for a House or Senate granule, else ``(None, reason it is skipped)``.

    ``granuleClass`` decides when present; otherwise the page letter of the granule id.
    """
    gclass = str(entry.get("granuleClass") or "").strip().upper()
    if gclass:
        if gclass not in GRANULE_CLASSES:
            return None, "unknown_granule_class"
        return GRANULE_CLASSES[gclass], None if GRANULE_CLASSES[gclass] else _SKIP_REASON[gclass]
    m = _GRANULE_ID.match(str(entry.get("granuleId", "")))
    letter = m[1] if m else ""
    if letter not in PAGE_LETTERS:
        return None, "unknown_granule_class"
    return PAGE_LETTERS[letter], None if PAGE_LETTERS[letter] else _SKIP_REASON[letter]
