"""The US Congressional Record client end to end against a local replay of real recorded GovInfo files.

The replay answers at the API's real paths:

- ``/published/{from}/{to}?collection=CREC&offsetMark=…`` in the shape of the recorded package listing
  (``govinfo_collections_CREC-sample.json``: ``count``, ``message``, ``nextPage``, ``previousPage``,
  ``packages[]`` with ``packageId``/``lastModified``/``packageLink``), paged with an opaque ``offsetMark`` in an
  absolute ``nextPage`` URL as sources.md §2 documents;
- ``/packages/{pkg}/granules?offsetMark=…`` in the shape of the recorded granule list
  (``govinfo_granules_CREC-2018-01-03.json``), either that real list or one derived from it for the recorded
  day 1997-01-28 (the three recorded granules, titled as the reference parses' ``doc_title``);
- ``/packages/{pkg}/granules/{granuleId}/htm`` with the recorded granule pages, byte for byte (404 otherwise).

Expected speech boundaries and speakers come from the reference parses of the same files
(``parsed_congressionalrecord_*.json``) and from reading the files: 13, 8 and 11 speeches in PgS697, PgS700 and
PgS715 (10 by the presiding officer, 7 made of procedural formulas only, 15 Members' speeches kept).

No House granule page was recorded: the House rules (one-minute notes, ``{time}``, ``[[Page H…]]``, bracketed
notes, yielding time, ``<bullet>`` statements, inserted letters) are tested on a page built from a recorded
page's HTML and header with the House notation quoted in sources.md §2 (``house_granule``), not on a recording.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import re
from collections import Counter
from urllib.parse import urlencode

import pytest
from conftest import fixture_path
from largefedbench.scrapers.http import HttpSettings
from largefedbench.scrapers.us_congress import (
    LICENSE,
    SPEAKER_TAG,
    UsCongressScraper,
    clean_speech,
    granule_chamber,
    is_recorder,
    next_page_request,
    parse_granule,
)
from replay_server import ReplayServer, Reply, refused_url

from largefedbench.data.windows import Window
from largefedbench.errors import SourceError

DAY = "1997-01-28"
PKG = f"CREC-{DAY}"
FILES = ("PgS697", "PgS700", "PgS715")
GRANULES = [f"{PKG}-pt1-{f}" for f in FILES]
SPEECHES_PER_FILE = {"PgS697": 13, "PgS700": 8, "PgS715": 11}
KEY = "test-key-4f1c9a"
REAL = "https://api.govinfo.gov"
WINDOW = Window.parse("1997-01", "1997-01", public_months=0)
_PUBLISHED = re.compile(r"^/published/(\d{4}-\d{2}-\d{2})/(\d{4}-\d{2}-\d{2})$")
_GRANULES = re.compile(r"^/packages/(CREC-[\d-]+)/granules$")
_HTM = re.compile(r"^/packages/(CREC-[\d-]+)/granules/([A-Za-z0-9-]+)/htm$")


# --- the recorded files --------------------------------------------------------------------------------
def htm(name: str) -> bytes:
    return fixture_path("us_congress", f"CREC-1997-01-28-pt1-{name}.htm").read_bytes()


def reference(name: str) -> dict:
    return json.loads(fixture_path("us_congress", f"parsed_congressionalrecord_CREC-1997-01-28-pt1-{name}.json").read_text())


def listing_sample() -> dict:
    return json.loads(fixture_path("us_congress", "govinfo_collections_CREC-sample.json").read_text())


def real_granule_list() -> dict:
    return json.loads(fixture_path("us_congress", "govinfo_granules_CREC-2018-01-03.json").read_text())


def granule_entry(pkg: str, granule_id: str, title: str) -> dict:
    return {"title": title, "granuleId": granule_id,
            "granuleLink": f"{REAL}/packages/{pkg}/granules/{granule_id}/summary"}


def recorded_day_granules() -> list[dict]:
    """The granule list of 1997-01-28 as GovInfo shapes it, holding the three recorded granules."""
    return [granule_entry(PKG, f"{PKG}-pt1-{f}", reference(f)["doc_title"]) for f in FILES]


def recorded_pages() -> dict[str, bytes]:
    return {f"{PKG}-pt1-{f}": htm(f) for f in FILES}


# --- the replay ----------------------------------------------------------------------------------------
def _mark(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode().rstrip("=")


def _offset(mark: str) -> int:
    if mark == "*":
        return 0
    return int(base64.urlsafe_b64decode(mark + "=" * (-len(mark) % 4)).decode().split(":")[1])


class GovinfoApp:
    """Answers the three GovInfo paths from recorded (or recorded-shape) data.

    ``days`` maps a package id to its granule entries; ``pages`` maps granule ids to htm bodies. The server
    chooses its page sizes (``listing_page``/``granule_page``), as the live API may. ``echo_key`` puts an
    ``api_key`` into every ``nextPage`` (what GovInfo does when the key came as a query parameter).
    """

    def __init__(self, days: dict[str, list[dict]], pages: dict[str, bytes], *, listing_page: int = 100,
                 granule_page: int = 100, honour_dates: bool = True, echo_key: str | None = None) -> None:
        self.days, self.pages = days, pages
        self.listing_page, self.granule_page = listing_page, granule_page
        self.honour_dates, self.echo_key = honour_dates, echo_key

    def _next(self, path: str, query: dict, offset: int, size: int, total: int) -> str | None:
        if offset + size >= total:
            return None
        params = {**{k: v for k, v in query.items() if k != "offsetMark"}, "offsetMark": _mark(offset + size)}
        if self.echo_key:
            params["api_key"] = self.echo_key
        return f"{REAL}{path}?{urlencode(params)}"

    def __call__(self, path: str, query: dict) -> Reply:
        if "offsetMark" not in query and (_PUBLISHED.match(path) or _GRANULES.match(path)):
            return Reply(400, b'{"message": "offsetMark or offset is required"}')
        if m := _PUBLISHED.match(path):
            if query.get("collection") != "CREC":
                return Reply(400, b'{"message": "collection is required"}')
            ids = sorted(p for p in self.days if not self.honour_dates or m[1] <= p[5:15] <= m[2])
            offset = _offset(query["offsetMark"])
            body = {**listing_sample(), "count": len(ids),
                    "nextPage": self._next(path, query, offset, self.listing_page, len(ids)),
                    "packages": [{"packageId": p, "lastModified": f"{p[5:15]}T12:00:00Z",
                                  "packageLink": f"{REAL}/packages/{p}/summary"}
                                 for p in ids[offset : offset + self.listing_page]]}
            return Reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        if m := _GRANULES.match(path):
            if m[1] not in self.days:
                return Reply(404, b'{"message": "package not found"}')
            entries = self.days[m[1]]
            offset = _offset(query["offsetMark"])
            body = {**{k: v for k, v in real_granule_list().items() if k != "granules"}, "count": len(entries),
                    "offset": 0, "pageSize": self.granule_page,
                    "nextPage": self._next(path, query, offset, self.granule_page, len(entries)),
                    "granules": entries[offset : offset + self.granule_page]}
            return Reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        if (m := _HTM.match(path)) and m[2] in self.pages:
            return Reply(200, self.pages[m[2]], {"Content-Type": "text/html"})
        return Reply(404, b"not found")


def recorded_app(**kw) -> GovinfoApp:
    return GovinfoApp({PKG: recorded_day_granules()}, recorded_pages(), **kw)


def scraper(url: str, sleeps: list | None = None, **kw) -> UsCongressScraper:
    s = UsCongressScraper.create(base_url=url, settings=HttpSettings(rate_limit=1000, backoff_base=0.01), **kw)
    if sleeps is not None:
        s.client.sleep = sleeps.append
    return s


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("GOVINFO_API_KEY", KEY)


def listing_path(start: str = "1997-01-01", end: str = "1997-01-31") -> str:
    return f"/published/{start}/{end}"


def htm_path(granule_id: str, pkg: str = PKG) -> str:
    return f"/packages/{pkg}/granules/{granule_id}/htm"


EXPECTED_SPEAKERS = [
    # PgS697: GORTON's speech; BOND's and MURKOWSKI's "I thank the Chair." (the rest is quorum procedure)
    ("Mr. GORTON", 1, 697), ("Mr. BOND", 5, 697), ("Mr. MURKOWSKI", 10, 697),
    # PgS700: the LOTT/WARNER colloquy, every turn spoken
    ("Mr. LOTT", 1, 700), ("Mr. WARNER", 2, 700), ("Mr. LOTT", 3, 700), ("Mr. WARNER", 4, 700),
    ("Mr. LOTT", 5, 700), ("Mr. WARNER", 6, 700), ("Mr. LOTT", 7, 700), ("Mr. WARNER", 8, 700),
    # PgS715: WARNER's request, DOMENICI's inquiry and request, THOMPSON's thanks
    ("Mr. WARNER", 1, 715), ("Mr. DOMENICI", 6, 715), ("Mr. DOMENICI", 8, 715), ("Mr. THOMPSON", 11, 715),
]


# --- end to end ----------------------------------------------------------------------------------------
def test_end_to_end_against_the_recorded_day():
    with ReplayServer(recorded_app()) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
        paths = srv.paths()
        queries = [q for _, q, _ in srv.requests]
    assert paths == [listing_path(), f"/packages/{PKG}/granules", *(htm_path(g) for g in GRANULES)]
    assert queries[0] == {"collection": "CREC", "offsetMark": "*", "pageSize": "1000"}
    assert queries[1] == {"offsetMark": "*", "pageSize": "1000"}
    assert [(r.speaker, r.id) for r in recs] == [
        (speaker, f"us:{PKG}-pt1-PgS{page}:{turn}") for speaker, turn, page in EXPECTED_SPEAKERS
    ]
    assert rejected == Counter({"presiding_officer": 10, "procedural": 7})
    gorton = recs[0]
    assert gorton.date == DAY and gorton.country == "USA" and gorton.chamber == "Senate"
    assert gorton.source == "us" and gorton.license == LICENSE == "public-domain (17 U.S.C. 105)"
    assert gorton.title == "ANTITERRORISM AND EFFECTIVE DEATH PENALTY ACT OF 1996"
    assert gorton.url == f"https://www.govinfo.gov/content/pkg/{PKG}/html/{PKG}-pt1-PgS697.htm"
    assert {r.title for r in recs[3:11]} == {"SENATE SCHEDULE"}
    assert len({r.id for r in recs}) == len(recs)


def test_cleaned_texts_are_what_the_members_said():
    with ReplayServer(recorded_app()) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
    text = {r.id: r.text for r in recs}
    gorton = text[f"us:{PKG}-pt1-PgS697:1"]
    assert gorton.startswith("Mr. President, this is to express my deep concern over a decision President Clinton")
    # the closing quorum formula is procedure; GPO's ``…'' quotes, -- dashes and * * * become text
    assert gorton.endswith("reverse his exemption of Sudan from the list of nations barred from doing business with American firms.")
    assert "absence of a quorum" not in gorton
    assert 'resolve "to hold fast against the forces of violence and division ... guard against them' in gorton
    assert "the American people \u2014 a promise never to give in" in gorton
    assert "``" not in gorton and "--" not in gorton
    # the parenthetical note after "I thank the Chair." is not spoken
    assert text[f"us:{PKG}-pt1-PgS697:5"] == "I thank the Chair."
    assert text[f"us:{PKG}-pt1-PgS700:6"] == "Mr. Hantman."
    assert text[f"us:{PKG}-pt1-PgS700:5"].endswith("I know we have come up with a very strong nominee \u2014")
    # WARNER's request ends where the recorder's "There being no objection" and the inserted rules begin
    warner = text[f"us:{PKG}-pt1-PgS715:1"]
    assert warner.endswith("I ask unanimous consent that they be printed in the Record.")
    assert "regular meeting dates" not in warner and "There being no objection" not in warner
    assert text[f"us:{PKG}-pt1-PgS715:6"] == "Parliamentary inquiry. Are we in morning business?"
    assert text[f"us:{PKG}-pt1-PgS715:11"] == "Thank you, Mr. President."
    for t in text.values():
        assert not re.search(r"\[\[Page|<bullet>|\{time\}|\(The remarks of|\n|  ", t)


@pytest.mark.parametrize("name", FILES)
def test_speech_boundaries_and_speakers_agree_with_the_reference_parse(name):
    granule = parse_granule(htm(name))
    ref = [c for c in reference(name)["content"] if c["kind"] == "speech"]
    assert len(granule.speeches) == len(ref) == SPEECHES_PER_FILE[name]
    assert [s.speaker for s in granule.speeches] == [c["speaker"] for c in ref]
    for speech, item in zip(granule.speeches, ref):
        ref_text = " ".join(item["text"].split())
        assert ref_text.startswith(f"{item['speaker']}. ")
        ref_body = ref_text[len(item["speaker"]) + 2 :]
        ours = " ".join(speech.text.split())
        # the reference keeps the "(The remarks of … are located in today's Record …)" notes; we drop them
        note = re.search(r" ?\(The remarks of [^()]*\)$", ref_body)
        spoken = ref_body[: note.start()] if note else ref_body
        assert ours[:60] == spoken[:60] and ours[-40:] == spoken[-40:], (speech.speaker, speech.turn)
        assert len(ours) == len(spoken)
    assert granule.title == reference(name)["title"]
    assert granule.chamber == "Senate" and granule.pages == reference(name)["header"]["pages"]


def test_presiding_officer_turns_are_parsed_then_not_kept():
    speakers = [s.speaker for s in parse_granule(htm("PgS697")).speeches if s.presiding]
    assert speakers == ["The PRESIDING OFFICER (Mr. Kyl)", "The PRESIDING OFFICER", "The PRESIDING OFFICER",
                        "The PRESIDING OFFICER (Mr. Ashcroft)", "The PRESIDING OFFICER"]


# --- granule classes -----------------------------------------------------------------------------------
def test_only_house_and_senate_granules_of_the_real_granule_list_are_fetched():
    real = real_granule_list()["granules"]
    letters = Counter(re.search(r"-Pg([A-Z])", g["granuleId"])[1] for g in real)
    assert letters == Counter({"S": 63, "H": 24, "D": 7, "E": 3})
    pkg = "CREC-2018-01-03"
    app = GovinfoApp({pkg: real}, {})  # no granule page of that day was recorded: every htm is a 404
    window = Window.parse("2018-01", "2018-01", public_months=0)
    with ReplayServer(app) as srv:
        recs, rejected = scraper(srv.url).fetch(window, progress=False)
        fetched = [p.split("/")[4] for p in srv.paths() if p.endswith("/htm")]
    kept = [g["granuleId"] for g in real if re.search(r"-Pg[HS]", g["granuleId"])]
    assert fetched == kept and len(kept) == 87
    assert not any(re.search(r"-Pg[ED]", g) for g in fetched)
    assert recs == []
    assert rejected == Counter({"missing_granule": 87, "daily_digest_granule": 7, "extensions_granule": 3})


def test_granule_class_decides_when_present():
    entries = recorded_day_granules()
    entries[0]["granuleClass"] = "SENATE"
    entries[1]["granuleClass"] = "EXTENSIONS"  # an S page filed under Extensions of Remarks is not fetched
    entries[2]["granuleClass"] = "HOUSE"
    with ReplayServer(GovinfoApp({PKG: entries}, recorded_pages())) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
        assert htm_path(GRANULES[1]) not in srv.paths()
    assert rejected["extensions_granule"] == 1
    assert {r.chamber for r in recs if ":" + GRANULES[2] + ":" in r.id} == {"House"}
    assert granule_chamber({"granuleId": "CREC-2024-09-09-pt1-PgD901", "granuleClass": "dailydigest"}) == (
        None, "daily_digest_granule")
    assert granule_chamber({"granuleId": "CREC-2024-09-09-pt1-PgH5001-3"}) == ("House", None)
    assert granule_chamber({"granuleId": "CREC-2024-09-09-pt1-PgS6001", "granuleClass": "MYSTERY"}) == (
        None, "unknown_granule_class")


# --- discovery: paging, window, key --------------------------------------------------------------------
def test_listing_and_granule_lists_follow_next_page_without_leaking_the_key(caplog, lfb_home):
    caplog.set_level(logging.DEBUG)
    days = {"CREC-1997-01-27": [], PKG: recorded_day_granules(), "CREC-1997-01-29": []}
    app = GovinfoApp(days, recorded_pages(), listing_page=1, granule_page=1, echo_key=KEY)
    with ReplayServer(app) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        requests = srv.requests
    listing = [q for p, q, _ in requests if p == listing_path()]
    assert [q["offsetMark"] for q in listing] == ["*", _mark(1), _mark(2)]
    granule_pages = [q["offsetMark"] for p, q, _ in requests if p == f"/packages/{PKG}/granules"]
    assert granule_pages == ["*", _mark(1), _mark(2)]
    assert len(recs) == 15
    for path, query, headers in requests:
        assert headers.get("X-Api-Key") == KEY
        assert "api_key" not in query and KEY not in path
    assert not [p for p in lfb_home.rglob("*") if KEY in str(p)]
    assert KEY not in caplog.text


def test_next_page_urls_are_reissued_against_the_configured_base():
    url = "https://api.govinfo.gov/published/2024-09-01/2024-09-30?offsetMark=AoJ%2Bq&pageSize=100&collection=CREC&api_key=SECRET"
    assert next_page_request(url, "http://127.0.0.1:8000") == (
        "published/2024-09-01/2024-09-30", {"offsetMark": "AoJ+q", "pageSize": "100", "collection": "CREC"})
    sample = listing_sample()["nextPage"]  # the recorded, older offset-style nextPage
    assert next_page_request(sample, "http://proxy.example/govinfo") == (
        "collections/CREC/2018-04-01T00:00:00Z/2018-04-17T23:59:59Z", {"offset": "10", "pageSize": "10"})
    assert next_page_request("https://proxy.example/govinfo/packages/X/granules?offsetMark=b",
                             "https://proxy.example/govinfo")[0] == "packages/X/granules"


def test_demo_key_is_used_with_a_warning_when_no_key_is_set(monkeypatch, caplog):
    monkeypatch.delenv("GOVINFO_API_KEY")
    with ReplayServer(recorded_app()) as srv:
        with caplog.at_level(logging.WARNING):
            recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert {h.get("X-Api-Key") for _, _, h in srv.requests} == {"DEMO_KEY"}
    assert "DEMO_KEY" in caplog.text and "GOVINFO_API_KEY" in caplog.text and "30 requests an hour" in caplog.text
    assert len(recs) == 15


def test_default_pace_follows_the_hourly_limit_unless_a_rate_is_set(monkeypatch):
    monkeypatch.delenv("LFB_RATE_LIMIT")
    assert UsCongressScraper.create().client.settings.rate_limit == pytest.approx(1000 / 3600)
    monkeypatch.delenv("GOVINFO_API_KEY")
    assert UsCongressScraper.create().client.settings.rate_limit == pytest.approx(30 / 3600)
    assert UsCongressScraper.create(rate_limit=0.5).client.settings.rate_limit == 0.5  # --rate-limit
    monkeypatch.setenv("LFB_RATE_LIMIT", "2")
    assert UsCongressScraper.create().client.settings.rate_limit == 2.0
    assert UsCongressScraper.create(rate_limit=0.5).client.settings.rate_limit == 0.5  # the flag wins over the env


def test_records_outside_the_window_are_not_returned_nor_fetched():
    days = {"CREC-1996-12-30": recorded_day_granules(), PKG: recorded_day_granules(),
            "CREC-1997-02-03": recorded_day_granules()}
    with ReplayServer(GovinfoApp(days, recorded_pages(), honour_dates=False)) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        granule_lists = [p for p in srv.paths() if p.endswith("/granules")]
    assert granule_lists == [f"/packages/{PKG}/granules"]
    assert len(recs) == 15 and {r.date for r in recs} == {DAY}


def test_public_period_and_window_are_listed_month_by_month():
    window = Window.parse("1997-02", "1997-02", public_months=1)  # 1997-01 is the public period
    with ReplayServer(recorded_app()) as srv:
        recs, _ = scraper(srv.url).fetch(window, progress=False)
        listings = [p for p in srv.paths() if p.startswith("/published/")]
    assert listings == [listing_path(), listing_path("1997-02-01", "1997-02-28")]
    assert len(recs) == 15 and all(window.classify(r.day) == "public" for r in recs)


# --- faults --------------------------------------------------------------------------------------------
def test_429_with_retry_after_is_honoured():
    sleeps: list[float] = []
    with ReplayServer(recorded_app()) as srv:
        srv.fail_next("/htm", Reply(429, b'{"error": {"code": "OVER_RATE_LIMIT"}}', {"Retry-After": "7"}))
        recs, _ = scraper(srv.url, sleeps).fetch(WINDOW, progress=False)
        assert srv.paths().count(htm_path(GRANULES[0])) == 2
    assert 7.0 in sleeps
    assert len(recs) == 15


def test_5xx_then_success():
    sleeps: list[float] = []
    with ReplayServer(recorded_app()) as srv:
        srv.fail_next("/granules", Reply(503, b"Service Unavailable"), times=2)
        recs, _ = scraper(srv.url, sleeps).fetch(WINDOW, progress=False)
        assert srv.paths().count(f"/packages/{PKG}/granules") == 3
    backoffs = [d for d in sleeps if d >= 0.01]  # the rate limit's own waits are below 1/1000 s
    assert len(backoffs) == 2 and backoffs[1] > backoffs[0]  # exponential backoff
    assert len(recs) == 15


def test_empty_body_is_retried_never_read_as_an_empty_listing():
    with ReplayServer(recorded_app()) as srv:
        srv.fail_next("/published/", Reply(200, b""), times=2)
        recs, _ = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert srv.paths().count(listing_path()) == 3
    assert len(recs) == 15


def test_truncated_granule_page_is_fetched_again():
    body = htm("PgS700")
    with ReplayServer(recorded_app()) as srv:
        srv.fail_next(htm_path(GRANULES[1]), Reply(200, body[: len(body) // 2]))
        recs, rejected = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert srv.paths().count(htm_path(GRANULES[1])) == 2
    assert len(recs) == 15 and "malformed_granule" not in rejected


def test_a_granule_that_stays_truncated_is_reported_and_skipped_keeping_the_rest(caplog, lfb_home):
    pages = recorded_pages()
    pages[GRANULES[1]] = pages[GRANULES[1]][:1500]
    with ReplayServer(GovinfoApp({PKG: recorded_day_granules()}, pages)) as srv:
        with caplog.at_level(logging.WARNING):
            recs, rejected = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert srv.paths().count(htm_path(GRANULES[1])) == 3  # the client's parse attempts
    assert len(recs) == 3 + 4  # PgS697 and PgS715 kept
    assert rejected == Counter({"malformed_granule": 1, "presiding_officer": 10, "procedural": 7})
    assert f"{htm_path(GRANULES[1])}" in caplog.text and "truncated" in caplog.text
    assert list(lfb_home.rglob("*.bad")), "the malformed response is kept for inspection"


def test_a_day_whose_granule_list_stays_truncated_is_skipped_keeping_the_other_days(caplog):
    class BrokenDay(GovinfoApp):
        def __call__(self, path, query):
            reply = super().__call__(path, query)
            if path == "/packages/CREC-1997-01-29/granules":
                return Reply(200, reply.body[:40])
            return reply

    days = {PKG: recorded_day_granules(), "CREC-1997-01-29": recorded_day_granules()}
    with ReplayServer(BrokenDay(days, recorded_pages())) as srv:
        with caplog.at_level(logging.WARNING):
            recs, rejected = scraper(srv.url, []).fetch(WINDOW, progress=False)
    assert len(recs) == 15 and {r.date for r in recs} == {DAY}
    assert rejected["malformed_day"] == 1
    assert "/packages/CREC-1997-01-29/granules" in caplog.text


def test_a_listing_that_does_not_parse_stops_the_refresh_naming_the_url():
    with ReplayServer(lambda p, q: Reply(200, b'{"count": 3, "packages": [{"packageId": "CREC-19')) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, []).fetch(WINDOW, progress=False)
    msg = str(err.value)
    assert "/published/1997-01-01/1997-01-31" in msg and "could not be parsed" in msg and KEY not in msg


def test_connection_refused_gives_a_clear_error_without_the_key():
    with pytest.raises(SourceError) as err:
        scraper(refused_url(), []).fetch(WINDOW, progress=False)
    msg = str(err.value)
    assert "/published/1997-01-01/1997-01-31" in msg and "ConnectionError" in msg and "resume" in msg
    assert KEY not in msg


def test_a_rejected_key_is_explained():
    with ReplayServer(lambda p, q: Reply(403, b'{"error": {"code": "API_KEY_INVALID"}}')) as srv:
        with pytest.raises(SourceError, match="GOVINFO_API_KEY"):
            scraper(srv.url, []).fetch(WINDOW, progress=False)


def test_a_killed_refresh_resumes_from_the_stored_responses():
    with ReplayServer(recorded_app()) as srv:
        srv.fail_next(htm_path(GRANULES[2]), Reply(503, b"down"), times=99)
        with pytest.raises(SourceError):
            scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert htm_path(GRANULES[1]) in srv.paths()
        srv._faults.clear()
        srv.requests.clear()
        recs, rejected = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert srv.paths() == [htm_path(GRANULES[2])]  # only what was missing
    assert len(recs) == 15 and rejected == Counter({"presiding_officer": 10, "procedural": 7})


def test_a_recent_month_is_listed_again_on_every_run():
    today = dt.date(1997, 1, 30)
    with ReplayServer(recorded_app()) as srv:
        scraper(srv.url, [], today=today).fetch(WINDOW, progress=False)
        srv.requests.clear()
        recs, _ = scraper(srv.url, [], today=today).fetch(WINDOW, progress=False)
        assert srv.paths() == [listing_path()]  # new days appear there; the day's files come from the cache
        srv.requests.clear()
        scraper(srv.url, []).fetch(WINDOW, progress=False)  # today: January 1997 is long closed
        assert srv.paths() == []
    assert len(recs) == 15


def test_refresh_builds_the_congress_snapshot_with_the_us_counts(lfb_home):
    from largefedbench.scrapers.refresh import RefreshPlan, refresh

    from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings

    with ReplayServer(recorded_app()) as srv:
        plan = RefreshPlan(window=WINDOW, sources=["us"], base_urls={"us": srv.url},
                           span=SpanSettings(tokenizer=OFFLINE_SPAN_TOKENIZER))
        (result,) = refresh(plan, progress=False)
    m = result.manifest
    assert m["dataset"] == "congress" and m["counts"]["records_in"] == 15
    assert m["rejected"]["us:presiding_officer"] == 10 and m["rejected"]["us:procedural"] == 7
    clients = sum(m["counts"]["clients"][s] for s in ("train", "validation", "test"))
    # the two "I thank the Chair." and the other short turns are below one span
    assert clients + m["rejected"].get("too_short_for_a_span", 0) == 15 and clients > 0
    assert m["licenses"] == {LICENSE: clients}
    assert KEY not in json.dumps(m)


# --- the speech rules on the notation sources.md §2 documents ------------------------------------------
@pytest.mark.parametrize("tag, speaker", [
    ("  Mr. SMITH. Mr. Speaker, I rise", "Mr. SMITH"),
    ("  Mr. SMITH of Texas. Mr. Speaker, I rise", "Mr. SMITH of Texas"),
    ("  Ms. JACKSON LEE of Texas. Madam Speaker,", "Ms. JACKSON LEE of Texas"),
    ("  Mr. SCOTT of South Carolina. Mr. President,", "Mr. SCOTT of South Carolina"),
    ("  Mrs. ROUKEMA. Mr. Speaker,", "Mrs. ROUKEMA"),
    ("  Ms. DeLAURO. Madam Speaker,", "Ms. DeLAURO"),
    ("  Mr. McCONNELL. Mr. President,", "Mr. McCONNELL"),
    ("  Mr. O'ROURKE. Mr. Speaker,", "Mr. O'ROURKE"),
    ("  Mr. DIAZ-BALART. Mr. Speaker,", "Mr. DIAZ-BALART"),
    ("  The SPEAKER pro tempore. Without objection,", "The SPEAKER pro tempore"),
    ("  The SPEAKER pro tempore (Mr. Fields of Louisiana). The", "The SPEAKER pro tempore (Mr. Fields of Louisiana)"),
    ("  The PRESIDING OFFICER. The clerk", "The PRESIDING OFFICER"),
    ("  The PRESIDENT pro tempore. The Senator", "The PRESIDENT pro tempore"),
    ("  The ACTING PRESIDENT pro tempore. The", "The ACTING PRESIDENT pro tempore"),
    ("  The CHAIRMAN. The gentleman", "The CHAIRMAN"),
    ("  The CHAIR. The question", "The CHAIR"),
    ("  The Acting CHAIR (Mr. Womack). The", "The Acting CHAIR (Mr. Womack)"),
    ("  The CLERK. The", "The CLERK"),
    ("  The VICE PRESIDENT. The", "The VICE PRESIDENT"),
])
def test_speaker_tags(tag, speaker):
    assert SPEAKER_TAG.match(tag.strip())["speaker"] == speaker


@pytest.mark.parametrize("line", ["  Mr. President, I rise today", "  Mr. Smith said that", "  MR. SPEAKER"])
def test_prose_is_not_a_speaker_tag(line):
    assert SPEAKER_TAG.match(line.strip()) is None


@pytest.mark.parametrize("line", [
    "The assistant legislative clerk proceeded to call the roll.",  # PgS697, PgS715
    "The legislative clerk proceeded to call the roll.",  # PgS697
    "There being no objection, the material was ordered to be printed in the Record, as follows:",  # PgS715
    "The Clerk read the title of the bill.",  # sources.md §2
    "The question was taken; and the Speaker pro tempore announced that the ayes appeared to have it.",
    "There was no objection.",
    "The result of the vote was announced as above recorded.",
    "The SPEAKER pro tempore laid before the House the following communication:",
    "Mr. SMITH of Texas moved to suspend the rules and pass the bill.",
    "The bill (S. 208) was ordered to be engrossed for a third reading, was read the third time, and passed.",
    "A motion to reconsider was laid on the table.",
    "The resolution (S. Res. 12) was agreed to.",
    "The text of the amendment is as follows:",
    "By Mr. BOND (for himself and Mr. LOTT):",
    "Accordingly (at 10 o'clock and 31 minutes a.m.), the House stood in recess.",
    "Thereupon, the Senate, at 6:31 p.m., adjourned until Thursday, January 4, 2018, at 12 noon.",
    "The Senate proceeded to consider the bill.",
])
def test_recorder_lines(line):
    assert is_recorder(line)


@pytest.mark.parametrize("line", [
    "The Senator from Missouri is recognized.",  # PgS697: the chair speaking, untagged
    "The bill we passed last year was agreed to by both parties, and it is working.",
    "The American people should not stand for such deception.",
    "There was a time when this body debated such questions for weeks.",
    "Accordingly, I urge my colleagues to support this bill.",
    "The Senate resumed its work in 1997 with a long list of nominations.",
])
def test_speech_paragraphs_are_not_recorder_lines(line):
    assert not is_recorder(line)


def house_granule(body: str) -> bytes:
    """A House page in the recorded files' HTML layout around ``body`` (the notation from sources.md §2)."""
    page = htm("PgS700").decode()
    head, _, _ = page.partition("                            SENATE SCHEDULE")
    head = head.replace("[Senate]", "[House]").replace("[Page S700]", "[Page H3792]")
    return (head + body + "\n                          ____________________\n\n\n</pre></body>\n</html>\n").encode()


