"""Executors: local and Ray give the same noised sums for the same seed (noise drawn once, on the driver)."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.executors import LocalExecutor, RayExecutor, make_executor
from largefedbench.federation import Federation
from largefedbench.privacy.mechanisms import Gaussian, NoNoise
from largefedbench.synthetic.scoring import PopriScores
from test_federation_private_sum import D, big_vector, small_split  # tests/ is on sys.path (rootdir conftest)


def test_make_executor_checks_its_input():
    assert isinstance(make_executor("local"), LocalExecutor) and isinstance(make_executor(None), LocalExecutor)
    assert isinstance(make_executor("ray", address="auto"), RayExecutor)
    with pytest.raises(InputError, match="local, ray"):
        make_executor("dask")
    with pytest.raises(InputError, match="--ray-address"):
        make_executor("local", address="auto")


@pytest.fixture(scope="module")
def ray_executor():
    pytest.importorskip("ray")  # installed by the dev extra (largefedbench[ray]), so this runs in CI
    executor = RayExecutor(num_cpus=2)
    yield executor
    executor.shutdown()


def _releases(executor):
    clients, emb = small_split(90, seed=4)
    synthetic = np.random.default_rng(0).normal(size=(64, D)).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    fed = Federation(clients, embeddings=emb, seed=9, executor=executor)
    out = [fed.private_sum(fed.sample(0.5), big_vector, clip=1.0, mechanism=Gaussian(1.0), chunk_clients=8),
           fed.private_sum(fed.everyone(), PopriScores(synthetic), clip=1.0, mechanism=Gaussian(0.1), batched=True,
                           chunk_clients=16),
           fed.private_sum(fed.everyone(), lambda chunk: chunk.embeddings[:0].sum(0) + np.stack(
               [chunk.rng(i).normal(size=D) for i in range(len(chunk))]), clip=0.5, mechanism=NoNoise(),
               batched=True, chunk_clients=16)]
    return out, fed


def test_local_and_ray_give_identical_sums_for_the_same_seed(ray_executor):
    local, fed_local = _releases(LocalExecutor())
    remote, fed_ray = _releases(ray_executor)
    for a, b in zip(local, remote):
        np.testing.assert_array_equal(a, b)
    assert fed_local.ledger == fed_ray.ledger
    assert fed_ray.costs.rounds[0]["client_seconds"] > 0


def test_bench_scale_gives_the_same_checksum_on_both_executors(ray_executor):
    from largefedbench.bench.scale import run_scale

    local = run_scale(700, 200, dim=32, seed=3, progress=False)
    remote = run_scale(700, 200, dim=32, seed=3, executor="ray", progress=False)
    assert local.checksum == remote.checksum and remote.worker_peak_rss_bytes > 0


def test_on_ray_every_contribution_is_clipped_and_each_release_is_one_event_of_the_cohorts_sampling(ray_executor):
    from largefedbench.privacy import GaussianEvent, PoissonGaussianEvent

    clients, emb = small_split(30, seed=6)
    fed = Federation(clients, embeddings=emb, executor=ray_executor)
    out = fed.private_sum(fed.everyone(), big_vector, clip=0.25, mechanism=NoNoise(), chunk_clients=4)
    assert np.linalg.norm(out) <= 0.25 * 30 * (1 + 1e-9)
    fed.private_sum(fed.sample(0.5), big_vector, clip=1.0, mechanism=Gaussian(2.0), chunk_clients=4)
    fed.private_sum(fed.epoch(10)[0].start(), big_vector, clip=1.0, mechanism=Gaussian(2.0), chunk_clients=4)
    assert fed.ledger.events == (GaussianEvent(0.0), PoissonGaussianEvent(2.0, 0.5), GaussianEvent(2.0))
