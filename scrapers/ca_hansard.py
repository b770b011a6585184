"""Canada's House of Commons debates (Hansard) from the ourcommons.ca XML publication.

One XML file per sitting, ``/Content/House/{parl}{session}/Debates/{NNN}/HAN{NNN}-E.XML``; how a file is read
into speeches (its metadata, interventions, embedded turns, notation and floor language) is in
:mod:`largefedbench.scrapers.ca_hansard_xml`. Each speech is one client record, cleaned with :data:`CA_PATTERNS`.
The record's ``url`` is the sitting's XML on ``https://www.ourcommons.ca`` whatever base URL was fetched from (a
mirror, a replay), so snapshots do not depend on it; its ``title`` is the subject of business (with its
qualifier: "Speech from the Throne: Address in Reply"), else the order of business.

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
  here embedded turns are split off or dropped (``ca_hansard_xml``);
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
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from largefedbench.data.records import Record
from largefedbench.data.windows import Window

from .base import Scraper
from .ca_hansard_xml import (  # noqa: F401 - re-exported: callers import them from here
    Sitting,
    Speech,
    display_name,
    embedded_turn,
    extracted_items,
    is_house_debates,
    is_notation,
    parse_sitting,
    parse_xml,
    person_key,
    sitting_day,
    text_of,
)
from .cleaning import clean_text
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
