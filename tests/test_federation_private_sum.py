"""The one door: Federation.private_sum — clipping, noise scale, ledger events, views, streaming, shortcuts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from largefedbench.data.federated import ClientSplit
from largefedbench.errors import InputError, PrivacyError
from largefedbench.federation import Federation, SpanEmbeddings
from largefedbench.privacy import GaussianEvent, PoissonGaussianEvent, TreeAggregationEvent
from largefedbench.privacy.clipping import CLIP_MARGIN, clip_rows
from largefedbench.privacy.mechanisms import Gaussian, NoNoise, TreeAggregation, TreePrefixSum
from largefedbench.synthetic.scoring import PopriScores

D = 8


def small_split(n: int = 40, seed: int = 0) -> tuple[ClientSplit, SpanEmbeddings]:
    """``n`` clients with 0-5 spans each, a category, and unit span embeddings."""
    from datasets import Dataset

    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, n)
    spans = [[f"client {c} span {k}" for k in range(k_)] for c, k_ in enumerate(counts)]
    table = Dataset.from_dict({"id": [f"c{c:03d}" for c in range(n)], "spans": spans, "n_spans": counts.tolist(),
                               "category": [f"cat{c % 3}" for c in range(n)]})
    vectors = rng.normal(size=(int(counts.sum()), D)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return ClientSplit("train", table), SpanEmbeddings(vectors, np.concatenate([[0], np.cumsum(counts)]))


@pytest.fixture(scope="module")
def split():
    return small_split()


def federation(split, **kw) -> Federation:
    clients, emb = split
    return Federation(clients, embeddings=emb, **kw)


def big_vector(client) -> np.ndarray:
    """A client's own vector, far outside the clip ball, from its own randomness and data."""
    return client.rng().normal(size=D) * 100 + len(client.spans)


def test_private_sum_is_the_sum_of_clipped_client_vectors(split):
    fed = federation(split, seed=3)
    cohort = fed.everyone()
    expected = clip_rows(np.stack([big_vector(c) for c in _views(fed, cohort)]), 2.0).sum(0)
    out = fed.private_sum(cohort, big_vector, clip=2.0, mechanism=NoNoise(), chunk_clients=7)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert np.linalg.norm(out) <= 2.0 * len(cohort)


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-3, 1e3), st.floats(1e-3, 1e4), st.integers(1, 50))
def test_every_clients_contribution_is_clipped(clip, scale, chunk):
    """One client at a time: each one's contribution to the sum has norm ≤ clip, whatever it returns."""
    fed = federation(small_split(12, seed=1))
    cohort = fed.everyone()
    for k in range(len(cohort)):
        def only_k(chunk_view, k=k):
            rows = np.zeros((len(chunk_view), D))
            for i, cid in enumerate(chunk_view.ids):
                if cid == cohort.ids[k]:
                    rows[i] = chunk_view.rng(i).normal(size=D) * scale
            return rows
        out = fed.private_sum(cohort, only_k, clip=clip, mechanism=NoNoise(), batched=True, chunk_clients=chunk)
        assert np.linalg.norm(out) <= clip * (1 + 1e-9)


def _views(fed, cohort):
    from largefedbench.client_views import chunk_view

    return chunk_view(fed._store, cohort.indices, round_=cohort.round, fed_seed=fed._seed).clients()


def test_batched_and_per_client_functions_give_the_same_sum_and_chunking_does_not_matter(split):
    sums = []
    for batched, chunk in ((False, 1), (False, 64), (True, 5), (True, 2048)):
        fed = federation(split, seed=7)
        cohort = fed.sample(0.6)
        fn = (lambda view: np.stack([big_vector(c) for c in view.clients()])) if batched else big_vector
        sums.append(fed.private_sum(cohort, fn, clip=1.5, mechanism=Gaussian(0.5), batched=batched, chunk_clients=chunk))
    for other in sums[1:]:
        np.testing.assert_allclose(other, sums[0], rtol=1e-12)


