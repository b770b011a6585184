"""FedBis / FedBiscuit: preferences, selector, majority vote, private balanced grouping, schedule and end to end."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from conftest import federation_and_public, train_end_to_end
from largefedbench.methods.fedbiscuit import (
    EMBEDDING_SELECTOR_DEVIATION,
    EmbeddingSelectorTask,
    FedBis,
    FedBisConfig,
    FedBiscuit,
    FedBiscuitConfig,
    PairPool,
    SelectorState,
    SelectorTask,
    balanced_grouping,
    client_pair_indices,
    client_preferences,
    clustered_step,
    grouping_rows,
    majority_vote,
    preference_scores,
    private_grouping,
)
from timing_free import without_timing

from largefedbench.errors import InputError
from largefedbench.federation import Federation
from largefedbench.privacy import PrivacyBudget, PrivacyLedger, epsilon_of

BUDGET = PrivacyBudget(4.0, 1e-5)


def reference_check_and_grouping(losses: np.ndarray, senders: list[int]) -> dict[int, list[int]]:
    """A transcription of the reference server's ``check_and_grouping`` (FederatedScope, LLMMultiLoRAServer), with
    the shuffled sender list given instead of ``random.shuffle``."""
    cur = {c: iter(sorted([(i, float(x)) for i, x in enumerate(row)], key=lambda t: t[1])) for c, row in enumerate(losses)}
    num_adap, done = losses.shape[1], {}
    grouping = {i: [] for i in range(num_adap)}
    unassigned = len(senders)
    while unassigned > 0:
        max_size = math.ceil(unassigned / (num_adap - len(done)))
        for sender in senders:
            idx, _ = next(cur[sender])
            while idx not in grouping:
                idx, _ = next(cur[sender])
            grouping[idx].append(sender)
        best = [0, 0]
        for idx, candidates in grouping.items():
            if len(candidates) > best[1]:
                best = [idx, len(candidates)]
        idx = best[0]
        done[idx], senders = grouping[idx][:max_size], grouping[idx][max_size:]
        grouping.pop(idx)
        unassigned -= len(done[idx])
    return done


@pytest.mark.parametrize("n", [100, 101, 7])
def test_noise_free_grouping_is_balanced_and_equals_the_reference(n):
    """Eq. 5: group sizes differ by at most one (the issue measured 47 / 26 / 27 for n = 100, U = 3 with the old
    coin-based grouping); with no noise the groups are exactly the reference's for the same client order."""
    rng = np.random.default_rng(n)
    losses = rng.random((n, 3)) + np.array([0.0, 0.15, 0.3]) * rng.random((n, 1))  # selector 0 is the favourite
    order = rng.permutation(n)
    group = private_grouping(grouping_rows(losses, range(n), n).sum(0), 3, order)  # release without noise
    sizes = np.bincount(group, minlength=3)
    assert sorted(sizes.tolist()) == sorted([n // 3 + (k < n % 3) for k in range(3)])
    expected = reference_check_and_grouping(losses, order.tolist())
    assert {u: sorted(np.flatnonzero(group == u).tolist()) for u in range(3)} == {u: sorted(v) for u, v in expected.items()}


def test_grouping_is_balanced_under_noise_and_releases_unit_rows():
    rng = np.random.default_rng(0)
    losses = rng.random((60, 5))
    released = []

    rows = grouping_rows(losses, rng.permutation(60), 60)  # each client writes its own slot
    released.append(rows)
    noisy = rows.sum(0) + rng.normal(0.0, 20.0, rows.shape[1])  # ε small: mostly noise
    group = private_grouping(noisy, 5, rng.permutation(60))
    assert np.bincount(group, minlength=5).tolist() == [12] * 5
    np.testing.assert_allclose(np.linalg.norm(released[0], axis=1), 1.0, rtol=1e-6)  # sensitivity 1 per client
    assert all(len(set((np.flatnonzero(row) // 5).tolist())) == 1 for row in released[0])  # one slot per client
    ranking = released[0].reshape(60, 60, 5).sum(1)  # each row's slot, back as (client, selector)
    assert (np.argmax(ranking, axis=1) == np.argmin(losses, axis=1)).all()  # the ranking is the losses'
    assert not preference_scores(np.array([[0.3, 0.3, 0.3]])).any()  # equal losses: a zero row


def test_crowded_favourite_is_capped_in_shuffled_order():
    losses = np.tile([0.1, 0.2, 0.3], (6, 1))  # everyone: 0, then 1, then 2
    group = balanced_grouping(preference_scores(losses), np.array([5, 4, 3, 2, 1, 0]))
    assert group.tolist() == [2, 2, 1, 1, 0, 0]  # the first two in the order get 0, the next two 1


def test_eq6_divides_by_the_number_of_clients_by_default():
    """Eq. 6 with p_m = 1/M (the paper and the reference aggregator's 1/num_clients): each selector moves by its
    slot's noisy sum / M; the "group" option divides by N_u instead."""
    weights = [torch.zeros(2), torch.ones(2), torch.full((2,), 2.0)]
    noisy = torch.arange(6, dtype=torch.float32)
    sizes = np.array([4, 3, 3])
    out = clustered_step(weights, noisy, 10, sizes)
    assert FedBiscuitConfig().selector_weights == "uniform"
    torch.testing.assert_close(torch.stack(out), torch.tensor([[0.0, 0.1], [1.2, 1.3], [2.4, 2.5]]))
    out = clustered_step(weights, noisy, 10, sizes, "group")
    torch.testing.assert_close(torch.stack(out), torch.tensor([[0.0, 0.25], [1 + 2 / 3, 1 + 3 / 3], [2 + 4 / 3, 2 + 5 / 3]]))
    with pytest.raises(InputError, match="selector_weights"):
        FedBiscuitConfig(selector_weights="sizes")


def test_majority_vote():
    scores = np.array([[1.0, -1.0, 1.0, -0.5], [1.0, 1.0, -1.0, -0.1], [-1.0, -1.0, 1.0, 0.3]])
    assert majority_vote(scores).tolist() == [True, False, True, False]
    assert majority_vote(np.array([[0.2, -0.2]])).tolist() == [True, False]


def test_client_preferences_prefer_the_closer_candidate():
    pool = PairPool(["a0", "a1"], ["b0", "b1"], emb_a=np.array([[1.0, 0.0], [0.0, 1.0]]),
                    emb_b=np.array([[0.0, 1.0], [1.0, 0.0]]))
    spans = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    owner = np.array([0, 0, 1])
    labels = client_preferences(spans, owner, 2, pool, np.array([[0, 1], [1, 0]]))
    # client 0 sits on axis x: prefers a0 (label 0) on pair 0 and b1 (label 1) on pair 1; client 1 the opposite
    assert labels.tolist() == [[0, 1], [0, 1]]


def test_client_pair_indices_are_fixed_per_client_and_distinct():
    first = client_pair_indices(np.array([3, 7]), 20, 5, seed=1)
    again = client_pair_indices(np.array([7]), 20, 5, seed=1)
    np.testing.assert_array_equal(first[1], again[0])
    assert all(len(set(row.tolist())) == 5 for row in first)
    assert not np.array_equal(first[0], first[1])


def test_selector_task_loss_and_order_symmetry(tiny):
    tok = tiny[1].generator_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=16, n_layer=1, n_head=2)).eval()
    task = SelectorTask(tok, ["the cell divides", "a bill passes"], ["we met farmers", "genes are expressed"], 8)
    ex = task.examples(np.array([1]), np.array([0]))
    assert ex == [(task.ab[1], 0), (task.ba[1], 1)]
    assert task.ab[0][0] == tok.bos_token_id
    logits = model(input_ids=torch.tensor([task.ab[1]])).logits[0, -1, task.choice_ids]
    manual = torch.nn.functional.cross_entropy(logits[None], torch.tensor([0]))
    torch.testing.assert_close(task.loss(model, ex[:1]), manual)
    flipped = SelectorTask(tok, ["we met farmers", "genes are expressed"], ["the cell divides", "a bill passes"], 8)
    np.testing.assert_allclose(task.prefers_a(model, np.arange(2), 8), -flipped.prefers_a(model, np.arange(2), 8), atol=1e-5)


def test_selector_logits_at_each_rows_last_position_match_the_full_logits_and_their_gradients(tiny):
    """``SelectorTask`` runs the LM head only at the rows' last positions (``logits_to_keep``, through the PEFT
    wrapper the method trains): on a right-padded batch of different lengths the choice logits and the LoRA
    gradients equal those of the full logits."""
    tok = tiny[1].generator_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    from largefedbench.synthetic.lora import add_lora

    torch.manual_seed(1)
    base = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=16, n_layer=2, n_head=2))
    model = add_lora(base, rank=2, alpha=4).eval()
    for name, param in model.named_parameters():  # B = 0 at first: move it, so the gradients reach every LoRA factor
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    task = SelectorTask(tok, ["the cell divides fast", "a bill", "x"], ["we met farmers today", "genes", "a b c d e"], 8)
    batch = task.examples(np.arange(3), np.array([0, 1, 0]))
    assert len({len(r) for r, _ in batch}) > 2, "rows of several lengths, so the last positions differ"

    def full_logits(rows):
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), task.pad_id)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)], mask[i, : len(r)] = torch.as_tensor(r), 1
        logits = model(input_ids=ids, attention_mask=mask).logits
        return logits[torch.arange(len(rows)), mask.sum(1) - 1][:, task.choice_ids]

    labels = torch.as_tensor([y for _, y in batch])
    expected_loss = torch.nn.functional.cross_entropy(full_logits([r for r, _ in batch]), labels)
    expected_loss.backward()
    trained = [p for p in model.parameters() if p.requires_grad]
    expected = [p.grad.clone() for p in trained]
    assert trained and all(g.abs().sum() > 0 for g in expected)
    model.zero_grad()
    loss = task.loss(model, batch)
    loss.backward()
    torch.testing.assert_close(loss, expected_loss, rtol=0, atol=1e-6)
    for got, want in zip((p.grad for p in trained), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def _top_layer_selector(tok, arch: str):
    """A 3-layer causal LM of ``arch`` with a LoRA (B moved off 0) in its top layer only."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from largefedbench.synthetic.lora import add_lora

    torch.manual_seed(3)
    base = (GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=3, n_head=2))
            if arch == "gpt2" else
            LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)))
    model = add_lora(base, rank=2, alpha=4, layers=[2]).eval()
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    return model


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_frozen_layers_run_once_per_row_with_the_same_loss_gradients_and_scores(tiny, arch):
    """With a LoRA in the top layer only, ``freeze_prefix`` runs the two layers under it once per row of the task;
    afterwards a training step and the scores never run them, and give the full model's loss, LoRA gradients and
    log-odds, in float32 and in bf16 autocast, on right-padded rows of several lengths."""
    import pickle

    from largefedbench.fedtrain.frozen_prefix import decoder_layers

    tok = tiny[1].generator_tokenizer
    model = _top_layer_selector(tok, arch)
    a, b = ["the cell divides fast", "a bill", "x"], ["we met farmers today", "genes", "a b c d e"]
    trained = [p for p in model.parameters() if p.requires_grad]
    calls = []
    hook = decoder_layers(model)[0].register_forward_hook(lambda *args: calls.append(1))
    for dtype in ("float32", "bfloat16"):
        runs = {}
        for frozen in (False, True):
            task = SelectorTask(tok, a, b, 8, dtype)
            if frozen:
                assert task.freeze_prefix(model, batch_size=2) == 2
                for autocast in (task.train_autocast, False):  # training's and scoring's states, computed now
                    task.prefix.states(autocast)
                calls.clear()
            batch = task.examples(np.arange(3), np.array([0, 1, 0]))
            assert len({len(r) for r, _ in batch}) > 2
            loss = task.loss(model, batch)
            runs[frozen] = loss.detach(), torch.autograd.grad(loss, trained), task.prefers_a(model, np.arange(3), 2)
            if frozen:
                assert not calls, "the frozen layers ran again"
        (loss, grads, scores), (loss_f, grads_f, scores_f) = runs[False], runs[True]
        tol = 1e-5 if dtype == "float32" else 2e-2
        torch.testing.assert_close(loss_f, loss, rtol=0, atol=tol)
        for got, want in zip(grads_f, grads):
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(scores_f, scores, atol=1e-5)
    hook.remove()
    assert not task.prefix.covers(model.train(), task.ab), "train mode (dropout) runs the whole model"
    assert not task.prefix.covers(_top_layer_selector(tok, arch).eval(), task.ab), "only the model it was made for"
    assert pickle.loads(pickle.dumps(task.prefix))._states == {}, "a worker computes its own states"


def test_a_selector_with_a_lora_in_every_layer_runs_the_whole_model(tiny):
    from transformers import GPT2Config, GPT2LMHeadModel

    from largefedbench.synthetic.lora import add_lora

    tok = tiny[1].generator_tokenizer
    model = add_lora(GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=2, n_head=2)),
                     rank=2, alpha=4)
    task = SelectorTask(tok, ["a b"], ["c d"], 8)
    assert task.freeze_prefix(model, 8) == 0 and task.prefix is None


def test_a_bfloat16_selector_trains_in_bf16_and_scores_in_float32(tiny):
    """``selector_dtype="bfloat16"`` (the cpu preset): the training forward's matrix products run under bf16 autocast,
    so the loss moves off float32's by bf16 rounding only and the LoRA gradients stay close to float32's; the scores
    (DPO labels, FedBiscuit's grouping) are float32's exactly."""
    tok = tiny[1].generator_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    from largefedbench.synthetic.lora import add_lora

    torch.manual_seed(2)
    model = add_lora(GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=2)),
                     rank=2, alpha=4).eval()
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)
    a, b = ["the cell divides fast", "a bill passes"], ["we met farmers today", "genes are expressed"]
    trained = [p for p in model.parameters() if p.requires_grad]
    results = {}
    for dtype in ("float32", "bfloat16"):
        task = SelectorTask(tok, a, b, 8, dtype)
        loss = task.loss(model, task.examples(np.arange(2), np.array([0, 1])))
        results[dtype] = loss.detach(), torch.autograd.grad(loss, trained), task.prefers_a(model, np.arange(2), 8)
    (loss32, grads32, scores32), (loss16, grads16, scores16) = results["float32"], results["bfloat16"]
    assert loss16.dtype == torch.float32
    assert loss16 != loss32, "the bf16 forward is not float32's"
    torch.testing.assert_close(loss16, loss32, rtol=0, atol=0.05)
    flat32, flat16 = torch.cat([g.flatten() for g in grads32]), torch.cat([g.flatten() for g in grads16])
    assert torch.nn.functional.cosine_similarity(flat32, flat16, dim=0) > 0.98
    np.testing.assert_array_equal(scores16, scores32)


def test_the_embedding_selector_learns_a_preference_defined_in_the_embedding_space():
    """The ablation's selector: its log-odds flip with the order, its loss is the LLM selector's cross-entropy with
    logits (w·x, 0) (the form FedBiscuit's grouping computes), and a few AdamW steps on 200 labelled pairs agree with
    held-out pairs' labels far above chance — what the LoRA selector does not reach (docs/profiles.md)."""
    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    emb_a, emb_b = unit(rng.normal(size=(400, 32)).astype(np.float32)), unit(rng.normal(size=(400, 32)).astype(np.float32))
    pool = PairPool(["a"] * 400, ["b"] * 400, emb_a, emb_b)
    spans = unit(rng.normal(size=(1, 32)) + 0.3 * rng.normal(size=(50, 32))).astype(np.float32)  # one client's spans
    labels = client_preferences(spans, np.zeros(50, dtype=np.int64), 1, pool, np.arange(400)[None])[0]
    task = EmbeddingSelectorTask(emb_a, emb_b)
    model = EmbeddingSelectorTask.model(32)
    assert np.all(task.prefers_a(model, np.arange(400), 64) == 0)  # at chance before training
    with torch.no_grad():
        model.weight.normal_()
    odds = task.log_odds(model, task.ab, 64)
    np.testing.assert_allclose(task.log_odds(model, task.ba, 64), -odds, atol=1e-6)
    batch = task.examples(np.arange(3), labels[:3])
    sign = np.where(labels[:3] == 0, 1.0, -1.0)  # both orders of a pair have the same loss
    expected = np.mean(np.logaddexp(0.0, -sign * odds[:3]))
    assert task.loss(model, batch).item() == pytest.approx(expected, rel=1e-5)
    torch.nn.init.zeros_(model.weight)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.0)
    train = task.examples(np.arange(200), labels[:200])
    for _ in range(30):
        opt.zero_grad()
        task.loss(model, train).backward()
        opt.step()
    agree = np.mean((task.prefers_a(model, np.arange(200, 400), 64) > 0) == (labels[200:] == 0))
    assert agree > 0.8  # 0.88; chance 0.5


def test_selector_dtype_and_dpo_accumulation_are_checked():
    with pytest.raises(InputError, match="selector_dtype"):
        FedBisConfig(selector_dtype="float16")
    with pytest.raises(InputError, match="dpo_gradient_accumulation"):
        FedBiscuitConfig(dpo_gradient_accumulation=0)
    with pytest.raises(ValueError, match="dtype"):
        SelectorTask(None, [], [], 8, "bf16")


def test_the_cpu_presets_dpo_takes_popris_cpu_steps_an_epoch():
    """FedBis's cpu DPO takes as many optimizer steps an epoch, at the same lr, as POPri's cpu round, whose step the
    cpu profile was measured at (with 4× the steps POPri's generator overshot); micro-batches keep memory small."""
    from largefedbench.methods.popri import POPriConfig

    popri, fedbis = POPriConfig.cpu(), FedBisConfig.cpu()
    pairs = fedbis.n_dpo_prompts * math.comb(fedbis.n_completions, 2)
    assert math.ceil(pairs / (fedbis.dpo_batch_size * fedbis.dpo_gradient_accumulation)) == \
        math.ceil(popri.n_prompts / popri.dpo_batch_size)
    assert (fedbis.dpo_lr, fedbis.dpo_epochs) == (popri.lr, popri.dpo_epochs)
    assert FedBiscuitConfig.cpu().dpo_gradient_accumulation == fedbis.dpo_gradient_accumulation


def test_the_cpu_presets_sample_as_the_generator_only_row_and_schedule_fedbiscuits_rounds():
    """FedBis's cpu prompts and final-set sampling are the generator-only row's (POPri's cpu preset), so that row is
    FedBis's own no-signal row; FedBiscuit: one warm-up round per selector, then one grouping and 2 clustered rounds."""
    from largefedbench.methods.generator_only import GeneratorOnlyConfig

    from largefedbench.synthetic.prompts import SamplingSettings

    fedbis, row = FedBisConfig.cpu(), GeneratorOnlyConfig.cpu()
    assert all(getattr(fedbis, f) == getattr(row, f) for f in SamplingSettings.__dataclass_fields__
               if f != "examples_per_prompt")  # an instruction prompt holds no example
    assert fedbis.prompt_format == "instruction" and fedbis.n_synthetic == row.n_final
    biscuit = FedBiscuitConfig.cpu()
    steps = biscuit.schedule()
    assert sum(k == "warmup" for k, _ in steps) == 3 and sum(k == "train" for k, _ in steps) == 2
    assert [i for k, i in steps if k == "group"] == [0] and biscuit.rounds == 5


def test_the_cpu_preset_noise_is_below_the_clip_bound_over_its_rounds():
    """The reason for the cpu preset (docs/profiles.md): at ε = 4 on demo-prose's 1,549 train clients the noise of the
    released mean, summed over the rounds, is below the clip bound for a selector of the top 4 SmolLM2 layers (163k
    LoRA weights at r 4), where the preset before (10 rounds at rate 0.05, the LoRA in all 30 layers) had 3.6×."""
    from largefedbench.privacy.calibration import calibrate_noise_multiplier
    from largefedbench.privacy.events import PoissonGaussianEvent

    per_layer = 4 * ((576 + 576) * 2 + (576 + 192) * 2 + (576 + 1536) * 3)  # r·(in+out) of q, o, k, v, gate, up, down

    def ratio(cfg: FedBisConfig, layers: int) -> float:
        sigma = calibrate_noise_multiplier(lambda s: [PoissonGaussianEvent(s, cfg.sample_rate, cfg.rounds)], 4.0, 3e-6,
                                           accountant="rdp")
        return sigma * math.sqrt(per_layer * layers) / (cfg.sample_rate * 1549) / math.sqrt(cfg.rounds)

    cpu = FedBisConfig.cpu()
    before = dataclasses.replace(cpu, rounds=10, sample_rate=0.05)
    assert ratio(cpu, cpu.selector_layers) < 0.5 and ratio(before, 30) > 3.5


def test_paper_schedule_and_plan_follow_algorithm_1():
    cfg = FedBiscuitConfig()
    steps = cfg.schedule()
    assert sum(k == "warmup" for k, _ in steps) == 150 and sum(k == "train" for k, _ in steps) == 350
    assert [i for k, i in steps if k == "group"] == list(range(7))  # every 50 of the 350 clustered rounds
    plan = FedBiscuit().plan(cfg, 53, 1.0, 20.0)
    assert len(plan) == 500 + 7  # one grouping release per regrouping
    assert FedBis().plan(FedBisConfig(), 53, 1.0, 0.0)[0].steps == 500


def _check_ledger(method, cfg, fed, info, budget):
    planned = PrivacyLedger(method.plan(cfg, fed.n_clients, info["noise_multiplier"], info["grouping_noise_multiplier"] or 0.0))
    assert fed.ledger.events == planned.events
    eps = fed.ledger.epsilon(budget.delta)
    assert eps <= budget.epsilon + 1e-6 and eps > 0.97 * budget.epsilon
    assert eps == pytest.approx(epsilon_of(list(planned.events), budget.delta), rel=1e-9)


@pytest.mark.slow
def test_fedbis_end_to_end_and_its_resumes_after_the_selectors_and_after_dpo(tiny, tmp_path, monkeypatch):
    """FedBis with the cpu preset's two speed settings: bf16 selector training and DPO micro-batches whose gradients
    are accumulated (an optimizer step every 3 micro-batches of 2 pairs), on 2 selector rounds of ~16 clients. Killed
    after the last selector round, then after DPO, it ends with the texts, info and ledger of a run never killed; a
    resume in DPO builds no pair pool (the minutes of generation and frozen layers the selector rounds need), a resume
    after DPO runs no DPO."""
    from conftest import Killed, killed_after

    cfg = dataclasses.replace(FedBisConfig.tiny(), selector_dtype="bfloat16", dpo_batch_size=2,
                              dpo_gradient_accumulation=3, rounds=2, sample_rate=0.01)
    fed, art = train_end_to_end(tiny, tmp_path / "a", FedBis(), cfg, BUDGET)
    assert art.kind == "synthetic text" and len(art.texts) >= 0.8 * cfg.n_synthetic
    _check_ledger(FedBis(), cfg, fed, art.info, BUDGET)
    dpo = art.info["dpo"]
    assert art.info["selectors"] == 1 and art.info["dpo_pairs"] > 0 and art.info["pool_pairs"] > 0
    assert dpo["steps"] == cfg.dpo_epochs * math.ceil(dpo["n_trained_pairs"] / 6) > 0
    assert [h["phase"] for h in art.history] == ["selector"] * cfg.rounds + ["dpo"]

    calls = {"pool": 0, "dpo": 0}
    pool, rlhf = FedBis._pair_pool, FedBis._rlhf

    def counted(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(FedBis, "_pair_pool", counted("pool", pool))
    monkeypatch.setattr(FedBis, "_rlhf", counted("dpo", rlhf))
    with pytest.raises(Killed):
        train_end_to_end(tiny, tmp_path / "b", FedBis(), cfg, BUDGET, resources=killed_after(cfg.rounds - 1))
    assert calls == {"pool": 1, "dpo": 0}
    with pytest.raises(Killed):
        train_end_to_end(tiny, tmp_path / "b", FedBis(), cfg, BUDGET, resources=killed_after(0, stage="dpo"))
    assert calls == {"pool": 1, "dpo": 1}
    fed_b, resumed = train_end_to_end(tiny, tmp_path / "b", FedBis(), cfg, BUDGET)
    assert calls == {"pool": 1, "dpo": 1}

    def untimed(a):  # DPO's wall seconds differ between any two runs
        info = {**a.info, "dpo": {k: v for k, v in a.info["dpo"].items() if k != "seconds"}}
        return a.texts, info, [{k: v for k, v in row.items() if k != "seconds"} for row in without_timing(a.history)]

    assert untimed(resumed) == untimed(art)
    one, two = fed.state_dict(), fed_b.state_dict()
    assert (one["ledger"], one["round"], one["rng"]) == (two["ledger"], two["round"], two["rng"])


def test_the_pair_pool_built_again_on_a_resume_between_selector_rounds_is_not_counted_twice(monkeypatch):
    """A fresh run's pool build is the run's time; after a resume between selector rounds the checkpoint says the pool
    was built (its size), so building it again runs in the clock's ``redoing()`` and its seconds are not added again."""
    import time
    from types import SimpleNamespace

    from largefedbench.methods.fedbiscuit import SelectorServer

    from largefedbench.timing import JobClock

    def build(self):
        time.sleep(0.1)
        self.pool = "built"

    monkeypatch.setattr(SelectorServer, "_build_pool", build)
    run = object.__new__(SelectorServer)
    run.fed, run.pool, run.state = SimpleNamespace(clock=JobClock()), None, SelectorState([], None, None)
    run.fed.clock.start()
    run._prepare()
    run._prepare()  # built once per process
    assert run.pool == "built" and run.fed.clock.redone_seconds == 0 and run.fed.clock.seconds() >= 0.1
    resumed = object.__new__(SelectorServer)
    resumed.fed, resumed.pool = SimpleNamespace(clock=JobClock()), None
    resumed.state = SelectorState([], None, None, pool_pairs=64, frozen_layers=3)  # as a round checkpoint restores it
    resumed.fed.clock.start()
    resumed._prepare()
    assert resumed.pool == "built" and resumed.fed.clock.redone_seconds >= 0.1 and resumed.fed.clock.seconds() < 0.05


def test_record_agreement_on_a_worker_executor_stops_before_any_round(tiny, tmp_path):
    """The agreement is kept where the client functions run: on worker processes it never reaches the method, so
    the run stops before its first round (not after it, with the round's work lost)."""
    fed, public = federation_and_public(tiny, tmp_path)
    workers = Federation(tiny[0].train, seed=0, executor="process")
    assert fed.clients_run_here and not workers.clients_run_here
    cfg = dataclasses.replace(FedBisConfig.tiny(), record_agreement=True)
    with pytest.raises(InputError, match="record_agreement needs --executor local.*add --executor local"):
        FedBis().train(workers, public, cfg, BUDGET)
    assert workers.round == -1 and not workers.releases and not len(workers.ledger)  # no cohort drawn, nothing sent


@pytest.mark.slow
def test_fedbis_records_its_selectors_agreement_unreleased_and_trains_only_the_top_layers(tiny, tmp_path):
    """``record_agreement``: one unreleased row a round (the broadcast selector against each cohort client's own
    validation pairs, before its local training), nothing of it in the artifact; ``selector_layers``: the selector's
    LoRA sits in the top layers only, so its release has that many layers' weights."""
    import json

    from largefedbench.rounds import UNRELEASED_FILE
    from largefedbench.synthetic.lora import add_lora, top_layer_indices

    cfg = dataclasses.replace(FedBisConfig.tiny(), record_agreement=True, selector_layers=1)
    fed, art = train_end_to_end(tiny, tmp_path, FedBis(), cfg, BUDGET)
    rows = json.loads((tmp_path / UNRELEASED_FILE).read_text())
    assert [r["round"] for r in rows] == list(range(cfg.rounds))
    for r in rows:
        assert 0 <= r["selector_agreement_on_own_validation_pairs"] <= 1
        assert r["validation_pairs"] % cfg.validation_pairs == 0 and r["validation_pairs"] > 0
    assert "agreement_on_own" not in json.dumps(art.info) + json.dumps(art.history)
    model = tiny[1].new_generator()
    top = top_layer_indices(model, 1)
    names = [n for n, p in add_lora(model, rank=2, alpha=4, layers=top).named_parameters() if p.requires_grad]
    assert names and all(f".{top[0]}." in n for n in names)
    with pytest.raises(InputError, match="top 0 layers"):
        top_layer_indices(model, 0)


@pytest.mark.slow
def test_fedbiscuit_with_the_embedding_selector_trains_linear_selectors_through_the_same_rounds(tiny, tmp_path):
    """``selector="embedding"``: U linear selectors (one weight per embedding dimension) through the same warm-up,
    private grouping, clustered rounds and ledger; each round uploads one selector's or U selectors' weights; the
    artifact names the deviation, and nothing of the generator's layers is run for the selector."""
    from largefedbench.models import embed

    fed, public = federation_and_public(tiny, tmp_path)
    cfg = dataclasses.replace(FedBiscuitConfig.tiny(), selector="embedding")
    art = FedBiscuit().train(fed, public, cfg, BUDGET)
    _check_ledger(FedBiscuit(), cfg, fed, art.info, BUDGET)
    dim = embed([], public.models.embedder).shape[1]
    widths = {h["phase"]: fed.costs.rounds[h["round"]]["floats_up_per_client"] for h in art.history if "round" in h}
    assert widths == {"warmup": dim, "group": fed.n_clients * 3, "train": 3 * dim}
    assert art.info["selector_layers_run_once"] == 0 and EMBEDDING_SELECTOR_DEVIATION in art.info["deviations"]
    assert len(art.texts) >= 0.8 * cfg.n_synthetic and art.info["dpo_pairs"] > 0
    with pytest.raises(InputError, match="selector='lora'; choose one of llm, embedding"):
        dataclasses.replace(cfg, selector="lora")


class _Unnested(Federation):
    """Counts releases and fails on a release started inside another one's client function."""

    n_releases, _depth = 0, 0

    def private_sum(self, *args, **kwargs):
        assert self._depth == 0, "a release nested in another's client function counts client seconds twice"
        self._depth, self.n_releases = self._depth + 1, self.n_releases + 1
        try:
            return super().private_sum(*args, **kwargs)
        finally:
            self._depth -= 1


@pytest.mark.slow
def test_fedbiscuit_end_to_end_with_private_grouping(tiny, tmp_path):
    fed, public = federation_and_public(tiny, tmp_path)
    fed.__class__ = _Unnested  # one flat release per round and per regrouping: client seconds counted once
    cfg = FedBiscuitConfig.tiny()
    art = FedBiscuit().train(fed, public, cfg, BUDGET)
    assert fed.n_releases == len(cfg.schedule()) == len(fed.releases)
    assert len(art.texts) >= 0.8 * cfg.n_synthetic and art.info["selectors"] == 3
    _check_ledger(FedBiscuit(), cfg, fed, art.info, BUDGET)
    phases = [h["phase"] for h in art.history]
    assert phases == ["warmup"] * 3 + ["group", "train", "train", "group", "train", "train", "dpo"]
    sizes = art.history[3]["group_sizes"]
    assert sum(sizes) == fed.n_clients and max(sizes) - min(sizes) <= 1  # Eq. 5
    trains = [h for h in art.history if h["phase"] in ("warmup", "train")]
    assert all("clients" not in h and h["expected_clients"] == pytest.approx(cfg.sample_rate * fed.n_clients)
               for h in trains)  # Poisson cohort sizes are not released
    assert all(h["releases"][0]["expected_clients"] == h["expected_clients"] for h in trains)  # SNR per release
    assert all(len(h["releases"]) == 1 for h in art.history if h["phase"] == "group")
