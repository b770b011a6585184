"""A Congressional Record granule's text (GovInfo's ``/htm`` page, or one article of a mirror's daily issue file)
read into its chamber, pages, title and speeches, before cleaning.

Facts (``shared/reference/sources.md`` §2, the usgpo/api samples in the shared fixtures):

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

One speech per speaker tag, ending at the next tag, a recorder line ("The legislative clerk proceeded to call the
roll.", "There being no objection, …", "The question was taken; …") or a ``____`` separator. Dropped from the
text: bracketed and parenthetical notes ("(Mr. X asked and was given permission to revise and extend his
remarks.)", "(The remarks of Mr. Bond … are located in today's Record …)"), indented inserted material and
headings, ``{time}``, ``[[Page …]]`` and ``<bullet>`` markers; a speech whose tag is marked ``<bullet>`` is kept
as ``unspoken``, for the records to count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import lxml.etree
import lxml.html

from .cleaning import normalize_whitespace

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
