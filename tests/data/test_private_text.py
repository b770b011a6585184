"""The private-text search: word runs only private texts have are found anywhere, readable text never is."""

from __future__ import annotations

import json

import numpy as np

from largefedbench.data.private_text import LeakSearch, PrivateRuns, canary_texts, run_hashes

PRIVATE = ["the committee heard that the new flood barrier at quillby marsh failed twice this spring and must be rebuilt",
           "we found that the kinase domain folds only when the cofactor binds first"]
PUBLIC = ["the committee heard that the budget was approved", "we found that the kinase domain folds"]


def test_a_run_of_private_words_is_found_and_shared_runs_are_not():
    runs = PrivateRuns(PRIVATE, PUBLIC, n=6)
    assert len(runs) > 0
    leaked = runs.find(["As reported: THE NEW FLOOD BARRIER, at Quillby Marsh failed twice!"], "out")
    assert [leak.what for leak in leaked] == ["the new flood barrier at quillby"]
    assert leaked[0].where == "out"
    assert runs.find(["the committee heard that the budget was approved today"], "out") == []  # public words
    assert runs.find(["the kinase domain folds only when"], "out")[0].what == "the kinase domain folds only when"


def test_runs_never_cross_from_one_text_into_the_next():
    h, owner, _ = run_hashes(["a b c", "d e f"], 3)
    assert len(h) == 2 and list(owner) == [0, 1]
    runs = PrivateRuns(["c d e f g h"], [], n=3)
    assert runs.find(["a b c", "d e f"], "out") != []  # "d e f" is a private run inside one text
    assert PrivateRuns(["b c d"], [], n=3).find(["a b c", "d e f"], "out") == []  # "b c | d" spans two texts


def test_the_search_names_where_it_found_text_and_canaries(tmp_path):
    secrets = canary_texts(np.random.default_rng(0), 2)
    assert len({w for spans in secrets for t in spans for w in t.split()}) == 12
    search = LeakSearch(PrivateRuns(PRIVATE, PUBLIC, n=6), [w for spans in secrets for t in spans for w in t.split()])
    search.texts(["harmless", PRIVATE[0]], "texts")
    search.value({"notes": ["ok", "it said " + PRIVATE[1]]}, "info")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "state.bin").write_bytes(b"\x00\x01" + secrets[1][0].split()[2].upper().encode() + b"\xff")
    (tmp_path / "rows.json").write_text(json.dumps({"kept": PRIVATE[0]}))
    (tmp_path / "round-checkpoint.pt").write_text(PRIVATE[1])  # binary state: searched for canaries only
    search.folder(tmp_path)
    where = [leak.where for leak in search.leaks]
    assert "texts[1]" in where and "info.notes[1]" in where
    assert any(w.endswith("state.bin") for w in where) and any(w.endswith("rows.json") for w in where)
    assert not any(w.endswith("round-checkpoint.pt") for w in where)
    clean = LeakSearch(PrivateRuns(PRIVATE, PUBLIC, n=6), ["zzzzzzzzzzzz"])
    clean.texts(PUBLIC, "texts")
    clean.folder(tmp_path / "missing")
    assert clean.leaks == []
