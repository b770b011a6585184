"""The demo corpus: deterministic, labelled synthetic, real schema, and drifting over time."""

from __future__ import annotations

import json
import math
from collections import Counter

from largefedbench.data.demo import DEMO_WINDOW, build_demo, demo_records
from largefedbench.data.federated import load_snapshot


def test_demo_is_deterministic_and_labelled_synthetic(lfb_home):
    a = build_demo(progress=False)
    m = json.loads((a.path / "manifest.json").read_text())
    assert m["synthetic"] is True and m["name"] == "demo"
    assert "SYNTHETIC" in (a.path / "README.md").read_text().upper()
    assert all("SYNTHETIC" in s["license_note"] for s in m["sources"].values())
    again = build_demo(progress=False)
    assert not again.created and again.manifest["content_sha256"] == m["content_sha256"]
    assert [r.to_dict() for r in demo_records(50)] == [r.to_dict() for r in demo_records(50)]


def test_demo_has_the_schema_of_the_real_datasets(lfb_home):
    fd = load_snapshot("demo")  # built on first use
    assert fd.synthetic and 3000 <= sum(len(s) for s in fd.splits.values()) <= 5000
    clients = list(fd.train) + list(fd.public)
    speeches = [c for c in clients if c.meta["source"] == "demo-congress"]
    abstracts = [c for c in clients if c.meta["source"] == "demo-biorxiv"]
    assert {c.meta["country"] for c in speeches} == {"USA", "GBR", "CAN"}
    assert {c.meta["chamber"] for c in speeches} >= {"House", "Senate", "Commons", "Lords", "House of Commons"}
    assert all(c.meta["speaker"] for c in speeches) and all(c.meta["category"] for c in abstracts)
    years = {c.meta["date"][:4] for c in clients}
    assert {"2019", "2025"} <= years
    assert len(fd.train) > 1000 and len(fd.public) > 1000


def _bigram_model(texts):
    counts, unigrams = Counter(), Counter()
    for t in texts:
        words = t.lower().split()
        unigrams.update(words)
        counts.update(zip(words, words[1:]))
    return counts, unigrams


def _log_likelihood(model, texts):
    counts, unigrams = model
    vocab = len(unigrams) + 1
    total = 0.0
    n = 0
    for t in texts:
        words = t.lower().split()
        for a, b in zip(words, words[1:]):
            total += math.log((counts[(a, b)] + 0.1) / (unigrams[a] + 0.1 * vocab * 10))
            n += 1
    return total / n


def test_private_text_drifts_from_public_text(lfb_home):
    """A model of the private train clients predicts the private test clients better than one of public text."""
    fd = load_snapshot("demo")
    public = [s for c in fd.public for s in c.spans]
    private = [s for c in fd.train for s in c.spans][: len(public)]
    test = [s for c in fd.test for s in c.spans]
    assert _log_likelihood(_bigram_model(private), test) > _log_likelihood(_bigram_model(public), test) + 0.1
    def freq(split, word):
        return sum(c.meta["text"].lower().count(word) for c in split) / len(split)

    # Topics that emerge shortly before the window are far more frequent inside it ...
    for word in ("h5n1", "deepfake", "tirzepatide"):
        assert freq(fd.train, word) > 5 * freq(fd.public, word) > 0
    # ... and one starts inside it: its words are unseen in public text.
    assert freq(fd.public, "tariff") == 0 < freq(fd.train, "tariff")
    assert DEMO_WINDOW.since.isoformat() == fd.manifest["window"]["since"]


def test_version_2_is_version_1_four_months_later_after_the_offline_generators_cutoff():
    """Same texts and draws as version 1, each record 4 months later; the window starts after SmolLM2's cutoff."""
    import datetime as dt

    from largefedbench.data.demo import LEXICON_WINDOW, add_months
    from largefedbench.data.windows import after_cutoff
    from largefedbench.models.profiles import CPU

    records = demo_records(400)
    days = [dt.date.fromisoformat(r.date) for r in records]
    assert DEMO_WINDOW.since == dt.date(2025, 1, 1) and add_months(LEXICON_WINDOW.since, 4) == DEMO_WINDOW.since
    assert sum(d >= DEMO_WINDOW.since for d in days) > 150 and min(days) >= DEMO_WINDOW.public_since
    assert max(days) <= DEMO_WINDOW.until and add_months(dt.date(2024, 8, 31), 4) == dt.date(2024, 12, 31)
    assert after_cutoff(DEMO_WINDOW.since, CPU.generator.id) is True
    assert after_cutoff(LEXICON_WINDOW.since, CPU.generator.id) is False  # version 1 was not: why it moved


def test_a_demo_folder_from_an_older_generator_version_is_refused_with_what_to_do(lfb_home, capsys):
    import shutil

    import pytest

    from largefedbench.cli import main
    from largefedbench.errors import SnapshotError

    small = build_demo(n_clients=60, progress=False).path
    old = small.parent / "demo"  # what an older release left in $LFB_HOME
    shutil.copytree(small, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for source in manifest["sources"].values():
        source["generator_version"] = "1"
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SnapshotError, match=r"demo generator version 1.*Move or delete that folder.*lfb data demo"):
        load_snapshot("demo")
    assert main(["data", "demo", "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "version 1" in err and "--name" not in err and "Traceback" not in err
    shutil.rmtree(old)
    assert load_snapshot("demo").manifest["sources"]["demo-biorxiv"]["generator_version"] == "2"  # rebuilt
