"""The ourcommons.ca client end to end against a local replay of the two recorded sitting files.

The replay answers at the real paths (``/Content/House/{parl}{session}/Debates/{NNN}/HAN{NNN}-E.XML``) with
the recorded files byte for byte: 44-1 No. 303 (19 April 2024; BOM, CRLF) and 42-1 No. 002 (4 December 2015;
the older schema variant), and 404 elsewhere. To exercise the discovery of sittings (searching a session's
sitting numbers by date) some tests also emulate the rest of a session with *derived* copies of a real file:
the same bytes with the ``ExtractedItem`` date and number rewritten, dated on consecutive weekdays around the
real sitting, so the real file keeps its real number and date.

Counts below were verified by reading the files: 44-1-303 has 194 ``<Intervention>`` elements and 12 ``<B>``
embedded turns (7 collective — "An hon. member:" ×2, "Some hon. members:" ×5 —, Mr. Corey Tochor and Mr.
Kevin Lamoureux inside the Assistant Deputy Speaker's intervention 12693208, Mr. Todd Doherty and Mr. Mark
Gerretsen resuming their own interventions, the Acting Speaker resuming his); 42-1-2 has 42 interventions,
two of them third-person "Right Hon. Justin Trudeau … moved" entries, and 6 "Some hon. members:" turns.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from conftest import fixture_path
from largefedbench.scrapers.ca_hansard import (
    LICENSE,
    CaHansardScraper,
    display_name,
    parse_sitting,
    sitting_path,
    speech_records,
)
from largefedbench.scrapers.http import HttpSettings
from replay_server import ReplayServer, Reply, refused_url

from largefedbench.data.windows import Window
from largefedbench.errors import SourceError

F303 = "ourcommons_HAN303-E_44-1-303-en.xml"
F002 = "ourcommons_HAN002-E_42-1-2-en.xml"
_PATH = re.compile(r"^/Content/House/(\d+)(\d)/Debates/(\d{3})/HAN(\d{3})-E\.XML$")
N303, N002 = 196, 40  # speeches (clients) of each file after the documented rules


def real(name: str) -> bytes:
    return fixture_path("ca_hansard", name).read_bytes()


def url_path(parliament: int, session: int, number: int) -> str:
    return "/" + sitting_path(parliament, session, number)


# --- derived variants -------------------------------------------------------------------------------------
def set_item(body: bytes, name: str, value: str) -> bytes:
    pattern = re.compile(rb'(<ExtractedItem Name="' + name.encode() + rb'">)(.*?)(</ExtractedItem>)', re.DOTALL)
    new, n = pattern.subn(lambda m: m.group(1) + value.encode() + m.group(3), body, count=1)
    assert n == 1, f"no ExtractedItem {name}"
    return new


def redated(body: bytes, day: dt.date, number: int, parliament: int | None = None, session: int | None = None) -> bytes:
    items = {
        "MetaDateNumYear": str(day.year), "MetaDateNumMonth": f"{day.month:02d}", "MetaDateNumDay": f"{day.day:02d}",
        "Date": f"{day:%A, %B} {day.day}, {day.year}", "MetaNumberNumber": f"{number:03d}", "Number": f"No. {number}",
    }
    if parliament is not None:
        items.update(ParliamentNumber=str(parliament), SessionNumber=str(session))
    for name, value in items.items():
        body = set_item(body, name, value)
    return body


def committee_variant(body: bytes) -> bytes:
    """The same file as committee evidence describes itself (category, document name, institution)."""
    body = set_item(body, "MetaDocumentCategory", "Committee")
    body = set_item(body, "InstitutionDebate", "Standing Committee on Indigenous and Northern Affairs")
    name = b"<DocumentName>OFFICIAL REPORT (HANSARD)</DocumentName>"
    assert body.count(name) == 1
    return body.replace(name, b"<DocumentName>EVIDENCE</DocumentName>")


def weekdays_from(day: dt.date, offset: int) -> dt.date:
    step = 1 if offset >= 0 else -1
    while offset:
        day += dt.timedelta(days=step)
        if day.weekday() < 5:
            offset -= step
    return day


# --- the replay -------------------------------------------------------------------------------------------
class SittingsApp:
    """Serves sitting files by (parliament, session, number) at their real paths; 404 elsewhere."""

    def __init__(self, files: dict[tuple[int, int, int], Callable[[], bytes]]) -> None:
        self.files = files
        self.missing: list[str] = []

    def __call__(self, path: str, query: dict) -> Reply:
        m = _PATH.match(path)
        key = (int(m[1]), int(m[2]), int(m[3])) if m and m[3] == m[4] else None
        if key not in self.files:
            self.missing.append(path)
            return Reply(404, b"<html><body>Page not found</body></html>", {"Content-Type": "text/html"})
        return Reply(200, self.files[key](), {"Content-Type": "application/xml"})


def real_files() -> dict[tuple[int, int, int], Callable[[], bytes]]:
    """Only the two recorded files, at their real paths."""
    b303, b002 = real(F303), real(F002)
    return {(44, 1, 303): lambda: b303, (42, 1, 2): lambda: b002}


def emulated_session(name: str, key: tuple[int, int, int], day: dt.date, last: int) -> dict:
    """Sittings 1..last of the real file's session: the real file at its number, derived copies elsewhere."""
    body = real(name)
    parliament, session, number = key
    files: dict = {key: lambda: body}
    for k in range(1, last + 1):
        if k != number:
            files[(parliament, session, k)] = lambda k=k: redated(body, weekdays_from(day, k - number), k)
    return files


