"""The HTTP layer under faults a live source (or something between it and us) can produce.

Every reply body is a real recorded bioRxiv page (``biorxiv_replay``) served by the local replay server; the
faults are in the transfer (cut short, slow, mislabelled, redirected, too large, told to wait) or, for the
lone surrogate, one JSON escape injected into a real abstract.
"""

from __future__ import annotations

import json
import time

import pytest
from biorxiv_replay import BiorxivApp, corpus, expected_clients
from largefedbench.scrapers.biorxiv import BiorxivScraper
from largefedbench.scrapers.http import HttpSettings
from replay_server import ReplayServer, Reply

from largefedbench.data.windows import Window
from largefedbench.errors import InputError, SourceError

WINDOW = Window.parse("2024-09", "2024-09", public_months=0)
PAGE0 = "/details/biorxiv/2024-09-01/2024-09-30/0/json"


def scraper(url: str, sleeps: list | None = None, refresh: bool = False, **settings) -> BiorxivScraper:
    s = BiorxivScraper.create(base_url=url, settings=HttpSettings(rate_limit=1000, backoff_base=0.01, **settings),
                              refresh=refresh)
    s.client.sleep = sleeps.append if sleeps is not None else (lambda _: None)
    return s


def real_page(records: list[dict] | None = None) -> bytes:
    return BiorxivApp(records or corpus(1))(PAGE0, {}).body


# --- 6. cut short, mislabelled, redirected, slow, too large ---------------------------------------------
def test_a_body_cut_short_mid_transfer_is_retried():
    body = real_page()
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(200, body, truncate_at=len(body) // 2))
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert srv.paths() == [PAGE0, PAGE0]  # the cut-short download, then the whole page
    assert len(recs) == expected_clients(corpus(1))


def test_a_body_cut_short_every_time_gives_a_clear_error():
    body = real_page()
    with ReplayServer(lambda p, q: Reply(200, body, truncate_at=100)) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_attempts=3).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 3
    msg = str(err.value)
    assert PAGE0 in msg and "cut short" in msg and "after 3 attempts" in msg and "resume" in msg


def test_a_body_labelled_gzip_that_is_not_is_retried_then_reported():
    body = real_page()
    with ReplayServer(lambda p, q: Reply(200, body, {"Content-Encoding": "gzip"})) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_attempts=3).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 3  # retried like a body cut short, then reported
    msg = str(err.value)
    assert PAGE0 in msg and "gzip" in msg and "base URL" in msg and "after 3 attempts" in msg


def test_one_garbled_gzip_response_is_fetched_again():
    body, seen = real_page(), []

    def reply(path, query):
        seen.append(path)
        garbled = len(seen) == 1  # the first response only: a proxy garbled it once
        return Reply(200, body, {"Content-Encoding": "gzip"} if garbled else {})

    with ReplayServer(reply) as srv:
        scraper(srv.url, max_attempts=3).fetch(WINDOW, progress=False)
    assert seen[0] == seen[1]  # the same page again, and the refresh went on


def test_a_redirect_loop_gives_a_clear_error():
    with ReplayServer(lambda p, q: Reply(302, b"", {"Location": p})) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 11  # the request and 10 redirects, then it stops
    assert PAGE0 in str(err.value) and "redirect" in str(err.value)


def test_a_redirect_on_the_same_host_is_followed():
    app = BiorxivApp(corpus(1))

    def moved(path, query):
        if path.startswith("/old/"):
            return Reply(301, b"", {"Location": path[len("/old") :]})
        return app(path, query)

    with ReplayServer(moved) as srv:
        recs, _ = scraper(f"{srv.url}/old").fetch(WINDOW, progress=False)
        assert srv.paths()[:2] == ["/old" + PAGE0, PAGE0]
    assert len(recs) == expected_clients(corpus(1))


def test_a_slow_body_is_cut_off_at_the_response_deadline():
    body = real_page()  # 65 KB, sent 64 bytes every 20 ms: about 20 s without a deadline
    with ReplayServer(lambda p, q: Reply(200, body, drip=0.02)) as srv:
        started = time.monotonic()
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_attempts=2, read_timeout=5.0, response_deadline=0.5).fetch(WINDOW, progress=False)
        elapsed = time.monotonic() - started
    assert elapsed < 4.0  # two attempts of about 0.5 s, not 2 x 20 s
    assert "0.5 s deadline" in str(err.value) and "LFB_RESPONSE_DEADLINE" in str(err.value)


