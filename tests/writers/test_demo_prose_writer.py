"""The demo prose writer: prompts from metadata only, sentence-cut texts, and a resume that writes what an
uninterrupted run would (the LLM is replaced by a seeded fake here; tests/models/test_cpu_profile.py runs the real one)."""

from __future__ import annotations

import random

import pytest

import largefedbench.synthetic.generation as generation
from largefedbench.data.demo import demo_records
from largefedbench.writers.demo_prose import opening_sentence, read_done, write_texts, writer_prompt, written_text


def fake_generate(calls):
    def generate_flat(model, tokenizer, prompts, *, seed, **_):
        calls.append(seed)
        rng = random.Random(seed)
        return [f" Sentence {rng.randint(0, 999)} about it. Another one here. A torn" for _ in prompts]
    return generate_flat


def test_prompts_use_metadata_only_and_speeches_keep_their_opening():
    abstract, speech = demo_records(2)
    prompt = writer_prompt(abstract)
    assert abstract.title in prompt and abstract.category in prompt and abstract.text not in prompt
    assert prompt.startswith("bioRxiv preprint") and prompt.endswith("Abstract:")
    opening = opening_sentence(speech.text)
    assert writer_prompt(speech).endswith(opening) and speech.speaker in writer_prompt(speech)
    assert opening != speech.text  # only the greeting line, not the templated body
    assert written_text(abstract, " First one.\nSecond one. Third cut") == "First one. Second one."
    assert written_text(speech, " And more.") == f"{opening} And more."


def test_a_killed_run_resumes_to_what_an_uninterrupted_one_writes(tmp_path, monkeypatch):
    records = demo_records(10)
    calls: list[int] = []
    monkeypatch.setattr(generation, "generate_flat", fake_generate(calls))
    whole = write_texts(records, None, None, tmp_path / "whole.jsonl", batch_size=4, progress=False)
    assert len(whole) == 10 and len(calls) == 3

    killed = tmp_path / "killed.jsonl"
    real = fake_generate([])
    state = {"n": 0}

    def dies_on_the_second_batch(*args, **kwargs):
        state["n"] += 1
        if state["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(generation, "generate_flat", dies_on_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        write_texts(records, None, None, killed, batch_size=4, progress=False)
    assert len(read_done(killed)) == 4
    with killed.open("a") as fh:
        fh.write('{"id": "demo:torn')  # a kill in the middle of a line
    calls.clear()
    monkeypatch.setattr(generation, "generate_flat", fake_generate(calls))
    resumed = write_texts(records, None, None, killed, batch_size=4, progress=False)
    assert len(calls) == 2  # batches 1 and 2 only
    assert {k: v["text"] for k, v in resumed.items()} == {k: v["text"] for k, v in whole.items()}
    assert {k: v["text"] for k, v in read_done(killed).items()} == {k: v["text"] for k, v in whole.items()}


def test_pack_is_byte_reproducible_in_record_order_and_refuses_gaps(tmp_path, monkeypatch):
    from largefedbench.data.demo import read_prose
    from largefedbench.errors import InputError
    from largefedbench.writers.demo_prose import pack

    records = demo_records(6)
    monkeypatch.setattr(generation, "generate_flat", fake_generate([]))
    rows = write_texts(records, None, None, tmp_path / "w.jsonl", batch_size=4, progress=False)
    first, again = pack(rows, records, tmp_path / "a.jsonl.gz"), pack(dict(reversed(rows.items())), records, tmp_path / "b.jsonl.gz")
    assert first == again and (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert list(read_prose(tmp_path / "a.jsonl.gz")) == [r.id for r in records]
    with pytest.raises(InputError, match="1 of 6 records have no text yet"):
        pack({k: v for k, v in rows.items() if k != records[5].id}, records, tmp_path / "c.jsonl.gz")
