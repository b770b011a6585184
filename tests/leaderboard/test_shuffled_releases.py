"""`lfb eval --shuffled-releases`: the control whose every noised sum is permuted before the method sees it. The
ledger and ε are the run's own; the entry is a diagnostic the board lists apart, never ranked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_federation_private_sum import D, small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.errors import InputError
from largefedbench.federation import Federation
from largefedbench.leaderboard.board import build_board
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.validate import format_reports, validate_entry_file
from largefedbench.privacy.mechanisms import Gaussian, TreeAggregation, TreePrefixSum
from largefedbench.run.eval import EvalRequest, prepare, run_eval

from .conftest import EXAMPLE, _on_path


@pytest.mark.parametrize("torch_rows", [False, True])
def test_a_shuffled_release_is_the_noised_sum_permuted_with_the_same_ledger(torch_rows):
    clients, emb = small_split()

    def vec(c):
        v = c.rng().normal(size=(2, D)) * 50
        return torch.as_tensor(v) if torch_rows else v

    outs, feds = [], []
    for shuffle in (False, True, True):
        fed = Federation(clients, embeddings=emb, seed=3, shuffle_releases=shuffle)
        outs.append([np.asarray(fed.private_sum(fed.everyone(), vec, clip=1.5, mechanism=Gaussian(2.0)))
                     for _ in range(2)])
        feds.append(fed)
    (plain, shuffled, again) = outs
    for r in range(2):
        assert shuffled[r].shape == plain[r].shape == (2, D)
        np.testing.assert_array_equal(np.sort(shuffled[r], axis=None), np.sort(plain[r], axis=None))
        assert not np.array_equal(shuffled[r], plain[r]), "the values moved"
        np.testing.assert_array_equal(shuffled[r], again[r])  # public randomness: seed and release index
    first = np.argsort(np.argsort(plain[0], axis=None))[np.argsort(np.argsort(shuffled[0], axis=None))]
    second = np.argsort(np.argsort(plain[1], axis=None))[np.argsort(np.argsort(shuffled[1], axis=None))]
    assert not np.array_equal(first, second), "each release has its own order"
    assert feds[1].ledger.epsilon(1e-5, "rdp") == feds[0].ledger.epsilon(1e-5, "rdp") < float("inf")


def test_shuffled_releases_refuse_a_tree_and_the_noise_free_diagnostic():
    clients, emb = small_split()
    fed = Federation(clients, embeddings=emb, shuffle_releases=True)
    with pytest.raises(InputError, match="no shuffled variant"):
        fed.private_sum(fed.everyone(), lambda c: np.ones(D), clip=1.0, mechanism=TreeAggregation(2.0, TreePrefixSum(3)))
    with pytest.raises(InputError, match="one at a time"):
        Federation(clients, embeddings=emb, shuffle_releases=True, noise_free=True)


@pytest.fixture(scope="module")
def shuffled(example_site, tiny, tmp_path_factory):
    _fd, _bundle, root = tiny
    board = tmp_path_factory.mktemp("shuffled-board")
    with _on_path(example_site):
        return run_eval(EvalRequest(method=EXAMPLE, seeds=(0,), out=board, home=root, progress=False,
                                    shuffled_releases=True), log=lambda m: None)


def test_the_shuffled_entry_is_a_valid_diagnostic_at_its_own_epsilon(shuffled, produced):
    e = shuffled.entry
    assert e.diagnostic.kind == "shuffled-releases" and "permuted" in e.diagnostic.note
    assert e.privacy.target_epsilon == 1.0 and 0 < float(e.privacy.epsilon) <= 1.0 * 1.01
    assert "--shuffled" in shuffled.path.name and "--shuffled-releases" in e.config.command
    assert shuffled.path.name != produced.path.name
    report = validate_entry_file(EntryFile(shuffled.path, board_of(shuffled.path)))
    assert report.valid and report.status == "diagnostic", format_reports([report])
    board = build_board([report])
    assert [r.status for r in board.rows] == ["diagnostic"] and board.rows[0].rank is None


def test_shuffled_releases_are_refused_for_references_declared_files_and_with_noise_free(tiny, tmp_path):
    with pytest.raises(InputError, match="reference"):
        prepare(EvalRequest(method="public", seeds=(0,), out=tmp_path, home=tiny[2], shuffled_releases=True))
    with pytest.raises(InputError, match="one at a time"):
        prepare(EvalRequest(method="popri", seeds=(0,), out=tmp_path, home=tiny[2], shuffled_releases=True,
                            noise_free=True))
