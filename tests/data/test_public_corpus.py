"""Public resources as a recorded choice: the shipped generic corpus, C4 through ``datasets`` on local
shards in C4's own layout, the snapshot's pre-window split, and clear errors for anything else."""

from __future__ import annotations

import gzip
import json

import pytest

from largefedbench.data.demo_lexicon import PRIVATE_TOPIC_MARKERS, private_topics_named
from largefedbench.data.public_corpus import (
    GENERIC_FILE,
    GENRES,
    TOPICS,
    file_sha256,
    generic_items,
    load_public_corpus,
    parse_public,
    read_generic,
)
from largefedbench.errors import InputError, LfbError


def test_the_generic_corpus_ships_and_names_none_of_the_demo_windows_topics():
    texts = read_generic()
    assert len(texts) > 12_000  # 175 topics x 18 genres x 4, less the short answers left out
    named = [(t[:80], private_topics_named(t)) for t in texts if private_topics_named(t)]
    assert named == []  # generic English: none of the demo window's topics (H5N1, GLP-1, tariffs, deepfakes, ...)
    assert not [t for t in TOPICS if private_topics_named(t)]
    assert len(set(generic_items())) == 4 * len(GENRES) * len(TOPICS)
    assert len(file_sha256(GENERIC_FILE)) == 64


def test_the_topic_markers_find_what_they_name():
    assert private_topics_named("Farmers fear H5N1 in raw milk and new tariffs") == ["avian_influenza", "tariffs"]
    assert private_topics_named("A recipe for apple pie") == []
    assert set(PRIVATE_TOPIC_MARKERS) >= {"glp1", "bird_flu", "ai_regulation"}


def test_generic_and_split_corpora_are_cut_with_the_snapshots_span_settings(tiny):
    fd, _, _ = tiny
    split = load_public_corpus("split", fd)
    assert split.spans == fd.public.all_spans() and split.kind == "split"
    generic = load_public_corpus("generic", fd)
    assert generic.kind == "generic" and generic.n_spans > 2 * len(generic.documents) > 20_000
    assert generic.describe()["sha256"] == load_public_corpus("generic", fd).sha256  # deterministic
    assert generic.sha256 != split.sha256 and "generic_corpus.jsonl.gz" in generic.source
    # 64-token spans of the snapshot's span tokenizer: no span is longer than a private one can be
    from largefedbench.data.public_corpus import span_settings
    from largefedbench.data.spans import get_span_tokenizer

    settings = span_settings(fd.manifest)
    tok = get_span_tokenizer(settings.tokenizer)
    counts = [n for _, n in tok.span_starts(generic.spans[:200], settings.span_tokens)]
    assert max(counts) <= settings.span_tokens


def _c4_shard(path, n):
    """A shard in allenai/c4's layout: gzipped JSON lines with text, timestamp and url."""
    rows = [{"text": f"Document {i} is about walking the dog in the park on a sunny morning. " * 3,
             "timestamp": "2019-04-25T12:57:54Z", "url": f"https://example.com/{i}"} for i in range(n)]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))


def test_c4_is_a_seeded_sample_read_through_datasets_from_local_shards(tiny, tmp_path):
    fd, _, _ = tiny
    (tmp_path / "en").mkdir()
    _c4_shard(tmp_path / "en" / "c4-train.00000-of-01024.json.gz", 40)
    _c4_shard(tmp_path / "en" / "c4-train.00001-of-01024.json.gz", 40)
    a = load_public_corpus(f"c4:{tmp_path / 'en'}", fd, c4_documents=25, seed=0)
    b = load_public_corpus(f"c4:{tmp_path / 'en'}", fd, c4_documents=25, seed=0)
    c = load_public_corpus(f"c4:{tmp_path / 'en' / 'c4-train.*.json.gz'}", fd, c4_documents=25, seed=1)
    assert a.kind == "c4" and len(a.documents) == 25 and a.sha256 == b.sha256 and a.sha256 != c.sha256
    assert "2 local C4 shard(s)" in a.source and str(tmp_path) not in a.source  # no path of this machine


def test_c4_from_the_hub_offline_says_what_to_do_instead(tiny, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(LfbError, match="--public c4:PATH"):
        load_public_corpus("c4", tiny[0], c4_documents=5)


@pytest.mark.parametrize("spec", ["c5", "generic:x", "split:here", ""])
def test_an_unknown_public_resource_is_refused_with_the_choices(spec):
    with pytest.raises(InputError, match="choose generic"):
        parse_public(spec)
    assert parse_public("c4:/data/c4") == ("c4", "/data/c4") and parse_public("generic") == ("generic", None)
