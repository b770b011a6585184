"""Canada's House of Commons debates (Hansard) from the ourcommons.ca XML publication.

Facts this client is built on (``shared/reference/sources.md`` §4 and the two recorded sittings in
``shared/fixtures/ca_hansard``: 44-1 No. 303 of 19 April 2024 and 42-1 No. 002 of 4 December 2015):

- one XML file per sitting, ``/Content/House/{parl}{session}/Debates/{NNN}/HAN{NNN}-E.XML`` (English
  edition, ``NNN`` the zero-padded sitting number). Sittings are numbered 1, 2, 3 … within a session, in date
  order. A sitting that does not exist answers 404;
- UTF-8, often with a byte-order mark, sometimes with CRLF line ends (44-1-303 has both). Some published
  files use HTML named entities (``&eacute;``) that XML does not define; they are turned into character
  references before parsing;
- ``<ExtractedInformation>`` holds the document's own metadata as ``<ExtractedItem Name=...>``:
  ``MetaDateNumYear/Month/Day`` (or ``Date``: "Friday, April 19, 2024"), ``ParliamentNumber``,
  ``SessionNumber``, ``MetaNumberNumber`` / ``Number`` ("No. 303", "NUMBER 002") and
  ``MetaDocumentCategory``: ``DEBATES`` for the House; committee evidence shares the schema but says
  ``Committee`` (its ``DocumentName`` is "EVIDENCE"). Only House debates are kept: a document whose category
  (or, without one, whose ``DocumentName``/``InstitutionDebate``) is not the House's is skipped and counted
  (``not_house_debates``);
- one client per ``<Intervention>`` (Types Debate, Question, Answer, Interjection, …): speaker from
  ``PersonSpeaking/Affiliation``, ``speaker_id`` its ``DbId``, text the ``ParaText`` paragraphs of its
  ``Content`` with the text of their inline elements (``Affiliation``, ``Document``, ``I``, ``Quote`` …).
  ``DbId`` identifies an *affiliation* (a member in a role), so one person can have several (Kevin
  Lamoureux is 278257 as a member and 300691 as parliamentary secretary in 44-1-303);
- the speaker's riding, party or office in parentheses ("Mr. Mark Gerretsen (Kingston and the Islands,
  Lib.)") is stripped from ``speaker`` (the record has no field for it; the DbId keeps the link). A presiding
  officer keeps the person in parentheses: "The Assistant Deputy Speaker (Mrs. Carol Hughes)";
- an embedded turn starts a ``ParaText`` with ``<B>Name:</B>`` (or ``<B>Name</B>:``, or an inline
  ``<Affiliation>`` with the colon). It is split off: collective ones ("Some hon. members:", "An hon.
  member:", "Des voix:") are dropped (``collective_interjection``), the Clerk's are procedural
  (``procedural_turn``); when the intervention's own speaker resumes ("Mr. Todd Doherty:" after "An hon.
  member: Oh, oh!") the text goes back to the intervention; anyone else becomes a client of their own, with
  id ``{intervention id}.{ParaText id}``, until the next marked turn. Their ``speaker_id`` is the DbId of the
  same name elsewhere in the file when that name has exactly one. After a dropped turn, unmarked paragraphs
  stay with the speaker who was interrupted (in both recorded files a marked turn always follows one);
- dropped as procedural or written notation: ``<ProceduralText>`` (stage headings and outcomes such as
  "(Motion agreed to)"), ``<Division>`` blocks, ``<Timestamp>``, paragraphs wholly in parentheses or square
  brackets ("(The House adjourned at 1:39 p.m.)", "[A moment of silence observed.]"), bold-only paragraphs
  (headings), the inline notation of :data:`CA_PATTERNS`, and whole interventions recorded in the third
  person ("Right Hon. Justin Trudeau moved for leave to introduce Bill C-1" — a ``PersonSpeaking`` without
  the colon of a spoken turn), counted as ``procedural``, like speeches left with nothing but such text.
  Text outside interventions (the Speech from the Throne read in the Senate, "The House resumed …") has no
  speaker and is not a client; nor are written answers (``WrittenQuestionResponse``);
- ``<FloorLanguage language="EN|FR">`` marks the language spoken from that point on (in document order,
  across interventions). The English edition carries the translation of what was said in French; each
  record's ``language`` is the floor language of most of its characters ("en"/"fr");
- the record's ``url`` is the sitting's XML on ``https://www.ourcommons.ca`` whatever base URL was fetched
  from (a mirror, a replay), so snapshots do not depend on it; its ``title`` is the subject of business
  (with its qualifier: "Speech from the Throne: Address in Reply"), else the order of business.

Discovery of the sittings of a window (no sitting index was recorded, so only the XML files are used):

1. :data:`SESSION_STARTS`, a table of the first day of each parliament/session since the 39th Parliament
   (Library of Parliament dates, entered by hand). A session is taken to last until the next one starts;
   its start is read with a margin of :data:`START_MARGIN` so an error of a few days costs probes, not
   sittings. Sessions newer than the table are found by probing sitting 001 of the next session of the same
   parliament and of session 1 of the next parliament, repeatedly; the date of that sitting is its start.
2. In each session overlapping the window, the first sitting on or after the window's start is found by an
   exponential then binary search on the sitting number (sittings are numbered in date order), reading each
   probed file's date from its metadata (only the metadata: speeches are parsed for the window's sittings
   alone); a missing (404) or unreadable file counts as "not before the window", so the search can only
   stop early, never late.
3. From there sittings are read in order until one is dated after the window or :data:`MAX_GAP` numbers in
   a row are missing (the end of the session so far; a shorter gap is stepped over).

Every response is stored raw before parsing (``HttpClient``), so a killed refresh resumes from the stored
files: only what was not yet stored is requested again (404 answers are not stored and are asked again); no
checkpoint is needed. A sitting file that still does not parse after the client's fresh downloads is
reported with its URL, kept as ``.bad`` and skipped (``unreadable_sitting``): the other sittings are kept,
and the next refresh tries it again. Network failures that outlast the retries stop the refresh (run it
again to resume).

Deviations from the reference scraper (``ca_parliament.py`` of hazylavender/fl_llm_benchmark_dataset,
``shared/reference/popri-reference.md`` §2):

- it took sitting numbers from the openparliament.ca API and hard-coded the 44th Parliament, 1st session;
  here sittings are discovered from the ourcommons files alone, in any session;
- it skipped every intervention containing a ``<B>`` (losing, e.g., Mr. Doherty's whole speech on C-29);
  here embedded turns are split off or dropped as above;
- it removed every parenthesised part of the speaker (leaving "The Assistant Deputy Speaker"); presiding
  officers keep the person here. A missing ``PersonSpeaking`` reused the previous speaker there; it is a
  ``malformed_speech`` here;
- it kept third-person entries, ``(…)``/``[…]`` notation paragraphs and collective interjections; they are
  dropped and counted here;
- it transliterated text and names to ASCII (unidecode); text stays Unicode here;
- date from ``HeaderDate`` there, from ``MetaDateNum*`` here; country "CA" there, "CAN" here (DESIGN.md §3);
  chamber from ``Institution`` ("HOUSE OF COMMONS") there, "House of Commons" here; no language, speaker id,
  committee check or stable id there;
- cleaning is the shared, versioned ``cleaning.clean_text`` with this module's patterns, applied to every
  speech (the reference's ``clean_text`` returned early on "Madam Speaker," openings).

The format facts above were checked against the two recorded files; that committee evidence says
``Committee`` in ``MetaDocumentCategory`` and that some files use HTML entities comes from openparliament's
parser (alpheus, AGPL; read, not copied) and is tested with derived variants of the recorded files.
"""