def test_headers_dripped_a_byte_at_a_time_are_cut_off_at_the_response_deadline():
    """Each byte comes well within the read timeout, so only the overall deadline can stop such a server."""
    reply = Reply(200, real_page(), drip=0.05, drip_bytes=1, drip_headers=True)  # about 5 s of headers, then 65 KB
    with ReplayServer(lambda p, q: reply) as srv:
        started = time.monotonic()
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_attempts=1, read_timeout=5.0, response_deadline=0.5).fetch(WINDOW, progress=False)
        elapsed = time.monotonic() - started
    assert elapsed < 2.0  # cut at the deadline, not after the headers
    msg = str(err.value)
    assert PAGE0 in msg and "0.5 s deadline" in msg and "LFB_RESPONSE_DEADLINE" in msg


def test_a_body_cut_at_the_deadline_is_not_taken_for_a_whole_one():
    """Without Content-Length the body ends when the socket closes: the cut must not read as the end."""
    reply = Reply(200, real_page(), drip=0.02, send_length=False)
    with ReplayServer(lambda p, q: reply) as srv:
        with pytest.raises(SourceError, match="0.3 s deadline"):
            scraper(srv.url, max_attempts=1, read_timeout=5.0, response_deadline=0.3).fetch(WINDOW, progress=False)


@pytest.mark.parametrize("send_length", [True, False])
def test_a_body_over_the_size_cap_gives_a_clear_error(send_length):
    body = real_page()
    with ReplayServer(lambda p, q: Reply(200, body, send_length=send_length)) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_body_bytes=4096).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 1
    msg = str(err.value)
    assert PAGE0 in msg and "4096 bytes" in msg and "LFB_MAX_RESPONSE_MB" in msg
    with ReplayServer(lambda p, q: Reply(200, body, send_length=send_length)) as srv:  # under the cap: read
        recs, _ = scraper(srv.url, max_body_bytes=len(body), refresh=True).fetch(WINDOW, progress=False)
    assert len(recs) == expected_clients(corpus(1))


def test_limits_come_from_the_environment_and_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv("LFB_MAX_RESPONSE_MB", "2")
    monkeypatch.setenv("LFB_RESPONSE_DEADLINE", "30")
    monkeypatch.setenv("LFB_MAX_RETRY_AFTER", "45")
    s = HttpSettings()
    assert (s.max_body_bytes, s.response_deadline, s.max_retry_after) == (2 * 1024 * 1024, 30.0, 45.0)
    for value in ("nan", "inf", "-1", "0", "lots"):
        monkeypatch.setenv("LFB_MAX_RETRY_AFTER", value)
        with pytest.raises(InputError, match="LFB_MAX_RETRY_AFTER"):
            HttpSettings()


# --- 7. a record whose text cannot be stored ------------------------------------------------------------
def test_a_lone_surrogate_rejects_that_record_and_keeps_the_rest_of_the_page(lfb_home):
    from largefedbench.scrapers.refresh import RefreshPlan, refresh

    from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings

    records = corpus(1)
    bad = next(r for r in records if r["license"] == "cc_by")

    class Surrogate(BiorxivApp):
        def __call__(self, path, query):
            reply = super().__call__(path, query)
            # the escape as it would arrive in the JSON text: "\ud800" (a lone high surrogate)
            abstract = json.dumps(bad["abstract"])[1:-1]
            spoiled = abstract[:40] + "\\ud800" + abstract[40:]
            reply.body = reply.body.replace(abstract.encode(), spoiled.encode(), 1)
            assert b"\\ud800" in reply.body
            return reply

    plan = RefreshPlan(window=WINDOW, sources=["biorxiv"], span=SpanSettings(tokenizer=OFFLINE_SPAN_TOKENIZER))
    with ReplayServer(Surrogate(records)) as srv:
        plan.base_urls = {"biorxiv": srv.url}
        (result,) = refresh(plan, progress=False)
    m = result.manifest
    assert m["rejected"]["biorxiv:unencodable_text"] == 1
    assert m["counts"]["records_in"] == expected_clients(records) - 1  # the rest of the page is kept


