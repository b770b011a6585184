"""US Congressional Record speeches through the GovInfo API (``https://api.govinfo.gov``, ``$LFB_GOVINFO_URL``).

Facts this client relies on (``shared/reference/sources.md`` §2, the usgpo/api samples in the shared fixtures):

- every request needs an api.data.gov key; it is read from ``GOVINFO_API_KEY`` (``DEMO_KEY`` otherwise, with a
  warning: about 30 requests an hour and 50 a day per IP) and sent only as the ``X-Api-Key`` header, so it
  never appears in a URL, a cache file name, a manifest, a log line or an error message. api.data.gov allows
  1,000 requests an hour per key: unless a rate limit is given (``--rate-limit``, ``$LFB_RATE_LIMIT``), the client
  paces itself to that limit;
- ``GET /published/{from}/{to}?collection=CREC&offsetMark=*&pageSize=N`` lists the daily packages issued in
  the range as ``{"count", "message", "nextPage", "previousPage", "packages": [{"packageId": "CREC-YYYY-MM-DD",
  "lastModified", "packageLink", ...}]}``; ``nextPage`` is an absolute URL carrying the next ``offsetMark`` (or,
  in older answers, ``offset``) and is null on the last page;
- ``GET /packages/{pkg}/granules?offsetMark=*&pageSize=N`` lists the day's granules (one per article) as
  ``{"count", "offset", "pageSize", "nextPage", "previousPage", "granules": [{"title", "granuleId",
  "granuleLink"}]}``; newer answers add ``granuleClass`` (HOUSE, SENATE, EXTENSIONS, DAILYDIGEST). Without it
  the page letter of the id decides: ``CREC-{date}-pt{n}-Pg{H|S|E|D}{page}[-{k}]``;
- ``GET /packages/{pkg}/granules/{granuleId}/htm`` is the granule text: an HTML page whose body is one
  ``<pre>`` block (the same file as ``https://www.govinfo.gov/content/pkg/{pkg}/html/{granuleId}.htm``), headed
  by ``[Congressional Record Volume …]``, ``[Senate]``/``[House]``, ``[Page S697]`` and the GPO trailer line;
- in the ``<pre>`` text a speech starts on a line indented by two spaces (after an optional ``<bullet>``) with a
  speaker tag ending in a full stop: ``Mr. GORTON.``, ``Mr. SMITH of Texas.``, ``The PRESIDING OFFICER (Mr.
  Kyl).``, ``The SPEAKER pro tempore.``, ``The ACTING PRESIDENT pro tempore.``, ``The CHAIR.`` …; further
  paragraphs of the speech start with two spaces and no tag; continuation lines are not indented; titles,
  inserted material (letters, bill text, tables "printed in the Record") and roll-call lists are indented by
  one or three and more spaces; ``[[Page S716]]``, ``{time}  1753`` and ``____`` separators stand on lines of
  their own; ``<bullet>`` marks statements that were not spoken on the floor.

Discovery: the window's fetch range (public period + window) is cut into calendar months; each month is listed
with ``/published`` following ``nextPage`` (any ``api_key`` in it is dropped and its host ignored: the path and
query are re-issued against the configured base URL); each daily package of the range gets its granule list
(paged the same way); House (H) and Senate (S) granules are fetched, Extensions of Remarks (E, written, not
spoken) and the Daily Digest (D) never are. Every response is stored raw before parsing, so a refresh that is
killed resumes from the stored responses; the listing of a month ending less than a week before today is
downloaded again on every run (new days appear there), nothing else is.

Speeches and records: one speech (one client) per speaker tag, ending at the next tag, a recorder line ("The
legislative clerk proceeded to call the roll.", "There being no objection, …", "The question was taken; …")
or a ``____`` separator. Dropped from the text: bracketed and parenthetical notes ("(Mr. X asked and was given
permission to revise and extend his remarks.)", "(The remarks of Mr. Bond … are located in today's Record
…)"), indented inserted material and headings, ``{time}``, ``[[Page …]]`` and ``<bullet>`` markers; GPO's
typewriter notation becomes text (```` ``…'' ```` → ``"…"``, ``--`` → an em dash, ``* * *`` → ``...``,
``\\1/2\\`` → ``1/2``). Floor-procedure formulas are removed sentence by sentence (quorum calls, yielding time
or the floor, "Without objection, it is so ordered." …, see :data:`PROCEDURAL_FORMULAS`), then the shared
cleaning (:func:`clean_text`: entities, white space, the paper's 30% non-letter sentence rule) applies to
every speech. Presiding officers' speeches (``The PRESIDING OFFICER``, ``The SPEAKER pro tempore``, ``The
CHAIR``, ``The CLERK`` …) are **not** clients: their text is almost entirely procedure, and the chair rotates
among Members, so "The PRESIDING OFFICER" is no one speaker; they are counted as ``presiding_officer``.
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
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import lxml.etree
import lxml.html

from largefedbench.data.records import Record
from largefedbench.data.windows import Window, month_ranges
from largefedbench.errors import SourceError

from .base import Scraper
from .cleaning import clean_text, normalize_whitespace, remove_patterns
from .http import HttpSettings, MalformedResponseError, default_rate_limit

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

_PACKAGE_ID = re.compile(r"^CREC-(\d{4}-\d{2}-\d{2})\Z")
_GRANULE_ID = re.compile(r"^CREC-\d{4}-\d{2}-\d{2}-[A-Za-z0-9]+-Pg([A-Z])[A-Za-z0-9-]*\Z")
GRANULE_CLASSES: dict[str, str | None] = {"HOUSE": "House", "SENATE": "Senate", "EXTENSIONS": None, "DAILYDIGEST": None}
PAGE_LETTERS: dict[str, str | None] = {"H": "House", "S": "Senate", "E": None, "D": None}
_SKIP_REASON = {"EXTENSIONS": "extensions_granule", "DAILYDIGEST": "daily_digest_granule", "E": "extensions_granule",
                "D": "daily_digest_granule"}


# --- the API's JSON pages ------------------------------------------------------------------------------
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


# --- the granule text ----------------------------------------------------------------------------------
_MEMBER_WORD = r"[A-Z][a-z]{0,2}[A-Z'][A-Z'\-]*"  # SMITH, McCONNELL, DeLAURO, O'ROURKE, DIAZ-BALART
_STATE = r"(?: of [A-Z][a-z]+(?: [A-Z][a-z]+)*)"
_MEMBER = rf"(?:Mr\.|Mrs\.|Ms\.|Miss|Dr\.)(?: (?:Manager|Counsel))? {_MEMBER_WORD}(?: {_MEMBER_WORD})*{_STATE}?"
_OFFICE = (
    r"The (?:(?:ACTING|Acting) )?(?:PRESIDING OFFICER|VICE PRESIDENT|PRESIDENT|SPEAKER|CHAIRMAN|CHAIRWOMAN|CHAIR"
    r"|CLERK|CHIEF JUSTICE)(?: pro tempore)?"
)
_PRESIDING_NAME = r"(?: \([A-Z][A-Za-z.'\- ]*\))?"  # (Mr. Kyl), (Mr. Fields of Louisiana)
SPEAKER_TAG = re.compile(rf"(?P<speaker>{_MEMBER}|{_OFFICE}{_PRESIDING_NAME})\.(?:\s+|$)")
_NARRATION = re.compile(rf"(?:{_MEMBER}|{_OFFICE}{_PRESIDING_NAME}),? [a-z]")  # "The SPEAKER pro tempore announced"

_VOLUME = re.compile(r"^\[Congressional Record Volume \d+, (?:Number|Issue) \d+ \((?P<date>[^)]*)\)\]$")
_CHAMBER = re.compile(r"^\[(?P<chamber>Senate|House|House of Representatives|Extensions of Remarks|Daily Digest)\]$")
_PAGES = re.compile(r"^\[Pages? (?P<pages>[A-Z]?[\w-]+)\]$")
_TRAILER = re.compile(r"^From the Congressional Record Online through the Government (?:Publishing|Printing) Office")
_PAGE_MARK = re.compile(r"^\s*\[\[Page [^\]]*\]\]\s*$")
_TIME_MARK = re.compile(r"^\s*\{time\}\s*\d*\s*$")
_SEPARATOR = re.compile(r"^\s*(?:_{3,}|={3,}|-{5,})\s*(?:(?:END )?NOTE\s*(?:_{3,}|={3,}|-{5,})?\s*)?$")
_LINE = re.compile(r"^(?P<indent> *)(?P<bullet><bullet>\s*)?(?P<rest>.*)$")
_LOWER = re.compile(r"[a-z]")

# Recorder (not spoken) paragraphs: narration of what happened on the floor.
_RECORDER_START = re.compile(
    r"(?:The (?:senior |assistant |deputy )*(?:legislative|bill|journal|reading) clerk\b"
    r"|The Clerk (?:read|called|designated|proceeded)\b"
    r"|There (?:being|was) no objection"
    r"|The question was taken\b"
    r"|The (?:result of the vote|vote) was announced\b"
    r"|The yeas and nays (?:were|resulted)\b"
    r"|A recorded vote was (?:ordered|demanded)\b"
    r"|The vote was taken by electronic device\b"
    r"|(?:Thereupon|Whereupon|Accordingly),? (?:\(at |at \d|the (?:Senate|House|Committee)\b)"
    r"|The (?:Senate|House) (?:proceeded to (?:consider|the consideration|vote)|resumed (?:the )?consideration"
    r"|resolved itself)\b"
    r"|The (?:guest )?Chaplain\b[^.]*\boffered\b"
    r"|The following [^.]{0,200}\b(?:was|were) (?:introduced|submitted|received|referred|laid|signed)\b"
    r"|Pending:"
    r"|By (?:Mr|Mrs|Ms|Miss)\. [A-Z][A-Za-z'\-]+ \(for\b"
    r"|Messages? (?:in writing )?from the (?:President|House|Senate)\b)"
)
_PAREN_FREE = r"(?:[^.()]|\([^)]*\))"  # sentence text, parentheticals (which hold "S. 208") allowed
_FORMULA_WORDS = (
    r"to|be|for|a|the|third|second|reading|time|was|were|read|passed|en|bloc|upon|on|table|engrossed|as|amended"
    r"|agreed|laid|ordered|considered|adopted|and|follows|with|its|preamble|rejected|confirmed|withdrawn|not"
)
_RECORDER_WHOLE = re.compile(
    r"(?:(?:The|A|An) )?(?:(?:Senate|House|committee|Committee) )?(?:motion|amendments?|resolution"
    r"|concurrent resolution|joint resolution|bill|preamble|nominations?|conference report|motion to "
    r"(?:reconsider|table|proceed))(?: \([^)]*\))?(?:, (?:as amended|with its preamble),)? (?:was|were) "
    r"(?:(?:not )?agreed to|rejected|passed|confirmed|withdrawn|laid|considered|read|ordered|engrossed|adopted)"
    rf"(?:,? (?:{_FORMULA_WORDS}))*[.:]"
    rf"|The {_PAREN_FREE}{{0,300}}\b(?:is|are|reads?|read|was|were) as follows:"
)


@dataclass
class Speech:
    """One speaker tag and the paragraphs that follow it (raw, before cleaning)."""

    turn: int  # 1-based position among the speaker tags of the granule
    speaker: str
    paragraphs: list[str] = field(default_factory=list)
    unspoken: bool = False  # the tag was marked with <bullet>

    @property
    def presiding(self) -> bool:
        return self.speaker.startswith("The ")

    @property
    def text(self) -> str:
        return " ".join(self.paragraphs)


@dataclass
class Granule:
    """A parsed granule: its header, its title lines and its speeches."""

    chamber: str | None
    pages: str | None
    title: str
    speeches: list[Speech]


@dataclass
class _Block:
    kind: str  # para | indented | separator
    lines: list[str]
    bullet: bool = False

    @property
    def text(self) -> str:
        return " ".join(line.strip() for line in self.lines)


def pre_text(body: bytes) -> str:
    """The text of the granule's ``<pre>`` block (entities decoded, links flattened, ``<bullet>`` kept)."""
    if b"</pre>" not in body.lower():
        raise ValueError("no closing </pre>: the page is truncated or is not a granule text")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("cp1252", errors="replace")
    text = text.replace("<bullet>", "&lt;bullet&gt;").replace("\r\n", "\n")
    try:
        doc = lxml.html.document_fromstring(text)
    except (lxml.etree.LxmlError, ValueError) as exc:
        raise ValueError(f"the HTML does not parse ({exc})") from None
    pre = doc.find(".//pre")
    if pre is None:
        raise ValueError("the page has no <pre> block")
    return pre.text_content()


