"""Batched generation: left padding changes nothing, seeds reproduce, prompts are cut from the left, texts cleaned."""

from __future__ import annotations

import pytest
import torch

from largefedbench.synthetic.generation import (
    context_length,
    decode_continuations,
    fit_prompt_ids,
    generate,
    generate_flat,
    generate_ids,
)


@pytest.fixture(scope="module")
def lm(tiny):
    fd, bundle, _ = tiny
    spans = fd.public.all_spans()
    prompts = [spans[0][:20], spans[1], spans[2][:60] + " " + spans[3], "The committee"]  # very different lengths
    return bundle.new_generator(), bundle.generator_tokenizer, prompts


def test_batched_greedy_decoding_equals_one_prompt_at_a_time(lm):
    model, tok, prompts = lm  # in float32: padding must change nothing, bit for bit (bf16 is checked by lfb bench llm)
    batched = generate_ids(model, tok, prompts, temperature=0, max_new_tokens=24, batch_size=8, dtype=torch.float32)
    single = [generate_ids(model, tok, [p], temperature=0, max_new_tokens=24, batch_size=1, dtype=torch.float32)[0] for p in prompts]
    assert batched == single
    # and equal to plain HF generate on the unpadded prompt (continuation only, cut before EOS)
    ids = torch.tensor([tok(prompts[1])["input_ids"]])
    full = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24,
                          pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
    cut = full.index(tok.eos_token_id) if tok.eos_token_id in full else len(full)
    assert single[1] == full[:cut]


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(lm):
    model, tok, prompts = lm
    state = torch.get_rng_state()
    a = generate(model, tok, prompts, n_per_prompt=3, max_new_tokens=16, seed=5)
    assert torch.equal(state, torch.get_rng_state())
    assert a == generate(model, tok, prompts, n_per_prompt=3, max_new_tokens=16, seed=5)
    assert a != generate(model, tok, prompts, n_per_prompt=3, max_new_tokens=16, seed=6)
    assert [len(g) for g in a] == [3, 3, 3, 3]
    assert generate_flat(model, tok, prompts, n_per_prompt=3, max_new_tokens=16, seed=5) == [t for g in a for t in g]
    assert all("\n" not in t and "Orig" not in t and t == t.strip() for g in a for t in g)


def test_overlong_prompts_are_truncated_from_the_left(lm):
    model, tok, prompts = lm
    long_prompt = " ".join(prompts * 20)
    ids = tok(long_prompt)["input_ids"]
    assert len(ids) > context_length(model)
    kept = fit_prompt_ids(tok, [long_prompt], context_length(model) - 32)[0]
    assert kept == ids[-(context_length(model) - 32):]
    out = generate_ids(model, tok, [long_prompt, "Short"], max_new_tokens=32, seed=0)
    assert len(out) == 2 and all(len(o) <= 32 for o in out)


def test_raw_continuations_keep_the_text_that_followed_the_prompt(tiny):
    _, bundle, _ = tiny
    tok = bundle.generator_tokenizer
    ids = [tok(" The cell divides.\nOriginal Text Sample 5\nmore", add_special_tokens=False)["input_ids"]]
    assert decode_continuations(tok, ids, clean=False) == [" The cell divides.\n"]
    assert decode_continuations(tok, ids) == ["The cell divides."]
