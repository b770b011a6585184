"""Executors: local, worker processes and Ray give the same noised sums for the same seed (noise drawn once, on the
driver); in worker processes and on Ray a client function's side effects never reach the caller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_federation_private_sum import D, big_vector, small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.errors import InputError, MethodError
from largefedbench.executors import LocalExecutor, ProcessExecutor, RayExecutor, make_executor
from largefedbench.federation import Federation
from largefedbench.privacy.mechanisms import Gaussian, NoNoise
from largefedbench.synthetic.scoring import PopriScores


def test_make_executor_checks_its_input():
    assert isinstance(make_executor("local"), LocalExecutor) and isinstance(make_executor(None), LocalExecutor)
    assert isinstance(make_executor("process"), ProcessExecutor)
    assert isinstance(make_executor("ray", address="auto"), RayExecutor)
    with pytest.raises(InputError, match="local, process, ray"):
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


def _assert_same_releases_as_local(executor):
    """``executor`` gives the local executor's noised sums and ledger; returns its federation."""
    local, fed_local = _releases(LocalExecutor())
    other, fed_other = _releases(executor)
    for a, b in zip(local, other):
        np.testing.assert_array_equal(a, b)
    assert fed_local.ledger == fed_other.ledger
    return fed_other


def test_local_and_ray_give_identical_sums_for_the_same_seed(ray_executor):
    fed_ray = _assert_same_releases_as_local(ray_executor)
    assert fed_ray.costs.rounds[0]["client_seconds"] > 0


@pytest.fixture(scope="module")
def process_executor():
    executor = ProcessExecutor()
    yield executor
    executor.shutdown()


def test_worker_processes_give_identical_sums_and_keep_what_a_client_function_keeps(process_executor):
    _assert_same_releases_as_local(process_executor)
    kept: list[list[str]] = []

    def keeps(view):  # the leak this guards against: a client function appending what it sees to the caller's list
        kept.append(view.spans)
        return np.zeros(3)

    clients, emb = small_split(12, seed=2)
    for executor, expected in ((LocalExecutor(), 12), (process_executor, 0)):
        kept.clear()
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        fed.private_sum(fed.everyone(), keeps, clip=1.0, mechanism=NoNoise())
        assert len(kept) == expected


def test_a_worker_processes_error_reaches_the_caller(process_executor):
    clients, emb = small_split(6, seed=2)
    fed = Federation(clients, embeddings=emb, seed=0, executor=process_executor)

    def fails(view):
        raise ValueError(f"no vector for {view.id}")

    with pytest.raises(ValueError, match="no vector for") as info:
        fed.private_sum(fed.everyone(), fails, clip=1.0, mechanism=NoNoise())
    assert "worker process" in "".join(getattr(info.value, "__notes__", []))
    import threading

    lock = threading.Lock()
    with pytest.raises(MethodError, match="cannot be sent to a worker process"):
        fed.private_sum(fed.everyone(), lambda view: lock.locked() or np.zeros(3), clip=1.0, mechanism=NoNoise())
    np.testing.assert_array_equal(  # the workers still serve the next call
        fed.private_sum(fed.everyone(), lambda view: np.ones(3), clip=10.0, mechanism=NoNoise()), np.full(3, 6.0))
    two = ProcessExecutor(workers=2)  # a failing first chunk while the other worker holds the second one
    try:
        fed2 = Federation(clients, embeddings=emb, seed=0, executor=two)
        with pytest.raises(ValueError, match="no vector for"):
            fed2.private_sum(fed2.everyone(), lambda view: fails(view) if view.id == clients.ids[0] else np.ones(3),
                             clip=1.0, mechanism=NoNoise(), chunk_clients=3)
        np.testing.assert_array_equal(
            fed2.private_sum(fed2.everyone(), lambda view: np.ones(3), clip=10.0, mechanism=NoNoise(), chunk_clients=3),
            np.full(3, 6.0))
    finally:
        two.shutdown()


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


# -- staged span embeddings: blocks in the object store, never one matrix on the driver -----------------------------
def _staged(executor, emb, rows_per_block: int):
    from largefedbench.federation import SpanEmbeddings

    vectors = emb.vectors
    blocks = executor.stage_rows(vectors[lo : lo + rows_per_block] for lo in range(0, len(vectors), rows_per_block))
    return SpanEmbeddings(blocks, emb.offsets)


