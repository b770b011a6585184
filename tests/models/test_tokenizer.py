"""The tiny profile's trained byte-level BPE: HF and tiktoken give identical ids; LM framing and padding."""

from __future__ import annotations

import pytest
import torch

from largefedbench.data import load_snapshot
from largefedbench.data.spans import get_span_tokenizer
from largefedbench.errors import InputError
from largefedbench.models import (
    EOT,
    lm_sequences,
    load_tiktoken,
    load_trained_tokenizer,
    pad_batch,
    save_trained_tokenizer,
    train_bpe,
)

EDGE_CASES = [
    "", " ", "  two leading and two trailing  ", "a\n\nb\tc  d\r\n", "It's they're we'll 2024's 1234567 numbers!!!",
    "Ünïcödé — “quotes” 日本語のテキスト 🙂🧬", "x" * 300, "<|endoftext|> is ordinary text here",
]


@pytest.fixture(scope="module")
def demo(shared_root):
    return load_snapshot("demo", home=shared_root)


@pytest.fixture(scope="module")
def trained(demo, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    bpe = train_bpe(demo.public.all_spans(), vocab_size=4096)
    digests = save_trained_tokenizer(bpe, folder)
    return folder, bpe, digests


def test_vocab_is_bounded_and_the_special_token_is_last(trained):
    _, bpe, digests = trained
    n = bpe.get_vocab_size()
    assert 256 < n <= 4096
    assert bpe.token_to_id(EOT) == n - 1
    assert set(digests) == {"tokenizer.json", "bpe.tiktoken"} and all(len(d) == 64 for d in digests.values())


def test_tiktoken_ids_are_identical_to_hf_ids(trained, demo):
    folder, bpe, _ = trained
    hf = load_trained_tokenizer(folder)
    enc = load_tiktoken(folder / "bpe.tiktoken")
    assert enc.n_vocab == len(hf) == bpe.get_vocab_size()
    assert enc.eot_token == hf.eos_token_id
    texts = demo.public.all_spans() + demo.train.all_spans() + demo.test.all_spans() + EDGE_CASES
    hf_ids = hf(texts, add_special_tokens=False)["input_ids"]
    # HF treats a literal "<|endoftext|>" in text as the special token; tiktoken does so when allowed to.
    tt_ids = enc.encode_batch(texts, allowed_special="all")
    mismatches = [t for t, a, b in zip(texts, hf_ids, tt_ids) if a != b]
    assert not mismatches, mismatches[:3]
    assert [enc.decode(ids) for ids in tt_ids] == texts  # byte-level: lossless
    assert hf_ids[-1][0] == enc.eot_token and enc.encode_ordinary(texts[-1])[0] != enc.eot_token
    # private-only words are split into smaller pieces, public words are mostly whole tokens
    assert len(enc.encode_ordinary(demo.public.all_spans()[0])) < len(demo.public.all_spans()[0]) / 3


def test_the_tiktoken_file_works_as_a_snapshot_span_tokenizer(trained):
    folder, _, _ = trained
    span_tok = get_span_tokenizer(str(folder / "bpe.tiktoken"))
    enc = load_tiktoken(folder / "bpe.tiktoken")
    text = "Mr. Speaker, the evidence on hospital waiting lists is clear."
    assert span_tok.encoding.encode_ordinary(text) == enc.encode_ordinary(text)


def test_pretrained_tokenizer_has_bos_eos_pad(trained):
    hf = load_trained_tokenizer(trained[0])
    assert hf.bos_token == hf.eos_token == hf.pad_token == EOT
    assert hf.bos_token_id == len(hf) - 1


def test_lm_sequences_frame_and_truncate(trained):
    hf = load_trained_tokenizer(trained[0])
    e = hf.eos_token_id
    ids = hf("hello world", add_special_tokens=False)["input_ids"]
    long_text = "word " * 200
    seqs = lm_sequences(hf, ["hello world", "", long_text], max_len=64)
    assert seqs[0] == [e] + ids + [e]
    assert seqs[1] == [e, e]
    assert len(seqs[2]) == 64 and seqs[2][0] == e and seqs[2][-1] != e  # EOS truncated away
    assert lm_sequences(hf, [], 64) == []
    with pytest.raises(InputError, match="at least 2"):
        lm_sequences(hf, ["x"], max_len=1)


def test_pad_batch_right_pads_with_a_mask():
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert ids.dtype == mask.dtype == torch.long
    with pytest.raises(InputError):
        pad_batch([], 0)


def test_tiny_vocab_is_rejected():
    with pytest.raises(InputError, match="too small"):
        train_bpe(["abc"], vocab_size=100)