HOUSE = """                   TAX RELIEF FOR WORKING FAMILIES

  (Mr. GONZALEZ asked and was given permission to address the House
for 1 minute and to revise and extend his remarks.)
  Mr. GONZALEZ. Mr. Speaker, I ask unanimous consent to address the House
for 1 minute and to revise and extend my remarks. Working families in
San Antonio pay more than their share.

                              {time}  1753

  They deserve relief, and they deserve it this year.

[[Page H3793]]

  I yield back the balance of my time.
  [Ms. FURSE addressed the House. Her remarks will appear hereafter in
the Extensions of Remarks.]
  Mr. SMITH of Texas. Mr. Speaker, I yield myself such time as I may
consume.
  Mr. Speaker, the gentleman is right about the \\1/2\\ percent rate.
  Mr. Speaker, I reserve the balance of my time.
  The SPEAKER pro tempore (Mr. Fields of Louisiana). The question is on
the motion.
  The question was taken; and the Speaker pro tempore announced that
the ayes appeared to have it.
  Mr. SMITH of Texas. Mr. Speaker, I demand the yeas and nays.
  The yeas and nays were ordered.
  <bullet> Mr. ARMEY. Mr. Speaker, this statement was submitted, not
spoken.<bullet>
  Ms. FURSE. I thank the gentleman.
  Mr. Speaker, I ask unanimous consent that the letter be printed.
  There being no objection, the material was ordered to be printed in
the Record, as follows:

                                               Portland, OR.
       Dear Ms. Furse: We write about the rate.
  It was never spoken on the floor.
"""


