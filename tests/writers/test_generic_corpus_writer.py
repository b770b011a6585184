"""The generic corpus writer: chat prompts over (genre, topic), answers cleaned to plain prose, resumable batches
(the LLM is replaced by a seeded fake here; the corpus itself was written by SmolLM2-135M-Instruct)."""

from __future__ import annotations

import random

import largefedbench.synthetic.generation as generation
from largefedbench.data.public_corpus import instruction
from largefedbench.writers.demo_prose import read_done
from largefedbench.writers.generic_corpus import clean_answer, pack, write_corpus


class ChatTokenizer:
    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return f"<user>{messages[0]['content']}</user><assistant>"


def fake_generate(calls):
    def generate_flat(model, tokenizer, prompts, *, seed, **_):
        calls.append(seed)
        rng = random.Random(seed)
        return [f"## A title\n**Bold** words {rng.randint(0, 99)} and more words here to pass. The end. A torn"
                for _ in prompts]
    return generate_flat


def test_answers_become_plain_prose_cut_after_the_last_sentence():
    assert clean_answer("# Title\n\n**Gardening** is fun.\n- Water daily. Then") == "Title Gardening is fun. Water daily."
    assert clean_answer("No full stop at all") == "No full stop at all"
    assert instruction("a how-to guide", "baking bread").startswith("Write a how-to guide about baking bread.")


def test_the_writer_resumes_and_packs_only_full_texts(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(generation, "generate_flat", fake_generate(calls))
    out = tmp_path / "g.jsonl"
    rows = write_corpus(None, ChatTokenizer(), out, limit=10, batch_size=4, progress=False)
    assert len(rows) == 10 and len(calls) == 3
    first = next(iter(rows.values()))
    assert first["text"].startswith("A title Bold words") and first["text"].endswith("The end.")
    assert first["genre"] and first["topic"] and "short" not in first
    calls.clear()
    again = write_corpus(None, ChatTokenizer(), out, limit=10, batch_size=4, progress=False)
    assert calls == [] and again == read_done(out)  # nothing left to write
    digest, left_out = pack(rows, list(rows), tmp_path / "g.jsonl.gz")
    assert left_out == 0 and digest == pack(rows, list(rows), tmp_path / "h.jsonl.gz")[0]  # byte-reproducible
