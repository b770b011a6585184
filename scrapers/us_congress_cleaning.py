"""A Congressional Record speech's text cleaned: GPO's typewriter notation becomes text (```` ``…'' ```` → ``"…"``,
``--`` → an em dash, ``* * *`` → ``...``, ``\\1/2\\`` → ``1/2``), floor-procedure formulas are removed sentence by
sentence (quorum calls, yielding time or the floor, "Without objection, it is so ordered." …, see
:data:`PROCEDURAL_FORMULAS`), then the shared cleaning (:func:`clean_text`: entities, white space, the paper's 30%
non-letter sentence rule) applies to every speech. A speech with nothing left is ``procedural`` (nothing but
procedural formulas) or ``empty_after_cleaning``.
"""

from __future__ import annotations

import re

from .cleaning import clean_text, normalize_whitespace, remove_patterns
from .us_congress_text import _PAREN_FREE

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