def session_44_1(last: int = 320) -> dict:
    return emulated_session(F303, (44, 1, 303), dt.date(2024, 4, 19), last)


def session_42_1(last: int = 10) -> dict:
    return emulated_session(F002, (42, 1, 2), dt.date(2015, 12, 4), last)


@pytest.fixture(scope="module")
def _replay():
    """One replay server for the module (stopping a server takes its half-second poll interval)."""
    with ReplayServer(SittingsApp({})) as srv:
        yield srv


@pytest.fixture
def serve(_replay) -> Iterator[Callable[[SittingsApp], ReplayServer]]:
    """``serve(app)``: the module's replay server answering with ``app``, its request log and faults cleared."""

    def use(app: SittingsApp) -> ReplayServer:
        _replay.app = app
        _replay.requests.clear()
        _replay._faults.clear()
        return _replay

    yield use
    _replay._faults.clear()


def scraper(url: str, sleeps: list | None = None, **kw) -> CaHansardScraper:
    s = CaHansardScraper.create(base_url=url, settings=HttpSettings(rate_limit=1000, backoff_base=0.01), **kw)
    if sleeps is not None:
        s.client.sleep = sleeps.append
    return s


def window(since: str, until: str, public_since: str | None = None) -> Window:
    iso = dt.date.fromisoformat
    return Window(iso(since), iso(until), iso(public_since) if public_since else None)


DEC_2015 = window("2015-12-01", "2015-12-31")
APR_19_2024 = window("2024-04-19", "2024-04-19")
SPARSE_DEC_2015_PATHS = [url_path(41, 2, n) for n in (1, 2, 3)] + [url_path(42, 1, n) for n in (1, 2, 3, 4, 5)]


def by_key(records) -> dict:
    return {r.id.rsplit(":", 1)[1]: r for r in records}