def test_staged_row_blocks_read_like_the_matrix():
    from largefedbench.client_views import RowBlocks

    matrix = np.arange(60, dtype=np.float32).reshape(20, 3)
    blocks = RowBlocks([matrix[:7], matrix[7:14], matrix[14:]])
    assert len(blocks) == 20 and blocks.shape == (20, 3) and blocks.dtype == np.float32
    for lo, hi in ((0, 20), (3, 6), (5, 16), (14, 14), (19, 20)):
        np.testing.assert_array_equal(blocks[lo:hi], matrix[lo:hi])
    rows = np.array([19, 0, 7, 8, 13, 2])
    np.testing.assert_array_equal(blocks[rows], matrix[rows])
    assert list(blocks.covering(5, 16)) == [0, 1, 2] and np.shares_memory(blocks[8:12], matrix)  # a view in a block
    with pytest.raises(InputError, match="consecutive"):
        blocks[::2]


def test_staged_embeddings_give_the_same_sums_on_both_executors(ray_executor, monkeypatch):
    """Embeddings staged block by block (blocks smaller than a chunk's rows), and a plain matrix the Ray executor
    ships in blocks itself: consecutive and scattered (Poisson) chunks give exactly the sums of the plain matrix."""
    import largefedbench.executors as executors

    monkeypatch.setattr(executors, "BLOCK_BYTES", 5 * D * 4)  # a plain matrix goes to Ray in blocks of 5 rows
    clients, emb = small_split(60, seed=2)
    synthetic = np.random.default_rng(1).normal(size=(16, D)).astype(np.float32)

    def releases(executor, embeddings):
        fed = Federation(clients, embeddings=embeddings, seed=5, executor=executor)
        score = PopriScores(synthetic / np.linalg.norm(synthetic, axis=1, keepdims=True))
        return [fed.private_sum(fed.everyone(), lambda chunk: score(chunk), clip=1.0, mechanism=Gaussian(0.5),
                                batched=True, chunk_clients=9),
                fed.private_sum(fed.sample(0.4), lambda chunk: score(chunk), clip=1.0, mechanism=Gaussian(0.5),
                                batched=True, chunk_clients=4)]

    reference = releases(LocalExecutor(), emb)
    staged = _staged(ray_executor, emb, rows_per_block=7)
    assert all(not b.flags.writeable for b in staged.vectors.blocks)  # read from the object store, no driver copy
    for out in (releases(LocalExecutor(), _staged(LocalExecutor(), emb, 7)), releases(ray_executor, staged),
                releases(ray_executor, emb)):
        for a, b in zip(reference, out):
            np.testing.assert_array_equal(a, b)


class _PidBlock:
    """A lazy block of rows that records who read it (every value is the reading process's id) and refuses to be read
    by the process ``forbid``."""

    def __init__(self, rows: int, forbid: int | None = None) -> None:
        self.rows, self.forbid = rows, forbid

    def __len__(self) -> int:
        return self.rows

    def read(self) -> np.ndarray:
        import os

        if os.getpid() == self.forbid:
            raise AssertionError("the driver read a lazy block")
        return np.full((self.rows, 2), os.getpid(), dtype=np.int64)


def test_lazy_blocks_are_read_by_a_ray_task_never_by_the_driver(ray_executor):
    """On Ray a lazy block (a block of the embedding cache file) goes into the object store from a task
    on the driver's node, so no row of it is ever in the driver process; the local executor reads it itself. Blocks
    over Ray's 100 KiB inline limit come back as read-only views of the object store."""
    import os

    sizes = (7000, 9000, 100, 8000)  # more blocks than LOADS_IN_FLIGHT; 16 bytes a row
    staged = ray_executor.stage_rows([_PidBlock(n, forbid=os.getpid()) for n in sizes])
    assert len(staged) == sum(sizes) and len(staged.refs) == 4
    assert os.getpid() not in set(staged[0 : len(staged)][:, 0].tolist())
    assert not any(b.flags.writeable for b in staged.blocks if b.nbytes > 100 << 10)
    assert set(LocalExecutor().stage_rows([_PidBlock(n) for n in sizes])[0:10][:, 0].tolist()) == {os.getpid()}


