"""Weak-client voting: control codes, strong/weak split, votes restricted to weak clients and codes, end to end."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import federation_and_public, train_end_to_end
from largefedbench.methods.weak_client_voting import (
    OTHER,
    WeakClientVoting,
    WeakClientVotingConfig,
    WeakVotes,
    code_set,
    control_code,
    own_codes,
    strong_clients,
)

from largefedbench.client_views import ClientStore, chunk_view
from largefedbench.data.federated import ClientSplit
from largefedbench.federation import SpanEmbeddings
from largefedbench.privacy import (
    PoissonGaussianEvent,
    PrivacyBudget,
    PrivacyLedger,
    analytic_gaussian_sigma,
    epsilon_of,
)

BUDGET = PrivacyBudget(4.0, 1e-5)


def test_control_codes_follow_the_record_kind():
    assert control_code({"category": "neuroscience", "country": None}) == "Category: neuroscience"
    assert control_code({"category": None, "country": "GBR", "chamber": "Lords"}) == "Country: GBR, Chamber: Lords"
    assert control_code({"category": "", "country": None, "chamber": None}) == OTHER


def test_code_set_and_own_codes_on_the_demo(tiny):
    from largefedbench.data.public_corpus import load_public_corpus

    fd = tiny[0]
    codes = code_set(load_public_corpus("split", fd).metadata)  # --public split: the pre-window records' metadata
    assert codes[-1] == OTHER and "Country: USA, Chamber: Senate" in codes and "Category: ecology" in codes
    chunk = chunk_view(ClientStore(fd.train), np.arange(len(fd.train)), round_=0, fed_seed=0)
    own = own_codes(chunk, codes)  # read on the clients, from each one's own record
    assert len(own) == len(fd.train) and own.min() >= 0 and own.max() < len(codes)
    first = fd.train.client(fd.train.ids[0]).meta
    assert codes[own[0]] == control_code(first)


def test_strong_clients_are_a_seeded_fraction():
    a = strong_clients(100, 0.1, np.random.default_rng(1))
    b = strong_clients(100, 0.1, np.random.default_rng(1))
    assert a.sum() == 10 and np.array_equal(a, b)
    assert strong_clients(5, 0.01, np.random.default_rng(0)).sum() == 1  # at least one


def _coded_split(categories: list[str]) -> ClientSplit:
    from datasets import Dataset

    n = len(categories)
    return ClientSplit("train", Dataset.from_dict({"id": [f"c{i}" for i in range(n)], "spans": [["x"]] * n,
                                                   "n_spans": [1] * n, "category": categories}))


def test_weak_votes_read_codes_on_the_clients_and_skip_strong_clients():
    """Clients c5..c8 (c8's record has code 1, the others code 0; c6 is strong) in chunks of 2: each vote uses its
    own record's code, and the result does not depend on the chunking."""
    split = _coded_split(["a"] * 8 + ["b"])
    emb = SpanEmbeddings(np.array([[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 2 + [[0.0, 1.0]] * 2 + [[0.0, 1.0]]),
                         np.array([0, 1, 2, 3, 4, 5, 6, 7, 9, 10]))
    store = ClientStore(split, emb)
    pool = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    votes = WeakVotes(["Category: a", "Category: b", OTHER], frozenset({"c6"}), pool, np.array([0, 0, 1]), k=1)
    first = votes(chunk_view(store, np.array([5, 6]), round_=0, fed_seed=0))
    second = votes(chunk_view(store, np.array([7, 8]), round_=0, fed_seed=0))
    np.testing.assert_array_equal(first, [[0, 1, 0], [0, 0, 0]])  # the strong client c6 sends nothing
    # c7 (code 0) votes twice for candidate 1 -> unit vector; c8 (code 1) can only pick candidate 2
    np.testing.assert_array_equal(second, [[0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(votes(chunk_view(store, np.arange(5, 9), round_=0, fed_seed=0)),
                                  np.concatenate([first, second]))


@pytest.mark.slow
def test_codes_come_from_the_public_corpus_only(tiny, tmp_path):
    """The code set is the --public corpus's (none under generic: "Other" alone), never the
    snapshot's pre-window records behind it."""
    import dataclasses

    from largefedbench.contract import PublicResources
    from largefedbench.data.public_corpus import _corpus, load_public_corpus

    fd, bundle, _ = tiny
    generic = load_public_corpus("generic", fd)
    assert code_set(PublicResources(models=bundle, seed=0, corpus=generic).public_metadata()) == [OTHER]
    split = load_public_corpus("split", fd)
    relabelled = _corpus("split", "test", list(split.documents), tuple({"category": "zoology"} for _ in split.metadata))
    public = PublicResources(models=bundle, seed=0, run_dir=tmp_path, progress=False, corpus=relabelled)
    fed, _ = federation_and_public(tiny, None)
    cfg = dataclasses.replace(WeakClientVotingConfig.tiny(), rounds=1, n_generated=24)
    art = WeakClientVoting().train(fed, public, cfg, BUDGET)
    assert art.info["codes"] == ["Category: zoology", OTHER]  # the demo's own categories are not used


def test_weak_client_voting_end_to_end(tiny, tmp_path):
    cfg = WeakClientVotingConfig.tiny()
    fed, art = train_end_to_end(tiny, tmp_path, WeakClientVoting(), cfg, BUDGET)
    info = art.info
    assert info["codes"] == code_set(tiny[1].public_corpus.metadata) and "Category: ecology" in info["codes"]

    sp = analytic_gaussian_sigma(4.0 * cfg.profile_budget_share, 1e-5 / 3)
    sv = analytic_gaussian_sigma(4.0 * cfg.vote_budget_share, 1e-5 / 3)
    assert info["profile_noise_multiplier"] == pytest.approx(sp) and info["vote_noise_multiplier"] == pytest.approx(sv)
    planned = PrivacyLedger([PoissonGaussianEvent(info["noise_multiplier"], cfg.strong_sample_rate, cfg.rounds),
                             PoissonGaussianEvent(sp, 1.0, 1), PoissonGaussianEvent(sv, 1.0, 1)])
    assert fed.ledger.events == planned.events
    eps = fed.ledger.epsilon(BUDGET.delta)
    assert 0.97 * BUDGET.epsilon < eps <= BUDGET.epsilon + 1e-6
    assert eps == pytest.approx(epsilon_of(list(planned.events), BUDGET.delta), rel=1e-9)

    assert info["strong_clients"] == round(0.1 * fed.n_clients)
    assert sum(info["generated_per_code"]) in range(cfg.n_generated - len(info["codes"]), cfg.n_generated + len(info["codes"]))
    # Alg. A.4 keeps max(1, floor(r * |I_j|)) candidates of every code that has some
    assert len(art.texts) <= info["candidates"] and len(art.texts) >= cfg.sampling_rate * info["candidates"] - len(info["codes"])
    rounds = [h for h in art.history if h["phase"] == "generator"]
    assert len(rounds) == cfg.rounds and all(0 < h["expected_strong_clients"] <= h["expected_clients"] for h in rounds)
    assert not any("strong_clients" in h or "clients" in h for h in rounds)  # Poisson counts are not released
    for phase in ("profile", "votes"):  # each release's signal-to-noise numbers, from public numbers only
        (record,) = [h for h in art.history if h["phase"] == phase]
        assert record["releases"][0]["noise_multiplier"] == record["noise_multiplier"]