def test_house_notation_is_dropped_and_speeches_split_at_tags():
    granule = parse_granule(house_granule(HOUSE))
    assert granule.chamber == "House" and granule.title == "TAX RELIEF FOR WORKING FAMILIES"
    assert [(s.speaker, s.presiding, s.unspoken) for s in granule.speeches] == [
        ("Mr. GONZALEZ", False, False), ("Mr. SMITH of Texas", False, False),
        ("The SPEAKER pro tempore (Mr. Fields of Louisiana)", True, False), ("Mr. SMITH of Texas", False, False),
        ("Mr. ARMEY", False, True), ("Ms. FURSE", False, False),
    ]
    texts = [clean_speech(s.paragraphs) for s in granule.speeches]
    said = "Working families in San Antonio pay more than their share. They deserve relief, and they deserve it this year."
    assert texts[0] == (said, None)
    assert texts[1] == ("Mr. Speaker, the gentleman is right about the 1/2 percent rate.", None)
    assert texts[3] == ("", "procedural")
    assert texts[5] == ("I thank the gentleman. Mr. Speaker, I ask unanimous consent that the letter be printed.", None)


def test_house_rejections_are_counted_by_reason():
    pages = {"CREC-1997-01-28-pt1-PgH3792": house_granule(HOUSE)}
    days = {PKG: [granule_entry(PKG, "CREC-1997-01-28-pt1-PgH3792", "TAX RELIEF FOR WORKING FAMILIES")]}
    with ReplayServer(GovinfoApp(days, pages)) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
    assert [(r.speaker, r.chamber) for r in recs] == [("Mr. GONZALEZ", "House"), ("Mr. SMITH of Texas", "House"),
                                                      ("Ms. FURSE", "House")]
    assert rejected == Counter({"presiding_officer": 1, "procedural": 1, "unspoken_statement": 1})