def test_a_ray_task_finds_its_chunks_rows_in_the_blocks_it_is_given():
    """The driver reads only the offsets: for a consecutive chunk a slice of the covering blocks, for a scattered one
    (a Poisson cohort's) the rows' indices within the blocks holding them, end to end; a chunk without rows gets empty
    arrays by value. What the task picks equals the federation's own rows of the chunk."""
    from largefedbench.client_views import ClientStore, RowBlocks
    from largefedbench.executors import _chunk_rows, _picked_rows
    from largefedbench.federation import SpanEmbeddings

    clients, emb = small_split(40, seed=8)
    blocks = RowBlocks([emb.vectors[lo : lo + 6] for lo in range(0, len(emb.vectors), 6)],
                       refs=list(range((len(emb.vectors) + 5) // 6)))
    store = ClientStore(clients, SpanEmbeddings(blocks, emb.offsets))
    empty = np.flatnonzero(np.diff(emb.offsets) == 0)
    cases = [np.arange(3, 17), np.array([1, 9, 10, 31, 38]), np.array([37]), np.arange(30, 40), np.array([39, 2, 2, 17]),
             empty[:2]]  # consecutive, scattered, one client, the short last block, unsorted with a repeat, no rows
    assert len(empty) >= 2  # small_split gives some clients no spans
    for indices in cases:
        (pick, *rest), refs = _chunk_rows(store, blocks, indices)
        want, owner = store.embedding_rows(indices)
        if isinstance(pick, str):  # by value
            assert len(want) == 0 and refs == [] and _picked_rows((pick, *rest), [])[0].shape == (0, D)
            continue
        got, got_owner = _picked_rows((pick, *rest), [blocks.blocks[r] for r in refs])  # what the task does
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_owner, owner)
        assert len(refs) < len(blocks.blocks)  # only the blocks holding the chunk's rows


# -- every model-training client function: same sum on both executors and for every chunking ------------------------
N_TRAINING = 10


@pytest.fixture(scope="module")
def training_clients():
    clients, emb = small_split(N_TRAINING, seed=11)  # 0-5 spans each: batch orders differ between clients
    return clients, emb


def _cohort_update(bundle):
    """DP-FedAvg / DP-FTRL: local SGD of the downstream model, two local epochs of batch 2."""
    from largefedbench.fedtrain import CohortUpdate, FlatParams, LocalSGD, ModelUpdate

    model = bundle.new_downstream()
    local = LocalSGD(lr=0.05, batch_size=2, epochs=2, max_steps=4)
    weights = FlatParams(model).get()
    return CohortUpdate(ModelUpdate(model, bundle.tokenizer, local, 16), weights), (weights.numel(),)


def _generator_update(bundle):
    """DP fine-tuning of a generator's LoRA adapter (dp-resample, ctcl, weak-client voting's strong clients)."""
    from largefedbench.fedtrain import FedAvgSettings, FlatParams
    from largefedbench.fedtrain.generator import generator_update, lora_generator

    adapter = FlatParams(lora_generator(bundle, rank=2, alpha=4))
    settings = FedAvgSettings(rounds=1, clients_per_round=N_TRAINING, clip=1.0, client_lr=0.5, local_epochs=2,
                        local_batch_size=2, max_len=16)
    update = generator_update(adapter, bundle.generator_tokenizer, settings, seed=0)
    return (lambda chunk: update(chunk, chunk.spans)), (adapter.numel,)  # as run_round's client function


def _selector_update(bundle):
    """FedBis / FedBiscuit: three selectors, each client training its own group's with local AdamW."""
    from largefedbench.methods.fedbiscuit import FedBisConfig, PairPool, SelectorTask, SelectorUpdate

    from largefedbench.fedtrain import FlatParams
    from largefedbench.fedtrain.generator import lora_generator

    rng = np.random.default_rng(3)
    a, b = [f"text a{i} about cells" for i in range(10)], [f"text b{i} about bills" for i in range(10)]
    emb_a, emb_b = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in rng.normal(size=(2, 10, D)))
    adapter = FlatParams(lora_generator(bundle, rank=2, alpha=4))
    task = SelectorTask(bundle.generator_tokenizer, a, b, 8)
    ids = [f"c{c:03d}" for c in range(N_TRAINING)]
    weights = [adapter.get() + 0.01 * u for u in range(3)]
    update = SelectorUpdate(adapter, task, PairPool(a, b, emb_a, emb_b), FedBisConfig.tiny().fedavg(N_TRAINING),
                            weights, [0, 1, 2], {c: i % 3 for i, c in enumerate(ids)}, dict(zip(ids, range(len(ids)))),
                            train_pairs=6, n_pairs=8, seed=0)
    return update, (3 * adapter.numel,)


TRAINING = {"dp-fedavg/dp-ftrl": _cohort_update, "dp generator fine-tuning": _generator_update,
            "fedbis/fedbiscuit": _selector_update}


def _training_release(make, bundle, clients, emb, executor, chunk_clients: int):
    client_fn, _shape = make(bundle)
    fed = Federation(clients, embeddings=emb, seed=4, executor=executor)
    out = fed.private_sum(fed.everyone(), client_fn, clip=0.5, mechanism=Gaussian(0.1), batched=True,
                          chunk_clients=chunk_clients)
    return np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float64)


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_training_client_functions_give_the_same_sum_on_both_executors_and_any_chunking(name, ray_executor, tiny,
                                                                                      training_clients):
    """Client-side randomness (local batch order) comes from each client's own seed, so neither the executor (each
    Ray task gets a copy of the client function) nor the chunking changes the noised sum."""
    clients, emb = training_clients
    bundle = tiny[1]
    local = _training_release(TRAINING[name], bundle, clients, emb, LocalExecutor(), chunk_clients=3)
    remote = _training_release(TRAINING[name], bundle, clients, emb, ray_executor, chunk_clients=3)
    np.testing.assert_array_equal(local, remote)
    workers = ProcessExecutor()
    try:
        isolated = _training_release(TRAINING[name], bundle, clients, emb, workers, chunk_clients=3)
    finally:
        workers.shutdown()
    np.testing.assert_array_equal(local, isolated)
    for chunk in (1, N_TRAINING):  # other chunkings: only the order of the float additions changes
        other = _training_release(TRAINING[name], bundle, clients, emb, LocalExecutor(), chunk_clients=chunk)
        np.testing.assert_allclose(other, local, rtol=0, atol=1e-6 * np.abs(local).max())
    assert np.abs(local).max() > 0