# --- what the recorded files contain -----------------------------------------------------------------------
def test_sitting_303_speeches_speakers_and_embedded_turns(serve):
    srv = serve(SittingsApp(session_44_1()))
    recs, rejected = scraper(srv.url).fetch(APR_19_2024, progress=False)
    assert len(recs) == N303 and len({r.id for r in recs}) == N303
    assert rejected == Counter({"collective_interjection": 7})
    assert {r.date for r in recs} == {"2024-04-19"}
    assert {(r.country, r.chamber, r.license, r.source) for r in recs} == {("CAN", "House of Commons", LICENSE, "ca")}
    assert Counter(r.language for r in recs) == Counter({"en": 156, "fr": 40})
    assert len({r.speaker for r in recs}) == 68
    got = by_key(recs)

    first = got["12693094"]
    assert first.id == "ca:44-1-303:12693094"
    assert (first.speaker, first.speaker_id, first.language) == ("Mr. Mark Gerretsen", "278514", "en")
    assert first.title == "National Council for Reconciliation Act"
    assert first.url == "https://www.ourcommons.ca/Content/House/441/Debates/303/HAN303-E.XML"
    assert first.text.startswith("Madam Speaker, I will be splitting my time with the member for Nepean. Before I")

    # The Assistant Deputy Speaker's intervention holds two other members' turns: split off, own clients.
    chair = got["12693208"]
    assert chair.speaker == "The Assistant Deputy Speaker (Mrs. Carol Hughes)" and chair.speaker_id == "279178"
    assert chair.text == "There is no unanimous consent. Resuming debate, the hon. member for Cariboo—Prince George."
    tochor, lamoureux = got["12693208.8336487"], got["12693208.8336488"]
    assert (tochor.speaker, tochor.speaker_id, tochor.text) == ("Mr. Corey Tochor", "278492", "Thank you.")
    # Two DbIds carry this name in the file (member 278257, parliamentary secretary 300691): not guessed.
    assert (lamoureux.speaker, lamoureux.speaker_id, lamoureux.text) == ("Mr. Kevin Lamoureux", None, "You're welcome.")

    # "An hon. member: No." is dropped, not attributed to Mr. Tochor.
    assert got["12693207"].text.endswith("table the four studies showing that it is worse for the environment—")
    # Mr. Doherty resumes his own speech after "An hon. member: Oh, oh!": one client, heckle dropped.
    doherty = got["12693211"].text
    assert "Madam Speaker, I am getting heckled from the other side" in doherty
    assert "That being said, as I mentioned" in doherty
    assert "Oh, oh!" not in doherty
    assert got["12693631"].text.endswith("rising on a point of order that is actually is a point of order.")
    assert "Debate." not in got["12693631"].text
    # The Acting Speaker's own embedded turn stays in his intervention; "Some hon. members: Question." does not.
    assert got["12693790"].text.startswith("Is the House ready for the question? The question is on the motion. If a")

    # Procedural text and notation dropped; the member's office stripped from the speaker (nested parentheses).
    last = got["12693950"].text
    assert "Division on motion deferred" not in last and "adjourned at 1:39" not in last
    assert last.endswith("pursuant to Standing Orders 28(2) and 24(1).")
    assert got["12693653"].speaker == "Ms. Yvonne Jones" and got["12693653"].speaker_id == "300682"
    assert got["12693143"].language == "fr" and got["12693143"].speaker == "Mr. Luc Desilets"


def test_sitting_002_older_schema(serve):
    srv = serve(SittingsApp(session_42_1()))
    recs, rejected = scraper(srv.url).fetch(window("2015-12-04", "2015-12-04"), progress=False)
    assert len(recs) == N002
    assert rejected == Counter({"collective_interjection": 6, "procedural": 2})
    assert Counter(r.language for r in recs) == Counter({"en": 27, "fr": 13})
    assert len({r.speaker for r in recs}) == 14
    got = by_key(recs)
    assert "214296" not in {r.speaker_id for r in recs}  # "Right Hon. Justin Trudeau … moved …" is not a speech
    assert got["8759813"].text == (
        "Does the hon. minister have the unanimous consent of the House to move the motion? The House has heard the "
        "terms of the motion. Is it the pleasure of the House to adopt the motion?"
    )
    brison = "Mr. Speaker, I move: That the business of supply be considered at the next sitting of the House."
    assert got["8759814"].text == brison
    assert got["8759814"].speaker == "Hon. Scott Brison" and got["8759814"].title == "Business of Supply"
    assert "moment of silence observed" not in got["8759847"].text
    assert got["8759828"].speaker == "Mr. Rémi Massé"
    assert got["8759828"].title == "Speech from the Throne: Address in Reply"
    assert got["8759828"].language == "fr"
    assert all("(Motion agreed to)" not in r.text and "Agreed." not in r.text for r in recs)
    # The Speech from the Throne (read in the Senate, outside any intervention) is no one's speech here.
    assert not any("As the representative of Her Majesty The Queen" in r.text for r in recs)


