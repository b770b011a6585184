"""The UK Hansard client end to end against a local replay of real recorded ParlParse files.

The replay answers at TheyWorkForYou's real paths under ``/pwdata/scrapedxml``: the recorded
``debates/debates2009-10-27d.xml`` (latest), ``debates/debates2009-10-27a.xml`` (its superseded version) and
``lordspages/daylord2009-10-29a.xml``, byte for byte; everything else is 404. ``changedates.txt`` listings:
``debates/`` gets the recorded lines that name those two files (and, in one test, the recorded file verbatim);
the Lords listing was not recorded, so one is derived in the recorded ``unix_timestamp,filename`` format, its
timestamp borrowed from the recorded ``debates2009-10-29a.xml`` line. The window filter uses the file date,
so windows are around October 2009.

Counts below were established by reading the files: 27d has 345 ``<speech>`` elements — 20 ``nospeaker``,
5 collective ("Hon. Members" ×4, "Several hon. Members"), 6 with no spoken paragraph ("rose—" ×4, and two
whose only paragraphs are ``pwmotiontext``) — so 314 clients; 29a has 134 — 10 ``nospeaker`` and 1
"Noble Lords" — so 123 clients; 27a has 2 speeches and 387 redirects to version b.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from conftest import fixture_path
from largefedbench.scrapers.http import HttpSettings
from largefedbench.scrapers.uk_hansard import ATTRIBUTION, UkHansardScraper, parse_day
from replay_server import ReplayServer, Reply, refused_url

from largefedbench.data.windows import Window
from largefedbench.errors import SourceError

BASE = "/pwdata/scrapedxml"
COMMONS = "debates/debates2009-10-27d.xml"
SUPERSEDED = "debates/debates2009-10-27a.xml"
LORDS = "lordspages/daylord2009-10-29a.xml"
FIXTURE_OF = {
    COMMONS: "twfy_debates2009-10-27d.xml",
    SUPERSEDED: "twfy_debates2009-10-27a.xml",
    LORDS: "twfy_daylord2009-10-29a.xml",
}
N_COMMONS, N_LORDS = 314, 123
COMMONS_REJECTED = Counter({"procedural": 20, "no_spoken_text": 6, "collective_speaker": 5})
LORDS_REJECTED = Counter({"procedural": 10, "collective_speaker": 1})
OCTOBER = Window.parse("2009-10", "2009-10", public_months=0)


def recorded(path: str) -> bytes:
    return fixture_path("uk_hansard", FIXTURE_OF[path]).read_bytes()


def recorded_listing() -> bytes:
    return fixture_path("uk_hansard", "twfy_debates_changedates.txt").read_bytes()


def debates_listing() -> bytes:
    """The recorded debates lines that name a recorded file."""
    lines = [l for l in recorded_listing().decode().splitlines() if l.endswith(("27a.xml", "27d.xml"))]
    assert lines == ["1256717977,debates2009-10-27a.xml", "1257841159,debates2009-10-27d.xml"]
    return ("\n".join(lines) + "\n").encode()


LORDS_LISTING = b"1256890716,daylord2009-10-29a.xml\n"


def site(debates: bytes | None = None, lords: bytes = LORDS_LISTING) -> dict[str, bytes]:
    """The recorded files at their real paths, plus the two listings."""
    files = {path: recorded(path) for path in FIXTURE_OF}
    files["debates/changedates.txt"] = debates if debates is not None else debates_listing()
    files["lordspages/changedates.txt"] = lords
    return files


class TwfyApp:
    """Serves a dict of files at ``/pwdata/scrapedxml/<path>``; anything else is 404."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def __call__(self, path: str, query: dict) -> Reply:
        body = self.files.get(path.removeprefix(BASE + "/")) if path.startswith(BASE + "/") else None
        if body is None:
            return Reply(404, b"<html>Not Found</html>")
        return Reply(200, body, {"Content-Type": "text/xml" if path.endswith(".xml") else "text/plain"})


def scraper(srv, sleeps: list | None = None, **kw) -> UkHansardScraper:
    s = UkHansardScraper.create(
        base_url=srv.url + BASE, settings=HttpSettings(rate_limit=1000, backoff_base=0.01), **kw
    )
    s.client.sleep = (sleeps if sleeps is not None else []).append
    return s


