"""demo-prose: the demo's records with the shipped LLM-written texts, built without running an LLM."""

from __future__ import annotations

import gzip
import json

import pytest

from largefedbench.data.demo import N_CLIENTS, PROSE_FILE, build_prose_demo, demo_records, prose_records, read_prose
from largefedbench.errors import SnapshotError
from largefedbench.run.eval import default_dataset


def fake_prose(path, records):
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps({"id": r.id, "text": f"Written prose about {r.title.lower()} for this record."}) + "\n")
    return path


def test_the_shipped_texts_cover_every_demo_record_in_prose():
    texts = read_prose(PROSE_FILE)
    records = demo_records(N_CLIENTS)
    assert {r.id for r in records} <= set(texts)
    templated = {r.id: r.text for r in records}
    assert sum(texts[i] == templated[i] for i in templated) == 0  # every text was written, none copied
    assert sum(len(t.split()) >= 12 for t in texts.values()) / len(texts) > 0.95


def test_prose_records_keep_the_demos_metadata_and_build_a_snapshot(tmp_path, lfb_home):
    records = demo_records(40)
    path = fake_prose(tmp_path / "prose.jsonl.gz", records)
    prose = prose_records(40, path)
    assert [r.id for r in prose] == [r.id for r in records]
    assert all(p.text.startswith("Written prose") and p.date == r.date and p.title == r.title
               for p, r in zip(prose, records))
    built = build_prose_demo(n_clients=40, path=path, progress=False)
    assert built.path.name == "demo-prose-40" and built.manifest["synthetic"] is True
    assert built.manifest["sources"]["demo-biorxiv"]["text_writer"].startswith("HuggingFaceTB/SmolLM2-135M")
    assert default_dataset("cpu") == "demo-prose" and default_dataset("tiny") == "demo"


def test_missing_texts_are_a_clear_error(tmp_path):
    path = fake_prose(tmp_path / "prose.jsonl.gz", demo_records(10))
    with pytest.raises(SnapshotError, match="no text for 10 of the 20 demo records.*resumes"):
        prose_records(20, path)
    with pytest.raises(SnapshotError, match="prose texts are missing"):
        read_prose(tmp_path / "none.jsonl.gz")


def test_the_shipped_prose_demo_builds_to_its_known_hash(tmp_path):
    from largefedbench.leaderboard.snapshots import known_hashes

    built = build_prose_demo(root=tmp_path, progress=False)
    assert built.path.name == "demo-prose"
    assert built.manifest["content_sha256"] in known_hashes("demo-prose", "demo")