from __future__ import annotations

import datetime as dt
import html.entities
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from lxml import etree

from largefedbench.data.records import Record
from largefedbench.data.windows import Window

from .base import Scraper
from .cleaning import clean_text, normalize_whitespace
from .http import MalformedResponseError

log = logging.getLogger(__name__)

PUBLIC_URL = "https://www.ourcommons.ca"  # records point here whatever base URL (mirror, replay) was used
LICENSE = "House of Commons Speaker's Permission (non-commercial reproduction)"
CHAMBER = "House of Commons"

# (parliament, session, first sitting day), one parliament a line. Sittings of a session lie before the next
# session's start.
SESSION_STARTS: tuple[tuple[int, int, str], ...] = (
    (39, 1, "2006-04-03"), (39, 2, "2007-10-16"),
    (40, 1, "2008-11-18"), (40, 2, "2009-01-26"), (40, 3, "2010-03-03"),
    (41, 1, "2011-06-02"), (41, 2, "2013-10-16"),
    (42, 1, "2015-12-03"),
    (43, 1, "2019-12-05"), (43, 2, "2020-09-23"),
    (44, 1, "2021-11-22"),
    (45, 1, "2025-05-26"),
)
START_MARGIN = dt.timedelta(days=14)
MAX_GAP = 3  # missing sitting numbers in a row that end a session's scan
MAX_SITTING = 999

