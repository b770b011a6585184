"""Signal-to-noise per release: public numbers only, in the federation's log and in every round
history the rounds loop keeps; the board's ε cell says σ, T, q and the bound."""

from __future__ import annotations

import numpy as np
from test_federation_private_sum import small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.federation import Federation, release_snr
from largefedbench.privacy.mechanisms import Gaussian, NoNoise


def test_each_release_logs_noise_std_signal_bound_and_their_ratio():
    clients, emb = small_split(50, seed=3)
    fed = Federation(clients, embeddings=emb, seed=0)
    fed.private_sum(fed.sample(0.2), lambda view: np.ones(3), clip=2.0, mechanism=Gaussian(4.0))
    fed.private_sum(fed.everyone(), lambda view: np.ones(3), clip=1.0, mechanism=NoNoise())
    first, second = fed.releases
    assert first == release_snr(0, 4.0, 2.0, 10.0)
    assert (first["noise_std"], first["signal_bound"], first["snr"]) == (8.0, 20.0, 2.5)  # expected cohort q·n = 10
    assert second["snr"] is None and second["noise_std"] == 0.0 and second["expected_clients"] == 50.0
    resumed = Federation(clients, embeddings=emb, seed=0)
    resumed.load_state_dict(fed.state_dict())
    assert resumed.releases == fed.releases


def test_the_rounds_loop_puts_each_rounds_releases_in_its_history(tmp_path):
    from dataclasses import dataclass

    from largefedbench.contract import PublicResources
    from largefedbench.rounds import RoundsLoop

    @dataclass
    class State:
        total: float = 0.0

    clients, emb = small_split(40, seed=3)
    fed = Federation(clients, embeddings=emb, seed=0)
    from rounds.test_rounds_loop import FakeSnapshot

    public = PublicResources(snapshot=FakeSnapshot.manifest, models=None, seed=0, run_dir=tmp_path, progress=False)
    loop = RoundsLoop(fed, public, State(), rounds=2, desc="test")
    for r in loop:
        fed.private_sum(fed.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(2.0))
        loop.history.append({"round": r})
    assert [h["releases"][0]["snr"] for h in loop.history] == [10.0, 10.0]  # 0.5 × 40 clients / σ = 2
    assert "round" not in loop.history[0]["releases"][0]


def test_the_boards_epsilon_cell_says_sigma_t_q_and_the_bound():
    from types import SimpleNamespace

    from largefedbench.leaderboard.columns import noise_summary

    ledger = {"format": "lfb-privacy-ledger/1", "events": [
        {"type": "poisson_gaussian", "noise_multiplier": 2.0, "sample_rate": 0.1, "steps": 20},
        {"type": "tree_aggregation", "noise_multiplier": 3.0, "rounds_per_epoch": 8, "epochs": 2}]}
    row = SimpleNamespace(entry=SimpleNamespace(privacy=SimpleNamespace(ledgers=[ledger], n_train_clients=1000)))
    assert noise_summary(row) == ("σ = 2, T = 20, q = 0.1: SNR bound per release 50; "
                                  "tree: σ = 3, 8 rounds × 2 epochs")