def test_crlf_lf_and_bom_variants_give_the_same_records(serve):
    def records(body: bytes, coords: tuple) -> list:
        return speech_records(parse_sitting(body), *coords, Counter())

    b002, b303 = real(F002), real(F303)
    assert b002.startswith(b"\xef\xbb\xbf") and b"\r\n" not in b002 and b303.count(b"\r\n") > 2000
    assert records(b002.replace(b"\n", b"\r\n"), (42, 1, 2)) == records(b002, (42, 1, 2))
    assert records(b303.replace(b"\r\n", b"\n"), (44, 1, 303)) == records(b303, (44, 1, 303))
    assert records(b303[3:], (44, 1, 303)) == records(b303, (44, 1, 303))  # without the BOM
    crlf = {(42, 1, 2): lambda: b002.replace(b"\n", b"\r\n")}
    srv = serve(SittingsApp(crlf))
    recs, _ = scraper(srv.url).fetch(DEC_2015, progress=False)
    assert recs == records(b002, (42, 1, 2))


def test_html_named_entities_are_read():
    body = real(F303).replace("Métis".encode(), b"M&eacute;tis")
    assert b"&eacute;" in body
    texts = " ".join(r.text for r in speech_records(parse_sitting(body), 44, 1, 303, Counter()))
    assert "Métis against Métis" in texts and "&eacute;" not in texts


def test_malformed_single_speeches_are_dropped_and_counted(serve):
    body = real(F002)
    body = body.replace(b'<Intervention Type="Debate" ToC="Yes" ToCText="Mr. Brison" id="8759814">',
                        b'<Intervention Type="Debate" ToC="Yes" ToCText="Mr. Brison">', 1)
    speaker = b'<Affiliation DbId="214419" Type="2">Mrs. Shannon Stubbs (Lakeland, CPC)</Affiliation>: '
    assert body.count(speaker) == 1
    body = body.replace(speaker, b"", 1)
    srv = serve(SittingsApp({(42, 1, 2): lambda: body}))
    recs, rejected = scraper(srv.url).fetch(DEC_2015, progress=False)
    assert rejected["malformed_speech"] == 2
    assert len(recs) == N002 - 2 and not {"8759814", "8759836"} & set(by_key(recs))


def test_committee_evidence_is_excluded_by_its_own_metadata(serve):
    body = committee_variant(real(F303))
    assert not parse_sitting(body).house_debates and parse_sitting(real(F303)).house_debates
    files = session_44_1()
    files[(44, 1, 303)] = lambda: body
    srv = serve(SittingsApp(files))
    recs, rejected = scraper(srv.url).fetch(window("2024-04-18", "2024-04-22"), progress=False)
    assert rejected["not_house_debates"] == 1
    assert {r.date for r in recs} == {"2024-04-18", "2024-04-22"}  # the derived House sittings around it
    assert not any(r.id.startswith("ca:44-1-303:") for r in recs)


# --- discovery -----------------------------------------------------------------------------------------------
def test_sparse_replay_of_the_real_files_finds_the_2015_sitting(serve):
    """Two real files at their paths, 404 elsewhere: 41-2 (which reaches into the window) and 42-1 are read
    from sitting 001 until MAX_GAP (3) numbers in a row are missing; the gap before sitting 002 is stepped over."""
    srv = serve(SittingsApp(real_files()))
    recs, _ = scraper(srv.url).fetch(DEC_2015, progress=False)
    assert srv.paths() == SPARSE_DEC_2015_PATHS
    assert len(recs) == N002 and {r.date for r in recs} == {"2015-12-04"}


def test_binary_search_finds_the_first_sitting_of_the_window(serve):
    app = SittingsApp(session_44_1())
    srv = serve(app)
    recs, _ = scraper(srv.url).fetch(APR_19_2024, progress=False)
    numbers = [int(p.split("/")[5]) for p in srv.paths()]
    assert len(recs) == N303
    # Exponential until past the window's start (512 is past the session's end), then binary between 256 and
    # 512; the scan reads 303 and 304 (dated after the window, which ends it) from what the search fetched.
    assert numbers == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 384, 320, 288, 304, 296, 300, 302, 303]
    assert app.missing == [url_path(44, 1, 512), url_path(44, 1, 384)]


