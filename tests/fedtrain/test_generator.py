"""DP-FedAvg on a LoRA adapter (fedtrain/fedavg.py + fedtrain/generator.py): sequence format, local SGD, clipping/noise
through the federation, the ledger, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from timing_free import without_timing

from largefedbench.data.federated import ClientSplit
from largefedbench.federation import Federation
from largefedbench.fedtrain import (
    BATCH_ROWS,
    FedAvgSettings,
    FlatParams,
    LMExample,
    lm_loss,
    lm_row_losses,
    local_steps,
    local_updates,
    run_round,
    train_adapter,
)
from largefedbench.fedtrain.generator import (
    conditional_prompt,
    conditional_sequences,
    generator_update,
    pretrain_on_public,
)
from largefedbench.privacy import PoissonGaussianEvent
from largefedbench.synthetic.lora import add_lora


@pytest.fixture(scope="module")
def tokenizer(tiny):
    return tiny[1].generator_tokenizer


def _tiny_lora(tokenizer, seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    eos = tokenizer.eos_token_id
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=eos, eos_token_id=eos, pad_token_id=eos))
    model = add_lora(model.eval(), rank=2, alpha=4).eval()
    with torch.no_grad():  # non-zero B so that A also gets gradients
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    return model


def _split(spans: list[list[str]]) -> ClientSplit:
    from datasets import Dataset

    table = Dataset.from_dict({"id": [f"c{i}" for i in range(len(spans))], "spans": spans,
                               "n_spans": [len(s) for s in spans]})
    return ClientSplit("train", table)


def test_conditional_sequences_mask_the_prefix(tokenizer):
    ex = conditional_sequences(tokenizer, ["Keywords: cell\n", ""], ["the cell divides", "hello"], max_len=3)
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    head = tokenizer("Keywords: cell\n", add_special_tokens=False)["input_ids"]
    body = tokenizer("the cell divides", add_special_tokens=False)["input_ids"]
    assert ex[0].ids == [bos] + head + body[:2] + [eos] and ex[0].n_context == 1 + len(head)
    assert ex[1].ids[0] == bos and ex[1].n_context == 1 and ex[1].ids[-1] == eos
    # the generation prompt tokenizes to exactly the training context
    assert tokenizer(conditional_prompt(tokenizer, "Keywords: cell\n"))["input_ids"] == ex[0].ids[: ex[0].n_context]


def test_lm_loss_ignores_context_tokens(tokenizer):
    model = _tiny_lora(tokenizer)
    a = LMExample([1, 2, 3, 4], 2)
    b = LMExample([9, 8, 3, 4], 2)  # different context, same targets 3, 4 ... but the logits depend on the context
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits[0]
        manual = torch.nn.functional.cross_entropy(logits[1:3], torch.tensor([3, 4]))
        assert torch.allclose(lm_loss(model, [a], tokenizer.eos_token_id), manual, atol=1e-6)
        assert lm_loss(model, [b], tokenizer.eos_token_id) != lm_loss(model, [a], tokenizer.eos_token_id)


def test_local_steps_shuffle_batch_and_cap():
    s = FedAvgSettings(rounds=1, clients_per_round=1, clip=1, client_lr=0.1, local_epochs=2, local_batch_size=2, max_local_steps=3)
    steps = local_steps(3, s.local, np.random.default_rng(0))
    assert [len(b) for b in steps] == [2, 1, 2]
    assert sorted(steps[0] + steps[1]) == [0, 1, 2]
    assert local_steps(0, s.local, np.random.default_rng(0)) == []


def test_local_updates_are_one_sgd_step_per_batch_and_restore_the_adapter(tokenizer):
    model = _tiny_lora(tokenizer)
    adapter = FlatParams(model)
    before = adapter.get()
    settings = FedAvgSettings(rounds=1, clients_per_round=1, clip=1, client_lr=0.5, local_batch_size=4)
    ex = conditional_sequences(tokenizer, [""], ["one two three"], 16)
    pad = tokenizer.eos_token_id
    deltas = local_updates(adapter, [ex, []], lambda b: lm_loss(model, b, pad), settings.local, np.random.default_rng(0))
    assert torch.equal(adapter.get(), before)
    assert torch.count_nonzero(deltas[1]) == 0
    grads = torch.autograd.grad(lm_loss(model, ex, pad), adapter.params)
    expected = -0.5 * torch.cat([g.reshape(-1) for g in grads])
    torch.testing.assert_close(deltas[0], expected, rtol=1e-4, atol=1e-7)


def test_lm_row_losses_sum_to_lm_loss(tokenizer):
    model = _tiny_lora(tokenizer)
    pad = tokenizer.eos_token_id
    batch = conditional_sequences(tokenizer, ["Topic: x\n", ""], ["one two three four", "five"], 16)
    with torch.no_grad():
        total, count = lm_row_losses(model, batch, pad)
        torch.testing.assert_close(total.sum() / count.sum(), lm_loss(model, batch, pad))
        for r in range(len(batch)):
            torch.testing.assert_close(total[r] / count[r], lm_loss(model, batch[r : r + 1], pad))


@pytest.mark.parametrize("batch_size,logits_per_pass", [(1, None), (2, None), (8, None), (8, 1)])
def test_single_step_clients_batched_get_exactly_their_own_update(tokenizer, batch_size, logits_per_pass, monkeypatch):
    """Clients of one SGD step run together (length-sorted, mixed across clients, in batches of BATCH_ROWS rows) and
    still each get the update of its own loss; clients of several steps, or none, take the one-at-a-time loop."""
    model = _tiny_lora(tokenizer)
    adapter = FlatParams(model)
    pad = tokenizer.eos_token_id
    words = "the protein binds a receptor on housing bills passed in the senate today".split()
    rng = np.random.default_rng(3)
    texts = [[" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(rng.integers(0, 5))]
             for _ in range(2 * BATCH_ROWS["cpu"])]
    clients = [conditional_sequences(tokenizer, ["Topic: x\n"] * len(t), t, 24) for t in texts]
    local = FedAvgSettings(rounds=1, clients_per_round=1, clip=1, client_lr=0.3, local_batch_size=batch_size,
                           max_local_steps=None).local
    before = adapter.get()
    loop = local_updates(adapter, clients, lambda b: lm_loss(model, b, pad), local,
                         [np.random.default_rng(i) for i in range(len(clients))])
    if logits_per_pass is not None:  # a pass holds fewer rows where their logits would pass the budget: here one
        import largefedbench.fedtrain.local_sgd as local_sgd

        monkeypatch.setattr(local_sgd, "LOGITS_PER_PASS", logits_per_pass)
    rows_seen: list[int] = []

    def row_losses(batch):
        rows_seen.append(len(batch))
        return lm_row_losses(model, batch, pad)

    batched = local_updates(adapter, clients, lambda b: lm_loss(model, b, pad), local,
                            [np.random.default_rng(i) for i in range(len(clients))], row_losses=row_losses)
    assert sum(rows_seen) == sum(len(c) for c in clients if 0 < len(c) <= batch_size)  # the one-step clients' rows
    assert max(rows_seen) <= (BATCH_ROWS["cpu"] if logits_per_pass is None else 1)
    assert torch.equal(adapter.get(), before) and not model.training
    assert all(not hasattr(p, "grad_sample") or p.grad_sample is None for p in adapter.params)
    torch.testing.assert_close(batched, loop, rtol=1e-4, atol=1e-7)
    assert (batched.norm(dim=1) > 0).sum() == sum(1 for c in clients if c)


def test_run_round_clips_releases_once_and_steps_the_server(tokenizer):
    spans = [["a b c", "d e"], ["f g"], ["h"], ["i j k"]]
    fed = Federation(_split(spans), seed=0)
    model = _tiny_lora(tokenizer)
    adapter = FlatParams(model)
    settings = FedAvgSettings(rounds=2, clients_per_round=4, clip=0.5, client_lr=0.1)
    server = settings.server(adapter)
    start = adapter.get()
    seen = []

    def huge(cohort, client_spans):
        seen.append([len(s) for s in client_spans])
        return torch.full((len(client_spans), adapter.numel), 100.0)

    record = run_round(fed, settings, server, 1e-9, huge)
    assert record["clients"] == 4 and seen == [[2, 1, 1, 1]]
    moved = adapter.get() - start
    # every client was clipped to 0.5: the mean of 4 clipped identical vectors has norm 0.5
    assert abs(float(torch.linalg.vector_norm(moved)) - 0.5) < 1e-4
    assert fed.ledger.events == (PoissonGaussianEvent(1e-9, 1.0, 1),)
    run_round(fed, settings, server, 1e-9, huge)
    assert fed.ledger.events == tuple(settings.events(1e-9, 4))


def test_generator_update_lowers_the_loss_of_the_clients_text(tokenizer):
    spans = [["the protein binds the receptor"] * 3 for _ in range(4)]
    fed = Federation(_split(spans), seed=1)
    model = _tiny_lora(tokenizer)
    adapter = FlatParams(model)
    settings = FedAvgSettings(rounds=3, clients_per_round=4, clip=10.0, client_lr=0.5, local_epochs=4, local_batch_size=2,
                        server_lr=1.0)
    server = settings.server(adapter)
    update = generator_update(adapter, tokenizer, settings, seed=0, prefixes=lambda cohort: ["Topic: x\n"] * len(cohort))
    ex = conditional_sequences(tokenizer, ["Topic: x\n"], spans[0][:1], 96)
    pad = tokenizer.eos_token_id
    with torch.no_grad():
        before = float(lm_loss(model, ex, pad))
    for _ in range(settings.rounds):
        run_round(fed, settings, server, 1e-3, update)
    with torch.no_grad():
        after = float(lm_loss(model, ex, pad))
    assert after < before - 0.15  # 7.99 -> 7.71 for this seed (a 16-wide random model learns slowly)
    state = server.state_dict()
    server.load_state_dict({**state, "weights": torch.zeros_like(state["weights"])})
    assert torch.count_nonzero(adapter.get()) == 0


def test_pretrain_on_public_fits_its_pairs(tokenizer):
    model = _tiny_lora(tokenizer)
    texts = ["the protein binds the receptor", "a bill on housing passed"]
    prefixes = ["Keywords: protein\n", "Keywords: housing\n"]
    pad = tokenizer.eos_token_id
    ex = conditional_sequences(tokenizer, prefixes, texts, 32)
    with torch.no_grad():
        before = float(lm_loss(model, ex, pad))
    out = pretrain_on_public(model, tokenizer, prefixes, texts, steps=30, batch_size=2, lr=1e-2, seed=0, max_len=32)
    with torch.no_grad():
        after = float(lm_loss(model, ex, pad))
    assert out["steps"] == 30 and after < before - 0.1 and out["loss_last"] < out["loss_first"]


def test_public_pretraining_resumes_after_a_kill_exactly(tiny, tokenizer, tmp_path, monkeypatch):
    """Killed after its second checkpoint, pretraining resumes with the same weights, AdamW state and batches as a
    run never killed; a finished stage resumes as finished (no step re-run), and the seed's end clears it."""
    from conftest import Killed, killed_after

    from largefedbench.contract import PublicResources
    from largefedbench.rounds.checkpoints import checkpoint_files

    texts = ["the protein binds the receptor", "a bill on housing passed", "cells divide at night", "we met farmers"]
    prefixes = [f"Keywords: {t.split()[1]}\n" for t in texts]

    def run(run_dir, cls=PublicResources):
        model = _tiny_lora(tokenizer)
        fed = Federation(_split([["x"], ["y"]]), seed=3)
        public = cls(models=tiny[1], seed=3, run_dir=run_dir, progress=False)
        out = pretrain_on_public(model, tokenizer, prefixes, texts, steps=23, batch_size=2, lr=1e-2, seed=5, max_len=32,
                                 fed=fed, public=public, steps_per_checkpoint=5)
        return FlatParams(model).get(), out, public

    plain = _tiny_lora(tokenizer)
    plain_out = pretrain_on_public(plain, tokenizer, prefixes, texts, steps=23, batch_size=2, lr=1e-2, seed=5, max_len=32)
    whole, out, _ = run(tmp_path / "a")
    assert torch.equal(whole, FlatParams(plain).get()) and out == plain_out  # checkpointing changes nothing
    with pytest.raises(Killed):
        run(tmp_path / "b", killed_after(1, stage="public-pretraining"))
    resumed, out_b, _ = run(tmp_path / "b")
    assert torch.equal(resumed, whole) and out_b == out
    monkeypatch.setattr("largefedbench.fedtrain.generator.lm_loss", lambda *a: pytest.fail("a finished stage re-ran"))
    again, out_c, public = run(tmp_path / "b")  # finished: restored, not retrained
    assert torch.equal(again, whole) and out_c == out
    assert [p.name for p in checkpoint_files(tmp_path / "b")] == ["round-checkpoint-public-pretraining.safetensors"]
    public.clear_checkpoint()
    assert checkpoint_files(tmp_path / "b") == []


def test_train_adapter_resumes_after_a_kill_exactly(tiny, tokenizer, tmp_path):
    from largefedbench.contract import PublicResources

    spans = [["the protein binds"], ["a bill passed today"], ["cells divide"], ["we met farmers"]]
    settings = FedAvgSettings(rounds=3, clients_per_round=2, clip=1.0, client_lr=0.5)

    def run(run_dir, fail_at=None):
        fed = Federation(_split(spans), seed=3)
        public = PublicResources(models=tiny[1], seed=3, run_dir=run_dir, progress=False)
        server = settings.server(FlatParams(_tiny_lora(tokenizer)))
        update = generator_update(server.flat, tokenizer, settings, seed=3)

        def client_update(cohort, client_spans):
            if cohort.round == fail_at:
                raise KeyboardInterrupt
            return update(cohort, client_spans)

        history = train_adapter(fed, public, settings, server, 0.5, client_update)
        return server.flat.get(), fed.ledger, history

    whole, ledger, history = run(tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", fail_at=2)
    resumed, ledger_b, history_b = run(tmp_path / "b")
    assert torch.equal(whole, resumed) and ledger == ledger_b and without_timing(history) == without_timing(history_b)
    assert ledger.events == tuple(settings.events(0.5, 4))
