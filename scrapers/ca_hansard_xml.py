"""One ourcommons.ca sitting file (the English XML of one House of Commons sitting) read into its metadata and
its speeches, before cleaning.

Facts this parser is built on (``shared/reference/sources.md`` §4 and the two recorded sittings in
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
  (headings), the inline notation of :data:`~largefedbench.scrapers.ca_hansard.CA_PATTERNS` (removed when
  the records are cleaned), and whole interventions recorded in the third person ("Right Hon. Justin Trudeau
  moved for leave to introduce Bill C-1" — a ``PersonSpeaking`` without the colon of a spoken turn), counted
  as ``procedural``, like speeches left with nothing but such text.
  Text outside interventions (the Speech from the Throne read in the Senate, "The House resumed …") has no
  speaker and is not a client; nor are written answers (``WrittenQuestionResponse``);
- ``<FloorLanguage language="EN|FR">`` marks the language spoken from that point on (in document order,
  across interventions). The English edition carries the translation of what was said in French; each
  record's ``language`` is the floor language of most of its characters ("en"/"fr").

These facts were checked against the two recorded files; that committee evidence says
``Committee`` in ``MetaDocumentCategory`` and that some files use HTML entities comes from openparliament's
parser (alpheus, AGPL; read, not copied) and is tested with derived variants of the recorded files.
"""

from __future__ import annotations

import datetime as dt
import html.entities
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from lxml import etree

from .cleaning import normalize_whitespace

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