# -- the smoke guard on both executors -----------------------------------------------------------------------------
def test_a_watched_federation_runs_client_functions_on_both_executors(ray_executor):
    """`lfb smoke`'s guard refuses method code that reads the federation's store, never the library's own reads:
    a client function reading its clients' spans, metadata and embeddings runs on both executors unflagged."""
    from largefedbench.errors import MethodError
    from largefedbench.run.guards import watch_federation, watched_private

    clients, emb = small_split(25, seed=8)

    def own_data(chunk):
        return np.stack([chunk.embeddings[:0].sum(0) + len(s) + len(m["category"]) for s, m in
                         zip(chunk.spans, chunk.metadata)]) + chunk.embeddings.sum() * 0

    outs = []
    for executor in (LocalExecutor(), ray_executor, ProcessExecutor(workers=1)):
        violations: list[str] = []
        fed = watch_federation(Federation(watched_private(clients, "fed._clients", violations), seed=1, executor=executor,
                                          embeddings=watched_private(emb, "fed._embeddings", violations)), violations)
        outs.append(fed.private_sum(fed.everyone(), own_data, clip=100.0, mechanism=NoNoise(), batched=True,
                                    chunk_clients=6))
        assert violations == []
        with pytest.raises(MethodError, match="read fed._store directly"):
            fed._store.spans(np.arange(3))
        with pytest.raises(MethodError, match="read fed._store directly"):
            fed._store  # noqa: B018 - reaching for the store is the violation
        assert len(violations) == 2
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_cached_embedding_file_is_read_block_by_block(tmp_path, version):
    """`lfb eval --executor ray` stages the span embeddings from their cache file a block at a time:
    the blocks are the matrix's rows in order, each its own array of about the asked size."""
    from largefedbench.models.embedder import npy_row_blocks

    matrix = np.random.default_rng(0).normal(size=(23, 5)).astype(np.float32)
    path = tmp_path / "train.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, matrix, version=version)
    import pickle

    from largefedbench.models.embedder import npy_row_parts

    parts = npy_row_parts(path, block_bytes=4 * 5 * 4)  # lazy: nothing read until asked, and picklable for a task
    assert [len(p) for p in parts] == [4, 4, 4, 4, 4, 3] and all(Path(p.path).is_absolute() for p in parts)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(parts[2])).read(), matrix[8:12])
    with open(path, "r+b") as fh:  # cut after the header was read: the read says so
        fh.truncate(parts[-1].offset + 8)
    with pytest.raises(ValueError, match="ends before"):
        parts[-1].read()
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, matrix[:0], version=version)
    assert [p.read().shape for p in npy_row_parts(path, block_bytes=64)] == [(0, 5)]  # an empty cache: one empty block
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, matrix, version=version)
    blocks = list(npy_row_blocks(path, block_bytes=4 * 5 * 4))  # 4 rows a block
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 4, 3]
    np.testing.assert_array_equal(np.concatenate(blocks), matrix)
    assert not any(np.shares_memory(a, b) for a in blocks for b in blocks if a is not b)
    assert [len(b) for b in npy_row_blocks(path, block_bytes=1)] == [1] * 23  # at least a row
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="C-ordered matrix"):
        next(npy_row_blocks(tmp_path / "cube.npy", block_bytes=64))


