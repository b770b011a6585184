"""A client vector with a NaN or ±inf entry is summed as a zero row, on every path (per client and
batched, numpy and torch, any chunking, every executor), so no release is ever non-finite and nothing un-noised
(the release, the ledger, the costs, the releases' record) tells whether or how many clients sent one."""

from __future__ import annotations

import numpy as np
import pytest
from test_federation_private_sum import D, small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.errors import PrivacyError
from largefedbench.executors import LocalExecutor, ProcessExecutor, RayExecutor
from largefedbench.federation import Federation
from largefedbench.privacy.clipping import CLIP_MARGIN, clip_rows
from largefedbench.privacy.mechanisms import Gaussian, NoNoise, TreeAggregation, TreePrefixSum
from largefedbench.synthetic.scoring import PopriScores

BAD = (float("nan"), float("inf"), float("-inf"))
#: the clients with the "private property": they send a non-finite vector (or, in the reference run, a zero one)
PROPERTY = {"c001", "c004", "c005", "c017", "c030"}
N = 40


def big_vector(client) -> np.ndarray:
    """test_federation_private_sum's: defined here, so the worker processes get it with this module (by value)."""
    return client.rng().normal(size=D) * 100 + len(client.spans)


def _vector(client, bad: float | None, lib: str):
    """``big_vector`` (far outside the clip), or for a client with the property ``bad`` in one entry (a zero row
    when ``bad`` is None: what the federation must sum in its place)."""
    v = big_vector(client)
    if client.id in PROPERTY:
        v = np.zeros(D) if bad is None else np.where(np.arange(D) == 2, bad, v)
    if lib == "torch":
        import torch

        return torch.as_tensor(v)
    return v


class PerClient:
    """A picklable per-client function (the process executor ships it to its workers)."""

    def __init__(self, bad: float | None, lib: str) -> None:
        self.bad, self.lib = bad, lib

    def __call__(self, client):
        return _vector(client, self.bad, self.lib)


class Batched(PerClient):
    def __call__(self, chunk):
        rows = [_vector(c, self.bad, self.lib) for c in chunk.clients()]
        if self.lib == "torch":
            import torch

            return torch.stack(rows) if rows else torch.zeros((0, D), dtype=torch.float64)
        return np.stack(rows) if rows else np.zeros((0, D))


def _numpy(x) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _run(executor, client_fn, *, batched: bool, chunk: int, mechanism):
    clients, emb = small_split(N, seed=3)
    fed = Federation(clients, embeddings=emb, seed=5, executor=executor)
    outs = [fed.private_sum(fed.everyone(), client_fn, clip=1.0, mechanism=mechanism, batched=batched,
                            chunk_clients=chunk),
            fed.private_sum(fed.sample(0.5), client_fn, clip=1.0, mechanism=mechanism, batched=batched,
                            chunk_clients=chunk)]
    return outs, fed


def _public_record(fed) -> tuple:
    """What leaves the federation besides the releases: ledger, releases' SNR record, costs (less the seconds)."""
    costs = [{k: v for k, v in r.items() if "seconds" not in k} for r in fed.costs.rounds]
    return fed.ledger.to_dict(), fed.releases, costs


def _check_poisoned_equals_zero_rows(executor, bad, lib, batched, chunk):
    """Poisoned releases equal those where the property's clients send zero rows (same seed: the same noise), bit for
    bit, with the same public record; without noise, the first is the finite clients' clipped sum."""
    make = Batched if batched else PerClient
    exact = None
    for mechanism in (NoNoise(), Gaussian(1.0)):
        poisoned, fed_p = _run(executor, make(bad, lib), batched=batched, chunk=chunk, mechanism=mechanism)
        zeroed, fed_z = _run(executor, make(None, lib), batched=batched, chunk=chunk, mechanism=mechanism)
        for p, z in zip(poisoned, zeroed):
            assert np.isfinite(_numpy(p)).all()
            np.testing.assert_array_equal(_numpy(p), _numpy(z))
        assert _public_record(fed_p) == _public_record(fed_z)
        exact = exact if exact is not None else _numpy(poisoned[0])
    from largefedbench.client_views import chunk_view

    clients, emb = small_split(N, seed=3)
    fed = Federation(clients, embeddings=emb, seed=5)
    views = chunk_view(fed._store, np.arange(N), round_=0, fed_seed=5).clients()  # the everyone() cohort, round 0
    finite = np.stack([big_vector(v) for v in views if v.id not in PROPERTY])
    assert len(finite) == N - len(PROPERTY)
    np.testing.assert_allclose(exact, clip_rows(finite, 1.0).sum(0), rtol=1e-12)


@pytest.mark.parametrize("bad", BAD, ids=["nan", "+inf", "-inf"])
@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize(("batched", "chunk"), [(False, 1), (False, 7), (True, 5), (True, 2048)],
                         ids=["per-client-1", "per-client-7", "batched-5", "batched-all"])
def test_a_non_finite_client_vector_is_summed_as_a_zero_row_locally(bad, lib, batched, chunk):
    if lib == "torch":
        pytest.importorskip("torch")
    _check_poisoned_equals_zero_rows(LocalExecutor(), bad, lib, batched, chunk)


@pytest.fixture(scope="module")
def process_executor():
    executor = ProcessExecutor(workers=2)
    yield executor
    executor.shutdown()


