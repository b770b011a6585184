"""Dated releases: `lfb release` names snapshots, `lfb refresh --release` rebuilds them from the (replayed) sources,
`load_snapshot("DATASET@RELEASE")` loads them and refuses content that does not hash to the release."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from biorxiv_replay import BiorxivApp, corpus
from replay_server import ReplayServer

from largefedbench.cli import main
from largefedbench.data.federated import load_snapshot
from largefedbench.data.releases import changelog, find_release, split_release_ref, write_release
from largefedbench.errors import InputError, SnapshotError


def _refresh(url: str, since: str, until: str) -> None:
    assert main(["refresh", "--sources", "biorxiv", "--since", since, "--until", until, "--quiet",
                 "--base-url", f"biorxiv={url}"]) == 0


@pytest.fixture()
def replay():
    records = corpus(2)  # real records re-dated into September 2024
    public = [{**r, "doi": r["doi"] + ".pub", "date": "2024-08-10"} for r in corpus(1)]
    with ReplayServer(BiorxivApp(records + public)) as srv:
        yield srv.url


def test_a_release_is_written_rebuilt_and_loaded_by_name(lfb_home, replay, capsys):
    _refresh(replay, "2024-09", "2024-09")
    capsys.readouterr()
    assert main(["release", "2026q3", "--snapshots", "biorxiv"]) == 0
    out = capsys.readouterr().out
    assert "release 2026q3 written" in out and "biorxiv@2026q3" in out and "first release" in out
    release = find_release("2026q3", lfb_home)
    (record,) = release["snapshots"]
    assert release["cadence"] == "quarterly" and release["previous"] is None
    assert record["window"] == {"since": "2024-09-01", "until": "2024-09-30", "public_since": "2024-08-01"}
    assert set(record["sources"]) == {"biorxiv"} and record["sources"]["biorxiv"]["scraper_version"]
    assert record["cleaning_version"] and record["span"]["span_tokens"] == 64

    fd = load_snapshot("biorxiv@2026q3", home=lfb_home)
    assert fd.manifest["content_sha256"] == record["content_sha256"] and fd.manifest["name"] == record["snapshot"]

    # gone from this machine: loading says how to get it back, and the rebuild brings the same content
    shutil.rmtree(lfb_home / "snapshots" / record["snapshot"])
    with pytest.raises(SnapshotError, match="not built here.*lfb refresh --release 2026q3"):
        load_snapshot("biorxiv@2026q3", home=lfb_home)
    assert main(["refresh", "--release", "2026q3", "--quiet", "--base-url", f"biorxiv={replay}"]) == 0
    assert "rebuilt" in capsys.readouterr().out
    assert load_snapshot("biorxiv@2026q3", home=lfb_home).manifest["content_sha256"] == record["content_sha256"]

    # the next quarter: a wider window, its changelog against the previous release
    _refresh(replay, "2024-09-15", "2024-09-30")
    newest = sorted((lfb_home / "snapshots").glob("biorxiv-2024-09-15*"))[0].name
    capsys.readouterr()
    assert main(["release", "2026q4", "--snapshots", newest, "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["previous"] == "2026q3"
    assert any(c.startswith("biorxiv: window 2024-09-01..2024-09-30 -> 2024-09-15..2024-09-30") for c in second["changes"])
    assert any(c.startswith("biorxiv: new content") for c in second["changes"])
    assert main(["release", "--list"]) == 0 and "2026q4" in capsys.readouterr().out


def test_content_that_does_not_hash_to_the_release_is_refused(lfb_home, replay):
    _refresh(replay, "2024-09", "2024-09")
    assert main(["release", "2026q3", "--snapshots", "biorxiv"]) == 0
    path = lfb_home / "releases" / "2026q3.json"
    release = json.loads(path.read_text())
    release["snapshots"][0]["content_sha256"] = "0" * 64  # a release that names other content
    path.write_text(json.dumps(release))
    with pytest.raises(SnapshotError, match="not the release's 000000000000"):
        load_snapshot("biorxiv@2026q3", home=lfb_home)


def test_a_rebuild_whose_sources_changed_is_reported_and_not_kept(lfb_home, capsys):
    with ReplayServer(BiorxivApp(corpus(2))) as srv:
        _refresh(srv.url, "2024-09", "2024-09")
    assert main(["release", "2026q3", "--snapshots", "biorxiv"]) == 0
    record = find_release("2026q3", lfb_home)["snapshots"][0]
    shutil.rmtree(lfb_home / "snapshots" / record["snapshot"])
    shutil.rmtree(lfb_home / "raw")  # nothing cached: the rebuild asks the sources again
    with ReplayServer(BiorxivApp(corpus(1))) as srv:  # the source now returns fewer records
        assert main(["refresh", "--release", "2026q3", "--quiet", "--base-url", f"biorxiv={srv.url}"]) != 0
    assert "return other records now" in capsys.readouterr().err
    assert not (lfb_home / "snapshots" / record["snapshot"]).exists()


def test_bad_release_requests_say_what_to_do(lfb_home, capsys, monkeypatch, tmp_path):
    with pytest.raises(InputError, match="release name 'Q4 2026'"):
        write_release("Q4 2026", [{"dataset": "d", "name": "n", "content_sha256": "a" * 64}], home=lfb_home)
    with pytest.raises(InputError, match="one snapshot per dataset"):
        write_release("2026q4", [{"dataset": "d", "name": "a", "content_sha256": "a" * 64},
                                 {"dataset": "d", "name": "b", "content_sha256": "b" * 64}], home=lfb_home)
    write_release("2026q4", [{"dataset": "d", "name": "a", "content_sha256": "a" * 64}], home=lfb_home)
    with pytest.raises(InputError, match="exists already.*immutable"):
        write_release("2026q4", [{"dataset": "d", "name": "a", "content_sha256": "a" * 64}], home=lfb_home)
    with pytest.raises(SnapshotError, match="no release '2025q1' \\(known: 2026q4\\)"):
        load_snapshot("d@2025q1", home=lfb_home)
    with pytest.raises(SnapshotError, match="has no 'congress' snapshot"):
        load_snapshot("congress@2026q4", home=lfb_home)
    # a folder of that name in the working directory does not stand in for the release (a path to it would)
    monkeypatch.chdir(tmp_path)
    Path("congress@2026q4").mkdir()
    Path("congress@2026q4/manifest.json").write_text("{}")
    with pytest.raises(SnapshotError, match="has no 'congress' snapshot"):
        load_snapshot("congress@2026q4", home=lfb_home)
    assert main(["refresh", "--release", "2026q4", "--since", "2024-09"]) == 2
    assert "--release rebuilds what the release records; drop --since" in capsys.readouterr().err


def test_a_release_refused_for_its_name_says_where_the_existing_one_is(lfb_home, tmp_path):
    snap = [{"dataset": "d", "name": "a", "content_sha256": "a" * 64}]
    kept, _ = write_release("2026q4", snap, home=lfb_home)
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(InputError) as err:  # --out in another folder: the name is taken in the home
        write_release("2026q4", snap, home=lfb_home, out=elsewhere)
    assert f"exists already ({kept})" in str(err.value) and "shipped" not in str(err.value)
    assert not elsewhere.exists()


def test_release_references_and_changelog_units():
    assert split_release_ref("biorxiv@2026q4") == ("biorxiv", "2026q4")
    assert split_release_ref("hf://owner/name@main") is None and split_release_ref("biorxiv") is None
    snap = {"dataset": "d", "content_sha256": "a" * 64, "window": {"since": "2024-09-01", "until": "2024-09-30"},
            "clients": {"train": 10}, "sources": {"biorxiv": {"scraper_version": "1"}}}
    assert changelog(None, [snap]) == ["first release"]
    assert changelog({"snapshots": [snap]}, [snap]) == ["no change"]
    newer = {**snap, "sources": {"biorxiv": {"scraper_version": "2"}}}
    assert changelog({"snapshots": [snap]}, [newer]) == ["d: scrapers {'biorxiv': '1'} -> {'biorxiv': '2'}"]
    assert changelog({"snapshots": [snap]}, []) == ["d: dropped"]