def test_views_show_each_client_its_own_spans_embeddings_and_metadata(split):
    clients, emb = split
    fed = federation(split)
    seen = {}

    def record(view):
        seen[view.id] = (view.spans, view.embeddings.copy(), view.metadata)
        return np.zeros(1)

    fed.private_sum(fed.everyone(), record, clip=1.0, mechanism=NoNoise(), chunk_clients=6)
    for i, cid in enumerate(clients.ids):
        spans, vectors, meta = seen[cid]
        assert spans == clients.spans(cid)
        np.testing.assert_array_equal(vectors, emb.vectors[emb.offsets[i] : emb.offsets[i + 1]])
        assert meta["category"] == f"cat{i % 3}" and "spans" not in meta and "id" not in meta

    def batched(chunk):
        assert len(chunk.owner) == len(chunk.embeddings) and np.all(np.diff(chunk.owner) >= 0)
        assert [m["category"] for m in chunk.metadata] == [f"cat{int(c[1:]) % 3}" for c in chunk.ids]
        return np.bincount(chunk.owner, minlength=len(chunk))[:, None].astype(float)

    cohort = fed.sample(0.5)
    out = fed.private_sum(cohort, batched, clip=100.0, mechanism=NoNoise(), batched=True, chunk_clients=4)
    assert out[0] == sum(len(clients.spans(c)) for c in cohort.ids)


def test_gaussian_noise_std_is_sigma_times_clip(split):
    fed = federation(split, seed=11)
    out = fed.private_sum(fed.everyone(), lambda view: np.zeros((len(view), 40_000)), clip=0.5,
                          mechanism=Gaussian(3.0), batched=True)
    # 40,000 draws: the sample std is within 2 % of 1.5 with overwhelming probability
    assert abs(np.std(out) - 1.5) < 0.03 and abs(np.mean(out)) < 0.03


def test_one_ledger_event_per_release_with_the_cohorts_sampling(split):
    fed = federation(split)
    zero = lambda view: np.zeros(3)  # noqa: E731
    fed.private_sum(fed.sample(0.25), zero, clip=1.0, mechanism=Gaussian(2.0))
    fed.private_sum(fed.sample(0.25), zero, clip=1.0, mechanism=Gaussian(2.0))
    assert fed.ledger.events == (PoissonGaussianEvent(2.0, 0.25, steps=2),)
    for planned in fed.epoch(10)[:2]:  # fixed-size cohorts: no amplification by sampling is claimed
        fed.private_sum(planned.start(), zero, clip=1.0, mechanism=Gaussian(2.0))
    assert fed.ledger.events[1:] == (GaussianEvent(2.0, count=2),)
    tree = TreePrefixSum(3)
    for planned in fed.epoch(10)[:3]:
        fed.private_sum(planned.start(), zero, clip=1.0, mechanism=TreeAggregation(2.0, tree))
    assert fed.ledger.events[2:] == (TreeAggregationEvent(2.0, 3, epochs=1),)
    with pytest.raises(PrivacyError, match="fixed-size cohorts"):
        fed.private_sum(fed.sample(0.5), zero, clip=1.0, mechanism=TreeAggregation(2.0, TreePrefixSum(3)))
    assert len(fed.ledger) == 3


def test_no_noise_is_the_exact_sum_and_makes_epsilon_infinite(split):
    fed = federation(split)
    cohort = fed.everyone()
    out = fed.private_sum(cohort, lambda view: np.ones(2), clip=1.0, mechanism=NoNoise())
    np.testing.assert_allclose(out, [len(cohort) / math.sqrt(2) * (1 - CLIP_MARGIN)] * 2, rtol=1e-12)  # each clipped
    assert fed.ledger.events == (GaussianEvent(0.0),)
    assert fed.ledger.epsilon(1e-6) == math.inf


def test_nothing_per_client_is_reachable_from_the_result(split):
    fed = federation(split)
    out = fed.private_sum(fed.everyone(), big_vector, clip=1.0, mechanism=Gaussian(1.0))
    assert isinstance(out, np.ndarray) and out.shape == (D,) and out.base is None
    torch = pytest.importorskip("torch")
    out = fed.private_sum(fed.everyone(), lambda view: torch.ones(4, 2), clip=1.0, mechanism=Gaussian(1.0))
    assert isinstance(out, torch.Tensor) and out.shape == (4, 2) and out._base is None and out.grad_fn is None


