"""Speed of UK Hansard parsing + cleaning on the recorded days, against a naive reference in the same run.

The measured path is the scraper's own: :func:`parse_day` (lxml, one pass over the root's children) then
:func:`day_records` (speech rules and the shared cleaning). The naive reference is the straightforward way
to write the same thing: ``xml.dom.minidom``, ``getElementsByTagName`` per speech and per paragraph, headings
found by walking back through siblings, text gathered node by node — with the same rules and the same
cleaning, and checked to give identical records, so the ratio compares like with like. Speeches per second
count every ``<speech>`` element read (kept or rejected). Nothing here asserts a timing.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import Counter
from xml.dom import minidom

from conftest import fixture_path
from largefedbench.scrapers.cleaning import clean_text, normalize_whitespace
from largefedbench.scrapers.uk_hansard import CHAMBERS, LICENSE, NOTATION_PATTERNS, DayFileName, day_records, parse_day

from largefedbench.data.records import Record

DAYS = (
    ("twfy_debates2009-10-27d.xml", DayFileName(dt.date(2009, 10, 27), "d", CHAMBERS[0])),
    ("twfy_daylord2009-10-29a.xml", DayFileName(dt.date(2009, 10, 29), "a", CHAMBERS[1])),
)


def recorded_days() -> list[tuple[bytes, DayFileName]]:
    return [(fixture_path("uk_hansard", name).read_bytes(), day) for name, day in DAYS]


def fast(days) -> tuple[list[Record], Counter]:
    rejected: Counter = Counter()
    records: list[Record] = []
    for body, day in days:
        records += day_records(parse_day(body), day, day.path, rejected)
    return records, rejected


# --- the naive reference ---------------------------------------------------------------------------
def _naive_text(node) -> str:
    if node.nodeType == node.TEXT_NODE:
        return node.data
    out = ""
    for child in node.childNodes:
        if (
            child.nodeType == child.ELEMENT_NODE
            and child.tagName == "phrase"
            and child.getAttribute("class") == "honfriend"
        ):
            out += re.sub(r"\s*\([^()]*\)\s*$", "", _naive_text(child))
        else:
            out += _naive_text(child)
    return out


def _naive_title(speech) -> str:
    node = speech.previousSibling
    while node is not None:
        if node.nodeType == node.ELEMENT_NODE and node.tagName in ("major-heading", "minor-heading"):
            return normalize_whitespace(_naive_text(node))
        node = node.previousSibling
    return ""


def _naive_paragraphs(speech) -> list[str]:
    out = []
    for p in speech.getElementsByTagName("p"):
        if p.parentNode is not speech or p.getAttribute("pwmotiontext"):
            continue
        text = _naive_text(p)
        if "italic" in p.getAttribute("class"):
            if out and not re.fullmatch(r"\s*\[[^\[\]]*\]\s*", text):
                break
            continue
        out.append(text)
    return out


def naive(days) -> tuple[list[Record], Counter]:
    rejected: Counter = Counter()
    records: list[Record] = []
    for body, day in days:
        doc = minidom.parseString(body)
        seen = set()
        for speech in doc.getElementsByTagName("speech"):
            if speech.getAttribute("nospeaker") == "true":
                rejected["procedural"] += 1
                continue
            gid, name = speech.getAttribute("id").strip(), normalize_whitespace(speech.getAttribute("speakername"))
            if not gid or not name or gid in seen:
                rejected["malformed_speech"] += 1
                continue
            seen.add(gid)
            if re.match(
                r"^\s*(?:an?|some|several|many|other|all)?\s*(?:(?:right\s+)?hon(?:ourable|\.)?|noble)\s+"
                r"(?:and\s+(?:(?:right\s+)?hon(?:ourable|\.)?|noble|learned|gallant)\s+)*(?:members?|lords?|baronesses|friends?)\b",
                name,
                re.IGNORECASE,
            ):
                rejected["collective_speaker"] += 1
                continue
            person = next(
                (
                    v
                    for v in (speech.getAttribute("person_id").strip(), speech.getAttribute("speakerid").strip())
                    if v and v.lower() != "unknown"
                ),
                None,
            )
            if person is None:
                rejected["unidentified_speaker"] += 1
                continue
            paragraphs = _naive_paragraphs(speech)
            if not paragraphs:
                rejected["no_spoken_text"] += 1
                continue
            text, _ = clean_text("\n".join(paragraphs), NOTATION_PATTERNS)
            if not text:
                rejected["empty_after_cleaning"] += 1
                continue
            records.append(
                Record(
                    id=f"uk:{gid}",
                    source="uk",
                    date=day.day.isoformat(),
                    title=_naive_title(speech),
                    text=text,
                    url=speech.getAttribute("url").strip() or day.path,
                    license=LICENSE,
                    country="GBR",
                    chamber=day.chamber.name,
                    speaker=name,
                    speaker_id=person,
                    language="en",
                )
            )
    return records, rejected


def _best_of(fn, days, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn(days)
        best = min(best, time.perf_counter() - start)
    return best


def test_parse_and_clean_speeches_per_second(benchmark):
    days = recorded_days()
    n_speeches = sum(len(re.findall(rb"<speech ", body)) for body, _ in days)
    assert n_speeches == 345 + 134

    records, rejected = benchmark.pedantic(fast, args=(days,), rounds=3, iterations=1, warmup_rounds=0)
    reference, reference_rejected = naive(days)
    assert [r.to_dict() for r in records] == [r.to_dict() for r in reference]  # the same work, done two ways
    assert rejected == reference_rejected and len(records) == 314 + 123

    t_fast, t_naive = _best_of(fast, days, 3), _best_of(naive, days, 2)
    rate, ratio = n_speeches / t_fast, t_naive / t_fast
    # The shared cleaning is the same on both sides; the XML side alone:
    t_parse = _best_of(lambda ds: [parse_day(b) for b, _ in ds], days, 3)
    t_dom = _best_of(lambda ds: [minidom.parseString(b) for b, _ in ds], days, 2)
    benchmark.extra_info.update(
        speeches=n_speeches,
        speeches_per_s=round(rate),
        naive_speeches_per_s=round(n_speeches / t_naive),
        speedup_vs_naive=round(ratio, 2),
        parse_only_speedup_vs_minidom=round(t_dom / t_parse, 1),
    )
    print(
        f"\nUK Hansard parse+clean: {rate:,.0f} speeches/s (naive minidom: {n_speeches / t_naive:,.0f}/s), {ratio:.2f}x; "
        f"XML parsing alone {n_speeches / t_parse:,.0f} speeches/s, {t_dom / t_parse:.1f}x minidom's parse"
    )
