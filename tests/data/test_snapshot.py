"""Snapshots: immutable, atomic, content-hashed; loaded back as federated datasets."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from largefedbench.data.federated import load_snapshot
from largefedbench.data.info import snapshot_info
from largefedbench.data.records import Record
from largefedbench.data.snapshot import BuildSpec, build_snapshot, list_snapshots
from largefedbench.data.spans import SpanSettings
from largefedbench.data.windows import Window
from largefedbench.errors import InputError, SnapshotError

TEXT = "The committee heard evidence on river pollution and the cost of cleaning it up for every town. " * 6


def rec(i: int, date: str, text: str = TEXT, **kw) -> Record:
    return Record(id=f"t:{i}", source="t", date=date, title=f"T{i}", text=text, url=f"u{i}", license="cc_by", **kw)


def spec(**kw) -> BuildSpec:
    return BuildSpec(dataset="t", window=Window.parse("2024-09", "2024-10", public_months=1),
                     span=SpanSettings(tokenizer="minilm-wordpiece"), **kw)


def records() -> list[Record]:
    out = [rec(i, f"2024-09-{1 + i % 28:02d}") for i in range(60)]
    out += [rec(100 + i, f"2024-08-{1 + i % 28:02d}") for i in range(10)]  # public month
    out += [rec(200, "2024-06-01"), rec(201, "2024-11-01")]  # outside
    out += [rec(300, "2024-09-05", text="Too short.")]
    return out


def test_build_and_load_roundtrip(lfb_home):
    result = build_snapshot(records(), spec(), Counter({"license:cc_no": 2}), progress=False)
    assert result.created and result.path.parent == lfb_home / "snapshots"
    m = json.loads((result.path / "manifest.json").read_text())
    for key in ("dataset", "sources", "window", "scraped_at", "cleaning_version", "span", "counts", "rejected", "content_sha256"):
        assert key in m
    assert m["span"]["tokenizer"] == "minilm-wordpiece" and m["span"]["span_tokens"] == 64
    assert m["span"]["last_span_rule"].startswith("keep the partial last span")
    assert m["rejected"] == {"license:cc_no": 2, "outside_window": 2, "too_short_for_a_span": 1}
    fd = load_snapshot(result.path)
    assert len(fd.public) == 10
    assert sum(len(fd[s]) for s in ("train", "validation", "test")) == 60
    client = next(iter(fd.train))
    assert client.spans == fd.train.spans(client.id) and client.meta["license"] == "cc_by"
    info = snapshot_info(fd)
    assert info["n_clients"] == 70 and info["splits"]["public"] == 10
    assert info["date_min"] == "2024-08-01" and info["date_max"] == "2024-09-28"
    assert (result.path / "README.md").read_text().count("Sources and licences") == 1


def test_same_content_same_hash_and_immutable(lfb_home):
    a = build_snapshot(records(), spec(name="fixed"), progress=False)
    b = build_snapshot(list(reversed(records())), spec(name="fixed"), progress=False)
    assert not b.created and a.manifest["content_sha256"] == b.manifest["content_sha256"]
    changed = records()
    changed[0] = rec(0, "2024-09-01", text=TEXT + " One more sentence about the river.")
    with pytest.raises(SnapshotError, match="immutable"):
        build_snapshot(changed, spec(name="fixed"), progress=False)
    default = build_snapshot(changed, spec(), progress=False)
    assert default.path.name.startswith("t-2024-09-01-2024-10-31-")


def test_interrupted_build_leaves_no_snapshot(lfb_home, monkeypatch):
    import largefedbench.data.snapshot as snap

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(snap, "dataset_card", boom)
    with pytest.raises(KeyboardInterrupt):
        build_snapshot(records(), spec(name="half"), progress=False)
    assert not (lfb_home / "snapshots" / "half").exists()
    assert [m["name"] for m in list_snapshots()] == []


def test_duplicate_ids_keep_the_latest():
    dup = records() + [rec(0, "2024-09-20", text=TEXT + " Revised.")]
    result = build_snapshot(dup, spec(), progress=False)
    fd = load_snapshot(result.path)
    split = next(s for s in ("train", "validation", "test") if "t:0" in fd[s])
    assert fd[split].client("t:0").meta["date"] == "2024-09-20"
    assert result.manifest["rejected"]["duplicate_id"] == 1


def test_load_errors_say_what_to_do(tmp_path):
    with pytest.raises(SnapshotError, match="lfb refresh"):
        load_snapshot("nope")
    (tmp_path / "x").mkdir()
    with pytest.raises(SnapshotError, match="not a snapshot"):
        load_snapshot(tmp_path / "x")
    with pytest.raises(InputError, match="YYYY-MM-DD"):
        rec(1, "2024-9-1")
