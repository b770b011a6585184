"""Speed of parsing + cleaning Congressional Record speeches on the recorded day (pytest-benchmark).

The workload is the three recorded granule pages of 1997-01-28 (32 speaker turns, all parsed and cleaned). The
reference is a naive version of the same rules written the straightforward way: BeautifulSoup's pure-Python
HTML parser, every line tested against each rule's pattern in turn, every procedural formula and notation
substituted one by one. Both must give the same speeches; the ratio and speeches/s are printed and stored in
the benchmark's ``extra_info``. Run with ``--benchmark-enable`` for pytest-benchmark's table; with the
project default ``--benchmark-disable`` the test still runs (about a second) and prints the comparison.
"""

from __future__ import annotations

import re
import time

from bs4 import BeautifulSoup
from conftest import fixture_path
from largefedbench.scrapers.cleaning import clean_text
from largefedbench.scrapers.us_congress import (
    NOTATION_PATTERN,
    PROCEDURAL_FORMULAS,
    SPEAKER_TAG,
    clean_speech,
    is_recorder,
    parse_granule,
)

FILES = ("PgS697", "PgS700", "PgS715")
PASSES = 15  # passes over the recorded day per timed round


def recorded_day() -> list[bytes]:
    return [fixture_path("us_congress", f"CREC-1997-01-28-pt1-{f}.htm").read_bytes() for f in FILES]


def ours(bodies: list[bytes]) -> list[tuple[str, str | None, str]]:
    out = []
    for body in bodies:
        for speech in parse_granule(body).speeches:
            text, reason = clean_speech(speech.paragraphs)
            out.append((speech.speaker, reason, text))
    return out


# --- the naive reference -------------------------------------------------------------------------------
_SKIP_LINE = [r"^\s*\[\[Page [^\]]*\]\]\s*$", r"^\s*\{time\}\s*\d*\s*$", r"^\s*$"]
_TYPEWRITER = [(r"``", '"'), (r"''", '"'), (r"\s*-{2,}\s*", " \u2014 "), (r"\*(?: \*){2,}", "..."),
               (r"\\(\d+)/(\d+)\\", r"\1/\2")]
_START = r"(?:^|(?<=[.!?])|(?<=[.!?][\"']))\s*"
_ADDRESS = r"(?:(?:Mr|Madam)\. (?:President|Speaker|Chairman|Chairwoman|Chair), )?"


def naive(bodies: list[bytes]) -> list[tuple[str, str | None, str]]:
    out = []
    for body in bodies:
        soup = BeautifulSoup(body.decode().replace("<bullet>", "&lt;bullet&gt;"), "html.parser")
        lines = soup.find("pre").get_text().split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith("From the Congressional Record")) + 1
        speeches: list[list] = []
        current = None
        paragraph: list[str] | None = None
        blocks: list[tuple[str, list[str]]] = []
        for line in lines[start:]:
            if any(re.match(p, line) for p in _SKIP_LINE):
                continue
            if re.match(r"^\s*_{3,}\s*$", line):
                blocks.append(("sep", []))
                paragraph = None
            elif re.match(r"^  (?:<bullet>\s*)?\S", line):
                paragraph = [line.strip()]
                blocks.append(("para", paragraph))
            elif re.match(r"^\S", line) and paragraph is not None:
                paragraph.append(line.strip())
            else:
                paragraph = None
                blocks.append(("indented", [line]))
        for kind, block_lines in blocks:
            text = " ".join(block_lines)
            if kind == "sep":
                current = None
            elif kind != "para" or not re.search("[a-z]", text):
                continue
            elif m := SPEAKER_TAG.match(text):
                current = [m["speaker"], [text[m.end():].strip()] if text[m.end():].strip() else []]
                speeches.append(current)
            elif re.match(r"^\(.*\)$", text) or re.match(r"^\[.*\]$", text):
                continue
            elif is_recorder(text):
                current = None
            elif current is not None:
                current[1].append(text)
        for speaker, paragraphs in speeches:
            text = " ".join(paragraphs)
            for pattern, replacement in _TYPEWRITER:
                text = re.sub(pattern, replacement, text)
            text = " ".join(text.split())
            removed = text
            for formula in PROCEDURAL_FORMULAS:
                removed = re.sub(_START + _ADDRESS + "(?:" + formula + r")\.(?= |$)", " ", removed)
            cleaned, _ = clean_text(removed, [NOTATION_PATTERN])
            reason = None
            if not cleaned:
                left = " ".join(re.sub(NOTATION_PATTERN.pattern, " ", removed).split())
                reason = "procedural" if text and not left and removed != text else "empty_after_cleaning"
            out.append((speaker, reason, cleaned))
    return out


def _best_of(fn, bodies, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(PASSES):
            fn(bodies)
        best = min(best, time.perf_counter() - t0)
    return best


def test_parse_and_clean_speed_against_a_naive_reference(benchmark):
    bodies = recorded_day()
    expected = ours(bodies)
    assert naive(bodies) == expected  # same speeches, speakers, texts and reasons: a fair comparison
    n_speeches = len(expected) * PASSES
    assert len(expected) == 32

    benchmark.pedantic(lambda: [ours(bodies) for _ in range(PASSES)], rounds=3, iterations=1, warmup_rounds=0)
    t_ours, t_naive = _best_of(ours, bodies), _best_of(naive, bodies)
    per_s_ours, per_s_naive = n_speeches / t_ours, n_speeches / t_naive
    benchmark.extra_info.update(speeches_per_s=round(per_s_ours), naive_speeches_per_s=round(per_s_naive),
                                speedup=round(t_naive / t_ours, 2))
    print(f"\nUS Congressional Record parse+clean: {per_s_ours:,.0f} speeches/s; naive reference "
          f"{per_s_naive:,.0f} speeches/s; ratio {t_naive / t_ours:.2f}x")
