"""US Congressional Record speeches through the GovInfo API (``https://api.govinfo.gov``, ``$LFB_GOVINFO_URL``).

The GovInfo answers it reads are described beside it: :mod:`~largefedbench.scrapers.us_congress_api` (the JSON
listings of days and granules), :mod:`~largefedbench.scrapers.us_congress_text` (a granule's text into speeches)
and :mod:`~largefedbench.scrapers.us_congress_cleaning` (a speech's text cleaned).

Facts this client relies on (``shared/reference/sources.md`` §2):

- every request needs an api.data.gov key; it is read from ``GOVINFO_API_KEY`` (``DEMO_KEY`` otherwise, with a
  warning: about 30 requests an hour and 50 a day per IP) and sent only as the ``X-Api-Key`` header, so it
  never appears in a URL, a cache file name, a manifest, a log line or an error message. api.data.gov allows
  1,000 requests an hour per key: unless a rate limit is given (``--rate-limit``, ``$LFB_RATE_LIMIT``), the client
  paces itself to that limit.

Discovery: the window's fetch range (public period + window) is cut into calendar months; each month is listed
with ``/published`` following ``nextPage`` (any ``api_key`` in it is dropped and its host ignored: the path and
query are re-issued against the configured base URL); each daily package of the range gets its granule list
(paged the same way); House (H) and Senate (S) granules are fetched, Extensions of Remarks (E, written, not
spoken) and the Daily Digest (D) never are. Every response is stored raw before parsing, so a refresh that is
killed resumes from the stored responses; the listing of a month ending less than a week before today is
downloaded again on every run (new days appear there), nothing else is.

Records: one speech (one client) per speaker tag, its text cleaned. Presiding officers' speeches (``The PRESIDING
OFFICER``, ``The SPEAKER pro tempore``, ``The CHAIR``, ``The CLERK`` …) are **not** clients: their text is almost
entirely procedure, and the chair rotates among Members, so "The PRESIDING OFFICER" is no one speaker; they are
counted as ``presiding_officer``.
Rejected speeches are counted by reason: ``presiding_officer``, ``unspoken_statement`` (``<bullet>``),
``procedural`` (nothing but procedural formulas), ``empty_after_cleaning``; skipped granules and days by
``extensions_granule``, ``daily_digest_granule``, ``unknown_granule_class``, ``malformed_granule_entry``,
``malformed_listing_entry``, ``missing_granule``/``missing_day`` (HTTP 404), and ``malformed_granule``/
``malformed_day`` (a response that still does not parse after the client's fresh downloads: reported with its
URL and skipped, the other granules and days are kept; a listing page that does not parse stops the refresh,
since the days it lists cannot be known). Network failures that outlast the retries stop the refresh too; run
it again to resume.

A record is ``us:{granuleId}:{n}`` (n = the speech's 1-based position among the speaker tags of the granule,
so ids do not move when cleaning rules change), dated by the package, country USA, chamber House/Senate,
speaker as printed ("Mr. LOTT", "Mr. SMITH of Texas"), the granule title, the govinfo content URL of the
granule's htm, licence "public-domain (17 U.S.C. 105)".

Deviations from the reference LargeFedBench scraper (hazylavender/fl_llm_benchmark_dataset ``us_congress.py``):
it read only the first page of ``/published`` and of each granule list (we follow ``nextPage``); it embedded an
API key in its source (ours comes from the environment and never leaves the header); it kept Extensions of
Remarks (we drop E and D granules); it split speeches on any "Mr. X" anywhere in the text (we split on speaker
tags at paragraph starts only, and agree with the unitedstates/congressional-record parses of the fixture
granules); it kept only speeches opening with "Mr. Speaker,"/"Mr. President," and dropped those shorter than
400 characters containing "I ask unanimous consent that" (we keep every Member's speech and remove procedural
formulas sentence by sentence, keeping the spoken salutation); its cleaning returned early on such openings,
skipping every rule (we apply the shared cleaning to every speech); it kept inserted material and notes (we
drop them and ``<bullet>`` statements). Like it, we drop presiding officers' speeches.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from largefedbench.data.records import Record
from largefedbench.data.windows import Window, month_ranges
from largefedbench.errors import SourceError

from .base import Scraper
from .cleaning import normalize_whitespace
from .http import HttpSettings, MalformedResponseError, default_rate_limit
from .us_congress_api import (  # noqa: F401 - re-exported: callers import them from here
    _GRANULE_ID,
    _SKIP_REASON,
    GRANULE_CLASSES,
    PAGE_LETTERS,
    Page,
    granule_chamber,
    next_page_request,
    package_day,
    parse_granule_list,
    parse_listing,
)
from .us_congress_cleaning import (  # noqa: F401 - re-exported: callers import them from here
    NOTATION_PATTERN,
    PROCEDURAL_FORMULAS,
    PROCEDURAL_PATTERN,
    US_PATTERNS,
    clean_speech,
    prepare_text,
)
from .us_congress_text import (  # noqa: F401 - re-exported: callers import them from here
    SPEAKER_TAG,
    Granule,
    Speech,
    is_recorder,
    parse_article,
    parse_granule,
    pre_text,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

LICENSE = "public-domain (17 U.S.C. 105)"
KEY_ENV = "GOVINFO_API_KEY"
DEMO_KEY = "DEMO_KEY"
KEY_HEADER = "X-Api-Key"
HOURLY_LIMIT = {"key": 1000, "demo": 30}  # api.data.gov requests per hour (sources.md §2)
PAGE_SIZE = 1000  # GovInfo's maximum page size
OPEN_LISTING_DAYS = 7  # a month listing ending this close to today is downloaded again on each run
CONTENT_URL = "https://www.govinfo.gov/content/pkg/{pkg}/html/{granule}.htm"


# --- the scraper ---------------------------------------------------------------------------------------
def api_key() -> tuple[str, bool]:
    """The api.data.gov key to send, and whether it is the shared ``DEMO_KEY``."""
    key = os.environ.get(KEY_ENV, "").strip()
    return (key, False) if key else (DEMO_KEY, True)


class UsCongressScraper(Scraper):
    source = "us"
    dataset = "congress"
    version = "1.0"
    default_url = "https://api.govinfo.gov"
    url_env = "LFB_GOVINFO_URL"
    license_note = (
        "US Congressional Record (House and Senate floor speeches) from the GovInfo API of the U.S. Government "
        "Publishing Office: a work of the US government, public domain (17 U.S.C. 105); source: govinfo.gov."
    )

    def __init__(self, client, *, refresh: bool = False, today: dt.date | None = None) -> None:
        super().__init__(client, refresh=refresh)
        self.today = today or dt.date.today()

    @classmethod
    def secrets(cls) -> dict[str, str]:
        return {"api_key": api_key()[0]}

    @classmethod
    def create(cls, *, settings: HttpSettings | None = None, rate_limit: float | None = None,
               **kwargs) -> UsCongressScraper:
        """As :meth:`Scraper.create`, pacing requests to the key's hourly limit unless a ``rate_limit`` (or
        ``$LFB_RATE_LIMIT``) says otherwise."""
        _, demo = api_key()
        if demo:
            log.warning(
                "%s is not set: using api.data.gov's DEMO_KEY, which allows about 30 requests an hour and 50 a day "
                "per IP (a month of the Record needs thousands). Get a free key at https://api.data.gov/signup/ "
                "and set %s.", KEY_ENV, KEY_ENV,
            )
        if settings is None and rate_limit is None:
            explicit = "LFB_RATE_LIMIT" in os.environ
            rate_limit = default_rate_limit() if explicit else HOURLY_LIMIT["demo" if demo else "key"] / 3600.0
        return super().create(settings=settings, rate_limit=rate_limit, **kwargs)

    # -- requests -----------------------------------------------------------------------------------
    def _get(self, path: str, parse: Callable[[bytes], T], params: dict[str, Any] | None = None, *,
             refresh: bool = False, missing_ok: bool = False) -> T | None:
        try:
            return self.client.fetch(
                path, parse, params=params, secret_headers={KEY_HEADER: "api_key"},
                refresh=refresh or self.refresh, missing_ok=missing_ok,
            )
        except SourceError as exc:
            if re.search(r"HTTP 40[13]\b", str(exc)):
                raise SourceError(
                    f"{exc} GovInfo answers 401/403 when the api.data.gov key is missing, invalid or over its "
                    f"limit: check {KEY_ENV}."
                ) from None
            raise

    def _get_or_skip(self, path: str, parse: Callable[[bytes], T], params: dict[str, Any] | None,
                     what: str, rejected: Counter) -> T | None:
        """Fetch a day's file; if it still does not parse after the client's fresh downloads, report and skip it.

        Network failures are not skipped: they stop the refresh, which resumes from the stored responses.
        """
        url = self.client.display_url(path, params)
        try:
            result = self._get(path, parse, params, missing_ok=True)
        except MalformedResponseError as exc:  # the file, not the network (that stops the refresh)
            log.warning("skipping %s: %s", url, exc)
            rejected[f"malformed_{what}"] += 1
            return None
        if result is None:
            log.warning("skipping %s: HTTP 404 (listed by GovInfo but not served)", url)
            rejected[f"missing_{what}"] += 1
        return result

    def _pages(self, path: str, params: dict[str, Any], parse: Callable[[bytes], Page], *, refresh: bool = False,
               what: str | None = None, rejected: Counter | None = None) -> Iterator[tuple[str, Page]]:
        """Every page of a paged listing, following ``nextPage``; ``what`` makes unparsable pages skippable."""
        seen: set[tuple[str, tuple]] = set()
        while True:
            url = self.client.display_url(path, params)
            request = (path, tuple(sorted(params.items())))
            if request in seen:
                raise SourceError(f"{url}: nextPage points back to a page already read; the listing loops")
            seen.add(request)
            if what is None:
                page = self._get(path, parse, params, refresh=refresh)
            else:
                page = self._get_or_skip(path, parse, params, what, rejected)
            if page is None:
                return
            yield url, page
            if not page.next_page or not page.items:
                return
            path, params = next_page_request(page.next_page, self.client.base_url)

    # -- discovery ----------------------------------------------------------------------------------
    def packages(self, window: Window, rejected: Counter) -> list[tuple[str, dt.date]]:
        """The daily packages issued in the fetch range, by date."""
        found: dict[str, dt.date] = {}
        for start, end in month_ranges(window.fetch_from, window.until):
            open_month = end >= self.today - dt.timedelta(days=OPEN_LISTING_DAYS)
            params = {"collection": "CREC", "offsetMark": "*", "pageSize": PAGE_SIZE}
            path = f"published/{start.isoformat()}/{end.isoformat()}"
            for url, page in self._pages(path, params, parse_listing, refresh=open_month):
                for entry in page.items:
                    day = package_day(entry)
                    if day is None:
                        log.warning("%s: skipping a listed package that is not a CREC-YYYY-MM-DD id: %.200r", url, entry)
                        rejected["malformed_listing_entry"] += 1
                    elif window.fetch_from <= day <= window.until:
                        found[entry["packageId"].strip()] = day
        return sorted(found.items(), key=lambda item: (item[1], item[0]))

    def granules(self, package: str, rejected: Counter) -> Iterator[tuple[dict[str, Any], str]]:
        """The House and Senate granules of one day, with their chamber."""
        params = {"offsetMark": "*", "pageSize": PAGE_SIZE}
        for url, page in self._pages(f"packages/{package}/granules", params, parse_granule_list,
                                     what="day", rejected=rejected):
            for entry in page.items:
                if not isinstance(entry, dict) or not _GRANULE_ID.match(str(entry.get("granuleId", ""))):
                    log.warning("%s: skipping a granule entry without a CREC granule id: %.200r", url, entry)
                    rejected["malformed_granule_entry"] += 1
                    continue
                chamber, reason = granule_chamber(entry)
                if chamber is None:
                    rejected[reason] += 1
                    continue
                yield entry, chamber

    # -- records ------------------------------------------------------------------------------------
    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        rejected: Counter = Counter()
        records: list[Record] = []
        for package, day in tqdm(self.packages(window, rejected), desc="Congressional Record days", unit="day",
                                 disable=not progress):
            for entry, chamber in self.granules(package, rejected):
                granule_id = entry["granuleId"]
                path = f"packages/{package}/granules/{granule_id}/htm"
                parsed = self._get_or_skip(path, parse_granule, None, "granule", rejected)
                if parsed is not None:
                    records += self.to_records(package, day, entry, chamber, parsed, rejected)
        return records, rejected

    def to_records(self, package: str, day: dt.date, entry: dict[str, Any], chamber: str, granule: Granule,
                   rejected: Counter) -> list[Record]:
        """The client records of one granule's speeches (rejected speeches counted by reason)."""
        title = normalize_whitespace(str(entry.get("title") or "")) or granule.title
        return speech_records(package, day, entry["granuleId"], chamber, title, granule, rejected)


def speech_records(package: str, day: dt.date, granule_id: str, chamber: str, title: str, granule: Granule,
                   rejected: Counter) -> list[Record]:
    """The client records of one granule's speeches (rejected speeches counted by reason): one per Member's
    speech, ``us:{granuleId}:{turn}``; presiding officers, unspoken statements and nothing-left speeches counted."""
    out = []
    for speech in granule.speeches:
        if speech.presiding:
            rejected["presiding_officer"] += 1
            continue
        if speech.unspoken:
            rejected["unspoken_statement"] += 1
            continue
        text, reason = clean_speech(speech.paragraphs)
        if reason:
            rejected[reason] += 1
            continue
        out.append(Record(
            id=f"us:{granule_id}:{speech.turn}",
            source=UsCongressScraper.source,
            date=day.isoformat(),
            title=title,
            text=text,
            url=CONTENT_URL.format(pkg=package, granule=granule_id),
            license=LICENSE,
            country="USA",
            chamber=chamber,
            speaker=speech.speaker,
        ))
    return out
