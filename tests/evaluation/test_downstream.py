"""Downstream training: best-validation epoch, determinism, and the demo's eps=0 vs eps=inf sanity result."""

from __future__ import annotations

import json

import pytest
import torch

from largefedbench.errors import InputError
from largefedbench.evaluation import evaluate_downstream, gap_closed, next_token_accuracy, train_downstream
from largefedbench.models import get_profile


@pytest.fixture(scope="module")
def small_task(tiny):
    fd, bundle, _ = tiny
    return bundle, fd.train.all_spans()[:160], fd.validation.all_spans()[:60]


def state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_training_is_deterministic_for_a_seed(small_task):
    bundle, train, val = small_task
    rng_before = torch.get_rng_state()
    runs = [train_downstream(bundle.new_downstream(), bundle.tokenizer, train, val, epochs=1, batch_size=32, lr=2e-3,
                             seed=seed, progress=False) for seed in (7, 7, 8)]
    assert torch.equal(torch.get_rng_state(), rng_before)  # the global RNG is left alone
    a, b, c = (state(r.model) for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    histories = [[(r.epoch, r.train_loss, r.validation) for r in run.history] for run in runs]
    assert histories[0] == histories[1] != histories[2]


def test_history_and_the_best_epoch_is_kept(small_task):
    bundle, train, val = small_task
    result = train_downstream(bundle.new_downstream(), bundle.tokenizer, train, val, epochs=2, batch_size=32, lr=2e-3,
                              seed=0, progress=False)
    assert [r.epoch for r in result.history] == [0, 1, 2]
    assert result.history[0].train_loss is None and all(r.train_loss > 0 for r in result.history[1:])
    best = max(result.history, key=lambda r: r.validation["top1"])
    assert result.best_epoch == best.epoch and result.best_validation == best.validation
    assert next_token_accuracy(result.model, bundle.tokenizer, val) == pytest.approx(best.validation)
    assert result.n_train_texts == len(train) and result.n_train_tokens > len(train)
    json.dumps(result.to_dict())


def test_a_harmful_epoch_is_discarded(small_task):
    bundle, train, val = small_task
    start = bundle.new_downstream()
    before = state(start)
    result = train_downstream(start, bundle.tokenizer, train, val, epochs=1, batch_size=32, lr=5.0, seed=0, progress=False)
    assert result.history[1].validation["top1"] < result.history[0].validation["top1"]
    assert result.best_epoch == 0
    after = state(result.model)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_argument_errors(small_task):
    bundle, train, val = small_task
    model, tok = bundle.new_downstream(), bundle.tokenizer
    with pytest.raises(InputError, match="no training texts"):
        train_downstream(model, tok, [], val, epochs=1, batch_size=8, lr=1e-3, seed=0)
    with pytest.raises(InputError, match="validation"):
        train_downstream(model, tok, train, [], epochs=1, batch_size=8, lr=1e-3, seed=0)
    with pytest.raises(InputError, match="epochs"):
        train_downstream(model, tok, train, val, epochs=-1, batch_size=8, lr=1e-3, seed=0)
    with pytest.raises(InputError, match="lr"):
        train_downstream(model, tok, train, val, epochs=1, batch_size=8, lr=0.0, seed=0)


@pytest.mark.slow
def test_private_training_beats_the_public_checkpoint_on_the_demo(tiny, capsys):
    """eps=0 (the pretrained downstream as it is) vs eps=inf (fine-tuned on the private train spans)."""
    fd, bundle, _ = tiny
    tok, test = bundle.tokenizer, fd.test.all_spans()
    training = get_profile("tiny").downstream_training
    eps0 = evaluate_downstream(bundle.new_downstream(), tok, test, max_len=training.max_len)
    result = train_downstream(bundle.new_downstream(), tok, fd.train.all_spans(), fd.validation.all_spans(), seed=0,
                              progress=False, **training.as_kwargs())
    eps_inf = evaluate_downstream(result, tok, test, max_len=training.max_len)
    with capsys.disabled():
        print(f"\n[demo, tiny] eps=0   test top1/3/5 = {eps0['top1']:.4f} / {eps0['top3']:.4f} / {eps0['top5']:.4f} "
              f"({eps0['n_tokens']} tokens)\n[demo, tiny] eps=inf test top1/3/5 = {eps_inf['top1']:.4f} / "
              f"{eps_inf['top3']:.4f} / {eps_inf['top5']:.4f} (best epoch {result.best_epoch}, {result.seconds:.1f} s)")
    assert eps_inf["n_tokens"] == eps0["n_tokens"]
    for k in ("top1", "top3", "top5"):
        assert eps_inf[k] > eps0[k]
    assert eps_inf["loss"] < eps0["loss"]
    assert result.best_epoch >= 1
    assert gap_closed(eps_inf["top1"], eps0["top1"], eps_inf["top1"]) == pytest.approx(1.0)
