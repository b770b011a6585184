"""LoRA adapters: the paper's targets per architecture, a no-op at start, weights that round-trip."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from largefedbench.synthetic.lora import (
    add_lora,
    default_target_modules,
    load_lora_state,
    lora_state,
)


def test_default_targets_are_the_attention_and_mlp_projections():
    assert default_target_modules(SimpleNamespace(config=SimpleNamespace(model_type="gpt2"))) == ["c_attn", "c_proj", "c_fc"]
    llama = default_target_modules(SimpleNamespace(config=SimpleNamespace(model_type="llama")))
    assert set(llama) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert default_target_modules(SimpleNamespace(config=SimpleNamespace(model_type="other"))) == "all-linear"


def test_lora_starts_as_the_base_model_and_its_state_round_trips(tiny):
    _, bundle, _ = tiny
    ids = torch.tensor([[5, 17, 300, 42, 7]])
    base = bundle.new_generator()
    with torch.no_grad():
        expected = base(input_ids=ids).logits
    model = add_lora(bundle.new_generator(), rank=4, alpha=8)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable} == {"c_attn", "c_proj", "c_fc"}
    assert model.peft_config["default"].r == 4 and model.peft_config["default"].lora_alpha == 8
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, expected, atol=1e-6)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
        changed = model(input_ids=ids).logits
    assert not torch.allclose(changed, expected, atol=1e-3)
    state = lora_state(model)
    other = add_lora(bundle.new_generator(), rank=4, alpha=8)
    load_lora_state(other, state)
    with torch.no_grad():
        assert torch.allclose(other(input_ids=ids).logits, changed, atol=1e-6)