# --- 9. leftovers of a killed run, Retry-After ----------------------------------------------------------
def test_temp_files_left_by_a_killed_run_are_removed_on_the_next_run(lfb_home):
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        scraper(srv.url).fetch(WINDOW, progress=False)
        cache = lfb_home / "raw" / "biorxiv"
        stored = sorted(p for p in cache.rglob("*") if p.is_file() and not p.name.startswith("."))
        # what atomic_write_bytes leaves behind when the process is killed between write and rename
        leftovers = [cache / "details/biorxiv/2024-09-01/2024-09-30/0/.json.raw.k3j9x.tmp",
                     cache / "checkpoints/.details_biorxiv_2024-09-01_2024-09-30.json.q81zt.tmp"]
        holder = scraper(srv.url)  # another run using the cache right now: its temp files are left alone
        holder.client.cache.open()
        for p in leftovers:
            p.write_bytes(b'{"messages": [{"status": "ok", "tot')
        scraper(srv.url).fetch(WINDOW, progress=False)
        assert all(p.exists() for p in leftovers)
        del holder
        srv.requests.clear()
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert srv.paths() == []  # the stored responses are still used
    assert not [p for p in leftovers if p.exists()]
    assert sorted(p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")) == stored
    assert len(recs) == expected_clients(corpus(1))


def test_retry_after_is_honoured_up_to_the_cap():
    sleeps: list[float] = []
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(503, b"busy", {"Retry-After": "90"}))
        recs, _ = scraper(srv.url, sleeps, max_retry_after=120).fetch(WINDOW, progress=False)
    assert 90.0 in sleeps and len(recs) == expected_clients(corpus(1))


def test_a_retry_after_beyond_the_cap_stops_at_once_instead_of_waiting():
    sleeps: list[float] = []
    with ReplayServer(lambda p, q: Reply(429, b"slow down", {"Retry-After": "600"})) as srv:
        started = time.monotonic()
        with pytest.raises(SourceError) as err:
            scraper(srv.url, sleeps).fetch(WINDOW, progress=False)  # the default cap
        assert len(srv.requests) == 1
    assert time.monotonic() - started < 5
    assert not [s for s in sleeps if s > 1]  # never waited 600 s, let alone five times
    msg = str(err.value)
    assert "600 s" in msg and "LFB_MAX_RETRY_AFTER" in msg and "resume" in msg and PAGE0 in msg


def test_the_default_retry_after_cap_is_well_below_ten_minutes(monkeypatch):
    monkeypatch.delenv("LFB_MAX_RETRY_AFTER", raising=False)
    assert HttpSettings().max_retry_after <= 120


def test_a_redirect_to_another_host_is_followed_when_no_key_is_sent():
    with ReplayServer(BiorxivApp(corpus(1))) as mirror, \
            ReplayServer(lambda p, q: Reply(302, b"", {"Location": mirror.url + p})) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert mirror.paths() == [PAGE0]
    assert len(recs) == expected_clients(corpus(1))


@pytest.mark.parametrize("location", ["ftp://example.org/x", "https:///no-host"])
def test_a_redirect_to_something_that_is_not_a_web_address_gives_a_clear_error(location):
    with ReplayServer(lambda p, q: Reply(302, b"", {"Location": location})) as srv:
        with pytest.raises(SourceError, match="not an http\\(s\\) URL"):
            scraper(srv.url).fetch(WINDOW, progress=False)


def test_a_stalled_body_is_retried_then_reported():
    body = real_page()  # the first 64 bytes, then nothing for longer than the read timeout
    with ReplayServer(lambda p, q: Reply(200, body[:128], drip=1.0, drip_bytes=64)) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, max_attempts=2, read_timeout=0.3).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 2
    assert "stalled" in str(err.value)


def test_a_killed_process_releases_the_cache_and_its_temp_file_is_removed(lfb_home):
    import subprocess
    import sys

    cache = lfb_home / "raw" / "biorxiv"
    leftover = cache / "details/.json.raw.x7w2q.tmp"
    writer = (  # a run that is killed between writing a temp file and renaming it
        "import sys, time, pathlib; from largefedbench.scrapers.cache import RawCache; "
        "c = RawCache(pathlib.Path(sys.argv[1]), 'biorxiv'); c.open(); p = pathlib.Path(sys.argv[2]); "
        "p.parent.mkdir(parents=True, exist_ok=True); p.write_bytes(b'half'); print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer, str(lfb_home / "raw"), str(leftover)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with ReplayServer(BiorxivApp(corpus(1))) as srv:
            scraper(srv.url).fetch(WINDOW, progress=False)
            assert leftover.exists()  # the writer is alive: its temp file may still be renamed
            proc.kill()
            proc.wait(timeout=10)
            recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not leftover.exists()
    assert len(recs) == expected_clients(corpus(1))