# Inline written notation that was not spoken (whole-paragraph notation is dropped structurally).
CA_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\[\s*(?:Translation|English|French|Français|Interpretation|Technical difficulty|Inaudible"
        r"|[^\]]{0,80}\bspoke in [^\]]{0,40}|[^\]]{0,80}\bobserved\.?)\s*\]",
        re.IGNORECASE,
    ),
    re.compile(
        r"\((?:Motions? (?:agreed to|negatived|carried|deemed|withdrawn)|Bill (?:read|deemed)|Amendment (?:agreed to"
        r"|negatived)|(?:Division|Vote) No\.|The House (?:adjourned|resumed|proceeded)|On the motion of"
        r"|Debate adjourned|Question (?:agreed|put))[^()]{0,300}\)",
        re.IGNORECASE,
    ),
)

_COLLECTIVE = re.compile(
    r"^(?:(?:some|an|several|other|many)\s+)?hon(?:ourable|\.)?\s+members?$|^(?:des|une|plusieurs)\s+voix$"
    r"|^(?:some\s+)?members$",
    re.IGNORECASE,
)
_PROCEDURAL_SPEAKER = re.compile(
    r"^(?:the\s+)?(?:(?:deputy|acting|principal|assistant)\s+)?clerk\b|^(?:le|la)\s+greffi", re.IGNORECASE
)
_HONORIFIC = re.compile(
    r"^(?:(?:right\s+)?hon\.?|mr\.?|mrs\.?|ms\.?|miss|dr\.?|m\.|mme\.?|l'hon\.?|le\s+très\s+hon\.?)\s+", re.IGNORECASE
)
_TRAILING_PARENS = re.compile(r"\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)$")  # nested twice at most
_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")
_XML_ENTITIES = frozenset({b"amp", b"lt", b"gt", b"quot", b"apos"})
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# Elements whose content is never a speaker's words.
_SKIP = frozenset({
    "ProceduralText", "Division", "Timestamp", "CatchLine", "Prayer", "StartPageNumber", "DocumentTitle",
    "ExtractedInformation", "WrittenQuestionResponse", "Appendix", "EditorsNotes",
})


# --- the sittings --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    parliament: int
    session: int
    start: dt.date  # first sitting day (from the table, or read from a probed sitting 001)

    @property
    def label(self) -> str:
        return f"{self.parliament}-{self.session}"


def known_sessions() -> list[Session]:
    return [Session(p, s, dt.date.fromisoformat(d)) for p, s, d in SESSION_STARTS]


def sitting_path(parliament: int, session: int, number: int) -> str:
    """The path of one sitting's English XML, e.g. ``Content/House/441/Debates/303/HAN303-E.XML``."""
    n = f"{number:03d}"
    return f"Content/House/{parliament}{session}/Debates/{n}/HAN{n}-E.XML"


@dataclass
class Speech:
    """One client before cleaning: who spoke, under which heading, and the paragraphs they said."""

    key: str  # intervention id, or "{intervention id}.{ParaText id}" for a split-off turn
    speaker: str
    speaker_id: str | None
    title: str
    paragraphs: list[tuple[str, str | None]] = field(default_factory=list)  # (text, floor language)

    @property
    def language(self) -> str | None:
        chars: Counter = Counter()
        for text, lang in self.paragraphs:
            chars[lang] += len(text)
        return chars.most_common(1)[0][0] if chars else None


@dataclass
class Sitting:
    """One parsed sitting file."""

    parliament: int
    session: int
    number: int
    day: dt.date
    house_debates: bool
    speeches: list[Speech] | None  # None when only the metadata was read
    rejected: Counter  # speeches and turns dropped while parsing, by reason


