"""Where client computations run: in this process (``local``, the default) or on a Ray cluster (``ray``).

An executor runs :func:`largefedbench.client_views.clipped_chunk_sum` for every chunk of a cohort and yields the
chunk results in chunk order; the federation adds them (in that order, so both executors give the same sum) and
draws the noise once, on the driver.

``ray`` (``pip install largefedbench[ray]``) starts a local cluster (``ray.init(num_cpus=2)``) unless given an
address (``--ray-address``) to join. Nothing is serialised whole: the client split goes into the object store once
per federation (spans and metadata are read lazily on the workers) and the cached span embeddings in blocks of
about :data:`BLOCK_BYTES` (``stage_rows`` puts blocks there as they are built, so a caller that builds embeddings
block by block never holds them on the driver at all). A task gets its chunk's client indices and the blocks
holding its rows (zero-copy on the same node; a scattered chunk, e.g. of a Poisson cohort, gets its rows gathered
instead) and returns only the chunk's clipped sum. At most ``in_flight`` chunks (default: as many as the cluster
runs at once, + 1) are pending at once. When the driver has torch loaded, a task runs torch with the driver's
intra-op thread count and asks for as many CPUs (up to a node's): torch's float reductions depend on the thread
count, and this keeps the sums of both executors identical.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from largefedbench.client_views import ChunkResult, ChunkStore, ClientStore, RowBlocks, clipped_chunk_sum
from largefedbench.errors import InputError

#: the size of one block of span embeddings in the object store
BLOCK_BYTES = 64 << 20

EXECUTORS = ("local", "ray")


class LocalExecutor:
    """Chunks one after another in this process."""

    name = "local"

    def start(self) -> None:
        """Nothing to start."""

    def prepare(self, store: ClientStore) -> None:
        """Nothing to ship: chunks read the store in this process."""

    def stage_rows(self, blocks: Iterable[np.ndarray]) -> RowBlocks:
        """Blocks of rows (e.g. span embeddings built block by block) as one matrix of rows, kept in this process."""
        return RowBlocks(list(blocks))

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        for indices in chunks:
            yield clipped_chunk_sum(store, indices, **task)


def _ray_task(clients: ClientStore, indices: np.ndarray, task: dict[str, Any], threads: int | None, rows: Any,
              *blocks: np.ndarray) -> ChunkResult:
    """One chunk on a worker. ``threads``: torch's intra-op threads (the driver's), if the driver uses torch.
    ``rows``: None (no embeddings), ``(vectors, owner)`` gathered on the driver, or ``(lo, hi, counts)`` with
    ``blocks`` the staged blocks holding rows ``lo:hi`` (offsets within the first)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    if rows is not None and blocks:
        lo, hi, counts = rows
        rows = RowBlocks(blocks)[lo:hi], np.repeat(np.arange(len(counts)), counts)
    return clipped_chunk_sum(ChunkStore(clients, indices, rows), indices, **task)


class RayExecutor:
    """Chunks as Ray tasks; see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int = 2, in_flight: int | None = None) -> None:
        if in_flight is not None and in_flight < 1:
            raise InputError(f"in_flight={in_flight} must be at least 1 (chunks pending on the cluster at once)")
        self.address = address
        self.num_cpus = num_cpus
        self.in_flight = in_flight
        self._ray: Any = None
        self._remote: Any = None
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

    def stage_rows(self, blocks: Iterable[np.ndarray]) -> RowBlocks:
        """Put each block of rows into the object store as it comes (the caller's copy can go at once) and return
        the matrix of rows read zero-copy from there, with the blocks' refs for the tasks."""
        ray = self._start()
        refs, views = [], []
        for block in blocks:
            refs.append(ray.put(block))
            del block  # the object store's copy is the one kept
            views.append(ray.get(refs[-1]))
        return RowBlocks(views, refs=refs, holder=self)

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

    def _ship_by_value(self, client_fn: Any) -> None:
        """Workers may not be able to import the module a client function lives in (a method file given by path, a
        test): pickle such modules' functions by value. Installed packages and largefedbench are imported."""
        for name in {getattr(client_fn, "__module__", None), type(client_fn).__module__}:
            module = sys.modules.get(name or "")
            path = str(getattr(module, "__file__", "") or "")
            if module is None or not path or name == "__main__" or name.split(".")[0] == "largefedbench" \
                    or "site-packages" in path or "dist-packages" in path:
                continue
            self._ray.cloudpickle.register_pickle_by_value(module)

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        ray = self._start()
        self._ship_by_value(task.get("client_fn"))
        (clients_ref, blocks), task_ref = self._shipped(store), ray.put(task)
        threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
        cpus = min(threads or 1, max(int(n["Resources"].get("CPU", 1)) for n in ray.nodes() if n["Alive"]))
        remote = self._remote.options(num_cpus=cpus)
        window = self.in_flight or int(ray.cluster_resources().get("CPU", 1)) // cpus + 1
        pending: deque[Any] = deque()
        for indices in chunks:
            rows, refs = None, []
            if blocks is not None:
                span = store.row_range(indices)
                if span is None or span[0] == span[1]:  # scattered or no rows: gathered here, shipped with the task
                    rows = store.embedding_rows(indices)
                else:  # consecutive: the blocks holding its rows, by reference
                    covering = blocks.covering(*span)
                    first = int(blocks.starts[covering[0]])
                    rows = (span[0] - first, span[1] - first, store.span_counts(indices).astype(np.int32))
                    refs = [blocks.refs[b] for b in covering]
            pending.append(remote.remote(clients_ref, indices, task_ref, threads, rows, *refs))
            if len(pending) >= window:
                yield ray.get(pending.popleft())  # in chunk order: the driver adds the sums in the order of ``local``
        while pending:
            yield ray.get(pending.popleft())

    def shutdown(self) -> None:
        if self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()
        self._ray, self._remote, self._stored = None, None, None


Executor = LocalExecutor | RayExecutor


def make_executor(name: str | None = "local", *, address: str | None = None) -> Executor:
    """``local`` or ``ray`` (joining ``address`` if given)."""
    if name in (None, "local"):
        if address:
            raise InputError("--ray-address is only for --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address)
    raise InputError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