def test_cleaning_applies_to_every_speech_even_after_mr_speaker():
    text, reason = clean_speech(["Mr. Speaker, the vote was 213 to 210.", "Table 1: 4.5% 3.2% 1.1% 7.7%."])
    assert reason is None and text == "Mr. Speaker, the vote was 213 to 210."
    assert clean_speech(["12345 678."]) == ("", "empty_after_cleaning")


@pytest.mark.parametrize("body, problem", [
    (b"<html><body><pre>\n[Senate]\n  Mr. LOTT. Hello.\n</pre></body></html>", "Congressional Record Volume"),
    (b"<html><body><p>Service maintenance</p></body></html>", "</pre>"),
    (b"", "</pre>"),
])
def test_malformed_granule_pages_raise_value_error(body, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_granule(body)


# --- the key: redirects, error messages, the raw cache -------------------------------------------------
def test_the_key_never_follows_a_redirect_to_another_host():
    with ReplayServer(recorded_app()) as other, ReplayServer(recorded_app()) as srv:
        srv.fail_next(htm_path(GRANULES[0]), Reply(302, b"", {"Location": f"{other.url}{htm_path(GRANULES[0])}"}))
        with pytest.raises(SourceError) as err:
            scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert not [h for _, _, h in other.requests if KEY in json.dumps(h)]
        assert other.requests == []  # not followed at all: without the key the answer would be a 403
    msg = str(err.value)
    assert "another host" in msg and other.url in msg and "LFB_GOVINFO_URL" in msg and KEY not in msg


def test_a_redirect_on_the_same_host_keeps_the_key():
    app = recorded_app()

    def moved(path, query):
        if path.startswith("/v1/"):
            return Reply(308, b"", {"Location": path[len("/v1") :] + ("?" + urlencode(query) if query else "")})
        return app(path, query)

    with ReplayServer(moved) as srv:
        recs, _ = scraper(f"{srv.url}/v1", []).fetch(WINDOW, progress=False)
        assert {h.get("X-Api-Key") for _, _, h in srv.requests} == {KEY}
    assert len(recs) == 15


def test_a_reason_phrase_that_echoes_the_key_is_not_shown(caplog):
    reply = Reply(403, b'{"error": {"code": "API_KEY_INVALID"}}', reason=f"Forbidden (api_key={KEY})")
    with ReplayServer(lambda p, q: reply) as srv:
        with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as err:
            scraper(srv.url, []).fetch(WINDOW, progress=False)
    assert "HTTP 403" in str(err.value) and "GOVINFO_API_KEY" in str(err.value)
    assert KEY not in str(err.value) and KEY not in caplog.text


def test_the_key_is_never_written_into_the_raw_cache(lfb_home):
    days = {"CREC-1997-01-27": [], PKG: recorded_day_granules(), "CREC-1997-01-29": []}
    app = GovinfoApp(days, recorded_pages(), listing_page=1, granule_page=1, echo_key=KEY)  # nextPage has api_key=KEY
    with ReplayServer(app) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        srv.requests.clear()
        again, _ = scraper(srv.url).fetch(WINDOW, progress=False)  # the redacted cache still resumes
        assert srv.paths() == []
    stored = [p for p in lfb_home.rglob("*") if p.is_file()]
    assert not [p for p in stored if KEY.encode() in p.read_bytes()]
    assert len([p for p in stored if p.suffix == ".raw"]) == 3 + (1 + 3 + 1) + 3  # listing, granule lists, htm
    assert len(recs) == len(again) == 15
