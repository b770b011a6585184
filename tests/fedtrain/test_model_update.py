"""The full-model client update of DP-FedAvg and DP-FTRL (fedtrain/model_update.py) and the pieces under it:
flat parameters, the shared local-SGD loop against a plain ``torch.optim.SGD`` reference with the model's own loss,
clipping, the unreleased norm tally, and the server optimizer."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from largefedbench.errors import InputError
from largefedbench.fedtrain import FlatParams, LocalSGD, ModelUpdate, ServerOptimizer, UpdateNormTally, local_steps
from largefedbench.models.tokenizer import lm_sequences, pad_batch
from largefedbench.privacy.clipping import clip_rows


def reference_updates(model, tokenizer, spans_per_client, local: LocalSGD, max_len: int, rng) -> torch.Tensor:
    """Δ of every client the plain way: a copy of the model per client, ``torch.optim.SGD``, the HF model's own loss
    with pads masked out of the labels."""
    base = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    rows = []
    for spans in spans_per_client:
        client = copy.deepcopy(model).eval()
        opt = torch.optim.SGD(client.parameters(), lr=local.lr)
        seqs = lm_sequences(tokenizer, spans, max_len)
        for step in local_steps(len(seqs), local, rng):
            ids, mask = pad_batch([seqs[i] for i in step], tokenizer.pad_token_id)
            client(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss.backward()
            opt.step()
            opt.zero_grad()
        rows.append(torch.nn.utils.parameters_to_vector(client.parameters()).detach() - base)
    return torch.stack(rows)


def test_model_update_equals_the_plain_reference(tiny):
    fd, bundle, _ = tiny
    model, tok = bundle.new_downstream(), bundle.tokenizer
    spans = [fd.train.spans(cid) for cid in fd.train.ids[:12]] + [[]]  # a client without spans gives Δ = 0
    local = LocalSGD(lr=0.05, batch_size=2, epochs=2, max_steps=3)
    before = FlatParams(model).get()
    got = ModelUpdate(model, tok, local, 64)(before, spans, np.random.default_rng(7))
    expected = reference_updates(model, tok, spans, local, 64, np.random.default_rng(7))
    assert got.shape == (13, before.numel()) == expected.shape
    assert torch.count_nonzero(got[-1]) == 0 and got[:-1].norm(dim=1).min() > 0
    assert (got - expected).abs().max() < 1e-5
    assert torch.equal(FlatParams(model).get(), before)  # the caller's model never moves


def test_clipped_updates_are_within_clip_and_the_tally_counts_them(tiny):
    fd, bundle, _ = tiny
    model = bundle.new_downstream()
    update = ModelUpdate(model, bundle.tokenizer, LocalSGD(lr=0.05), 64)
    updates = update(FlatParams(model).get(), [fd.train.spans(c) for c in fd.train.ids[:16]], np.random.default_rng(0))
    norms = updates.norm(dim=1)
    clip = float(norms.median())  # about half the clients get clipped
    clipped = clip_rows(updates, clip)
    assert (clipped.norm(dim=1) <= clip * (1 + 1e-6)).all()
    small = norms <= clip
    assert torch.equal(clipped[small], updates[small])  # updates under the clip are untouched
    tally = UpdateNormTally(clip)
    tally.add(updates[:7])
    tally.add(updates[7:])
    stats = tally.summary()
    assert stats["fraction_clipped"] == pytest.approx(float((~small).float().mean()))
    assert stats["mean_update_norm"] == pytest.approx(float(norms.mean()), rel=1e-6)


def test_flat_params_cover_the_trainable_weights_only(tiny):
    model = tiny[1].new_downstream()
    flat = FlatParams(model)
    assert flat.numel == sum(p.numel() for p in model.parameters())  # tied embeddings once
    flat.set(flat.get() + 1.0)
    assert torch.equal(flat.get(), FlatParams(model).get())
    model.transformer.wte.weight.requires_grad_(False)
    assert FlatParams(model).numel == flat.numel - model.transformer.wte.weight.numel()
    with pytest.raises(InputError, match="trainable"):
        FlatParams(torch.nn.Linear(2, 2).requires_grad_(False))
    with pytest.raises(InputError, match="values for"):
        flat.set(torch.zeros(3))


def test_server_optimizer_sgd_momentum_and_adam():
    flat = FlatParams(torch.nn.Linear(3, 1, bias=False))
    flat.set(torch.zeros(3))
    sgd = ServerOptimizer(flat, lr=0.5, momentum=0.5)
    sgd.step(torch.tensor([4.0, 0.0, 0.0]), expected_clients=2)  # mean 2: m = 2, θ = 1
    sgd.step(torch.tensor([4.0, 0.0, 0.0]), expected_clients=2)  # m = 0.5·2 + 2 = 3, θ = 1 + 1.5
    assert torch.allclose(flat.get(), torch.tensor([2.5, 0.0, 0.0]))
    flat.set(torch.zeros(3))
    adam = ServerOptimizer(flat, lr=0.1, optimizer="adam")
    adam.step(torch.tensor([3.0, -3.0, 0.0]), expected_clients=3)  # Adam's first step moves lr · sign
    assert torch.allclose(flat.get(), torch.tensor([0.1, -0.1, 0.0]), atol=1e-6)
    state = adam.state_dict()
    adam.step(torch.ones(3), expected_clients=1)
    adam.load_state_dict(state)
    assert torch.allclose(flat.get(), torch.tensor([0.1, -0.1, 0.0]), atol=1e-6) and adam.steps == 1
    with pytest.raises(InputError, match="server_optimizer"):
        ServerOptimizer(flat, optimizer="lamb")


@pytest.mark.parametrize("bad", [{"lr": -1.0}, {"lr": 0.1, "batch_size": 0}, {"lr": 0.1, "max_steps": 0},
                                 {"lr": 0.1, "optimizer": "rmsprop"}])
def test_local_sgd_settings_are_checked(bad):
    with pytest.raises(InputError):
        LocalSGD(**bad)
