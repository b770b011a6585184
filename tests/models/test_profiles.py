"""Model profiles: names, the paper's values, validation, devices."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from largefedbench.data import get_cutoff
from largefedbench.errors import InputError
from largefedbench.models import PROFILES, HubModel, TinyGPT2, get_device, get_profile, list_profiles


def test_known_profiles_and_unknown_name_lists_them():
    assert list_profiles() == ["paper", "small", "cpu", "cpu-wide", "tiny"]
    assert get_profile("tiny") is PROFILES["tiny"]
    assert get_profile(PROFILES["paper"]) is PROFILES["paper"]
    with pytest.raises(InputError, match="unknown model profile 'huge'.*paper, small, cpu, cpu-wide, tiny"):
        get_profile("huge")


def test_cpu_wide_is_cpu_with_a_wider_downstream_and_the_same_defaults():
    """Only the on-device model differs (6 layers, 384 wide, ≈12M parameters)."""
    from largefedbench.models.tiny import build_tiny_gpt2
    from largefedbench.run.eval import default_dataset

    cpu, wide = PROFILES["cpu"], PROFILES["cpu-wide"]
    assert (wide.generator, wide.embedder, wide.tokenizer, wide.downstream_training, wide.public) == \
        (cpu.generator, cpu.embedder, cpu.tokenizer, cpu.downstream_training, cpu.public)
    assert (wide.downstream.n_layer, wide.downstream.n_embd) == (6, 384) and wide.downstream.pretrain_steps == 3600
    n = sum(p.numel() for p in build_tiny_gpt2(wide.downstream, 4096, 4095).parameters())
    assert 11e6 < n < 13e6
    assert wide.preset == cpu.preset == "cpu" and PROFILES["tiny"].preset == "tiny" and PROFILES["paper"].preset == "paper"
    assert default_dataset("cpu-wide") == default_dataset("cpu") == "demo-prose" and default_dataset("tiny") == "demo"


def test_paper_profile_names_the_papers_models_and_downstream_defaults():
    paper = get_profile("paper")
    assert paper.generator == HubModel("meta-llama/Meta-Llama-3-8B")
    assert paper.embedder == HubModel("sentence-transformers/all-MiniLM-L6-v2")
    assert paper.downstream == HubModel("distilgpt2") and paper.tokenizer == HubModel("distilgpt2")
    assert paper.span_tokenizer == "gpt2"
    t = paper.downstream_training
    assert (t.lr, t.batch_size, t.epochs, t.max_len) == (2e-4, 160, 80, 64)


def test_small_profile_uses_a_sub_1b_generator_with_a_registered_cutoff():
    small = get_profile("small")
    assert small.generator.id == "Qwen/Qwen2.5-0.5B"
    assert get_cutoff(small.generator.id).cutoff  # the window can be placed after it
    assert small.downstream == get_profile("paper").downstream


def test_tiny_profile_is_offline_and_small():
    tiny = get_profile("tiny")
    assert not tiny.needs_hub
    for spec in (tiny.generator, tiny.downstream):
        assert isinstance(spec, TinyGPT2) and spec.n_layer == 2 and 64 <= spec.n_embd <= 128
    assert tiny.tokenizer.vocab_size == 4096


def test_profiles_are_frozen_and_serialisable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_profile("paper").name = "x"  # type: ignore[misc]
    for name in list_profiles():
        text = json.dumps(get_profile(name).to_dict())
        assert name in text


def test_public_replay_is_validated_and_recorded_only_when_set():
    from largefedbench.models.profiles import DownstreamTraining

    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(InputError, match="public_replay=.* must be a finite number >= 0"):
            DownstreamTraining(lr=1e-3, batch_size=8, epochs=1, public_replay=bad)
    off = DownstreamTraining(lr=1e-3, batch_size=8, epochs=1)
    assert "public_replay" not in off.to_dict()  # entries and run folders made before the setting still match
    assert DownstreamTraining(lr=1e-3, batch_size=8, epochs=1, public_replay=0.5).to_dict()["public_replay"] == 0.5
    assert "public_replay" not in off.as_kwargs()  # the harness mixes the public spans in, not train_downstream
    assert get_profile("cpu").downstream_training.public_replay == 1.0
    assert all(get_profile(n).downstream_training.public_replay == 0 for n in ("paper", "small", "tiny"))


def test_tiny_spec_is_validated():
    with pytest.raises(InputError, match="multiple of n_head"):
        TinyGPT2(n_embd=65, n_head=4)
    with pytest.raises(InputError, match="exceeds n_positions"):
        TinyGPT2(n_positions=64, block_tokens=128)


def test_device_defaults_to_cuda_only_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert get_device() == torch.device("cpu")
    with pytest.raises(InputError, match="CUDA is not available"):
        get_device("cuda")
    with pytest.raises(InputError, match="unknown device"):
        get_device("gpu-please")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_device().type == "cuda"
    assert get_device("cpu") == torch.device("cpu")