def _header(lines: list[str]) -> tuple[int, str | None, str | None]:
    """Index of the first body line, chamber and pages; ``ValueError`` without the volume header."""
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or not _VOLUME.match(lines[i].strip()):
        raise ValueError("no '[Congressional Record Volume …]' header at the top of the <pre> block")
    return _article_header(lines, i + 1)


def _article_header(lines: list[str], i: int) -> tuple[int, str | None, str | None]:
    """From line ``i``: the chamber, pages and trailer lines an article opens with, and the first body line."""
    chamber = pages = None
    for j in range(i, min(i + 4, len(lines))):
        line = lines[j].strip()
        if m := _CHAMBER.match(line):
            chamber = m["chamber"]
        elif m := _PAGES.match(line):
            pages = m["pages"]
        elif not _TRAILER.match(line):
            break
        i = j + 1
    return i, chamber, pages


def _blocks(lines: list[str]) -> list[_Block]:
    """Group lines into paragraphs (two-space indent), indented blocks and separators."""
    blocks: list[_Block] = []
    current: _Block | None = None
    for raw in lines:
        if not raw.strip() or _PAGE_MARK.match(raw) or _TIME_MARK.match(raw):
            continue
        if _SEPARATOR.match(raw):
            blocks.append(_Block("separator", []))
            current = None
            continue
        m = _LINE.match(raw.rstrip())
        indent, bullet, rest = len(m["indent"]), bool(m["bullet"]), m["rest"]
        if indent == 0 and not bullet and current is not None:
            current.lines.append(rest)
            continue
        is_para = indent == 2 or (indent <= 2 and bullet) or (indent == 1 and SPEAKER_TAG.match(rest))
        current = _Block("para" if is_para else "indented", [rest], bullet)
        blocks.append(current)
    return blocks


