"""Our decode loop: exact nucleus sampling, one prefill per distinct prompt, the bf16 inference copy."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import largefedbench.synthetic.generation as generation
from largefedbench.errors import InputError
from largefedbench.models.precision import ENV_VAR, generation_dtype, inference_copy
from largefedbench.synthetic.generation import decode_batch, generate_ids, nucleus_sample
from largefedbench.synthetic.lora import add_lora


def nucleus_distribution(logits: torch.Tensor, temperature: float, top_p: float) -> np.ndarray:
    """The top-p distribution written out the slow way: sort, keep while the mass before a token is < top_p."""
    p = torch.softmax(logits.double() / temperature, -1).numpy()
    order = np.argsort(-p, kind="stable")
    before = np.concatenate([[0.0], np.cumsum(p[order])[:-1]])
    keep = np.zeros_like(p)
    keep[order[before < top_p]] = 1
    q = p * keep
    return q / q.sum()


@pytest.mark.parametrize("top", [1024, 3])  # 3: the top ones hold < top_p, so the full sort runs
def test_nucleus_sampling_draws_from_the_exact_top_p_distribution(monkeypatch, top):
    monkeypatch.setattr(generation, "NUCLEUS_TOP", top)
    logits = torch.tensor([[2.0, 1.5, 1.0, 0.5, 0.0, -1.0, -3.0, -6.0]])
    want = nucleus_distribution(logits[0], 0.8, 0.9)
    n = 40_000
    draws = nucleus_sample(logits.expand(n, -1), 0.8, 0.9, torch.Generator().manual_seed(0)).numpy()
    got = np.bincount(draws, minlength=8) / n
    assert np.all(got[want == 0] == 0), "a token outside the nucleus was drawn"
    assert np.abs(got - want).max() < 4 * np.sqrt(want.max() / n)  # within sampling error
    full = nucleus_sample(logits.expand(n, -1), 1.3, 1.0, torch.Generator().manual_seed(1)).numpy()
    assert np.abs(np.bincount(full, minlength=8) / n - nucleus_distribution(logits[0], 1.3, 1.0)).max() < 0.01
    assert nucleus_sample(logits, 0, 0.5, torch.Generator()).item() == 0  # temperature 0: greedy


def test_a_prompt_is_prefilled_once_for_all_its_samples(tiny, monkeypatch):
    _, bundle, _ = tiny
    model, tok = bundle.new_generator().eval(), bundle.generator_tokenizer
    a, b = tok("The committee met on")["input_ids"], tok("A short note")["input_ids"]
    widths = []
    forward = model.forward

    def spy(*args, **kwargs):
        widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    kwargs = {"max_new_tokens": 6, "temperature": 0, "top_p": 1.0, "pad_id": tok.eos_token_id, "eos": set()}
    shared = decode_batch(model, [a, a, b, a], generator=torch.Generator(), **kwargs)
    assert widths[0] == (2, max(len(a), len(b)))  # the prefill: two distinct prompts, not four rows
    assert all(w == (4, 1) for w in widths[1:])
    monkeypatch.setattr(model, "forward", forward)
    alone = [decode_batch(model, [r], generator=torch.Generator(), **kwargs)[0] for r in (a, a, b, a)]
    assert shared == alone  # greedy: each row's tokens are its prompt's, whatever it shares a batch with


def test_the_inference_copy_merges_the_adapter_and_leaves_the_model_alone(tiny):
    _, bundle, _ = tiny
    model = add_lora(bundle.new_generator(), rank=4, alpha=8, seed=0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)  # a trained adapter (lora_B starts at zero)
    ids = torch.tensor([[5, 17, 42, 7, 99]])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        want = model(input_ids=ids).logits
        low = inference_copy(model, torch.bfloat16)
        got = low(input_ids=ids).logits.float()
    assert not hasattr(low, "peft_config") and next(low.parameters()).dtype == torch.bfloat16
    assert torch.allclose(got, want, atol=0.15), (got - want).abs().max()
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.8
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # float32, adapter unmerged
    assert inference_copy(model, None) is model and inference_copy(model, torch.float32) is model


def test_the_generation_dtype_follows_the_hardware_and_the_environment(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr("largefedbench.models.precision.cpu_bf16", lambda: "amx_bf16")
    assert generation_dtype(torch.device("cpu")) == torch.bfloat16
    assert generation_dtype(torch.device("cuda")) is None
    monkeypatch.setattr("largefedbench.models.precision.cpu_bf16", lambda: None)
    assert generation_dtype(torch.device("cpu")) is None
    monkeypatch.setenv(ENV_VAR, "float32")
    assert generation_dtype(torch.device("cpu")) == torch.float32
    monkeypatch.setenv(ENV_VAR, "fp8")
    with pytest.raises(InputError, match="LFB_GENERATION_DTYPE='fp8'; choose one of float32, bfloat16"):
        generation_dtype(torch.device("cpu"))


def test_an_entrys_precision_record_names_what_ran_and_what_pins_it_again(monkeypatch):
    """``precision_record`` is what an entry records: float32 on a CPU without bf16 (every generator loads in float32
    there), "as loaded" only on CUDA; ``default_precision`` ignores the shell; ``precision_env`` pins a recorded dtype,
    unsets "as loaded" and leaves an unrecorded entry alone."""
    from largefedbench.models.precision import TRAINING_ENV_VAR, default_precision, precision_env, precision_record

    cpu = torch.device("cpu")
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(TRAINING_ENV_VAR, raising=False)
    monkeypatch.setattr("largefedbench.models.precision.cpu_bf16", lambda: None)
    assert precision_record(cpu) == {"generation": "float32", "training": "float32"}
    monkeypatch.setattr("largefedbench.models.precision.cpu_bf16", lambda: "avx512_bf16")
    assert precision_record(cpu)["generation"] == "bfloat16"
    assert precision_record(torch.device("cuda"))["generation"] == "as loaded"
    monkeypatch.setenv(ENV_VAR, "float32")
    monkeypatch.setenv(TRAINING_ENV_VAR, "bfloat16")
    assert precision_record(cpu) == {"generation": "float32", "training": "bfloat16"}
    assert default_precision(cpu) == {"generation": "bfloat16", "training": "float32"}
    assert os.environ[ENV_VAR] == "float32" and os.environ[TRAINING_ENV_VAR] == "bfloat16"  # put back
    pins = precision_env({"generation": "as loaded", "training": "float32"})
    assert pins == {ENV_VAR: None, TRAINING_ENV_VAR: "float32"}
    assert precision_env(None) == {}


def test_sampling_in_bf16_is_seeded_and_close_to_float32(tiny):
    fd, bundle, _ = tiny
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    prompts = [s[:40] for s in fd.public.all_spans()[:6]]
    a = generate_ids(model, tok, prompts, n_per_prompt=2, max_new_tokens=12, seed=3, dtype=torch.bfloat16)
    assert a == generate_ids(model, tok, prompts, n_per_prompt=2, max_new_tokens=12, seed=3, dtype=torch.bfloat16)
    assert a != generate_ids(model, tok, prompts, n_per_prompt=2, max_new_tokens=12, seed=4, dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.float32  # sampling never touches the model's own weights


def test_the_inference_copy_is_kept_until_a_parameter_changes(tiny):
    _, bundle, _ = tiny
    model = add_lora(bundle.new_generator(), rank=4, alpha=8, seed=0)
    first = inference_copy(model, torch.bfloat16)
    assert inference_copy(model, torch.bfloat16) is first  # unchanged: the kept copy
    with torch.no_grad():
        next(p for n, p in model.named_parameters() if "lora_B" in n).add_(0.5)  # what an optimizer step does
    second = inference_copy(model, torch.bfloat16)
    assert second is not first
    ids = torch.tensor([[5, 17, 42]])
    with torch.no_grad():
        assert not torch.equal(first(input_ids=ids).logits, second(input_ids=ids).logits)


@pytest.mark.slow
def test_the_inference_copy_follows_a_dpo_update(tiny):
    """trl's DPO steps change the adapter without bumping the parameters' version counters: the copy must still be
    made again, or a method samples after DPO from its generator before it (e.g. a final synthetic set drawn from the
    stale copy)."""
    from largefedbench.synthetic.dpo import dpo_update

    _, bundle, _ = tiny
    model, tok = add_lora(bundle.new_generator(), rank=4, alpha=8, seed=0), bundle.generator_tokenizer
    before = inference_copy(model, torch.bfloat16)
    dpo_update(model, tok, ["a b c"] * 8, ["d e f g"] * 8, ["x y z w"] * 8, beta=0.1, lr=5e-3, epochs=2, batch_size=4)
    after = inference_copy(model, torch.bfloat16)
    assert after is not before
    ids = torch.tensor([[5, 17, 42]])
    with torch.no_grad():
        assert not torch.equal(before(input_ids=ids).logits, after(input_ids=ids).logits)


def test_cached_greedy_decoding_equals_recomputing_the_whole_sequence(tiny):
    """The naive reference: no cache, the full sequence through the model at every step. A model that silently
    ignored the cache keyword (transformers before its `past_key_values` -> `cache` rename) failed this."""
    _, bundle, _ = tiny
    model, tok = bundle.new_generator().eval(), bundle.generator_tokenizer
    prompt = tok("The committee met on Tuesday to discuss")["input_ids"]
    got = decode_batch(model, [prompt], max_new_tokens=8, temperature=0, top_p=1.0, generator=torch.Generator(),
                       pad_id=tok.eos_token_id, eos=set())[0]
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(8):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    assert got == ids[len(prompt):]


def test_a_model_that_ignores_its_cache_is_refused(tiny):
    from largefedbench.errors import MethodError
    from largefedbench.synthetic.generation import cache_keyword

    _, bundle, _ = tiny
    inner, tok = bundle.new_generator().eval(), bundle.generator_tokenizer

    class Forgetful(torch.nn.Module):  # takes the cache keyword and drops it
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None,
                    logits_to_keep=0):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              use_cache=False, logits_to_keep=logits_to_keep)

    class OldStyle(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None, use_cache=None):
            raise AssertionError

    assert cache_keyword(Forgetful()) == "cache" and cache_keyword(OldStyle()) == "past_key_values"
    assert cache_keyword(add_lora(bundle.new_generator(), rank=2, alpha=4)) == cache_keyword(inner)  # through peft
    with pytest.raises(MethodError, match="ignored its KV cache"):
        decode_batch(Forgetful(), [tok("a note")["input_ids"]], max_new_tokens=3, temperature=0, top_p=1.0,
                     generator=torch.Generator(), pad_id=tok.eos_token_id, eos=set())
