"""The US Congressional Record from a mirror of daily issue files (``lfb refresh --sources us --mirror DIR``).

The mirror (``shared/real/us-congress-crec-170``, b-d055/us-congressional-records) holds one file per daily issue,
``congressional_record_<volume>_<issue>.txt``: the concatenated "Formatted Text" of every article of the issue,
each opening with an optional ``[Daily Digest]``/``[Extensions of Remarks]`` line, its ``[Page(s) …]`` line and the
GPO trailer — a GovInfo granule's ``<pre>`` text less the volume header. So an issue is cut into articles at each
``[Page(s) …]`` line that the trailer follows, and every article goes through the live scraper's own
:func:`~largefedbench.scrapers.us_congress.parse_article` and :func:`speech_records` (same cleaning, same
rejection counts). The chamber is the first page's letter (S Senate, H House; E Extensions and D Digest are
skipped and counted as the live scraper counts them); the issue's date is the weekday date line that heads its
Daily Digest; the granule id is rebuilt as GovInfo spells it, ``CREC-<date>-pt1-Pg<first page>`` (``-2``, ``-3`` …
for the second and later articles opening on the same page), so record ids are ``us:<granule id>:<turn>``.

Repairs and gaps, each recorded in the manifest: stray NUL bytes are removed (and the files named); issues missing
from the numbering (the mirror lacks 24 and 75) are reported, with a warning when the gap lies inside the fetch
range. A file named like an issue that holds no dated article, and a folder without issue files, are refused.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from pathlib import Path

from largefedbench.data.records import Record
from largefedbench.data.windows import Window
from largefedbench.errors import InputError

from .mirror import MirrorSource
from .us_congress import _SKIP_REASON, PAGE_LETTERS, UsCongressScraper, parse_article, speech_records

log = logging.getLogger(__name__)

ISSUE_FILE = re.compile(r"^congressional_record_(?P<volume>\d+)_(?P<issue>\d+)\.txt\Z")
_ARTICLE = re.compile(r"^\[Pages? (?P<first>[A-Z])(?P<page>\d+)[^\]]*\]\n(?=From the Congressional Record Online)",
                      re.M)
_NEXT_CHAMBER_LINE = re.compile(r"\n\[[A-Z][A-Za-z ]+\]\n*\Z")  # the next article's [Daily Digest]-style line
_DATE_LINE = re.compile(r"^ +(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, (?P<date>[A-Z][a-z]+ \d{1,2}, \d{4}) *$",
                        re.M)
HEAD_BYTES = 64 * 1024  # the Daily Digest, with its date line, opens the issue


class UsCongressMirror(MirrorSource):
    source = "us"
    dataset = "congress"
    version = "1.0"
    license_note = UsCongressScraper.license_note.replace(
        "from the GovInfo API", "from a mirror of the GPO's formatted text (one file per daily issue) of")
    what = "Congressional Record issue files named congressional_record_<volume>_<issue>.txt"

    def issues(self) -> list[tuple[int, int, Path]]:
        """(volume, issue, path) of every issue file, in issue order; :class:`InputError` if there is none."""
        found = []
        for path in self.folder.iterdir():
            if m := ISSUE_FILE.match(path.name):
                found.append((int(m["volume"]), int(m["issue"]), path))
        if not found:
            raise InputError(f"--mirror {self.folder} holds no {self.what}; is it the right folder?")
        volumes = {v for v, _, _ in found}
        if len(volumes) > 1:
            raise InputError(f"--mirror {self.folder} mixes volumes {sorted(volumes)}; give one volume a folder")
        return sorted(found)

    @staticmethod
    def text_of(data: bytes) -> tuple[str, bool]:
        """An issue file's text and whether stray NUL bytes were removed from it."""
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        return text.replace("\0", ""), "\0" in text

    @staticmethod
    def issue_date(text: str, path: Path) -> dt.date:
        """The date that heads the issue's Daily Digest (the first weekday date line)."""
        m = _DATE_LINE.search(text[:HEAD_BYTES])
        if m is None:
            raise InputError(f"{path} is not a Congressional Record issue: no weekday date line (e.g. 'Friday, "
                             "December 20, 2024') heads it. Remove the file from the mirror folder")
        return dt.datetime.strptime(m["date"], "%B %d, %Y").date()

    def dated_issues(self) -> list[tuple[int, dt.date, Path]]:
        """(issue, date, path) of every issue; a gap in the numbering is noted."""
        issues = self.issues()
        dated = []
        for _, number, path in issues:
            with open(path, "rb") as f:
                head, _ = self.text_of(f.read(HEAD_BYTES))
            dated.append((number, self.issue_date(head, path), path))
        numbers = {n for n, _, _ in dated}
        self.missing = [n for n in range(min(numbers), max(numbers) + 1) if n not in numbers]
        return dated

    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        from tqdm.auto import tqdm

        dated = self.dated_issues()
        self._note_gaps(dated, window)
        chosen = [(n, day, path) for n, day, path in dated if window.fetch_from <= day <= window.until]
        rejected: Counter = Counter()
        records: list[Record] = []
        repaired = []
        for _number, day, path in tqdm(chosen, desc="Congressional Record issues", unit="issue", disable=not progress):
            text, had_nul = self.text_of(self.read_bytes(path))
            if had_nul:
                repaired.append(path.name)
            records += self.issue_records(text, day, rejected, path)
        if repaired:
            self.notes.append(f"stray NUL bytes removed from {len(repaired)} issue file(s): {', '.join(repaired)}")
        return records, rejected

    def _note_gaps(self, dated: list[tuple[int, dt.date, Path]], window: Window) -> None:
        """Note each run of issue numbers missing from the mirror; warn when it falls in the fetch range."""
        by_number = {n: day for n, day, _ in dated}
        runs: list[list[int]] = []
        for n in self.missing:
            if runs and runs[-1][-1] == n - 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        for run in runs:
            before, after = by_number[run[0] - 1], by_number[run[-1] + 1]
            which = f"issue {run[0]}" if len(run) == 1 else f"issues {run[0]}-{run[-1]}"
            self.notes.append(f"missing from the mirror: {which} (between {before} and {after})")
            if before < window.until and after > window.fetch_from:
                log.warning("%s: %s (between %s and %s) missing from the mirror, inside the fetch range %s..%s: "
                            "their speeches are not in the snapshot", self.folder, which, before, after,
                            window.fetch_from, window.until)

    def issue_records(self, text: str, day: dt.date, rejected: Counter, path: Path) -> list[Record]:
        """The records of one issue's House and Senate articles (the others counted as skipped)."""
        package = f"CREC-{day.isoformat()}"
        starts = list(_ARTICLE.finditer(text))
        if not starts:
            raise InputError(f"{path} is not a Congressional Record issue: it has no '[Page(s) …]' article header "
                             "followed by the GPO trailer line. Remove the file from the mirror folder")
        seen: Counter = Counter()
        out: list[Record] = []
        for k, m in enumerate(starts):
            end = starts[k + 1].start() if k + 1 < len(starts) else len(text)
            article = text[m.start():end]
            article = _NEXT_CHAMBER_LINE.sub("\n", article)
            letter = m["first"]
            chamber = PAGE_LETTERS.get(letter)
            if letter not in PAGE_LETTERS:
                rejected["unknown_granule_class"] += 1
                continue
            if chamber is None:
                rejected[_SKIP_REASON[letter]] += 1
                continue
            page = f"{letter}{m['page']}"
            seen[page] += 1
            granule_id = f"{package}-pt1-Pg{page}" + (f"-{seen[page]}" if seen[page] > 1 else "")
            try:
                granule = parse_article(article)
            except ValueError as exc:
                log.warning("skipping article %s: %s", granule_id, exc)
                rejected["malformed_granule"] += 1
                continue
            out += speech_records(package, day, granule_id, chamber, article_title(article), granule, rejected)
        return out


def article_title(article: str) -> str:
    """The article's heading: the indented lines between the trailer and its first paragraph."""
    lines = article.split("\n")[2:]
    title: list[str] = []
    for line in lines:
        if not line.strip():
            if title:
                break
            continue
        if len(line) - len(line.lstrip(" ")) < 3 or line.strip().startswith("[["):
            break
        title.append(line.strip())
    return " ".join(title)