def _is_note(text: str) -> bool:
    return (text.startswith("(") and text.endswith(")")) or (text.startswith("[") and text.endswith("]"))


def is_recorder(text: str) -> bool:
    """Whether an untagged paragraph is the recorder's narration (roll calls, votes, orders, "as follows:")."""
    return bool(_RECORDER_START.match(text) or _NARRATION.match(text) or _RECORDER_WHOLE.fullmatch(text))


def _speeches(blocks: list[_Block]) -> tuple[list[Speech], list[str]]:
    """Speeches from the blocks, and the title lines that precede the first paragraph."""
    speeches: list[Speech] = []
    title: list[str] = []
    current: Speech | None = None
    started = False
    for block in blocks:
        text = block.text
        if block.kind == "separator":
            current = None
            continue
        if block.kind == "indented" or not _LOWER.search(text):  # headings, inserted material
            if not started and not _LOWER.search(text):
                title.append(text)
            continue
        started = True
        if m := SPEAKER_TAG.match(text):
            current = Speech(len(speeches) + 1, m["speaker"], unspoken=block.bullet)
            speeches.append(current)
            rest = text[m.end() :].strip()
            if rest:
                current.paragraphs.append(rest)
        elif _is_note(text):
            continue
        elif block.bullet or is_recorder(text):
            current = None
        elif current is not None:
            current.paragraphs.append(text)
    return speeches, title


