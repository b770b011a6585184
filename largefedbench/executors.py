"""Where client computations run: in this process (``local``), in worker processes of this machine (``process``,
what ``lfb eval``, ``lfb audit`` and ``lfb smoke`` use) or on a Ray cluster (``ray``).

An executor runs :func:`largefedbench.client_views.clipped_chunk_sum` for every chunk of a cohort and yields the
chunk results in chunk order; the federation adds them (in that order, so both executors give the same sum) and
draws the noise once, on the driver.

``process`` and ``ray`` isolate the method from its client functions: a client function runs on a copy of what it
closes over, in another process, so whatever it keeps (a list it appends to, a module global, an attribute of the
view) stays there; only the chunk's clipped sum comes back. ``process`` (:mod:`largefedbench.process_executor`)
starts fresh interpreters once, ships each federation's client store to them once and each ``private_sum`` call's
task once per worker; they run torch with the driver's thread count, so the sums equal ``local``'s bit for bit.

``ray`` (``pip install largefedbench[ray]``) starts a local cluster (``ray.init(num_cpus=2)``) unless given an
address (``--ray-address``) to join. Nothing is serialised whole: the client split goes into the object store once
per federation (spans and metadata are read lazily on the workers) and the cached span embeddings in blocks of
about :data:`BLOCK_BYTES`. ``stage_rows`` takes blocks as arrays (put into the store as they come) or as lazy
blocks with a ``read()`` (e.g. rows of the cache file: a task on the driver's node reads each one straight into the
store, so the driver never holds a row). A task gets its chunk's client indices and the blocks holding its rows
(zero-copy on the same node; another node gets a copy of each block once), picks its rows there (a slice for
consecutive clients, a gather for a scattered chunk such as a Poisson cohort's) and returns only the chunk's clipped
sum. At most ``in_flight`` chunks (default: as many as the cluster runs at once, + 1) are pending at once. When the
driver has torch loaded, a task runs torch with the driver's intra-op thread count and asks for as many CPUs (up to
a node's): torch's float reductions depend on the thread count, and this keeps the sums of both executors identical.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from largefedbench.client_views import ChunkResult, ChunkStore, ClientStore, RowBlocks, clipped_chunk_sum
from largefedbench.errors import InputError
from largefedbench.process_executor import ProcessExecutor, _by_value_modules, _driver_threads, _read

__all__ = ["BLOCK_BYTES", "EXECUTORS", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "make_executor",
           "shared_process_executor"]


#: the size of one block of span embeddings in the object store
BLOCK_BYTES = 64 << 20

EXECUTORS = ("local", "process", "ray")
#: lazy blocks read by Ray tasks at once while staging (each holds its block until the store has it)
LOADS_IN_FLIGHT = 2


class LocalExecutor:
    """Chunks one after another in this process."""

    name = "local"
    confined = False  # client functions run in this process

    def start(self) -> None:
        """Nothing to start."""

    def prepare(self, store: ClientStore) -> None:
        """Nothing to ship: chunks read the store in this process."""

    def stage_rows(self, blocks: Iterable[Any]) -> RowBlocks:
        """Blocks of rows (arrays, or lazy blocks read here) as one matrix of rows, kept in this process."""
        return RowBlocks([_read(b) for b in blocks])

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        for indices in chunks:
            yield clipped_chunk_sum(store, indices, **task)


def _ray_task(clients: ClientStore, indices: np.ndarray, task: dict[str, Any], threads: int | None, rows: Any,
              *blocks: np.ndarray) -> ChunkResult:
    """One chunk on a worker. ``threads``: torch's intra-op threads (the driver's), if the driver uses torch.
    ``rows``: None (no embeddings), ``("by value", vectors, owner)``, or ``(pick, counts)`` with ``blocks`` the
    staged blocks holding the chunk's rows and ``pick`` their rows in those blocks, end to end: a ``(lo, hi)`` slice
    or an array of row indices."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    rows = None if rows is None else _picked_rows(rows, blocks)
    return clipped_chunk_sum(ChunkStore(clients, indices, rows), indices, **task)