# --- parsing -------------------------------------------------------------------------------------------
def _entity_refs(body: bytes) -> bytes:
    """Replace HTML named entities that XML does not define by character references."""

    def repl(m: re.Match[bytes]) -> bytes:
        name = m.group(1)
        if name in _XML_ENTITIES:
            return m.group(0)
        code = html.entities.name2codepoint.get(name.decode("ascii"))
        return f"&#{code};".encode() if code is not None else m.group(0)

    return _ENTITY.sub(repl, body) if b"&" in body else body


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def parse_xml(body: bytes) -> etree._Element:
    """The root ``<Hansard>`` element; ``ValueError`` for malformed or foreign documents."""
    try:
        root = etree.fromstring(_entity_refs(body), _PARSER)
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"malformed XML: {exc}") from None
    if root.tag != "Hansard":
        raise ValueError(f"the document's root element is <{root.tag}>, not <Hansard>")
    return root


def text_of(el: etree._Element | None) -> str:
    return normalize_whitespace("".join(el.itertext())) if el is not None else ""


def extracted_items(root: etree._Element) -> dict[str, str]:
    return {item.get("Name", ""): text_of(item) for item in root.iterfind("ExtractedInformation/ExtractedItem")}


def _int_item(meta: dict[str, str], *names: str) -> int:
    for name in names:
        digits = re.findall(r"\d+", meta.get(name, ""))
        if digits:
            return int(digits[-1])
    raise ValueError(f"the metadata has no {' or '.join(names)} (ExtractedItem)")


def sitting_day(meta: dict[str, str]) -> dt.date:
    """The sitting's date from ``MetaDateNum*``, else from ``Date`` ("Friday, April 19, 2024")."""
    try:
        return dt.date(int(meta["MetaDateNumYear"]), int(meta["MetaDateNumMonth"]), int(meta["MetaDateNumDay"]))
    except (KeyError, ValueError):
        pass
    try:
        return dt.datetime.strptime(meta.get("Date", ""), "%A, %B %d, %Y").date()
    except ValueError:
        raise ValueError(f"the metadata has no usable date (Date={meta.get('Date')!r})") from None


def is_house_debates(meta: dict[str, str], root: etree._Element) -> bool:
    """House debates, not committee evidence, by the document's own metadata."""
    category = meta.get("MetaDocumentCategory", "").strip().lower()
    if category:
        return category == "debates"
    name = text_of(root.find("DocumentTitle/DocumentName")).lower()
    institution = (meta.get("InstitutionDebateEn") or meta.get("InstitutionDebate") or "").lower()
    return "evidence" not in name and "house of commons debates" in institution


def parse_sitting(body: bytes, *, speeches: bool = True) -> Sitting:
    """Parse one sitting file (with its speeches unless ``speeches=False``, which reads only the metadata).

    ``ValueError`` if it is not a readable Hansard file; both modes accept and reject the same files.
    """
    root = parse_xml(body)
    meta = extracted_items(root)
    house = is_house_debates(meta, root)
    sitting = Sitting(
        parliament=_int_item(meta, "ParliamentNumber", "Parliament"),
        session=_int_item(meta, "SessionNumber", "Session"),
        number=_int_item(meta, "MetaNumberNumber", "Number"),
        day=sitting_day(meta),
        house_debates=house,
        speeches=None,
        rejected=Counter(),
    )
    body_el = root.find("HansardBody")
    if body_el is None:
        raise ValueError("the document has no <HansardBody>")
    if speeches:
        sitting.speeches = []
    if speeches and house:
        reader = _Reader(root)
        reader.walk(body_el)
        sitting.speeches, sitting.rejected = reader.speeches, reader.rejected
    return sitting


@lru_cache(maxsize=4096)
def display_name(label: str) -> str:
    """The speaker's name without the riding/party/office in parentheses (presiding officers keep theirs)."""
    name = normalize_whitespace(label).rstrip(":").strip()
    if name.endswith(")") and not name.lower().startswith("the "):
        return _TRAILING_PARENS.sub("", name) or name
    return name


@lru_cache(maxsize=4096)
def person_key(label: str) -> str:
    """A comparison key for one speaker's labels ("Mr. Todd Doherty (Cariboo—…)" == "Mr. Todd Doherty")."""
    return "".join(c for c in _HONORIFIC.sub("", display_name(label)).lower() if c.isalpha())


