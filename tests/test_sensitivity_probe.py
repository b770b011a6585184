"""The sensitivity probe of a sandboxed plug-in's releases: a client function whose vector for a client depends on
other clients (copied from the first client its worker saw, the chunk's maximum, the worker's whole store read from
memory) has its release refused under a confined executor, and goes through unconfined; honest functions, per client
(drawing from the global generators too) and batched, give the same sums confined as in this process."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from test_federation_private_sum import D, small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.client_views import ClientStore
from largefedbench.errors import PrivacyError
from largefedbench.executors import LocalExecutor, ProcessExecutor
from largefedbench.federation import Federation
from largefedbench.privacy.mechanisms import Gaussian, NoNoise

SEEN: list[float] = []  # the per-client cheat's memory, in its worker


def _value(client_id: str) -> float:
    """A private value per client, distinct (1/24 apart) so that a mixed sum is off by more than the probe's slack."""
    return int(client_id[1:]) / 24


def copies_the_first_client(client):
    """Every client sends the value of the first client its worker ran: one client's data at many clients' weight."""
    SEEN.append(_value(client.id))
    return np.array([SEEN[0]])


def chunk_maximum(chunk):
    """Every client of a chunk sends the chunk's largest value (a consensus, not a mean: its sum is not the clients')."""
    return np.full((len(chunk), 1), max(_value(i) for i in chunk.ids))


def reads_the_store(client):
    """Reads how many clients the worker's store holds (any client's data is as near) and sends it."""
    stores = [o for o in gc.get_objects() if isinstance(o, ClientStore)]
    return np.array([max(len(s.ids) for s in stores) / 100, _value(client.id)])


def honest_global_draws(client):
    """Honest, but random through the global generators (seeded per client in a confined worker)."""
    import torch

    return np.concatenate([client.embeddings.sum(0) if len(client.spans) else np.zeros(D),
                           [np.random.random(), float(torch.rand(1))]])


def honest_batched(chunk):
    rows = np.zeros((len(chunk), D))
    np.add.at(rows, chunk.owner, chunk.embeddings)
    return rows + np.array([chunk.rng(i, 1).random() for i in range(len(chunk))])[:, None]


def _confined() -> ProcessExecutor:
    """A process executor whose workers start through a launcher that adds no guard: the probe runs as it does for a
    sandboxed plug-in (whose launcher also jails the workers)."""
    executor = ProcessExecutor(workers=1)
    executor.confine(lambda argv, env, files: (argv, env, lambda: None))
    return executor


@pytest.fixture(scope="module")
def split():
    return small_split(24, seed=4)


@pytest.mark.parametrize("client_fn,batched", [(copies_the_first_client, False), (chunk_maximum, True),
                                               (reads_the_store, False)])
def test_a_client_function_that_mixes_clients_has_its_release_refused(split, client_fn, batched):
    clients, emb = split
    executor = _confined()
    try:
        fed = Federation(clients, embeddings=emb, seed=1, executor=executor)
        with pytest.raises(PrivacyError, match="sensitivity probe refused this release"):
            fed.private_sum(fed.everyone(), client_fn, clip=1.0, mechanism=Gaussian(1.0), batched=batched,
                            chunk_clients=8)
        assert not fed.ledger.events  # nothing was released
    finally:
        executor.shutdown()
    plain = ProcessExecutor(workers=1)  # the same functions go through where the workers are not confined
    try:
        fed = Federation(clients, embeddings=emb, seed=1, executor=plain)
        fed.private_sum(fed.everyone(), client_fn, clip=1.0, mechanism=Gaussian(1.0), batched=batched, chunk_clients=8)
        assert len(fed.ledger.events) == 1
    finally:
        plain.shutdown()


@pytest.mark.parametrize("client_fn,batched", [(honest_global_draws, False), (honest_batched, True)])
def test_an_honest_client_function_passes_the_probe_with_the_same_sum(split, client_fn, batched):
    """... and the probe's fresh workers are spares started beside the release, sent nothing before it, replaced once
    used, and all exit with the executor."""
    clients, emb = split
    executor = _confined()
    try:
        sums, spares = [], []
        for ex in (executor, LocalExecutor()):  # a clip no vector reaches: the unseeded draws scale no entry
            fed = Federation(clients, embeddings=emb, seed=1, executor=ex)
            for _ in range(2):  # two releases: two probes
                sums.append(fed.private_sum(fed.sample(0.5), client_fn, clip=10.0, mechanism=NoNoise(), batched=batched,
                                            chunk_clients=5))
                if ex is executor:
                    spares.append(list(executor._spares))
                    assert len(spares[-1]) == ProcessExecutor.SPARES
                    assert all(s._shipped == [None] for s in spares[-1])  # no store before the probe
        assert {id(s) for s in spares[0]} <= {id(s) for s in executor._retired}  # the second probe ran in them
        assert not {id(s) for s in spares[0]} & {id(s) for s in executor._spares}
        procs = [p for s in [*executor._spares, *executor._retired] for p, _ in s._procs]
    finally:
        executor.shutdown()
    assert procs and all(p.poll() is not None for p in procs)
    if client_fn is honest_batched:  # the local run draws no global numbers in between: the same sums bit for bit
        np.testing.assert_array_equal(sums[0], sums[2])
        np.testing.assert_array_equal(sums[1], sums[3])
    else:  # the confined worker seeded the global generators per client; locally they run on: only the embeddings agree
        np.testing.assert_allclose(np.asarray(sums[0])[:D], np.asarray(sums[2])[:D], atol=1e-9)


def test_a_function_random_outside_client_rng_is_told_how_to_be_reproducible(split):
    clients, emb = split

    def unseeded(chunk):
        return np.random.default_rng().random((len(chunk), 3))

    executor = _confined()
    try:
        fed = Federation(clients, embeddings=emb, seed=1, executor=executor)
        with pytest.raises(PrivacyError, match=r"draw from client.rng\(\)"):
            fed.private_sum(fed.everyone(), unseeded, clip=50.0, mechanism=Gaussian(1.0), batched=True)
    finally:
        executor.shutdown()