def by_gid(records) -> dict:
    return {r.id.rsplit("/", 1)[1]: r for r in records}


def served(srv: ReplayServer) -> list[str]:
    return [p.removeprefix(BASE + "/") for p in srv.paths()]


# --- end to end ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def october(tmp_path_factory):
    """One end-to-end refresh of October 2009 (own raw cache), shared by the read-only tests below."""
    with ReplayServer(TwfyApp(site())) as srv:
        recs, rejected = scraper(srv, root=tmp_path_factory.mktemp("uk_october")).fetch(OCTOBER, progress=False)
        return recs, rejected, served(srv)


def test_latest_versions_of_the_window_end_to_end(october):
    recs, rejected, paths = october
    assert paths == ["debates/changedates.txt", COMMONS, "lordspages/changedates.txt", LORDS]  # never 27a
    assert Counter(r.chamber for r in recs) == Counter({"Commons": N_COMMONS, "Lords": N_LORDS})
    assert rejected == COMMONS_REJECTED + LORDS_REJECTED
    assert len({r.id for r in recs}) == len(recs)
    assert not any("2009-10-27a." in r.id for r in recs)
    assert {r.date for r in recs} == {"2009-10-27", "2009-10-29"}
    assert {(r.source, r.country, r.license, r.language) for r in recs} == {
        ("uk", "GBR", "Open Parliament Licence v3.0", "en")
    }
    assert all(r.text and r.speaker and r.speaker_id for r in recs)
    # Every Commons speech kept or counted: 345 in the file.
    assert len(re.findall(rb"<speech ", recorded(COMMONS))) == N_COMMONS + sum(COMMONS_REJECTED.values()) == 345
    assert len(re.findall(rb"<speech ", recorded(LORDS))) == N_LORDS + sum(LORDS_REJECTED.values()) == 134


def test_commons_speech_boundaries_speakers_and_titles(october):
    recs = october[0]
    commons = [r for r in recs if r.chamber == "Commons"]
    first = commons[0]
    assert first.id == "uk:uk.org.publicwhip/debate/2009-10-27d.141.9"
    assert (first.speaker, first.speaker_id) == ("Angela Watkinson", "uk.org.publicwhip/member/1891")
    assert first.title == "Contingency Arrangements (Fire Service)"
    assert (
        first.text
        == "What role his Department plays in making contingency arrangements in the event of industrial action by the fire service."
    )
    assert first.url.endswith("/cm091027/debtext/91027-0001.htm#09102772000375")
    s = by_gid(commons)
    assert s["2009-10-27d.141.10"].speaker == "John Denham"
    assert len({r.speaker for r in commons}) == 100
    # The name Hansard adds to a constituency reference is not spoken.
    assert "the hon. Member for Upminster, who asked the first question" in s["2009-10-27d.142.0"].text
    assert "(Angela Watkinson)" not in s["2009-10-27d.142.0"].text
    # Inline "[Interruption.]" notes go; the speech around them stays one client.
    mcgrady = s["2009-10-27d.225.1"]
    assert (
        mcgrady.speaker == "Eddie McGrady" and mcgrady.title == "[Un-allotted Half Day] — Parading in Northern Ireland"
    )
    assert mcgrady.text.startswith(
        "Just give me a moment. I will come back to the hon. Member. That is where we are at."
    )
    assert "Interruption" not in mcgrady.text
    # Motion text and the recorded business after "Question put and agreed to." are not the speaker's.
    harris = s["2009-10-27d.164.2"].text
    assert harris.startswith("There has been and continues to be much debate surrounding the operation of CCTV")
    assert harris.endswith("such monitoring is not only effective but worth the investment.")
    assert (
        "Question put" not in harris
        and "accordingly presented the Bill" not in harris
        and "I beg to move" not in harris
    )
    pritchard = s["2009-10-27d.258.7"].text
    assert pritchard.endswith("the petition will be taken very seriously by the Secretary of State.")
    assert "Petitioners remain" not in pritchard and "P000405" not in pritchard
    assert "Official Report" not in s["2009-10-27d.149.5"].text
    # "rose—", motion-only speeches, collective speakers and procedural items are no clients.
    for gid in (
        "2009-10-27d.162.0",
        "2009-10-27d.199.8",
        "2009-10-27d.167.3",
        "2009-10-27d.209.2",
        "2009-10-27d.141.7",
    ):
        assert gid not in s
    assert not any(r.speaker in ("Hon. Members", "Several hon. Members") for r in commons)