def _wholly_enclosed(text: str, open_: str, close: str) -> bool:
    if not (text.startswith(open_) and text.endswith(close)):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += 1 if ch == open_ else -1 if ch == close else 0
        if depth == 0:
            return i == len(text) - 1
    return False


def is_notation(text: str) -> bool:
    """A paragraph that records proceedings rather than words: wholly in parentheses or square brackets."""
    text = text.strip()
    return not text or _wholly_enclosed(text, "(", ")") or _wholly_enclosed(text, "[", "]")


@dataclass
class _Turn:
    label: str
    db_id: str | None
    text: str


def embedded_turn(para: etree._Element) -> _Turn | None:
    """``<B>Name:</B> text`` (or ``<B>Name</B>: text``, or an ``<Affiliation>``) opening a paragraph."""
    if (para.text or "").strip() or not len(para):
        return None
    first = para[0]
    if not isinstance(first.tag, str) or first.tag not in ("B", "Affiliation"):
        return None
    label = text_of(first)
    tail = first.tail or ""
    if label.endswith(":"):
        label = label[:-1].strip()
    elif tail.lstrip().startswith(":"):
        tail = tail.lstrip()[1:]
    else:
        return None
    if not label or not label[0].isupper():
        return None
    rest = [tail]
    for sib in first.itersiblings():
        rest.append("".join(sib.itertext()))
        rest.append(sib.tail or "")
    return _Turn(label, first.get("DbId") if first.tag == "Affiliation" else None, "".join(rest))


def _bold_only(para: etree._Element) -> bool:
    return (
        len(para) == 1 and para[0].tag == "B" and not (para.text or "").strip() and not (para[0].tail or "").strip()
    )


def _language(code: str | None) -> str | None:
    code = (code or "").strip().lower()
    return code if code in ("en", "fr") else None


class _Reader:
    """Walks ``<HansardBody>`` in document order, tracking the heading and the floor language."""

    def __init__(self, root: etree._Element) -> None:
        self.language = _language(root.get(_XML_LANG))
        self.order_title = ""
        self.subject_title = ""
        self.qualifier = ""
        self.speeches: list[Speech] = []
        self.rejected: Counter = Counter()
        self.ids_by_name: dict[str, set[str]] = {}
        for aff in root.iterfind(".//PersonSpeaking/Affiliation"):
            if aff.get("DbId"):
                self.ids_by_name.setdefault(person_key(text_of(aff)), set()).add(aff.get("DbId"))

    @property
    def title(self) -> str:
        if self.subject_title:
            return f"{self.subject_title}: {self.qualifier}" if self.qualifier else self.subject_title
        return self.order_title or "House of Commons Debates"

    def children(self, el: etree._Element) -> Iterator[tuple[etree._Element, str]]:
        """``el``'s element children with their tags, skipping comments and _SKIP; a FloorLanguage child is read here
        (it changes the language of what follows) and not yielded."""
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP:
                continue
            if tag == "FloorLanguage":
                self.language = _language(child.get("language")) or self.language
            else:
                yield child, tag

    def walk(self, el: etree._Element) -> None:
        for child, tag in self.children(el):
            if tag == "OrderOfBusinessTitle":
                self.order_title, self.subject_title, self.qualifier = text_of(child), "", ""
            elif tag == "SubjectOfBusinessTitle":
                self.subject_title, self.qualifier = text_of(child), ""
            elif tag == "SubjectOfBusinessQualifier":
                self.qualifier = text_of(child)
            elif tag == "Intervention":
                self.read_intervention(child)
            elif tag == "ParaText":
                continue  # narrative outside any intervention: no speaker
            else:
                self.walk(child)
                if tag == "SubjectOfBusiness":
                    self.qualifier = ""
                elif tag == "OrderOfBusiness":
                    self.order_title = self.subject_title = ""

    def items(self, el: etree._Element) -> Iterator[tuple[etree._Element, str | None]]:
        """The paragraphs of an intervention's content in order, each with the floor language in force."""
        for child, tag in self.children(el):
            if tag == "ParaText":
                yield child, self.language
            else:
                yield from self.items(child)

    def read_intervention(self, iv: etree._Element) -> None:
        person = iv.find("PersonSpeaking")
        affiliation = person.find("Affiliation") if person is not None else None
        label = text_of(affiliation) if affiliation is not None else text_of(person).rstrip(":").strip()
        content = iv.find("Content")
        # Read the paragraphs first: the floor language they change holds for what follows, kept or not.
        paragraphs = list(self.items(content)) if content is not None else []
        iv_id = (iv.get("id") or "").strip()
        if not iv_id or not label:
            self.rejected["malformed_speech"] += 1
            return
        if not text_of(person).endswith(":"):
            self.rejected["procedural"] += 1  # "X moved …": the record of an act, not a spoken turn
            return
        db_id = affiliation.get("DbId") if affiliation is not None else None
        main = Speech(iv_id, display_name(label), db_id, self.title)
        for speech in self.split_turns(main, label, paragraphs):
            if speech.paragraphs:
                self.speeches.append(speech)
            else:
                self.rejected["procedural"] += 1

    def split_turns(
        self, main: Speech, label: str, paragraphs: list[tuple[etree._Element, str | None]]
    ) -> list[Speech]:
        """The intervention's speech and the turns of other speakers embedded in its paragraphs."""
        turns, current = [main], main
        for para, language in paragraphs:
            turn = embedded_turn(para)
            if turn is None:
                if _bold_only(para):
                    continue
                text = "".join(para.itertext())
            else:
                name = display_name(turn.label)
                if _COLLECTIVE.match(name):
                    self.rejected["collective_interjection"] += 1
                    continue
                if _PROCEDURAL_SPEAKER.match(name):
                    self.rejected["procedural_turn"] += 1
                    continue
                if person_key(turn.label) == person_key(label):
                    current = main  # the intervention's speaker resumes
                else:
                    key = f"{main.key}.{para.get('id') or len(turns)}"
                    current = Speech(key, name, turn.db_id or self._unique_id(turn.label), main.title)
                    turns.append(current)
                text = turn.text
            if not is_notation(text):
                current.paragraphs.append((text, language))
        return turns

    def _unique_id(self, label: str) -> str | None:
        ids = self.ids_by_name.get(person_key(label), set())
        return next(iter(ids)) if len(ids) == 1 else None