def test_lfb_eval_on_ray_stages_the_embeddings_from_their_cache(tiny, tmp_path, monkeypatch):
    """POPri reads span embeddings: with ``--executor ray`` they go to the executor block by block from the cache file
    (never one matrix on the driver). The executor here is a local one standing in for Ray (a Ray cluster costs
    minutes on a shared 2-core machine; ``stage_rows`` on Ray is checked above), so the run is the local run."""
    import largefedbench.executors as executors
    import largefedbench.models.embedder as embedder
    from largefedbench.client_views import RowBlocks
    from largefedbench.run.eval import EvalRequest, run_eval

    staged = []

    class StandIn(LocalExecutor):
        def stage_rows(self, blocks):
            staged.append(super().stage_rows(blocks))
            return staged[-1]

    monkeypatch.setattr(executors, "make_executor", lambda name, address=None: StandIn())
    monkeypatch.setattr(executors, "BLOCK_BYTES", 256 * 4 * 64)  # several blocks even on the tiny snapshot
    _fd, bundle, root = tiny
    overrides = {"rounds": "1", "n_prompts": "6", "n_per_prompt": "3", "rejected_rank": "3", "n_final": "48"}
    entry = run_eval(EvalRequest(method="popri", seeds=(0,), overrides=overrides, out=tmp_path, home=root, progress=False,
                                 executor="ray"), log=lambda m: None).entry.to_json()
    assert entry["privacy"]["epsilon"] <= 1.0 and len(staged) == 1 and isinstance(staged[0], RowBlocks)
    matrix = embedder.span_embeddings(_fd, "train", bundle.embedder, bundle.embedder_id, root=root, progress=False)
    assert len(staged[0].blocks) > 1 and np.array_equal(staged[0][0:len(matrix)], matrix)


def test_a_worker_replacing_its_task_every_release_does_not_grow(monkeypatch):
    """Each release sends every worker a new task; an adapter method's holds the whole model. The worker drops the old
    task before loading the new one and hands the freed heap back, so its peak stays where the first task put it."""
    from largefedbench import process_executor
    from largefedbench.client_views import ClientStore

    monkeypatch.setattr(process_executor, "_driver_threads", lambda: None)  # no torch import in the worker after task 1
    clients, emb = small_split(4, seed=2)
    store, executor = ClientStore(clients, emb), ProcessExecutor(workers=1)
    peaks = []
    try:
        for release in range(4):
            weights = np.full(20_000_000, float(release))  # 160 MB that the client function closes over

            def client_fn(view, weights=weights):
                return np.full((len(view), 3), weights[0])

            results = list(executor.map_chunks(store, [np.arange(4)], client_fn=client_fn, round_=release, fed_seed=0,
                                               clip=10.0, batched=True))
            assert float(results[0].total[0]) == pytest.approx(4 * min(release, 10 / np.sqrt(3)))
            peaks.append(results[0].peak_rss_bytes)
    finally:
        executor.shutdown()
    assert peaks[-1] - peaks[0] < 60e6, [f"{p / 1e6:.0f} MB" for p in peaks]


class _FailsToLoad:
    """Pickles on the driver, raises ZeroDivisionError when a worker unpickles it."""

    def __reduce__(self):
        import operator

        return operator.truediv, (1, 0)


def test_a_store_that_fails_to_load_in_a_worker_is_shipped_again_next_time():
    """The worker drops its store before the new one arrives, so after a failed load it holds none: the executor must
    not believe it still holds the old one."""
    from largefedbench.client_views import ClientStore

    clients, emb = small_split(4, seed=2)
    good, bad = ClientStore(clients, emb), ClientStore(clients, emb)
    bad.poison = _FailsToLoad()
    executor = ProcessExecutor(workers=1)

    def ones(view):
        return np.ones((len(view), 2))

    def run(store):
        return list(executor.map_chunks(store, [np.arange(4)], client_fn=ones, round_=0, fed_seed=0, clip=10.0,
                                        batched=True))[0].total

    try:
        assert run(good).tolist() == [4.0, 4.0]
        with pytest.raises(ZeroDivisionError):
            run(bad)
        assert run(good).tolist() == [4.0, 4.0]
    finally:
        executor.shutdown()


def test_a_torch_free_driver_gives_its_workers_the_thread_count_torch_would_take():
    """A sandboxed plug-in's harness has not loaded torch; its workers must run the threads the same run's workers get
    where the driver has torch (the sums then agree), which is torch's own default: checked in a fresh interpreter."""
    import os
    import subprocess
    import sys

    from largefedbench.process_executor import _physical_cores

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                          capture_output=True, text=True, check=True)
    assert int(done.stdout) == _physical_cores()
