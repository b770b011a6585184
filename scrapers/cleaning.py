"""Text cleaning shared by every source, versioned: a change of behaviour bumps ``CLEANING_VERSION``.

The rules are the POPri paper's (appendix F): procedural boilerplate removed, sentences with more than 30% of
their (non-space) characters not letters dropped, written notation that was not spoken removed. Unlike the
reference scraper, whose early return on openings such as "Mr. Speaker," skipped the rules for US speeches,
every rule applies to every text. Source-specific patterns (procedural lines of one parliament) live in the
source's scraper module and are passed to :func:`clean_text`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from re import Pattern

CLEANING_VERSION = "1.0"
MAX_NON_LETTER_FRACTION = 0.30

# --- sentences ---------------------------------------------------------------------------------------
# Words after which a full stop does not end a sentence.
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "hon", "rt", "no", "nos", "vs", "v", "e.g", "i.e", "al", "fig", "figs",
    "approx", "ca", "cf", "etc", "u.s", "u.k", "jr", "sr", "prof", "sen", "rep", "gov", "gen", "col", "lt",
    "sgt", "mt", "ft", "inc", "ltd", "co", "corp", "dept", "univ", "vol", "pp", "eq", "ref", "refs", "resp",
    "min", "max", "sp", "spp", "var", "subsp", "chap", "art", "sec", "cl", "para", "op", "cit",
}
_BOUNDARY = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences on ``.``/``!``/``?`` followed by space and a capital or digit.

    A full stop after a known abbreviation ("Mr.", "e.g.", "Fig.") or a single capital initial ("M.") does
    not split.
    """
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start()]
        word = before.rsplit(None, 1)[-1] if before.split() else ""
        stem = word.rstrip(".!?").lower()
        if word.endswith(".") and (stem in _ABBREVIATIONS or re.fullmatch(r"[a-z]", stem)):
            continue
        sentences.append(text[start : m.start() + len(m.group(1))].strip())  # keep closing quotes/brackets
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def non_letter_fraction(sentence: str) -> float:
    """Fraction of the non-space characters of ``sentence`` that are not letters (1.0 for empty text)."""
    chars = [c for c in sentence if not c.isspace()]
    if not chars:
        return 1.0
    return sum(1 for c in chars if not c.isalpha()) / len(chars)


def drop_noisy_sentences(text: str, max_fraction: float = MAX_NON_LETTER_FRACTION) -> tuple[str, int]:
    """Drop sentences with more than ``max_fraction`` non-letter characters; return (text, dropped count)."""
    kept, dropped = [], 0
    for sentence in split_sentences(text):
        if non_letter_fraction(sentence) > max_fraction:
            dropped += 1
        else:
            kept.append(sentence)
    return " ".join(kept), dropped


# --- generic notation --------------------------------------------------------------------------------
_WS = re.compile(r"\s+")


def normalize_whitespace(text: str) -> str:
    """Collapse every run of white space (including line breaks) into one space."""
    return _WS.sub(" ", text).strip()


def remove_patterns(text: str, patterns: Iterable[Pattern[str]]) -> str:
    """Remove every match of every pattern (procedural lines, stage directions, notation)."""
    for pattern in patterns:
        text = pattern.sub(" ", text)
    return text


def clean_text(text: str, patterns: Iterable[Pattern[str]] = ()) -> tuple[str, int]:
    """The shared pipeline: HTML entities, source patterns, white space, the 30% non-letter rule.

    Returns the cleaned text and the number of sentences the non-letter rule dropped.
    """
    text = html.unescape(text)
    text = remove_patterns(text, patterns)
    text = normalize_whitespace(text)
    return drop_noisy_sentences(text)


# --- bioRxiv / JATS ----------------------------------------------------------------------------------
# Markers left by flattening JATS XML into the API's abstract string.
_JATS_BLOCKS = re.compile(r"O_FIG(?:_DISPLAY)?.*?C_FIG(?:_DISPLAY)?|O_TBL.*?C_TBL|O_ST_ABS.*?C_ST_ABS", re.S)
_JATS_LIST_MARKERS = re.compile(r"C_LIO_LI|O_LI|C_LI|O_QD|C_QD|O_FN|C_FN")
_JATS_INLINE_MARKERS = re.compile(r"O_SCPCAP|C_SCPCAP|O_QT|C_QT|O_SUB|C_SUB|O_SUP|C_SUP")
_JATS_SYMBOLS = {"{+/-}": "±", "{+/+}": "+/+", "{ell}": "ℓ", "{approx}": "≈", "{degrees}": "°", "{micro}": "µ"}
_HEADINGS = (
    "abstract", "background", "backgrounds", "introduction", "objective", "objectives", "aim", "aims",
    "aims and objectives", "purpose", "rationale", "importance", "context", "motivation", "summary",
    "author summary", "significance", "significance statement", "translational relevance",
    "methods", "method", "methodology", "materials and methods", "experimental design", "study design",
    "design", "setting", "settings", "participants", "interventions", "main outcome measures",
    "measurements", "results", "findings", "interpretation", "discussion", "conclusion", "conclusions",
    "limitations", "funding", "trial registration", "availability", "availability and implementation",
    "implementation", "contact", "supplementary information", "key messages", "about the authors",
    "evidence before this study", "added value of this study", "implications of all the available evidence",
    "research in context", "graphical abstract", "highlights", "one sentence summary", "teaser",
)
_HEADING = re.compile(
    r"(^|\n)\s*(?i:" + "|".join(sorted((re.escape(h) for h in _HEADINGS), key=len, reverse=True)) + r")(?:\s*:\s*|(?=[A-Z0-9])|[ \t]*(?=\n))"
)


def clean_jats_abstract(text: str) -> str:
    """Undo the JATS flattening of bioRxiv abstracts (before :func:`clean_text`).

    Literal ``\\n`` sequences become line breaks, figure/table blocks and section-heading markers are removed,
    list markers become breaks, headings run into the next word ("BackgroundIn ...") are removed, and
    JATS symbol escapes (``{+/-}``) become characters.
    """
    text = text.replace("\\n", "\n")
    text = _JATS_BLOCKS.sub("\n", text)
    text = _JATS_LIST_MARKERS.sub("\n", text)
    text = _JATS_INLINE_MARKERS.sub("", text)
    for escape, char in _JATS_SYMBOLS.items():
        text = text.replace(escape, char)
    text = html.unescape(text)
    text = _HEADING.sub(r"\1", text)
    # A list item or paragraph without final punctuation still ends a sentence.
    text = re.sub(r"(?<=[A-Za-z0-9)])\s*\n+\s*(?=[A-Z])", ". ", text)
    return text