def test_lords_speech_boundaries_speakers_and_titles(october):
    recs = october[0]
    lords = [r for r in recs if r.chamber == "Lords"]
    assert len({r.speaker for r in lords}) == 56
    s = by_gid(lords)
    q = s["2009-10-29a.1265.1"]
    assert (q.speaker, q.speaker_id, q.date) == (
        "Lord James of Blackheath",
        "uk.org.publicwhip/lord/100932",
        "2009-10-29",
    )
    assert q.title == "Government: Debts — Question"
    assert q.url == "http://www.publications.parliament.uk/pa/ld200809/ldhansrd/text/91029-0001.htm#09102929000729"
    # Printed amendment texts after "Amendment 96 withdrawn." / "Moved by ..." are not Lord Bach's words.
    bach = s["2009-10-29a.1281.1"].text
    assert bach.endswith("The suitable course now is for me to beg leave to withdraw the amendment.")
    assert "Clause 144" not in bach and "withdrawn." not in bach and "Borrie" not in bach
    erroll = s["2009-10-29a.1308.0"].text
    assert erroll.endswith("this is certainly a move in the right direction.") and "62A" not in erroll
    assert s["2009-10-29a.1281.2"].speaker == "Lord Borrie"
    assert not any(r.speaker == "Noble Lords" for r in lords)


def test_dtd_entities_are_resolved(october):
    recs = october[0]
    s = by_gid(recs)
    assert "abolition of the Parades Commission\u2014full stop." in s["2009-10-27d.225.1"].text  # &mdash;
    assert (
        "spend \u00a364 billion a year\u2014equivalent to more than \u00a32,500" in s["2009-10-27d.152.7"].text
    )  # &pound;
    assert 'Plattform "Arzte f\u00fcr das Leben"' in s["2009-10-27d.214.2"].text  # &uuml; and &quot;
    assert "El Ni\u00f1o rains" in s["2009-10-29a.1268.3"].text and "\u00a3100 billion" in s["2009-10-29a.1268.3"].text
    assert not any(re.search(r"&[a-z]+;", r.text) for r in recs)


def test_declared_iso_8859_1_bytes_are_decoded():
    body = recorded(COMMONS)
    assert b'encoding="ISO-8859-1"' in body[:60]
    raw = body.replace(b"&pound;64 billion", b"\xa364 billion")  # the same character as a Latin-1 byte
    speech = next(sp for sp in parse_day(raw).speeches if sp.id.endswith("27d.152.7"))
    assert "\u00a364 billion" in speech.paragraphs[0]


def test_person_id_is_preferred_to_speakerid():
    body = recorded(LORDS).replace(
        b'speakerid="uk.org.publicwhip/lord/100932"',
        b'person_id="uk.org.publicwhip/person/13258" speakerid="uk.org.publicwhip/lord/100932"',
        1,
    )
    speeches = {sp.id: sp for sp in parse_day(body).speeches}
    assert speeches["uk.org.publicwhip/lords/2009-10-29a.1265.1"].person_id == "uk.org.publicwhip/person/13258"
    assert speeches["uk.org.publicwhip/lords/2009-10-29a.1265.2"].person_id == "uk.org.publicwhip/lord/100983"