# --- records -------------------------------------------------------------------------------------------
def speech_records(sitting: Sitting, parliament: int, session: int, number: int, rejected: Counter) -> list[Record]:
    """The cleaned client records of one House sitting, named by the sitting's URL coordinates.

    Speeches empty after cleaning are counted in ``rejected``.
    """
    if sitting.speeches is None:
        raise ValueError("the sitting was parsed without its speeches (parse_sitting(..., speeches=False))")
    out = []
    prefix = f"ca:{parliament}-{session}-{number}"
    url = f"{PUBLIC_URL}/{sitting_path(parliament, session, number)}"
    for speech in sitting.speeches:
        text, _ = clean_text(" ".join(t for t, _ in speech.paragraphs), CA_PATTERNS)
        if not text:
            rejected["empty_after_cleaning"] += 1
            continue
        out.append(
            Record(
                id=f"{prefix}:{speech.key}",
                source=CaHansardScraper.source,
                date=sitting.day.isoformat(),
                title=speech.title,
                text=text,
                url=url,
                license=LICENSE,
                country="CAN",
                chamber=CHAMBER,
                speaker=speech.speaker,
                speaker_id=speech.speaker_id,
                language=speech.language,
            )
        )
    return out


_UNREADABLE = object()  # a sitting file that exists but did not parse after every download
Probe = Sitting | None | object