def test_a_non_finite_client_vector_is_summed_as_a_zero_row_in_worker_processes(process_executor):
    """Each value through a worker process once, numpy and torch, per client and batched (every value on every path
    runs in the local executor's tests above: a worker only adds the trip through pickling)."""
    pytest.importorskip("torch")
    _check_poisoned_equals_zero_rows(process_executor, float("nan"), "numpy", batched=False, chunk=7)
    _check_poisoned_equals_zero_rows(process_executor, float("inf"), "torch", batched=True, chunk=6)
    _check_poisoned_equals_zero_rows(process_executor, float("-inf"), "numpy", batched=True, chunk=5)


def test_a_non_finite_client_vector_is_summed_as_a_zero_row_on_ray():
    pytest.importorskip("ray")  # installed by the dev extra (largefedbench[ray]), as tests/test_executors.py's
    executor = RayExecutor(num_cpus=2)
    try:
        for bad in BAD:
            _check_poisoned_equals_zero_rows(executor, bad, "numpy", batched=True, chunk=6)
        _check_poisoned_equals_zero_rows(executor, float("nan"), "torch", batched=False, chunk=7)
    finally:
        executor.shutdown()


def test_clip_rows_zeroes_non_finite_rows_and_leaves_the_others_as_they_were():
    torch = pytest.importorskip("torch")
    rows = np.array([[3.0, 4.0], [np.nan, 0.0], [0.1, np.inf], [-np.inf, -np.inf], [0.3, 0.4], [1e3, 0.0]])
    expected = np.array([[0.6, 0.8], [0, 0], [0, 0], [0, 0], [0.3, 0.4], [1.0, 0.0]])
    expected[[0, 5]] *= 1 - CLIP_MARGIN  # above the clip: scaled to (1 − margin)·clip
    for dtype in (np.float64, np.float32):
        with np.errstate(all="raise"):  # no warning escapes from the non-finite rows
            out = clip_rows(rows.astype(dtype), 1.0)
        assert out.dtype == dtype
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        np.testing.assert_array_equal(out[4], rows[4].astype(dtype))  # under the clip: untouched
        t = clip_rows(torch.as_tensor(rows.astype(dtype)), 1.0)
        assert t.dtype == torch.from_numpy(rows.astype(dtype)).dtype
        np.testing.assert_array_equal(t.numpy(), out)


def test_a_shortcut_sum_with_a_non_finite_client_falls_back_to_the_rows():
    """A library client function's exact shortcut (POPri's scores) over a chunk holding a client whose span embedding
    is NaN: that chunk is summed row by row, the client's row zeroed, and the release equals the general path's."""
    rng = np.random.default_rng(5)
    clients, emb = small_split(120, seed=2)
    vectors = emb.vectors.copy()
    owners = [i for i in range(120) if emb.offsets[i + 1] > emb.offsets[i]][:3]
    for i in owners:
        vectors[emb.offsets[i]] = np.nan
    emb = type(emb)(vectors, emb.offsets)
    synthetic = rng.normal(size=(50, D)).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    fn = PopriScores(synthetic)
    bad_ids = {clients.ids[i] for i in owners}

    def without_bad(chunk):  # the reference: the bad clients send zero rows
        rows = fn(chunk)
        rows[[cid in bad_ids for cid in chunk.ids]] = 0
        return rows

    outs = []
    for client_fn in (fn, lambda chunk: fn(chunk), without_bad):  # shortcut, general path, reference
        fed = Federation(clients, embeddings=emb, seed=1)
        with np.errstate(invalid="ignore"):  # the scores of a NaN embedding are NaN (then zeroed by the federation)
            outs.append(fed.private_sum(fed.everyone(), client_fn, clip=1.0, mechanism=NoNoise(), batched=True,
                                        chunk_clients=17))
    shortcut, general, reference = outs
    assert np.isfinite(shortcut).all() and np.abs(reference).max() > 0
    np.testing.assert_array_equal(general, reference)
    np.testing.assert_allclose(shortcut, reference, atol=1e-5 * float(np.abs(reference).max()))


def test_tree_aggregation_stays_finite_with_non_finite_clients():
    """DP-FTRL's tree draws each node's noise from the value's shape (``value * 0``): a non-finite sum would have made
    every later prefix sum of the epoch NaN."""
    outs = []
    for bad in (float("nan"), None):
        clients, emb = small_split(N, seed=3)
        fed = Federation(clients, embeddings=emb, seed=5)
        tree = TreePrefixSum(4)
        outs.append([fed.private_sum(planned.start(), PerClient(bad, "numpy"), clip=1.0,
                                     mechanism=TreeAggregation(1.0, tree)) for planned in fed.epoch(10)])
    for p, z in zip(*outs):
        assert np.isfinite(p).all()
        np.testing.assert_array_equal(p, z)


def test_a_release_that_overflows_its_dtype_is_refused_not_released():
    """Every row is finite and clipped, so only an overflow of the sum's dtype (float16 here) could make a release
    non-finite: it stops the run instead of being returned."""
    clients, emb = small_split(8, seed=3)
    fed = Federation(clients, embeddings=emb, seed=5)
    big = lambda chunk: np.full((len(chunk), 1), 60000.0, dtype=np.float16)  # noqa: E731 - under the clip of 1e5
    with pytest.raises(PrivacyError, match="overflowed float16"):
        fed.private_sum(fed.everyone(), big, clip=1e5, mechanism=NoNoise(), batched=True)