def test_an_italic_note_mid_speech_is_dropped_but_recorded_business_ends_the_speech():
    """Variants of Peter Robinson's speech (27d.214.2) with an italic paragraph before its 4th ``<p>``.

    Its ``<p>`` 1-2 are motion text (``pwmotiontext``), 3 opens the spoken text ("I should perhaps begin").
    """
    anchor = b'<p pid="d.214.2/4">'
    body = recorded(COMMONS)
    assert body.count(anchor) == 1

    def robinson(italic: bytes) -> list[str]:
        variant = body.replace(anchor, b'<p pid="x" class="italic">' + italic + b"</p>\n" + anchor)
        return next(sp for sp in parse_day(variant).speeches if sp.id.endswith("27d.214.2")).paragraphs

    original = next(sp for sp in parse_day(body).speeches if sp.id.endswith("27d.214.2")).paragraphs
    assert len(original) == 36  # 38 paragraphs, the two pwmotiontext ones dropped
    assert robinson(b" [<i>Interruption.</i>] ") == original
    assert robinson(b"Question put and agreed to.") == original[:1]
    assert original[0].startswith("I should perhaps begin") and original[1].startswith("The wording of the motion")


def test_license_note_carries_the_attribution():
    assert ATTRIBUTION == "Contains Parliamentary information licensed under the Open Parliament Licence v3.0."
    assert ATTRIBUTION in UkHansardScraper.license_note
    assert (UkHansardScraper.source, UkHansardScraper.dataset, UkHansardScraper.url_env) == (
        "uk",
        "congress",
        "LFB_TWFY_URL",
    )


# --- discovery and versions ----------------------------------------------------------------------
def test_recorded_listing_picks_the_highest_letter_and_reports_missing_days():
    """The verbatim recorded listing names 26a/b, 27a-d, 28a-c, 29a; only 27d was recorded."""
    with ReplayServer(TwfyApp(site(debates=recorded_listing()))) as srv:
        recs, rejected = scraper(srv).fetch(Window.parse("2009-10-27", "2009-10-27", public_months=0), progress=False)
        assert served(srv) == ["debates/changedates.txt", COMMONS, "lordspages/changedates.txt"]
        srv.requests.clear()
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
        assert served(srv) == [  # 27d is in the raw cache from the first run
            "debates/changedates.txt",
            "debates/debates2009-10-26b.xml",
            "debates/debates2009-10-28c.xml",
            "debates/debates2009-10-29a.xml",
            "lordspages/changedates.txt",
            LORDS,
        ]
    assert rejected["missing_day_file"] == 3  # 26b, 28c, 29a answer 404: reported and skipped
    assert len(recs) == N_COMMONS + N_LORDS


def test_a_stale_listing_follows_the_redirects_of_a_superseded_file(tmp_path):
    """A listing written before 27b existed names 27a as the last version, and 27a says latest="no"."""
    stale = b"".join(l + b"\n" for l in recorded_listing().splitlines() if int(l.split(b",")[0]) < 1256804448)
    assert (
        stale
        == b"1256631461,debates2009-10-26a.xml\n1256717977,debates2009-10-27a.xml\n1256804436,debates2009-10-28a.xml\n"
    )
    # As recorded, 27a redirects to 27b, which the replay does not have: the day is skipped and reported.
    with ReplayServer(TwfyApp(site(debates=stale))) as srv:
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
        assert "debates/debates2009-10-27b.xml" in served(srv)
    assert {r.chamber for r in recs} == {"Lords"}
    assert rejected["superseded_version"] == 2 and rejected["no_latest_version"] == 1
    # With its redirects pointing at the recorded 27d, that version is found and used.
    to_d = recorded(SUPERSEDED).replace(
        b'newgid="uk.org.publicwhip/debate/2009-10-27b.', b'newgid="uk.org.publicwhip/debate/2009-10-27d.'
    )
    with ReplayServer(TwfyApp({**site(debates=stale), SUPERSEDED: to_d})) as srv:
        recs, rejected = scraper(srv, root=tmp_path).fetch(OCTOBER, progress=False)  # a fresh raw cache
        assert served(srv) == [
            "debates/changedates.txt",
            "debates/debates2009-10-26a.xml",
            SUPERSEDED,
            COMMONS,
            "debates/debates2009-10-28a.xml",
            "lordspages/changedates.txt",
            LORDS,
        ]
    assert len(recs) == N_COMMONS + N_LORDS and not any("27a." in r.id for r in recs)
    assert rejected["superseded_version"] == 2 and rejected["missing_day_file"] == 2  # 26a, 28a not recorded