def test_empty_cohorts_and_bad_input_get_clear_errors(split):
    fed = federation(split)
    empty = fed.epoch(5)[0].start()
    empty = type(empty)(empty.indices[:0], (), empty.sample_rate, empty.round, empty.sampling)
    out = fed.private_sum(empty, lambda chunk: np.zeros((len(chunk), 3)), clip=1.0, mechanism=NoNoise(), batched=True)
    np.testing.assert_array_equal(out, np.zeros(3))
    with pytest.raises(InputError, match="shape="):
        fed.private_sum(empty, big_vector, clip=1.0, mechanism=NoNoise())
    assert fed.private_sum(empty, big_vector, clip=1.0, mechanism=NoNoise(), shape=(D,)).shape == (D,)
    cohort = fed.everyone()
    with pytest.raises(InputError, match="clip"):
        fed.private_sum(cohort, big_vector, clip=0.0, mechanism=NoNoise())
    with pytest.raises(InputError, match="mechanism"):
        fed.private_sum(cohort, big_vector, clip=1.0, mechanism=1.0)
    with pytest.raises(PrivacyError, match="NoNoise"):
        Gaussian(0.0)
    with pytest.raises(InputError, match="one per client"):
        fed.private_sum(cohort, lambda chunk: np.zeros((1, 3)), clip=1.0, mechanism=NoNoise(), batched=True)


#: everything public on a Federation: cohorts, the one door, the ε = ∞ reference's release, resume state, public
#: counts, the ledger and costs, the noise-free and shuffled diagnostics' flags and the audit's hooks — nothing that returns
#: per-client rows
# door_seconds: wall seconds spent in private_sum (the rounds loop's server time is the rest), no client data;
# selection: model selection on held-out data (scores of a candidate, each choice recorded), no client rows
PUBLIC_API = {"budget", "client_ids", "client_outputs", "clients_run_here", "clock", "costs", "door_seconds", "epoch",
              "everyone", "ledger", "load_state_dict", "n_clients", "noise_free", "on_release", "private_sum",
              "release_without_noise", "releases", "round", "sample", "selection", "shuffle_releases", "state_dict"}


def test_the_public_federation_api_has_no_per_client_row_method(split):
    fed = federation(split)
    assert {name for name in dir(fed) if not name.startswith("_")} == PUBLIC_API
    for gone in ("map", "map_embeddings", "map_clipped_sum", "client_metadata", "noisy_sum", "noisy_prefix_sum"):
        assert not hasattr(fed, gone), gone
    assert fed.client_ids == tuple(split[0].ids)  # ids are public (every cohort names its clients), data is not


@pytest.mark.parametrize("normalization", ["zscore", "mean"])
@pytest.mark.parametrize("clip", [1.0, 0.05, 40.0])
def test_popri_shortcut_equals_the_general_streamed_path(normalization, clip):
    rng = np.random.default_rng(5)
    clients, emb = small_split(300, seed=2)
    synthetic = rng.normal(size=(500, D)).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    fn = PopriScores(synthetic, normalization=normalization, chunk=64)
    outs = []
    for client_fn in (fn, lambda chunk: fn(chunk)):  # a lambda has no shortcut: the general path
        fed = Federation(clients, embeddings=emb, seed=1)
        outs.append(fed.private_sum(fed.sample(0.7), client_fn, clip=clip, mechanism=NoNoise(), batched=True,
                                    chunk_clients=37))
    shortcut, general = outs
    assert shortcut.shape == general.shape == (500,)
    np.testing.assert_allclose(shortcut, general, atol=1e-5 * max(1.0, float(np.abs(general).max())))
    assert np.abs(general).max() > 0


def test_private_sum_reads_client_data_under_the_smoke_guard(split):
    """`lfb smoke` watches the private split: the federation and its client views may read it, method code may not."""
    from largefedbench.errors import MethodError
    from largefedbench.run.guards import watched_private

    clients, emb = split
    violations: list[str] = []
    fed = Federation(watched_private(clients, "fed._clients", violations),
                     embeddings=watched_private(emb, "fed._embeddings", violations))
    out = fed.private_sum(fed.everyone(), lambda v: np.array([len(v.spans), len(v.embeddings), len(v.metadata)]),
                          clip=1e6, mechanism=NoNoise())
    assert not violations and out[0] == out[1] == len(emb.vectors)
    with pytest.raises(MethodError, match="through the Federation"):
        fed._clients.ids  # noqa: B018
    assert len(violations) == 1