def parse_granule(body: bytes) -> Granule:
    """Parse a granule ``/htm`` page into speeches; ``ValueError`` if it is not a complete granule text."""
    lines = pre_text(body).split("\n")
    return _granule(lines, *_header(lines))


def parse_article(text: str) -> Granule:
    """Parse one article of a daily issue's text (a granule's ``<pre>`` text without the volume line, as a
    Congressional Record mirror stores it): it opens with ``[Page(s) …]`` and the GPO trailer."""
    lines = text.split("\n")
    return _granule(lines, *_article_header(lines, 0))


def _granule(lines: list[str], start: int, chamber: str | None, pages: str | None) -> Granule:
    speeches, title = _speeches(_blocks(lines[start:]))
    return Granule(chamber, pages, normalize_whitespace(" ".join(title)), speeches)


# --- cleaning ------------------------------------------------------------------------------------------
_ADDRESS = r"(?:(?:Mr|Madam)\. (?:President|Speaker|Chairman|Chairwoman|Chair), )?"
_START = r"(?:^|(?<=[.!?])|(?<=[.!?][\"']))\s*"


#: Floor-procedure formulas removed from every speech as whole sentences, after an optional "Mr. President,"
#: (the paper's "boilerplate procedural language").
PROCEDURAL_FORMULAS: tuple[str, ...] = (
    r"I (?:suggest|note) the absence of a quorum",
    r"I yield the floor(?:,? and I? ?suggest the absence of a quorum)?",
    r"I ask unanimous consent that the order for the quorum call be rescinded",
    r"I ask unanimous consent that all Members (?:may )?have \d+ legislative days" + _PAREN_FREE + "*",
    r"I ask unanimous consent to (?:address the House|revise and extend)" + _PAREN_FREE + "*",
    r"I yield (?:back )?(?:myself )?(?:such time as (?:I|he|she|they) may consume|the balance of (?:my|our) time"
    r"|\S+ (?:and \S+ )?minutes?)(?: to (?:the|my) " + _PAREN_FREE + "*)?",
    r"I reserve the balance of (?:my|our) time",
    r"Without objection, it is so ordered",
    r"The clerk will (?:call the roll|report(?: the " + _PAREN_FREE + "*)?)",
    r"I (?:demand|ask for) the yeas and nays",
    r"I move (?:that the (?:House|Senate) do now adjourn|to reconsider" + _PAREN_FREE + "*)",
)
# One alternation, so a speech is scanned once for all of them.
PROCEDURAL_PATTERN = re.compile(_START + _ADDRESS + "(?:" + "|".join(PROCEDURAL_FORMULAS) + r")\.(?= |$)")
#: Written notation removed from every speech (most of it is already gone with its line).
NOTATION_PATTERN = re.compile(r"<bullet>|\{time\}\s*\d{0,4}|\[\[Page [^\]]*\]\]")
US_PATTERNS = (NOTATION_PATTERN, PROCEDURAL_PATTERN)
_TYPEWRITER = (
    (re.compile(r"``|''"), '"'),
    (re.compile(r"\s*-{2,}\s*"), " \u2014 "),
    (re.compile(r"\*(?: \*){2,}"), "..."),
    (re.compile(r"\\(\d+)/(\d+)\\"), r"\1/\2"),
)


def prepare_text(paragraphs: list[str] | str) -> str:
    """Join a speech's paragraphs and turn GPO's typewriter notation into text (quotes, dashes, ellipses)."""
    text = paragraphs if isinstance(paragraphs, str) else " ".join(paragraphs)
    for pattern, replacement in _TYPEWRITER:
        text = pattern.sub(replacement, text)
    return normalize_whitespace(text)


def clean_speech(paragraphs: list[str] | str) -> tuple[str, str | None]:
    """``(cleaned text, None)``, or ``("", reason)`` when nothing spoken is left."""
    text = prepare_text(paragraphs)
    cleaned, _ = clean_text(text, US_PATTERNS)
    if cleaned:
        return cleaned, None
    only_procedure = text and not normalize_whitespace(remove_patterns(text, US_PATTERNS))
    if only_procedure and PROCEDURAL_PATTERN.search(text):
        return "", "procedural"
    return "", "empty_after_cleaning"


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