def test_records_outside_the_window_are_not_fetched_or_returned():
    with ReplayServer(TwfyApp(site())) as srv:
        recs, _ = scraper(srv).fetch(Window.parse("2009-10-28", "2009-10-31", public_months=0), progress=False)
        assert COMMONS not in served(srv)
    assert {r.date for r in recs} == {"2009-10-29"} and len(recs) == N_LORDS
    with ReplayServer(TwfyApp(site())) as srv:
        recs, _ = scraper(srv).fetch(Window.parse("2009-11", "2009-12", public_months=0), progress=False)
        assert served(srv) == ["debates/changedates.txt", "lordspages/changedates.txt"]
    assert recs == []
    # The public period before the window is fetched too; the snapshot builder classifies by date.
    window = Window.parse("2009-10-28", "2009-10-31", public_months=1)
    with ReplayServer(TwfyApp(site())) as srv:
        recs, _ = scraper(srv).fetch(window, progress=False)
    assert Counter(window.classify(r.day) for r in recs) == Counter({"public": N_COMMONS, "private": N_LORDS})


def test_malformed_and_unidentified_speeches_are_dropped_and_counted():
    body = recorded(COMMONS)
    body = body.replace(b'<speech id="uk.org.publicwhip/debate/2009-10-27d.141.11" ', b"<speech ", 1)
    body = body.replace(b'speakername="John Denham" colnum="142"', b'colnum="142"', 1)  # 142.0
    mcdonnell = b'speakerid="uk.org.publicwhip/member/1624" speakername="John McDonnell" colnum="141"'  # 141.13
    assert body.count(mcdonnell) == 1
    body = body.replace(mcdonnell, b'speakerid="unknown" speakername="John McDonnell" colnum="141"')
    with ReplayServer(TwfyApp({**site(), COMMONS: body})) as srv:
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
    assert rejected == COMMONS_REJECTED + LORDS_REJECTED + Counter(malformed_speech=2, unidentified_speaker=1)
    assert len(recs) == N_COMMONS - 3 + N_LORDS
    kept = by_gid(recs)
    assert "2009-10-27d.142.0" not in kept and "2009-10-27d.141.13" not in kept and "2009-10-27d.141.12" in kept


# --- faults --------------------------------------------------------------------------------------
def test_429_with_retry_after_is_honoured():
    sleeps: list[float] = []
    with ReplayServer(TwfyApp(site())) as srv:
        srv.fail_next("/daylord2009-10-29a.xml", Reply(429, b"slow down", {"Retry-After": "7"}))
        recs, _ = scraper(srv, sleeps).fetch(OCTOBER, progress=False)
        assert served(srv).count(LORDS) == 2
    assert 7.0 in sleeps
    assert len(recs) == N_COMMONS + N_LORDS


def test_5xx_then_success():
    sleeps: list[float] = []
    with ReplayServer(TwfyApp(site())) as srv:
        srv.fail_next("/debates2009-10-27d.xml", Reply(502, b"bad gateway"), times=2)
        srv.fail_next("/changedates.txt", Reply(503, b"busy"))
        recs, rejected = scraper(srv, sleeps).fetch(OCTOBER, progress=False)
        assert served(srv).count(COMMONS) == 3 and served(srv).count("debates/changedates.txt") == 2
    assert len(recs) == N_COMMONS + N_LORDS and rejected == COMMONS_REJECTED + LORDS_REJECTED
    assert len(sleeps) >= 3


def test_empty_body_is_retried_never_read_as_an_empty_day():
    with ReplayServer(TwfyApp(site())) as srv:
        srv.fail_next("/debates2009-10-27d.xml", Reply(200, b""), times=2)
        srv.fail_next("lordspages/changedates.txt", Reply(200, b"  \n"))
        recs, _ = scraper(srv).fetch(OCTOBER, progress=False)
    assert len(recs) == N_COMMONS + N_LORDS