def _picked_rows(rows: tuple, blocks: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's ``(vectors, owner)`` from what :func:`_chunk_rows` sent: by value, or picked from ``blocks``."""
    if isinstance(rows[0], str):  # "by value"
        return rows[1], rows[2]
    pick, counts = rows
    matrix = RowBlocks(blocks)
    picked = matrix[pick[0] : pick[1]] if isinstance(pick, tuple) else matrix[pick]
    return picked, np.repeat(np.arange(len(counts)), counts)


def _read_block(block: Any) -> np.ndarray:
    """A Ray task: read a lazy block of rows, so that it goes into the object store from this worker."""
    return _read(block)


class RayExecutor:
    """Chunks as Ray tasks; see the module docstring."""

    name = "ray"
    confined = False  # a sandboxed plug-in is refused on Ray (its workers cannot be confined)

    def __init__(self, address: str | None = None, *, num_cpus: int = 2, in_flight: int | None = None) -> None:
        if in_flight is not None and in_flight < 1:
            raise InputError(f"in_flight={in_flight} must be at least 1 (chunks pending on the cluster at once)")
        self.address = address
        self.num_cpus = num_cpus
        self.in_flight = in_flight
        self._ray: Any = None
        self._remote: Any = None
        self._loader: Any = None
        self._stored: tuple[ClientStore, Any, RowBlocks | None] | None = None  # store, its clients' ref, its blocks

    def start(self) -> None:
        """Start the local cluster (or join ``address``) now rather than at the first use."""
        self._start()

    def _start(self) -> Any:
        if self._ray is None:
            try:
                import ray
            except ImportError:
                raise InputError("--executor ray needs Ray: pip install 'largefedbench[ray]'") from None
            if not ray.is_initialized():
                options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                           "logging_level": logging.WARNING}
                if self.address:
                    options["address"] = self.address
                else:
                    options["num_cpus"] = self.num_cpus
                try:
                    ray.init(**options)
                except (ConnectionError, RuntimeError, ValueError) as err:
                    raise InputError(f"could not start or join the Ray cluster ({self.address or 'local'}): {err}; "
                                     "check --ray-address (e.g. ray://head:10001 or auto)") from None
            self._ray = ray
            self._remote = ray.remote(num_cpus=1)(_ray_task)
        return self._ray

    def stage_rows(self, blocks: Iterable[Any]) -> RowBlocks:
        """Put each block of rows into the object store and return the matrix of rows read zero-copy from there, with
        the blocks' refs for the tasks. An array is put as it comes (the caller's copy can go at once); a lazy block
        is read by a task pinned to this node, at most :data:`LOADS_IN_FLIGHT` at once, so its rows never pass
        through the driver. Through a Ray client connection (``ray://``) the driver reads and puts each block, and
        holds a copy of it: there the object store is not in this process's reach."""
        ray = self._start()
        refs, loading = [], deque()
        for block in blocks:
            if isinstance(block, np.ndarray) or ray.util.client.ray.is_connected():
                refs.append(ray.put(_read(block)))
                del block  # the object store's copy is the one kept
                continue
            _by_value_modules(ray.cloudpickle, block)  # a lazy block's class may live where workers cannot import it
            if len(loading) >= LOADS_IN_FLIGHT:
                ray.wait([loading.popleft()], fetch_local=False)
            refs.append(self._block_loader().remote(block))
            loading.append(refs[-1])
        return RowBlocks(ray.get(refs), refs=refs, holder=self)

    def _block_loader(self) -> Any:
        """:func:`_read_block` as a task on the driver's node (it reads the driver's files), made once; no CPU
        reserved, so a head node started with ``--num-cpus 0`` runs it too."""
        if self._loader is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = self._ray.get_runtime_context().get_node_id()
            self._loader = self._ray.remote(num_cpus=0)(_read_block).options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
        return self._loader

    def _shipped(self, store: ClientStore) -> tuple[Any, RowBlocks | None]:
        """The clients' ref and the staged embedding blocks of ``store``, put into the object store on first use."""
        if self._stored is None or self._stored[0] is not store:
            self._stored = None  # the previous federation's objects can go
            blocks = None
            if store.embeddings is not None:
                vectors = store.embeddings.vectors
                if isinstance(vectors, RowBlocks) and vectors.holder is self:
                    blocks = vectors  # staged by this executor already
                else:
                    step = max(1, BLOCK_BYTES // max(1, vectors[:1].nbytes))
                    blocks = self.stage_rows(vectors[lo : lo + step] for lo in range(0, max(len(vectors), 1), step))
            self._stored = (store, self._ray.put(store.without_embeddings()), blocks)
        return self._stored[1], self._stored[2]

    def prepare(self, store: ClientStore) -> None:
        """Start (or join) the cluster and put ``store`` (clients, embedding blocks) into the object store now rather
        than at the first release."""
        self._start()
        self._shipped(store)

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        ray = self._start()
        _by_value_modules(self._ray.cloudpickle, task.get("client_fn"))
        (clients_ref, blocks), task_ref = self._shipped(store), ray.put(task)
        threads = _driver_threads()
        cpus = min(threads or 1, max(int(n["Resources"].get("CPU", 1)) for n in ray.nodes() if n["Alive"]))
        remote = self._remote.options(num_cpus=cpus)
        window = self.in_flight or int(ray.cluster_resources().get("CPU", 1)) // cpus + 1
        pending: deque[Any] = deque()
        for indices in chunks:
            rows, refs = None, []
            if blocks is not None:
                rows, refs = _chunk_rows(store, blocks, indices)
            pending.append(remote.remote(clients_ref, indices, task_ref, threads, rows, *refs))
            if len(pending) >= window:
                yield ray.get(pending.popleft())  # in chunk order: the driver adds the sums in the order of ``local``
        while pending:
            yield ray.get(pending.popleft())

    def shutdown(self) -> None:
        if self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()
        self._ray, self._remote, self._loader, self._stored = None, None, None, None


def _chunk_rows(store: ClientStore, blocks: RowBlocks, indices: np.ndarray) -> tuple[Any, list[Any]]:
    """What a Ray task needs to find its chunk's span-embedding rows: ``(pick, counts)`` and the refs of the staged
    blocks holding them (see :func:`_ray_task`). Only the offsets are read here, never a row."""
    counts = store.span_counts(indices)
    if not counts.sum():  # no rows: nothing to fetch
        return ("by value", np.empty((0, *blocks.shape[1:]), blocks.dtype), np.empty(0, np.int64)), []
    span = store.row_range(indices)
    if span is not None:  # consecutive clients: a slice of the blocks covering it
        covering = list(blocks.covering(*span))
        first = int(blocks.starts[covering[0]])
        pick: Any = (span[0] - first, span[1] - first)
    else:  # scattered (e.g. a Poisson cohort): the rows' indices within the blocks holding them, end to end
        rows = store.row_indices(indices)
        block = np.searchsorted(blocks.starts, rows, side="right") - 1
        covering = [int(b) for b in np.unique(block)]
        ends = np.cumsum([0] + [len(blocks.blocks[b]) for b in covering])
        at = np.searchsorted(covering, block)
        pick = rows - blocks.starts[block] + ends[at]
    return (pick, counts.astype(np.int32)), [blocks.refs[b] for b in covering]


Executor = LocalExecutor | ProcessExecutor | RayExecutor
_SHARED: ProcessExecutor | None = None


def shared_process_executor() -> ProcessExecutor:
    """This process's one set of client workers, started on first use and kept (every run of a session reuses them:
    a worker's start, an interpreter importing torch, costs seconds)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ProcessExecutor()
    return _SHARED


def make_executor(name: str | None = "local", *, address: str | None = None) -> Executor:
    """``local``, ``process`` or ``ray`` (joining ``address`` if given)."""
    if name in (None, "local", "process"):
        if address:
            raise InputError("--ray-address is only for --executor ray")
        return shared_process_executor() if name == "process" else LocalExecutor()
    if name == "ray":
        return RayExecutor(address)
    raise InputError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
