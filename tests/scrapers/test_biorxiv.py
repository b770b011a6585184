"""The bioRxiv client end to end against a local replay of real recorded API records (see biorxiv_replay)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest
from biorxiv_replay import BiorxivApp, corpus, expected_clients, real_records
from largefedbench.scrapers.biorxiv import LICENSE_ALLOWLIST, BiorxivScraper
from largefedbench.scrapers.http import HttpSettings
from replay_server import ReplayServer, Reply, refused_url

from largefedbench.data.windows import Window
from largefedbench.errors import SourceError


def scraper(url: str, sleeps: list | None = None, **kw) -> BiorxivScraper:
    s = BiorxivScraper.create(base_url=url, settings=HttpSettings(rate_limit=1000, backoff_base=0.01), **kw)
    if sleeps is not None:
        s.client.sleep = sleeps.append
    return s


WINDOW = Window.parse("2024-09", "2024-09", public_months=0)


def test_pages_from_cursor_zero_advancing_by_what_was_returned():
    records = corpus()  # 78 records -> 3 pages of 30/30/18
    with ReplayServer(BiorxivApp(records)) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
        cursors = [int(p.split("/")[5]) for p in srv.paths()]
    assert cursors == [0, 30, 60]  # first page is cursor 0 (the reference scraper started at 100)
    assert len(recs) == expected_clients(records)
    assert rejected["license:cc_no"] == 4 * 3
    assert {r.license for r in recs} <= LICENSE_ALLOWLIST


def test_page_size_is_not_hard_coded():
    records = corpus()
    with ReplayServer(BiorxivApp(records, page_size=100)) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 1  # total reached after one page of 78
    assert len(recs) == expected_clients(records)


def test_missing_total_stops_on_empty_collection():
    records = corpus(1)

    class NoTotal(BiorxivApp):
        def __call__(self, path, query):
            reply = super().__call__(path, query)
            data = json.loads(reply.body)
            data["messages"][0].pop("total", None)
            return Reply(200, json.dumps(data).encode())

    with ReplayServer(NoTotal(records, page_size=10)) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
        assert [int(p.split("/")[5]) for p in srv.paths()] == [0, 10, 20, 26]
    assert len(recs) == expected_clients(records)


def test_latest_version_within_window_is_the_client():
    base = real_records()[0]  # cc_by, a real abstract
    v1 = {**base, "date": "2024-09-03", "version": "1"}
    v2 = {**base, "date": "2024-09-20", "version": "2", "abstract": base["abstract"] + " We add a revised analysis."}
    v3_outside = {**base, "date": "2024-10-02", "version": "3"}
    with ReplayServer(BiorxivApp([v1, v2, v3_outside])) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
    assert len(recs) == 1 and recs[0].version == 2 and recs[0].date == "2024-09-20"
    assert recs[0].text.endswith("We add a revised analysis.")
    assert recs[0].id == f"biorxiv:{base['doi']}" and recs[0].url.endswith("v2")
    assert rejected["superseded_version"] == 1


def test_new_doi_prefix_and_categories_are_normalised():
    base = real_records()[0]
    row = {**base, "doi": "10.64898/2024.09.05.611111", "date": "2024-09-05", "category": "Evolutionary Biology "}
    with ReplayServer(BiorxivApp([row])) as srv:
        (rec,), _ = scraper(srv.url).fetch(WINDOW, progress=False)
    assert rec.doi == "10.64898/2024.09.05.611111" and rec.category == "evolutionary biology"


def test_cleaning_on_the_real_artefacts():
    rows = {r["doi"]: r for r in real_records()}
    # 19000356 is cc_no in reality; relabelled cc_by here only to run its list artefacts through cleaning.
    chosen = [rows["10.1101/000042"], {**rows["10.1101/19000356"], "license": "cc_by"}, rows["10.1101/000109"],
              rows["10.1101/000125"], rows["10.1101/19000687"]]
    for i, r in enumerate(chosen):
        r["date"] = f"2024-09-1{i}"
    with ReplayServer(BiorxivApp(chosen)) as srv:
        recs, _ = scraper(srv.url).fetch(WINDOW, progress=False)
    texts = {r.doi: r.text for r in recs}
    for text in texts.values():
        assert not re.search(r"[OC]_(LI|ST_ABS|FIG)|\\n|&quot;|&gt;|\n", text)
    assert '"budded"' in texts["10.1101/000109"]  # &quot; entity decoded
    assert "BACKGROUNDJuvenile" not in texts["10.1101/19000356"] and texts["10.1101/19000356"].startswith("Juvenile-onset")
    assert "Summary" not in texts["10.1101/000042"] and "privacy. Privacy breaching" in texts["10.1101/000042"]
    assert "Objectives" not in texts["10.1101/19000687"][:20]
    assert "AbstractO_ST_ABS" not in texts["10.1101/000125"] and "Translational Relevance" not in texts["10.1101/000125"]


def test_record_without_abstract_is_skipped_and_counted():
    rows = corpus(1)[:5]
    rows[0] = {**rows[0], "license": "cc_by"}
    rows[0].pop("abstract")
    rows[1] = {**rows[1], "license": "cc_by", "abstract": "   "}
    with ReplayServer(BiorxivApp(rows)) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
    assert rejected["missing_abstract"] == 2
    assert all(r.text for r in recs)


def test_unknown_and_missing_licences_are_dropped_and_counted():
    rows = corpus(1)[:4]
    rows[0] = {**rows[0], "license": "cc_no"}
    rows[1] = {**rows[1], "license": ""}
    rows[2] = {**rows[2], "license": "all_rights_reserved"}
    rows[3] = {**rows[3], "license": "CC_BY "}
    with ReplayServer(BiorxivApp(rows)) as srv:
        recs, rejected = scraper(srv.url).fetch(WINDOW, progress=False)
    assert rejected == Counter({"license:cc_no": 1, "license:missing": 1, "license:unknown": 1})
    assert len(recs) == 1 and recs[0].license == "cc_by"


def test_429_with_retry_after_is_honoured():
    sleeps: list[float] = []
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(429, b"slow down", {"Retry-After": "7"}))
        recs, _ = scraper(srv.url, sleeps).fetch(WINDOW, progress=False)
    assert 7.0 in sleeps
    assert len(recs) == expected_clients(corpus(1))


def test_unreadable_retry_after_falls_back_to_backoff():
    sleeps: list[float] = []
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(429, b"slow down", {"Retry-After": "soon-ish"}))
        recs, _ = scraper(srv.url, sleeps).fetch(WINDOW, progress=False)
    assert len(recs) == expected_clients(corpus(1))
    assert any(0.01 <= s < 1 for s in sleeps)  # the client's own backoff (base 0.01 s), not a crash


def test_500_then_success():
    sleeps: list[float] = []
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(500, b"oops"), times=2)
        recs, _ = scraper(srv.url, sleeps).fetch(WINDOW, progress=False)
        assert len(srv.requests) == 2 + 1  # two failures, then the single page (26 records)
    assert len(recs) == expected_clients(corpus(1))
    backoffs = [s for s in sleeps if s >= 0.01]  # the rate limiter's sub-millisecond waits are not backoffs
    assert len(backoffs) == 2 and backoffs[1] > backoffs[0]  # exponential backoff


def test_dropped_connection_is_retried():
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(drop_connection=True))
        recs, _ = scraper(srv.url, []).fetch(WINDOW, progress=False)
    assert len(recs) == expected_clients(corpus(1))


def test_connection_refused_gives_a_clear_error():
    s = scraper(refused_url(), [])
    with pytest.raises(SourceError) as err:
        s.fetch(WINDOW, progress=False)
    msg = str(err.value)
    assert "/details/biorxiv/2024-09-01/2024-09-30/0/json" in msg and "ConnectionError" in msg and "resume" in msg


def test_empty_body_is_retried_then_reported_never_read_as_no_results():
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        srv.fail_next("/details/", Reply(200, b""), times=2)
        recs, _ = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert len(recs) == expected_clients(corpus(1))
    with ReplayServer(lambda p, q: Reply(200, b"")) as srv:
        with pytest.raises(SourceError, match="empty body"):
            scraper(srv.url, [], refresh=True).fetch(WINDOW, progress=False)


def test_truncated_json_is_refetched_then_reported_with_the_file_kept(lfb_home):
    records = corpus(1)
    with ReplayServer(BiorxivApp(records)) as srv:
        good = BiorxivApp(records)("/details/biorxiv/2024-09-01/2024-09-30/0/json", {}).body
        srv.fail_next("/details/", Reply(200, good[: len(good) // 2]))
        recs, _ = scraper(srv.url, []).fetch(WINDOW, progress=False)
        assert len(recs) == expected_clients(records)
    with ReplayServer(lambda p, q: Reply(200, b'{"messages": [{"status": "ok", "total": "3"')) as srv:
        with pytest.raises(SourceError) as err:
            scraper(srv.url, [], refresh=True).fetch(WINDOW, progress=False)
    assert "could not be parsed" in str(err.value)
    assert list(lfb_home.rglob("*.bad")), "the malformed response is kept for inspection"


def test_resume_after_a_killed_run_uses_the_stored_pages():
    records = corpus()
    with ReplayServer(BiorxivApp(records)) as srv:
        srv.fail_next("/details/biorxiv/2024-09-01/2024-09-30/60/", Reply(503, b"down"), times=99)
        with pytest.raises(SourceError):
            scraper(srv.url, []).fetch(WINDOW, progress=False)
        first = list(srv.paths())
        srv._faults.clear()
        srv.requests.clear()
        recs, _ = scraper(srv.url, []).fetch(WINDOW, progress=False)
        second = srv.paths()
    assert any(p.endswith("/30/json") for p in first)
    assert second == ["/details/biorxiv/2024-09-01/2024-09-30/60/json"]  # only what was missing
    assert len(recs) == expected_clients(records)
    assert len({r.id for r in recs}) == len(recs)


def test_killed_process_resumes_without_duplicates(tmp_path, lfb_home):
    """A real `lfb refresh` process killed mid-way, then run again: same snapshot as an uninterrupted run."""
    records = corpus(4)
    slow = {"n": 0}

    class SlowApp(BiorxivApp):
        def __call__(self, path, query):
            slow["n"] += 1
            if slow["n"] == 3:
                import time

                time.sleep(30)  # the refresh is killed while waiting here
            return super().__call__(path, query)

    with ReplayServer(SlowApp(records)) as srv:
        cmd = [sys.executable, "-m", "largefedbench.cli", "refresh", "--sources", "biorxiv", "--since", "2024-09",
               "--until", "2024-09", "--public-months", "0", "--quiet"]
        env = {**__import__("os").environ, "LFB_BIORXIV_URL": srv.url}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        import time

        deadline = time.time() + 60
        while slow["n"] < 3 and time.time() < deadline:
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        assert not list((lfb_home / "snapshots").glob("biorxiv-*")) if (lfb_home / "snapshots").exists() else True
        n_before = slow["n"]
        out = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert slow["n"] - n_before == 2  # pages 60.. and 90 only; 0 and 30 came from the cache
    info = json.loads(out.stdout)[0]
    assert info["n_private_clients"] == expected_clients(records)
