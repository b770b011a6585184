"""DPO and SFT updates of the LoRA generator with trl: the margin rises, the loss falls, no side effects remain."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from largefedbench.errors import InputError
from largefedbench.synthetic.dpo import dpo_update, fit_prompts, label_flips
from largefedbench.synthetic.lora import add_lora, lora_state
from largefedbench.synthetic.prompts import build_prompts
from largefedbench.synthetic.sft import sft_update


@pytest.fixture(scope="module")
def pairs(tiny):
    fd, bundle, _ = tiny
    spans = fd.public.all_spans()
    prompts = build_prompts(spans[:50], 16, examples_per_prompt=2, rng=np.random.default_rng(0))
    chosen = [" " + s[:120] for s in spans[100:116]]
    rejected = [" " + s[:120] for s in spans[200:216]]
    return bundle, prompts, chosen, rejected


def test_one_dpo_round_raises_the_chosen_over_rejected_margin(pairs):
    bundle, prompts, chosen, rejected = pairs
    model = add_lora(bundle.new_generator(), rank=4, alpha=8)
    base = model.get_base_model()
    rng_state = torch.get_rng_state()
    epochs = []  # the checkpoint after each epoch (POPri App. B.1 picks the round's best by FID)
    metrics = dpo_update(model, bundle.generator_tokenizer, prompts, chosen, rejected, beta=0.1, lr=5e-3, epochs=2,
                         batch_size=8, seed=0, eval_margin=True, epoch_end=lambda: epochs.append(lora_state(model)))
    assert len(epochs) == 2 and all(torch.equal(epochs[1][k], v) for k, v in lora_state(model).items())
    assert any(not torch.equal(epochs[0][k], v) for k, v in epochs[1].items())
    assert metrics["margin_before"] == pytest.approx(0.0, abs=1e-6)  # the adapter starts as the public model
    assert metrics["margin_after"] > 0.05 and metrics["margin_after"] > metrics["margin_before"]
    assert metrics["steps"] == 4 and metrics["n_trained_pairs"] == 16 and metrics["margin_last"] is not None
    # no side effects: the reference copy is gone, forward is the class's again, the global RNG is untouched
    assert list(model.peft_config) == ["default"] and "forward" not in base.__dict__
    assert torch.equal(rng_state, torch.get_rng_state())
    assert any(v.abs().sum() > 0 for k, v in lora_state(model).items() if "lora_B" in k)

    # a second round: against the public model the margin starts where the first ended, against the policy at 0
    again = dpo_update(model, bundle.generator_tokenizer, prompts, chosen, rejected, beta=0.1, lr=1e-9, epochs=1,
                       batch_size=8, seed=1, eval_margin=True, reference="base")
    assert again["margin_before"] == pytest.approx(metrics["margin_after"], rel=1e-3)
    start = dpo_update(model, bundle.generator_tokenizer, prompts, chosen, rejected, beta=0.1, lr=1e-9, epochs=1,
                       batch_size=8, seed=1, eval_margin=True, reference="start")
    assert start["margin_before"] == pytest.approx(0.0, abs=1e-6)


def test_sft_lowers_the_loss_of_its_completions(pairs):
    bundle, prompts, chosen, _ = pairs
    tok = bundle.generator_tokenizer
    model = add_lora(bundle.new_generator(), rank=4, alpha=8)

    @torch.no_grad()
    def completion_nll() -> float:
        total = 0.0
        for p, c in zip(fit_prompts(tok, prompts, [chosen], 256), chosen):
            pid, cid = tok(p)["input_ids"], tok(c, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([pid + cid])
            labels = ids.clone()
            labels[0, : len(pid)] = -100
            total += float(model(input_ids=ids, labels=labels).loss)
        return total / len(chosen)

    before = completion_nll()
    metrics = sft_update(model, tok, chosen, prompts=prompts, lr=5e-3, epochs=2, batch_size=8, seed=0)
    assert metrics["steps"] == 4 and metrics["n_texts"] == 16
    assert completion_nll() < before - 0.05


def test_prompts_are_cut_from_the_left_to_fit_with_their_completions(pairs):
    bundle, prompts, chosen, rejected = pairs
    tok = bundle.generator_tokenizer
    long_prompts = [p * 6 for p in prompts[:3]]
    fitted = fit_prompts(tok, long_prompts, [chosen[:3], rejected[:3]], 128)
    for p, f, c, r in zip(long_prompts, fitted, chosen, rejected):
        assert p.endswith(f[-40:])
        need = max(len(tok(c, add_special_tokens=False)["input_ids"]), len(tok(r, add_special_tokens=False)["input_ids"]))
        assert len(tok(f)["input_ids"]) + need + 1 <= 128


def test_cdpo_flips_each_label_with_probability_epsilon():
    flips = label_flips(20_000, 0.2, seed=3)
    assert flips.mean() == pytest.approx(0.2, abs=0.01)
    assert np.array_equal(flips, label_flips(20_000, 0.2, seed=3)) and not label_flips(100, 0.0, seed=3).any()


def test_bad_dpo_requests_are_refused(pairs):
    bundle, prompts, chosen, rejected = pairs
    model = add_lora(bundle.new_generator(), rank=4, alpha=8)
    tok = bundle.generator_tokenizer
    kwargs = {"beta": 0.1, "lr": 1e-3, "epochs": 1, "batch_size": 4}
    with pytest.raises(InputError, match="one of each per pair"):
        dpo_update(model, tok, prompts, chosen, rejected[:3], **kwargs)
    with pytest.raises(InputError, match="loss_type"):
        dpo_update(model, tok, prompts, chosen, rejected, loss_type="hinge", **kwargs)
    with pytest.raises(InputError, match="add_lora"):
        dpo_update(bundle.new_generator(), tok, prompts, chosen, rejected, **kwargs)