def test_truncated_xml_is_downloaded_again():
    with ReplayServer(TwfyApp(site())) as srv:
        body = recorded(LORDS)
        srv.fail_next("/daylord2009-10-29a.xml", Reply(200, body[: len(body) // 2]))
        srv.fail_next("debates/changedates.txt", Reply(200, debates_listing()[:-12]))  # cut inside the last name
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
        assert served(srv).count(LORDS) == 2 and served(srv).count("debates/changedates.txt") == 2
    assert len(recs) == N_COMMONS + N_LORDS and "malformed_day_file" not in rejected


def test_a_day_file_that_stays_malformed_is_reported_and_skipped(lfb_home, caplog):
    body = recorded(LORDS)
    with ReplayServer(TwfyApp({**site(), LORDS: body[: len(body) // 3]})) as srv:
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
        assert served(srv).count(LORDS) == 3  # the client's parse attempts
    assert rejected["malformed_day_file"] == 1
    assert len(recs) == N_COMMONS  # the Commons day already fetched is kept
    assert any(f"{srv.url}{BASE}/{LORDS}" in m and "not well-formed" in m for m in caplog.messages)
    assert list(lfb_home.rglob("daylord2009-10-29a.xml.bad")), "the malformed response is kept for inspection"


def test_a_html_page_instead_of_xml_is_not_a_day():
    with ReplayServer(TwfyApp({**site(), LORDS: b"<html><body>Service busy</body></html>"})) as srv:
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
    assert rejected["malformed_day_file"] == 1 and len(recs) == N_COMMONS


def test_connection_refused_gives_a_clear_error():
    class Refused:
        url = refused_url()

    with pytest.raises(SourceError) as err:
        scraper(Refused).fetch(OCTOBER, progress=False)
    msg = str(err.value)
    assert "/pwdata/scrapedxml/debates/changedates.txt" in msg and "ConnectionError" in msg and "resume" in msg


def test_a_killed_refresh_resumes_from_the_stored_responses():
    with ReplayServer(TwfyApp(site())) as srv:
        srv.fail_next("/daylord2009-10-29a.xml", Reply(503, b"down"), times=99)
        with pytest.raises(SourceError) as err:
            scraper(srv).fetch(OCTOBER, progress=False)
        assert f"{BASE}/{LORDS}" in str(err.value) and "HTTP 503" in str(err.value)
        assert COMMONS in served(srv)
        srv._faults.clear()
        srv.requests.clear()
        recs, rejected = scraper(srv).fetch(OCTOBER, progress=False)
        # The listings are always read afresh; the Commons day comes from the raw cache.
        assert served(srv) == ["debates/changedates.txt", "lordspages/changedates.txt", LORDS]
        srv.requests.clear()
        again, _ = scraper(srv, refresh=True).fetch(OCTOBER, progress=False)
        assert served(srv) == ["debates/changedates.txt", COMMONS, "lordspages/changedates.txt", LORDS]
    assert len(recs) == N_COMMONS + N_LORDS and rejected == COMMONS_REJECTED + LORDS_REJECTED
    assert [r.to_dict() for r in again] == [r.to_dict() for r in recs]


# --- into a snapshot -----------------------------------------------------------------------------
def test_refresh_builds_a_congress_snapshot_with_these_counts(lfb_home):
    """``lfb refresh --sources uk`` (the library call behind it) against the replay: the manifest agrees."""
    from largefedbench.scrapers.refresh import RefreshPlan, refresh

    from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings

    with ReplayServer(TwfyApp(site())) as srv:
        span = SpanSettings(tokenizer=OFFLINE_SPAN_TOKENIZER)
        plan = RefreshPlan(window=OCTOBER, sources=["uk"], span=span, base_urls={"uk": srv.url + BASE})
        (result,) = refresh(plan, progress=False)
    manifest = result.manifest
    assert manifest["dataset"] == "congress"
    assert manifest["counts"]["records_in"] == N_COMMONS + N_LORDS
    uk_rejected = {k.removeprefix("uk:"): v for k, v in manifest["rejected"].items() if k.startswith("uk:")}
    assert uk_rejected == dict(COMMONS_REJECTED + LORDS_REJECTED)
    assert ATTRIBUTION in manifest["sources"]["uk"]["license_note"]
    assert set(manifest["licenses"]) == {"Open Parliament Licence v3.0"}
