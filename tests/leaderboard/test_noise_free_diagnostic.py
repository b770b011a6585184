"""`lfb eval --noise-free`: calibrated for the target ε, released with σ = 0; the ledger says ε = ∞, the entry is a
diagnostic the validator accepts only with noiseless ledgers, and the board lists it apart, never ranked."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_federation_private_sum import (  # tests/ is on sys.path (rootdir conftest)
    D,
    _views,
    small_split,
)

from largefedbench.errors import InputError
from largefedbench.federation import Federation
from largefedbench.leaderboard.board import build_board
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.markdown import render_markdown
from largefedbench.leaderboard.validate import format_reports, validate_entry_file
from largefedbench.privacy.clipping import clip_rows
from largefedbench.privacy.mechanisms import Gaussian, TreeAggregation, TreePrefixSum
from largefedbench.run.eval import EvalRequest, prepare, run_eval

from .conftest import EXAMPLE, _on_path
from .entry_variants import save


def test_a_noise_free_federation_releases_the_exact_clipped_sum_and_records_infinite_epsilon():
    clients, emb = small_split()
    fed = Federation(clients, embeddings=emb, noise_free=True)
    cohort = fed.everyone()
    vec = lambda c: c.rng().normal(size=D) * 50
    out = fed.private_sum(cohort, vec, clip=1.5, mechanism=Gaussian(4.0))
    plain = Federation(clients, embeddings=emb)
    exact = clip_rows(np.stack([vec(c) for c in _views(plain, plain.everyone())]), 1.5).sum(0)
    np.testing.assert_allclose(out, exact, rtol=1e-12)
    assert fed.ledger.epsilon(1e-5, "rdp") == float("inf")
    noisy = Federation(clients, embeddings=emb)
    assert np.abs(noisy.private_sum(noisy.everyone(), vec, clip=1.5, mechanism=Gaussian(4.0)) - exact).max() > 1.0


def test_noise_free_refuses_a_mechanism_without_a_noise_free_variant():
    """DP-FTRL's tree releases running totals: swapping in NoNoise would run another algorithm, so it is refused."""
    clients, emb = small_split()
    fed = Federation(clients, embeddings=emb, noise_free=True)
    with pytest.raises(InputError, match="no noise-free variant"):
        fed.private_sum(fed.everyone(), lambda c: np.ones(D), clip=1.0, mechanism=TreeAggregation(2.0, TreePrefixSum(3)))


@pytest.fixture(scope="module")
def noise_free(example_site, tiny, tmp_path_factory):
    _fd, _bundle, root = tiny
    board = tmp_path_factory.mktemp("noise-free-board")
    with _on_path(example_site):
        return run_eval(EvalRequest(method=EXAMPLE, seeds=(0,), out=board, home=root, progress=False, noise_free=True),
                        log=lambda m: None)


def test_the_noise_free_entry_is_a_valid_diagnostic_with_infinite_epsilon(noise_free, produced):
    e = noise_free.entry
    assert e.diagnostic.kind == "noise-free"
    assert e.privacy.epsilon == "inf" and e.privacy.target_epsilon == 1.0
    assert "--noise-free" in noise_free.path.name and "--noise-free" in e.config.command
    assert noise_free.path.name != produced.path.name  # its own id and run folder, beside the noised entry
    report = validate_entry_file(EntryFile(noise_free.path, board_of(noise_free.path)))
    assert report.valid and report.status == "diagnostic", format_reports([report])
    board = build_board([report])
    assert [r.status for r in board.rows] == ["diagnostic"] and board.rows[0].rank is None
    assert "1 diagnostic" in board.counts_text()
    # bucketed by the ε it was calibrated for, not with the ε = ∞ references, and the table shows that target
    assert board.rows[0].bucket == "ε ≤ 1" and board.groups[0].tables("diagnostic")[0][0] == "ε ≤ 1"
    table = [line for line in render_markdown(board, {}).splitlines() if line.startswith("|")]
    assert "| ε | Target ε |" in table[0] and "| ∞ | 1 |" in table[2]


def test_a_diagnostic_whose_ledger_was_noised_is_rejected(noise_free, produced, tmp_path):
    forged = copy.deepcopy(noise_free.entry.to_json())
    noised = produced.entry.to_json()["privacy"]
    forged["privacy"].update({k: noised[k] for k in ("ledgers", "epsilon", "epsilon_per_seed")})
    report = validate_entry_file(EntryFile(save(tmp_path, forged), tmp_path))
    assert not report.valid
    assert any(f.check == "privacy-budget" and "some release was noised" in f.message for f in report.errors)


def test_noise_free_is_refused_for_the_references(tiny, tmp_path):
    with pytest.raises(InputError, match="reference"):
        prepare(EvalRequest(method="public", seeds=(0,), out=tmp_path, home=tiny[2], noise_free=True))