class CaHansardScraper(Scraper):
    source = "ca"
    dataset = "congress"
    version = "1.0"
    default_url = PUBLIC_URL
    url_env = "LFB_OURCOMMONS_URL"
    license_note = (
        "House of Commons Debates (Hansard), reproduced under the House of Commons Speaker's Permission "
        "(https://www.ourcommons.ca/en/important-notices): reproduction for non-commercial or educational "
        "purposes is allowed if accurate and not represented as the official version; commercial reproduction "
        "needs the written permission of the House of Commons; parliamentary privilege is retained. Speeches "
        "given in French appear in the English edition's translation (language 'fr'). Attribution: House of "
        "Commons of Canada, Debates, with each record's sitting URL."
    )

    def __init__(self, client, *, refresh: bool = False) -> None:
        super().__init__(client, refresh=refresh)
        self._probes: dict[tuple[int, int, int], Probe] = {}

    # -- fetching one sitting -------------------------------------------------------------------------
    def sitting(self, parliament: int, session: int, number: int) -> Probe:
        """The sitting's metadata, ``None`` if it does not exist (404), or ``_UNREADABLE`` (reported, skipped).

        Discovery needs only dates, so speeches are read later, by :meth:`with_speeches`, for the sittings
        of the window (from the stored response).
        """
        key = (parliament, session, number)
        if key not in self._probes:
            self._probes[key] = self._download(*key)
        return self._probes[key]

    def _download(self, parliament: int, session: int, number: int) -> Probe:
        path = sitting_path(parliament, session, number)
        try:
            return self.client.fetch(path, lambda body: parse_sitting(body, speeches=False), refresh=self.refresh, missing_ok=True)
        except MalformedResponseError as exc:  # the file, not the network: skip it, keep the other sittings
            log.warning("skipping this sitting, the other sittings are kept: %s", exc)
            return _UNREADABLE

    def with_speeches(self, parliament: int, session: int, number: int) -> Sitting:
        """The sitting parsed with its speeches, from the response :meth:`sitting` stored in this run."""
        return self.client.fetch(sitting_path(parliament, session, number), parse_sitting)

    # -- discovery ------------------------------------------------------------------------------------
    def sessions(self, window: Window) -> list[Session]:
        """The sessions overlapping the window: the table, plus newer sessions found by probing."""
        known = known_sessions()
        while known[-1].start <= window.until:
            newer = self._next_session(known[-1])
            if newer is None:
                break
            known.append(newer)
        out = []
        for i, sess in enumerate(known):
            ends_before = known[i + 1].start if i + 1 < len(known) else None
            if sess.start - START_MARGIN <= window.until and (ends_before is None or ends_before > window.fetch_from):
                out.append(sess)
        return out

    def _next_session(self, last: Session) -> Session | None:
        for parliament, session in ((last.parliament, last.session + 1), (last.parliament + 1, 1)):
            first = self.sitting(parliament, session, 1)
            if isinstance(first, Sitting):
                log.info("found session %d-%d (sitting 001: %s), newer than the table", parliament, session, first.day)
                return Session(parliament, session, first.day)
        return None

    def first_sitting(self, sess: Session, since: dt.date) -> int:
        """The first sitting number dated on or after ``since`` (or past the session's end)."""
        if sess.start - START_MARGIN >= since:
            return 1

        def at_or_after(number: int) -> bool:
            found = self.sitting(sess.parliament, sess.session, number)
            return not isinstance(found, Sitting) or found.day >= since

        if at_or_after(1):
            return 1
        lo, hi = 1, 2
        while hi < MAX_SITTING and not at_or_after(hi):
            lo, hi = hi, min(2 * hi, MAX_SITTING)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if at_or_after(mid):
                hi = mid
            else:
                lo = mid
        return hi

    def scan(self, sess: Session, first: int, until: dt.date, rejected: Counter) -> Iterator[tuple[int, Sitting]]:
        """``(number, sitting)`` from ``first`` until one is dated after ``until`` or ``MAX_GAP`` are missing."""
        number, missing = first, 0
        while missing < MAX_GAP and number <= MAX_SITTING:
            found = self.sitting(sess.parliament, sess.session, number)
            number += 1
            if found is None:
                missing += 1
                continue
            missing = 0
            if found is _UNREADABLE:
                rejected["unreadable_sitting"] += 1
            elif found.day > until:
                return
            else:
                yield number - 1, found

    # -- records --------------------------------------------------------------------------------------
    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        rejected: Counter = Counter()
        records: list[Record] = []
        bar = tqdm(desc="ca sittings", unit="sitting", disable=not progress)
        for sess in self.sessions(window):
            first = self.first_sitting(sess, window.fetch_from)
            log.info("session %s: reading from sitting %03d", sess.label, first)
            for number, sitting in self.scan(sess, first, window.until, rejected):
                bar.update(1)
                if sitting.day < window.fetch_from:
                    continue
                if not sitting.house_debates:
                    rejected["not_house_debates"] += 1
                    continue
                sitting = self.with_speeches(sess.parliament, sess.session, number)
                rejected.update(sitting.rejected)
                records += speech_records(sitting, sess.parliament, sess.session, number, rejected)
        bar.close()
        return records, rejected
