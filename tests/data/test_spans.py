"""Span cutting: successive, non-overlapping spans with an explicit tokenizer and last-span rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from largefedbench.data.spans import SpanSettings, cut_spans, get_span_tokenizer
from largefedbench.errors import InputError

WP = "minilm-wordpiece"


def n_tokens(text: str) -> int:
    return len(get_span_tokenizer(WP).token_starts([text])[0])


def test_spans_are_successive_and_exactly_span_tokens_long():
    text = " ".join(f"word{i}" for i in range(300))
    (spans, n), = cut_spans([text], SpanSettings(tokenizer=WP, span_tokens=64, last_span_min_tokens=1))
    assert n == n_tokens(text) and len(spans) == -(-n // 64)
    # Nothing lost, nothing repeated, order kept (a cut may fall inside a word, between two word pieces).
    assert "".join(spans).replace(" ", "") == text.replace(" ", "")
    starts = get_span_tokenizer(WP).token_starts([text])[0]
    assert [text.find(s) for s in spans] == [int(starts[i * 64]) for i in range(len(spans))]


def test_last_span_rule():
    text = " ".join(["alpha"] * 70)  # 70 tokens: one full span and a partial one of 6
    keep = SpanSettings(tokenizer=WP, span_tokens=64, last_span_min_tokens=1)
    drop = SpanSettings(tokenizer=WP, span_tokens=64, last_span_min_tokens=64)
    quarter = SpanSettings(tokenizer=WP, span_tokens=64, last_span_min_tokens=16)
    assert len(cut_spans([text], keep)[0][0]) == 2
    assert len(cut_spans([text], drop)[0][0]) == 1
    assert len(cut_spans([text], quarter)[0][0]) == 1
    assert cut_spans(["too short"], quarter)[0][0] == []
    assert "16 tokens" in quarter.last_span_rule and drop.last_span_rule == "drop the partial last span"


def test_spans_keep_original_case_and_unicode():
    text = "Café Münster — Δ-receptors in the Hôpital Saint-Louis. " * 10
    (spans, _), = cut_spans([text], SpanSettings(tokenizer=WP, span_tokens=16, last_span_min_tokens=1))
    assert all(s in text for s in spans) and "Café" in spans[0]


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=400))
def test_spans_are_substrings_in_order(text):
    (spans, _), = cut_spans([text], SpanSettings(tokenizer=WP, span_tokens=8, last_span_min_tokens=1))
    pos = 0
    for s in spans:
        at = text.find(s, pos)
        assert at >= pos
        pos = at + len(s)


def test_tiktoken_file_tokenizer_matches_byte_offsets(tmp_path):
    """A BPE in a local .tiktoken file (as the tiny profile trains) cuts exact substrings, unicode included."""
    import base64

    ranks = {bytes([i]): i for i in range(256)}
    for j, merge in enumerate([b"th", b"the", b"in", b" the", b"\xc3\xa9"]):
        ranks[merge] = 256 + j
    path = tmp_path / "toy.tiktoken"
    path.write_text("".join(f"{base64.b64encode(k).decode()} {v}\n" for k, v in ranks.items()))
    text = "the thin café in the inn"
    (spans, n), = cut_spans([text], SpanSettings(tokenizer=str(path), span_tokens=4, last_span_min_tokens=1))
    assert "".join(s.replace(" ", "") for s in spans) == text.replace(" ", "")
    assert get_span_tokenizer(str(path)).describe()["vocab_sha256"]


def test_unknown_and_offline_errors_say_what_to_do(tmp_path):
    with pytest.raises(InputError, match="minilm-wordpiece"):
        get_span_tokenizer("bert-base")
    with pytest.raises(InputError, match="does not exist"):
        get_span_tokenizer(str(tmp_path / "missing.tiktoken"))
    with pytest.raises(InputError):
        SpanSettings(span_tokens=0)
    with pytest.raises(InputError):
        SpanSettings(span_tokens=64, last_span_min_tokens=65)


def test_gpt2_is_explicit_never_a_silent_fallback(monkeypatch):
    """Offline, the paper's default fails loudly and names the offline choice instead of switching to it."""
    import tiktoken

    def offline(name):
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    get_span_tokenizer.cache_clear()
    with pytest.raises(InputError, match="--span-tokenizer minilm-wordpiece"):
        get_span_tokenizer("gpt2")
    get_span_tokenizer.cache_clear()
