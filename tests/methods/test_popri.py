"""POPri: the paper's defaults, one end-to-end run on the demo with its ledger, early stopping and resume."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from conftest import Killed, killed_after, train_end_to_end
from largefedbench.methods.popri import POPri, POPriConfig
from timing_free import without_timing

from largefedbench.errors import InputError
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget

pytestmark = pytest.mark.slow

BUDGET = PrivacyBudget(1.0, 3e-6)
SMALL = {"rounds": 2, "n_prompts": 6, "n_per_prompt": 4, "rejected_rank": 3, "n_final": 12, "dpo_batch_size": 6}


def run(tiny, run_dir, cfg, resources=None):
    return train_end_to_end(tiny, run_dir, POPri(), cfg, BUDGET, seed=3, resources=resources)


def test_defaults_are_the_papers():
    cfg = POPriConfig()
    assert (cfg.n_prompts, cfg.n_per_prompt, cfg.rejected_rank, cfg.max_new_tokens, cfg.temperature) == (1800, 10, 5, 64, 1.0)
    assert (cfg.rounds, cfg.lora_rank, cfg.lora_alpha, cfg.dpo_epochs, cfg.dpo_batch_size) == (20, 4, 8, 2, 24)
    assert (cfg.scoring, cfg.loss_type, cfg.clients_per_round, cfg.n_final) == ("cosine", "sigmoid", None, 1_000_000)
    assert cfg.lr_at(0) == pytest.approx(8e-7) and cfg.lr_at(19) == pytest.approx(3e-7)
    assert 3e-7 < cfg.lr_at(10) < 8e-7
    tiny = POPriConfig.tiny()
    assert tiny.rejected_rank <= tiny.n_per_prompt and tiny.rounds >= 2
    with pytest.raises(InputError, match="rejected_rank"):
        POPriConfig(n_per_prompt=4, rejected_rank=5)
    with pytest.raises(InputError, match="loss_type"):
        POPriConfig(loss_type="kto")


def test_popri_runs_end_to_end_and_resumes_after_a_kill_as_if_uninterrupted(tiny, tmp_path):
    cfg = dataclasses.replace(POPri.Config.tiny(), **SMALL)
    fed_a, straight = run(tiny, tmp_path / "straight", cfg)

    # the artifact and its ledger
    assert straight.kind == "synthetic text" and 0 < len(straight.texts) <= cfg.n_final
    sigma = straight.info["sigma"]
    assert fed_a.ledger.events == (PoissonGaussianEvent(sigma, 1.0, cfg.rounds),)
    assert 0.95 * BUDGET.epsilon < fed_a.ledger.epsilon(BUDGET.delta) <= BUDGET.epsilon
    assert straight.info["lora"] == {"rank": 4, "alpha": 8, "dropout": 0.0}
    # one history row per round with its FID and DPO metrics, plus the final generator's FID
    assert [h["round"] for h in straight.history] == [0, 1, 2] and straight.history[-1]["evaluation_only"]
    rounds = straight.history[:-1]
    assert all(math.isfinite(h["fid"]) and h["n_pairs"] >= 1 and h["sigma"] == sigma for h in rounds)
    assert all(h["clients"] == fed_a.n_clients and "margin_last" in h for h in rounds)
    # early stopping: the generator with the lowest validation FID made the final set
    fids = [h["fid"] for h in straight.history]
    assert straight.info["best_round"] == int(np.argmin(fids)) and straight.info["best_fid"] == min(fids)
    # Table 2 costs: K·J embeddings down, K·J scores up, server seconds counted
    costs = fed_a.costs.rounds
    assert costs[0]["floats_down_per_client"] == cfg.n_prompts * cfg.n_per_prompt * 384
    assert costs[0]["floats_up_per_client"] == cfg.n_prompts * cfg.n_per_prompt and costs[0]["server_seconds"] > 0

    with pytest.raises(Killed):
        run(tiny, tmp_path / "killed", cfg, killed_after(0))
    fed_b, resumed = run(tiny, tmp_path / "killed", cfg)
    assert fed_b.ledger == fed_a.ledger and fed_b.round == fed_a.round == cfg.rounds - 1
    assert without_timing(resumed.history) == without_timing(straight.history)
    assert resumed.texts == straight.texts


def _lora_b(model):
    return [p for name, p in model.named_parameters() if "lora_B" in name]


def test_each_round_starts_from_the_round_befores_best_epoch(tiny, tmp_path, monkeypatch):
    """App. B.1: the lowest-FID checkpoint of a round's DPO epochs is the next round's starting point (default);
    ``round_start="last_epoch"`` carries the last epoch on (the reference code). DPO and FID are replaced by stubs
    that mark epoch e of round r in the adapter (lora_B = (10·r + e)·1e-6) and score epoch 1 best."""
    import largefedbench.methods.popri as popri_module

    import largefedbench.synthetic.generator_rounds as template

    starts, current = [], {}

    def mark(model) -> float:
        return round(float(_lora_b(model)[0].detach().flatten()[0]) * 1e6, 3)

    def fake_dpo(model, tokenizer, prompts, chosen, rejected, *, epoch_end=None, **kwargs):
        starts.append(mark(model))
        current["model"] = model
        for epoch in (1, 2):
            with torch.no_grad():
                for p in _lora_b(model):
                    p.fill_((10 * len(starts) + epoch) * 1e-6)
            if epoch_end is not None:
                epoch_end()
        return {"train_loss": 0.0, "margin_first": 0.0, "margin_last": 0.0, "reward_accuracy_last": 1.0, "steps": 2}

    real_fid = template.fid_to

    def fake_fid(emb, reference):
        model = current.get("model")
        return real_fid(emb, reference) if model is None else abs(mark(model) % 10 - 1.0)

    monkeypatch.setattr(popri_module, "dpo_update", fake_dpo)
    monkeypatch.setattr(template, "fid_to", fake_fid)
    cfg = dataclasses.replace(POPri.Config.tiny(), **SMALL)
    assert cfg.dpo_epochs == 2 and cfg.round_start == "best_epoch"
    _, art = run(tiny, tmp_path / "best", cfg)
    assert starts == [0.0, 11.0]  # round 2 starts from round 1's epoch 1, not its last epoch (12)
    assert art.history[0]["epoch_fids"] == [0.0, 1.0] and art.history[0]["start_epoch"] == 1

    starts.clear()
    current.clear()
    run(tiny, tmp_path / "last", dataclasses.replace(cfg, round_start="last_epoch"))
    assert starts == [0.0, 12.0]
    with pytest.raises(InputError, match="round_start"):
        POPriConfig(round_start="best")