def test_records_outside_the_window_are_not_returned(serve):
    srv = serve(SittingsApp(session_44_1()))
    recs, _ = scraper(srv.url).fetch(window("2024-04-18", "2024-04-22", public_since="2024-04-17"), progress=False)
    numbers = sorted(int(p.split("/")[5]) for p in srv.paths())
    days = Counter(r.date for r in recs)
    assert days == Counter({d: N303 for d in ("2024-04-17", "2024-04-18", "2024-04-19", "2024-04-22")})
    assert {r.id.split(":")[1] for r in recs} == {"44-1-301", "44-1-302", "44-1-303", "44-1-304"}
    assert 305 in numbers and 306 not in numbers  # 305 (23 April) ends the scan


def test_sessions_newer_than_the_table_are_found_by_probing(serve):
    body = real(F303)
    files = {
        (45, 2, 1): lambda: redated(body, dt.date(2025, 9, 15), 1, 45, 2),
        (45, 2, 2): lambda: redated(body, dt.date(2025, 9, 16), 2, 45, 2),
    }
    srv = serve(SittingsApp(files))
    recs, _ = scraper(srv.url).fetch(window("2025-09-01", "2025-10-31"), progress=False)
    paths = srv.paths()
    assert paths == [
        url_path(45, 2, 1), url_path(45, 3, 1), url_path(46, 1, 1),  # successors of the table's last session
        url_path(45, 1, 1), url_path(45, 1, 2), url_path(45, 1, 3),  # 45-1 has nothing in the replay
        url_path(45, 2, 2), url_path(45, 2, 3), url_path(45, 2, 4), url_path(45, 2, 5),
    ]
    assert Counter(r.id.split(":")[1] for r in recs) == Counter({"45-2-1": N303, "45-2-2": N303})
    assert recs[0].url == "https://www.ourcommons.ca/Content/House/452/Debates/001/HAN001-E.XML"


# --- faults -----------------------------------------------------------------------------------------------------
def test_429_with_retry_after_is_honoured(serve):
    sleeps: list[float] = []
    srv = serve(SittingsApp(real_files()))
    srv.fail_next("/421/Debates/002/", Reply(429, b"slow down", {"Retry-After": "7"}))
    recs, _ = scraper(srv.url, sleeps).fetch(DEC_2015, progress=False)
    assert 7.0 in sleeps and len(recs) == N002


def test_500_then_success(serve):
    sleeps: list[float] = []
    srv = serve(SittingsApp(real_files()))
    srv.fail_next("/421/Debates/002/", Reply(500, b"oops"), times=2)
    recs, _ = scraper(srv.url, sleeps).fetch(DEC_2015, progress=False)
    assert srv.paths().count(url_path(42, 1, 2)) == 3
    assert len(recs) == N002
    backoffs = [s for s in sleeps if s >= 0.01]  # the others are the (1000/s) rate limit's waits
    assert len(backoffs) == 2 and backoffs[1] > backoffs[0]  # exponential backoff


def test_empty_body_and_dropped_connection_are_retried(serve):
    srv = serve(SittingsApp(real_files()))
    srv.fail_next("/421/Debates/002/", Reply(200, b""), times=2)
    srv.fail_next("/421/Debates/002/", Reply(drop_connection=True))
    recs, _ = scraper(srv.url, []).fetch(DEC_2015, progress=False)
    assert srv.paths().count(url_path(42, 1, 2)) == 4
    assert len(recs) == N002


def test_connection_refused_names_the_url():
    with pytest.raises(SourceError) as err:
        scraper(refused_url(), []).fetch(DEC_2015, progress=False)
    msg = str(err.value)
    assert "/Content/House/412/Debates/001/HAN001-E.XML" in msg and "ConnectionError" in msg and "resume" in msg


