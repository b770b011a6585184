"""UK Hansard, Commons and Lords, from the ParlParse XML that TheyWorkForYou serves.

Base URL ``https://www.theyworkforyou.com/pwdata/scrapedxml`` (``$LFB_TWFY_URL``); one speech = one client.

Facts this client relies on (``shared/reference/sources.md`` §3 and the recorded files in
``shared/fixtures/uk_hansard``):

- ``debates/`` holds the Commons main chamber as ``debatesYYYY-MM-DD{a,b,c..}.xml``, ``lordspages/`` the Lords
  as ``daylordYYYY-MM-DD{a,..}.xml``; a day is re-scraped into a new file with the next suffix letter;
- each directory has a ``changedates.txt`` of ``unix_timestamp,filename`` lines, one per written file (a file
  may appear more than once); the recorded one ends with a newline;
- the root is ``<publicwhip scrapeversion="d" latest="yes">``; a superseded version says ``latest="no"`` and
  is mostly ``<gidredirect oldgid=".." newgid=".." matchtype=".."/>`` whose ``newgid`` names the *next*
  version (27a redirects to 27b, not to the final 27d);
- files declare ``encoding="ISO-8859-1"`` and an internal DTD of HTML entities (``&mdash;``, ``&pound;``,
  ``&uuml;`` …), so they are parsed with lxml honouring the internal DTD (external entities and the network
  stay off);
- ``<major-heading>``/``<minor-heading>`` title what follows; ``<oral-heading>`` and ``<division>`` are not
  speech; ``<speech id=.. speakername=.. speakerid=..|person_id=..>`` holds ``<p>`` paragraphs (and sometimes
  ``<table>``) with inline ``<phrase>``, ``<i>``, ``<b>``; ``nospeaker="true"`` marks procedural items;
  collective speakers ("Hon. Members", "Several hon. Members", "Noble Lords") have ``speakerid="unknown"``;
- paragraphs with ``class="italic"`` (or ``indentitalic``) are the record of proceedings ("rose—", "Question put
  and agreed to.", "Amendment 96 withdrawn.", "Moved by Lord Borrie"); ``pwmotiontext`` paragraphs are motion
  and amendment texts. ParlParse attaches everything printed before the next speaker to the current speech,
  so after the first italic paragraph that follows spoken text the rest of a speech is printed business, not
  the speaker's words (Lords amendment texts, Commons "Ordered," lists, petition texts; seen in both files).

Discovery: for each directory the ``changedates.txt`` listing is downloaded afresh on every run (it grows
with every scrape). The HTML directory index is not parsed: it was not recorded, so its format is not known
here. Files are selected by the date in their name (``window.fetch_from .. window.until``) and only the
highest suffix letter of each day is downloaded. A file is rewritten once it is superseded (redirects,
``latest="no"``), and then a higher letter is listed; so a stored day file is reused while the fresh
listing still names it as the day's highest letter. That raw cache is what makes a killed refresh resume:
a second run fetches the two listings and then only the day files it does not have.

If the chosen file says ``latest="no"`` (the listing was older than the file), its redirects are followed
to the version they name, repeatedly, until a file says ``latest="yes"``; if the named version is missing
the day is skipped and reported (``no_latest_version``). A file without the flag counts as the latest. The
speeches of every superseded file read are counted as ``superseded_version``.

Bad input: a listed file that answers 404 is reported and skipped (``missing_day_file``); a file that is not
well-formed ParlParse XML (e.g. a truncated download, an HTML error page) is quarantined and downloaded again
by the HTTP client, and if it still does not parse the day is reported with its URL and skipped
(``malformed_day_file``) — days already fetched are kept. A malformed listing line is downloaded again,
then reported. Network failures that outlast the client's retries abort the refresh (the raw cache makes
the next run resume). Rejected counts are per speech, except ``missing_day_file``, ``malformed_day_file``
and ``no_latest_version``, which count files.

Rules per speech: kept when it has a speaker name and a person id (``person_id``, else ``speakerid``);
dropped and counted: ``procedural`` (nospeaker), ``collective_speaker`` (collective or anonymous: "Hon.
Members", "Noble Lords", "An hon. Member"), ``unidentified_speaker`` (no usable id), ``malformed_speech``
(no id, no speaker name, or a duplicate id), ``no_spoken_text`` (only stage directions or motion text, e.g.
"rose—"), ``empty_after_cleaning``. Written notation removed from the text: bracketed editorial notes
(``[Interruption.]``, ``—[Official Report, …]``, ``[Hon. Members: "…"]``, ``[HL]``) and the name Hansard
adds after a constituency in ``<phrase class="honfriend">`` ("the hon. Member for Upminster (Angela
Watkinson)" -> "the hon. Member for Upminster"); only ``<p>`` is read (amendment tables are not). An
italic paragraph that is only a bracketed note is dropped without ending the speech. Then the shared
:func:`clean_text` rules (HTML entities, 30% non-letter sentences).

Records: ``id`` ``uk:{speech id}`` (ParlParse ids carry the version letter, e.g. ``…/2009-10-27d.225.1``, so
a re-scraped day renames its speeches, as ParlParse's own redirects record), date = the file's date, title =
the nearest preceding major/minor heading, url = the speech's ``url`` attribute or the file URL, speaker =
``speakername``, speaker_id = the person id, country GBR, chamber Commons/Lords, language ``en``, licence
Open Parliament Licence v3.0 (attribution in :attr:`UkHansardScraper.license_note`).

Deviations from the reference scraper (hazylavender/fl_llm_benchmark_dataset ``gbr_parliament.py``, as
described in ``shared/reference/popri-reference.md`` §2):

- it parsed the HTML index of ``debates/`` only; this reads ``changedates.txt`` of ``debates/`` *and*
  ``lordspages/`` (the Lords were missing);
- it fetched every version (a, b, c…) of a day, duplicating speeches; this uses the latest version only;
- it kept every speech without ``nospeaker``, with all its ``<p>``: collective speakers, stage directions,
  motion texts and the printed business after a speech were client text; this drops them (above);
  ``pwmotiontext`` paragraphs are dropped even where a speaker goes on speaking inside one (27d.199.8:
  "I beg to move, That the Bill be now read a Third time." and the sentence after it);
- it ran ``unidecode`` (losing "£", "—", "ü"); this keeps Unicode;
- its title and chamber were empty and it had no speaker id; its cleaning was its own ``clean_text``
  (early return on "Mr. Speaker,", split on ". "); this uses the shared versioned cleaning;
- Westminster Hall and written answers/statements are not read (as before).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from lxml import etree

from largefedbench.data.records import Record
from largefedbench.data.windows import Window

from .base import Scraper
from .cleaning import clean_text, normalize_whitespace
from .http import MalformedResponseError

log = logging.getLogger(__name__)

SOURCE = "uk"
LICENSE = "Open Parliament Licence v3.0"
ATTRIBUTION = "Contains Parliamentary information licensed under the Open Parliament Licence v3.0."


@dataclass(frozen=True)
class Chamber:
    directory: str  # folder under scrapedxml/
    prefix: str  # file name prefix
    name: str  # Record.chamber


CHAMBERS: tuple[Chamber, ...] = (
    Chamber("debates", "debates", "Commons"),
    Chamber("lordspages", "daylord", "Lords"),
)

_LISTING_LINE = re.compile(r"(\d+),([A-Za-z0-9_.-]+\.xml)")
_DAY_NAME = re.compile(r"([a-z]+)(\d{4}-\d{2}-\d{2})([a-z])\.xml")
_GID_VERSION = re.compile(r"/(\d{4}-\d{2}-\d{2})([a-z])\.")
_COLLECTIVE = re.compile(
    r"^\s*(?:an?|some|several|many|other|all)?\s*(?:(?:right\s+)?hon(?:ourable|\.)?|noble)\s+"
    r"(?:and\s+(?:(?:right\s+)?hon(?:ourable|\.)?|noble|learned|gallant)\s+)*(?:members?|lords?|baronesses|friends?)\b",
    re.IGNORECASE,
)
_HONFRIEND_NAME = re.compile(r"\s*\([^()]*\)\s*$")
# An italic paragraph that is only a bracketed note ("[Interruption.]") does not end the spoken text.
_BRACKETED_NOTE = re.compile(r"\s*\[[^\[\]]*\]\s*")

# Written notation removed from the spoken text (passed to clean_text).
NOTATION_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Bracketed editorial notes, with the dash that introduces an Official Report reference.
    re.compile(r"[\u2014\u2013]?\s*\[[^\[\]]*\]"),
)


# --- discovery -----------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class DayFileName:
    """One version file of one sitting day, e.g. ``debates/debates2009-10-27d.xml``."""

    day: dt.date
    letter: str
    chamber: Chamber = field(compare=False)

    @property
    def name(self) -> str:
        return f"{self.chamber.prefix}{self.day.isoformat()}{self.letter}.xml"

    @property
    def path(self) -> str:
        return f"{self.chamber.directory}/{self.name}"


def parse_changedates(body: bytes, chamber: Chamber) -> list[DayFileName]:
    """Every day file a ``changedates.txt`` lists for ``chamber`` (``ValueError`` on a malformed line).

    Lines naming files of another kind are ignored; a line that is not ``timestamp,filename.xml`` (such as
    the cut-off last line of a truncated download) is an error, so the listing is downloaded again.
    """
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError as exc:
        raise ValueError(f"changedates.txt is not ASCII text ({exc})") from None
    files: set[DayFileName] = set()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        m = _LISTING_LINE.fullmatch(line)
        if not m:
            raise ValueError(f"line {number} of changedates.txt is {line[:80]!r}, not 'unix_timestamp,filename.xml'")
        name = _DAY_NAME.fullmatch(m[2])
        if not name or name[1] != chamber.prefix:
            continue
        try:
            day = dt.date.fromisoformat(name[2])
        except ValueError:
            raise ValueError(
                f"line {number} of changedates.txt names {m[2]!r}, whose date is not a calendar day"
            ) from None
        files.add(DayFileName(day, name[3], chamber))
    return sorted(files)


def latest_per_day(files: Iterable[DayFileName], start: dt.date, end: dt.date) -> list[DayFileName]:
    """The highest-lettered file of each day in ``[start, end]``, by day."""
    best: dict[dt.date, DayFileName] = {}
    for f in files:
        if start <= f.day <= end and (f.day not in best or f.letter > best[f.day].letter):
            best[f.day] = f
    return [best[d] for d in sorted(best)]


# --- parsing -------------------------------------------------------------------------------------
@dataclass
class Speech:
    """One ``<speech>`` as printed: attributes, the heading above it, and its spoken paragraphs."""

    id: str | None
    speaker: str | None
    person_id: str | None
    nospeaker: bool
    title: str
    url: str | None
    paragraphs: list[str]


@dataclass
class DayFile:
    latest: bool
    speeches: list[Speech]
    redirect_letters: dict[str, set[str]]  # day (ISO) -> version letters that gidredirects point to


def _parser() -> etree.XMLParser:
    """Internal DTD entities resolved; external entities, DTD loading and the network off."""
    return etree.XMLParser(
        resolve_entities="internal",
        no_network=True,
        load_dtd=False,
        remove_comments=True,
        remove_pis=True,
        huge_tree=True,
    )


def parse_day(body: bytes) -> DayFile:
    """Parse one ParlParse day file; ``ValueError`` if it is not well-formed ParlParse XML."""
    try:
        root = etree.fromstring(body, _parser())
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not well-formed XML ({exc})") from None
    if root.tag != "publicwhip":
        raise ValueError(f"the root element is <{root.tag}>, not <publicwhip>: not a ParlParse file")
    speeches: list[Speech] = []
    redirects: dict[str, set[str]] = {}
    title = ""
    for el in root:
        tag = el.tag
        if tag == "speech":
            speeches.append(_speech(el, title))
        elif tag in ("major-heading", "minor-heading"):
            title = normalize_whitespace("".join(el.itertext()))
        elif tag == "gidredirect":
            m = _GID_VERSION.search(el.get("newgid") or "")
            if m:
                redirects.setdefault(m[1], set()).add(m[2])
    # A file without the flag is taken as the latest: only superseded files are marked.
    return DayFile(root.get("latest", "yes").strip().lower() != "no", speeches, redirects)


def _speech(el: etree._Element, title: str) -> Speech:
    return Speech(
        id=(el.get("id") or "").strip() or None,
        speaker=normalize_whitespace(el.get("speakername") or "") or None,
        person_id=_person_id(el),
        nospeaker=(el.get("nospeaker") or "").strip().lower() == "true",
        title=title,
        url=(el.get("url") or "").strip() or None,
        paragraphs=spoken_paragraphs(el),
    )


def _person_id(el: etree._Element) -> str | None:
    for attr in ("person_id", "speakerid"):
        value = (el.get(attr) or "").strip()
        if value and value.lower() != "unknown":
            return value
    return None


def spoken_paragraphs(speech: etree._Element) -> list[str]:
    """The paragraphs of a speech that the speaker said (see the module docstring for the rules)."""
    out: list[str] = []
    for p in speech:
        if p.tag != "p" or p.get("pwmotiontext"):
            continue  # tables, motion and amendment texts
        text = paragraph_text(p)
        if "italic" in (p.get("class") or ""):
            if out and not _BRACKETED_NOTE.fullmatch(text):
                break  # the record of proceedings: the rest of the speech is printed business
            continue
        out.append(text)
    return out


def paragraph_text(el: etree._Element) -> str:
    """The text of an element, without the member's name Hansard adds inside ``honfriend`` phrases."""
    parts = [el.text or ""]
    for child in el:
        if child.tag == "phrase" and child.get("class") == "honfriend":
            parts.append(_HONFRIEND_NAME.sub("", "".join(child.itertext())))
        else:
            parts.append(paragraph_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


# --- records -------------------------------------------------------------------------------------
def speech_record(speech: Speech, day: DayFileName, file_url: str, rejected: Counter, seen: set[str]) -> Record | None:
    """The client record of one speech, or None (counted in ``rejected`` by reason)."""
    if speech.nospeaker:
        rejected["procedural"] += 1
        return None
    if speech.id is None or speech.speaker is None or speech.id in seen:
        rejected["malformed_speech"] += 1
        return None
    seen.add(speech.id)
    if _COLLECTIVE.match(speech.speaker):
        rejected["collective_speaker"] += 1
        return None
    if speech.person_id is None:
        rejected["unidentified_speaker"] += 1
        return None
    if not speech.paragraphs:
        rejected["no_spoken_text"] += 1
        return None
    text, _ = clean_text("\n".join(speech.paragraphs), NOTATION_PATTERNS)
    if not text:
        rejected["empty_after_cleaning"] += 1
        return None
    return Record(
        id=f"uk:{speech.id}",
        source=SOURCE,
        date=day.day.isoformat(),
        title=speech.title,
        text=text,
        url=speech.url or file_url,
        license=LICENSE,
        country="GBR",
        chamber=day.chamber.name,
        speaker=speech.speaker,
        speaker_id=speech.person_id,
        language="en",
    )


def day_records(day_file: DayFile, day: DayFileName, file_url: str, rejected: Counter) -> list[Record]:
    """The records of one parsed (latest) day file."""
    seen: set[str] = set()
    out = []
    for speech in day_file.speeches:
        rec = speech_record(speech, day, file_url, rejected, seen)
        if rec is not None:
            out.append(rec)
    return out


class UkHansardScraper(Scraper):
    source = SOURCE
    dataset = "congress"
    version = "1.0"
    default_url = "https://www.theyworkforyou.com/pwdata/scrapedxml"
    url_env = "LFB_TWFY_URL"
    license_note = (
        f"UK Hansard (House of Commons and House of Lords), via TheyWorkForYou's ParlParse XML (mySociety): "
        f"{LICENSE}. {ATTRIBUTION}"
    )

    MAX_REDIRECT_HOPS = 26

    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        rejected: Counter = Counter()
        records: list[Record] = []
        for chamber in CHAMBERS:
            days = latest_per_day(self.list_files(chamber), window.fetch_from, window.until)
            for name in tqdm(days, desc=f"uk {chamber.name}", unit="day", disable=not progress):
                found = self.latest_version(name, rejected)
                if found is not None:
                    name, day_file = found
                    records += day_records(day_file, name, self.client.display_url(name.path), rejected)
        return records, rejected

    def list_files(self, chamber: Chamber) -> list[DayFileName]:
        """The day files ``changedates.txt`` lists, downloaded afresh (it grows with every scrape)."""
        path = f"{chamber.directory}/changedates.txt"
        return self.client.fetch(path, lambda body: parse_changedates(body, chamber), refresh=True)

    def latest_version(self, name: DayFileName, rejected: Counter) -> tuple[DayFileName, DayFile] | None:
        """The day file that says ``latest="yes"``, following redirects from a superseded one."""
        for hop in range(self.MAX_REDIRECT_HOPS):
            day_file = self.fetch_day(name, rejected, followed=hop > 0)
            if day_file is None:
                return None
            if day_file.latest:
                return name, day_file
            rejected["superseded_version"] += len(day_file.speeches)
            newer = [v for v in day_file.redirect_letters.get(name.day.isoformat(), ()) if v > name.letter]
            url = self.client.display_url(name.path)
            if not newer:
                log.warning('%s says latest="no" but redirects to no newer version; skipping %s', url, name.day)
                rejected["no_latest_version"] += 1
                return None
            log.warning('%s says latest="no"; following its redirects to version %s', url, max(newer))
            name = replace(name, letter=max(newer))
        rejected["no_latest_version"] += 1
        return None

    def fetch_day(self, name: DayFileName, rejected: Counter, *, followed: bool = False) -> DayFile | None:
        """One day file, or None when it is missing or still malformed after re-downloads (reported)."""
        url = self.client.display_url(name.path)
        try:
            day_file = self.client.fetch(name.path, parse_day, refresh=self.refresh, missing_ok=True)
        except MalformedResponseError as exc:  # the file, not the network (that aborts; the next run resumes)
            log.warning(
                "%s: skipping %s, the file is not well-formed ParlParse XML (%s); the last download is kept in the "
                "raw cache as a .bad file; report it to TheyWorkForYou if it persists",
                url,
                name.day,
                exc,
            )
            rejected["malformed_day_file"] += 1
            return None
        if day_file is None:
            if followed:
                log.warning(
                    "%s: the newer version named by the redirects does not exist (404); skipping %s", url, name.day
                )
                rejected["no_latest_version"] += 1
            else:
                log.warning("%s: listed in changedates.txt but answered 404; skipping %s", url, name.day)
                rejected["missing_day_file"] += 1
        return day_file