def test_truncated_xml_is_fetched_again(serve, lfb_home):
    body = real(F002)
    srv = serve(SittingsApp(real_files()))
    srv.fail_next("/421/Debates/002/", Reply(200, body[: len(body) // 2]))
    recs, rejected = scraper(srv.url, []).fetch(DEC_2015, progress=False)
    assert srv.paths().count(url_path(42, 1, 2)) == 2
    assert len(recs) == N002 and "unreadable_sitting" not in rejected
    assert [p.name for p in lfb_home.rglob("*.bad")] == ["HAN002-E.XML.bad"]


def test_an_html_page_instead_of_the_xml_is_fetched_again(serve):
    page = b"<!DOCTYPE html><html><body><h1>Scheduled maintenance</h1></body></html>"
    with pytest.raises(ValueError, match="root element is <html>"):
        parse_sitting(page)
    srv = serve(SittingsApp(real_files()))
    srv.fail_next("/421/Debates/002/", Reply(200, page, {"Content-Type": "text/html"}))
    recs, _ = scraper(srv.url, []).fetch(DEC_2015, progress=False)
    assert srv.paths().count(url_path(42, 1, 2)) == 2 and len(recs) == N002


def test_a_file_that_never_parses_is_reported_and_skipped_keeping_the_other_days(serve, lfb_home, caplog):
    files = session_42_1()
    full = files[(42, 1, 3)]()
    files[(42, 1, 3)] = lambda: full[: len(full) * 2 // 3]  # truncated on every download
    srv = serve(SittingsApp(files))
    caplog.set_level(logging.WARNING)
    recs, rejected = scraper(srv.url, []).fetch(window("2015-12-04", "2015-12-08"), progress=False)
    assert srv.paths().count(url_path(42, 1, 3)) == 3  # the client's parse_attempts
    assert rejected["unreadable_sitting"] == 1
    assert Counter(r.date for r in recs) == Counter({"2015-12-04": N002, "2015-12-08": N002})  # 002 and 004 kept
    assert "Content/House/421/Debates/003/HAN003-E.XML" in caplog.text and "could not be parsed" in caplog.text
    assert list(lfb_home.rglob("HAN003-E.XML.bad"))


def test_killed_refresh_resumes_from_the_stored_responses(serve):
    """The first run dies on sitting 303 (503 until the client gives up); the second downloads only what was
    not stored: 303, the 404 probes (never stored) and 305, which the first run had not reached."""
    wide = window("2024-04-18", "2024-04-22")
    srv = serve(SittingsApp(session_44_1()))
    srv.fail_next("/441/Debates/303/", Reply(503, b"down"), times=99)
    with pytest.raises(SourceError, match="Content/House/441/Debates/303/HAN303-E.XML: HTTP 503"):
        scraper(srv.url, []).fetch(wide, progress=False)
    first = [int(p.split("/")[5]) for p in srv.paths()]
    assert first == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 384, 320, 288, 304, 296, 300, 302, 301] + [303] * 6
    srv._faults.clear()
    srv.requests.clear()
    recs, _ = scraper(srv.url, []).fetch(wide, progress=False)
    assert srv.paths() == [url_path(44, 1, n) for n in (512, 384, 303, 305)]
    assert Counter(r.id.split(":")[1] for r in recs) == Counter({f"44-1-{n}": N303 for n in (302, 303, 304)})


def test_refresh_builds_the_congress_snapshot_from_the_replay(serve, lfb_home):
    from largefedbench.scrapers.refresh import RefreshPlan, refresh

    from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings

    srv = serve(SittingsApp(real_files()))
    plan = RefreshPlan(DEC_2015, ["ca"], span=SpanSettings(OFFLINE_SPAN_TOKENIZER), base_urls={"ca": srv.url})
    (result,) = refresh(plan, progress=False)
    manifest = result.manifest
    assert manifest["dataset"] == "congress" and manifest["counts"]["records_in"] == N002
    clients = sum(manifest["counts"]["clients"].values())
    assert clients + manifest["rejected"].get("too_short_for_a_span", 0) == N002
    assert manifest["rejected"]["ca:collective_interjection"] == 6 and manifest["rejected"]["ca:procedural"] == 2
    assert manifest["licenses"] == {LICENSE: clients}
    assert "Speaker's Permission" in manifest["sources"]["ca"]["license_note"]


def test_display_name_strips_riding_party_and_office_but_not_presiding_officers():
    assert display_name("Mr. Mark Gerretsen (Kingston and the Islands, Lib.)") == "Mr. Mark Gerretsen"
    assert display_name("Right Hon. Justin Trudeau (Prime Minister, Lib.) ") == "Right Hon. Justin Trudeau"
    assert display_name("The Acting Speaker (Mr. Gabriel Ste-Marie)") == "The Acting Speaker (Mr. Gabriel Ste-Marie)"
    assert display_name("The Speaker: ") == "The Speaker"
