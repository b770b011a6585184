"""Where client computations run: in this process (``local``), in worker processes of this machine (``process``,
what ``lfb eval``, ``lfb audit`` and ``lfb smoke`` use) or on a Ray cluster (``ray``).

An executor runs :func:`largefedbench.client_views.clipped_chunk_sum` for every chunk of a cohort and yields the
chunk results in chunk order; the federation adds them (in that order, so both executors give the same sum) and
draws the noise once, on the driver.

``process`` and ``ray`` isolate the method from its client functions: a client function runs on a copy of what it
closes over, in another process, so whatever it keeps (a list it appends to, a module global, an attribute of the
view) stays there; only the chunk's clipped sum comes back. ``process`` starts ``workers`` fresh interpreters once
(``python -c``, not multiprocessing: a forked child of a process that ran torch's OpenMP pool hangs, and a spawned
one would re-run the caller's script), ships each federation's client store to them
once, and each ``private_sum`` call's task (the client function, pickled with cloudpickle, and the settings) once per
worker; a worker drops the store or task a message replaces before its body arrives and hands the freed heap back
(:func:`release_memory`), so it does not grow from release to release. The workers run torch with the driver's thread
count, so the sums equal ``local``'s bit for bit. A sandboxed plug-in's run starts them through a launcher
(:meth:`ProcessExecutor.confine`) that puts them behind the method's guard.

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

import gc
import logging
import os
import pickle
import subprocess
import sys
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from largefedbench.client_views import (
    ChunkResult,
    ChunkStore,
    ClientStore,
    RowBlocks,
    clipped_chunk_sum,
    plain_reply,
    read_plain_reply,
)
from largefedbench.errors import InputError, MethodError

#: how a confined worker is started: (argv, environment, the client store's files it must read) -> (argv, environment
#: or None, cleanup after it exits)
Launcher = Callable[[list[str], dict[str, str], Sequence[str]], tuple[list[str], "dict[str, str] | None", Callable[[], None]]]

#: the size of one block of span embeddings in the object store
BLOCK_BYTES = 64 << 20

EXECUTORS = ("local", "process", "ray")
#: lazy blocks read by Ray tasks at once while staging (each holds its block until the store has it)
LOADS_IN_FLIGHT = 2


def _read(block: Any) -> np.ndarray:
    """A block of rows: an array as is, a lazy block (anything with ``read()``) read here."""
    return block if isinstance(block, np.ndarray) else block.read()


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


def _driver_threads() -> int | None:
    """torch's intra-op thread count on the driver, if the driver uses torch (workers match it: same float sums)."""
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None


def _by_value_modules(pickler: Any, client_fn: Any) -> None:
    """Workers import installed packages and largefedbench, but may not be able to import a module a client function
    (or what it refers to) lives in: a method file given by path, a test. Such modules are pickled by value."""
    names = {getattr(client_fn, "__module__", None), type(client_fn).__module__}
    names |= {name for name, module in list(sys.modules.items()) if name.startswith("lfb_user_method_")}
    for name in names:
        module = sys.modules.get(name or "")
        path = str(getattr(module, "__file__", "") or "")
        if module is None or not path or name == "__main__" or name.split(".")[0] == "largefedbench" \
                or "site-packages" in path or "dist-packages" in path:
            continue
        pickler.register_pickle_by_value(module)


def release_memory() -> None:
    """Collect garbage and hand the freed heap back to the system (glibc's ``malloc_trim``; elsewhere collection
    only). A worker that loaded each new task beside the old one, and kept it apart from the freed heap, grew on every
    release: sent the cpu profile's 517 MiB LoRA-generator task 4 times, it held 1.56, 1.99, 2.29, 2.29 GB and peaked
    at 1.98, 2.59, 3.02, 3.32 GB. Dropping the old task before the new one arrives and trimming keeps it at 0.92 GB,
    peak 1.98 GB (the message and the loaded task side by side), release after release."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _load_libc():
    """glibc, where ``malloc_trim`` exists; None elsewhere (macOS, Windows, musl, a Python without ctypes)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")  # OSError where there is no libc.so.6 (musl)
    except (ImportError, OSError):
        return None
    return libc if hasattr(libc, "malloc_trim") else None


_LIBC = _load_libc()


def _worker_main(inbox: int, outbox: int, confined: bool = False) -> None:
    """A ``process`` worker (``python -c``, reading and writing the pipes ``inbox`` and ``outbox``): keeps the client
    store and the task it was last sent (none, after one that failed to load), runs chunks, returns their sums
    (``confined``: as builtins and arrays only, see :func:`~largefedbench.client_views.plain_reply`)."""
    from multiprocessing.connection import Connection

    import cloudpickle

    conn_in, conn = Connection(inbox, writable=False), Connection(outbox, readable=False)
    store = task = None
    while True:
        try:  # two frames a message: its kind, then its pickled body
            kind = conn_in.recv_bytes()
            if kind not in (b"store", b"task", b"chunk"):  # "stop", or frames out of step: the driver sees it end
                return
            kind = kind.decode()
            if kind in ("store", "task"):  # the old one goes before the new one arrives
                store, task = (None, task) if kind == "store" else (store, None)
                release_memory()
            raw = conn_in.recv_bytes()
        except (EOFError, OSError):
            return  # the driver went away
        try:
            if kind == "store":
                store, raw = pickle.loads(raw), None
                release_memory()
                reply: tuple[str, Any] = ("ok", None)
            elif kind == "task":  # every release: an adapter method's task holds the whole model (~0.5 GB, cpu profile)
                (task, threads), raw = cloudpickle.loads(raw), None
                release_memory()
                if threads is not None:
                    import torch

                    torch.set_num_threads(threads)
                reply = ("ok", None)
            else:
                reply = ("ok", clipped_chunk_sum(store, pickle.loads(raw), **task))
            data = plain_reply(reply, None) if confined else pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - whatever the client function raised goes back to the driver
            text = traceback.format_exc()
            if confined:
                conn.send_bytes(plain_reply(("error", None), text))
                continue
            try:
                data = cloudpickle.dumps(("error", (exc, text)))
            except Exception:  # noqa: BLE001 - an exception that does not pickle goes back as its traceback
                data = pickle.dumps(("error", (None, text)))
        conn.send_bytes(data)


class ProcessExecutor:
    """Chunks in ``workers`` spawned processes of this machine; see the module docstring."""

    name = "process"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise InputError(f"workers={workers} must be at least 1 (client worker processes)")
        self.workers = workers
        self._procs: list[tuple[Any, Any]] = []  # (process, (its inbox, its outbox))
        self._shipped: list[int | None] = []  # id of the store each worker holds
        self._store_ref: ClientStore | None = None  # keeps that store alive, so its id is not reused
        self._launcher: Launcher | None = None
        self._cleanups: list[Callable[[], None]] = []
        self._readable: tuple[str, ...] = ()  # the store files confined workers were started able to read

    @property
    def confined(self) -> bool:
        """Whether the workers start behind a launcher's guard (a sandboxed plug-in's run)."""
        return self._launcher is not None

    def isolated_sums(self, store: ClientStore, index_sets: Sequence[np.ndarray], **task: Any) -> list[ChunkResult]:
        """Each of ``index_sets`` run as one chunk in a fresh worker of its own (through this executor's launcher),
        holding only those clients' data in memory (:meth:`ClientStore.held`): no other client's spans, no store file,
        nothing an earlier chunk left behind. The workers stop when their sums are back."""
        solos: list[ProcessExecutor] = []
        try:
            for _ in index_sets:  # all spawned first: their interpreters start side by side
                solo = ProcessExecutor(workers=1)
                solo.confine(self._launcher)
                solo.start(())
                solos.append(solo)
            results = []
            for solo, indices in zip(solos, index_sets):
                run = solo.map_chunks(store.held(indices), [np.arange(len(indices))], **task)
                results.append(next(run))
                run.close()
            return results
        finally:
            for solo in solos:
                solo.shutdown()

    def confine(self, launcher: Launcher | None) -> None:
        """Start the workers through ``launcher`` from now on (None: as plain processes); running workers stop, and
        the next release starts new ones. A launcher turns a worker's argv and environment into the confined
        process's argv, its environment (None: the launcher's argv sets it) and a cleanup run after it exits."""
        self.shutdown()
        self._launcher = launcher

    def start(self, files: Sequence[str] = ()) -> None:
        """Spawn the workers now rather than at the first release (confined ones able to read ``files``)."""
        if self._procs:
            return
        self._readable = tuple(files)
        try:
            import cloudpickle  # noqa: F401 - pickles client functions (closures, lambdas) for the workers
        except ImportError:
            raise InputError("--executor process needs cloudpickle: pip install 'largefedbench[train]'") from None
        from multiprocessing.connection import Connection

        threads = _driver_threads() or 1
        n = self.workers or max(1, (os.cpu_count() or 1) // threads)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # what the driver imports from
        for _ in range(n):
            to_worker, from_worker = os.pipe(), os.pipe()
            confined = self._launcher is not None
            code = (f"from largefedbench.executors import _worker_main; "
                    f"_worker_main({to_worker[0]}, {from_worker[1]}, confined={confined})")
            argv, proc_env, quiet = [sys.executable, "-c", code], env, {}
            if self._launcher is not None:
                argv, proc_env, cleanup = self._launcher(argv, env, self._readable)
                self._cleanups.append(cleanup)
                quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # it could print private spans
            proc = subprocess.Popen(argv, pass_fds=(to_worker[0], from_worker[1]), env=proc_env, **quiet)
            os.close(to_worker[0])
            os.close(from_worker[1])
            inbox, outbox = Connection(to_worker[1], readable=False), Connection(from_worker[0], writable=False)
            self._procs.append((proc, (inbox, outbox)))
            self._shipped.append(None)

    def prepare(self, store: ClientStore) -> None:
        """Spawn the workers and ship ``store`` to them now."""
        self._ship_store(store)

    def stage_rows(self, blocks: Iterable[Any]) -> RowBlocks:
        """Blocks of rows (arrays, or lazy blocks read here) kept in this process (and shipped with the client
        store)."""
        return RowBlocks([_read(b) for b in blocks])

    def _ship_store(self, store: ClientStore) -> None:
        """Start the workers if they are not running, and send ``store`` to those that do not hold it."""
        files = store.files() if self._launcher is not None else []
        if self._procs and not set(files) <= set(self._readable):
            self.shutdown()  # confined workers read only the files they were started with
        self.start(files)
        body = None
        for w in range(len(self._procs)):
            if self._shipped[w] != id(store):
                body = body or pickle.dumps(store, protocol=pickle.HIGHEST_PROTOCOL)
                self._shipped[w] = None  # the worker drops its store first: if the new one fails to load, it has none
                self._call(w, "store", body)
                self._shipped[w] = id(store)
        self._store_ref = store

    def _send(self, w: int, kind: str, body: Any = None) -> None:
        """``kind``, then ``body`` (bytes as they are, anything else pickled): the worker frees what the message
        replaces before its body arrives."""
        payload = body if isinstance(body, bytes) else pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
        try:  # both frames or neither: the payload is ready before the first goes out
            inbox = self._procs[w][1][0]
            inbox.send_bytes(kind.encode())
            inbox.send_bytes(payload)
        except (BrokenPipeError, OSError):
            self._died(w)

    def _receive(self, w: int) -> Any:
        import cloudpickle  # noqa: F401 - an exception pickled by value needs it to load

        try:
            data = self._procs[w][1][1].recv_bytes()
        except (EOFError, OSError):
            self._died(w)
        if self._launcher is not None:  # its client function may have written the reply: nothing of it runs here
            return read_plain_reply(data)
        status, value = pickle.loads(data)
        if status == "error":
            exc, text = value
            if isinstance(exc, Exception):
                exc.add_note(f"(raised by a client function in a worker process)\n{text}")
                raise exc
            raise MethodError(f"a client function failed in a worker process:\n{text}")
        return value

    def _call(self, w: int, kind: str, body: Any) -> Any:
        self._send(w, kind, body)
        return self._receive(w)

    def _died(self, w: int) -> None:
        proc = self._procs[w][0]
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.shutdown()
        raise MethodError(f"a client worker process died (exit code {code}) while running a client function; if it "
                          "ran out of memory, use smaller chunks (chunk_clients) or fewer workers") from None

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        import cloudpickle

        self._ship_store(store)
        _by_value_modules(cloudpickle, task.get("client_fn"))
        if self.confined:  # the sensitivity probe replays clients elsewhere: a per-client call must not depend on order
            task = dict(task, seed_globals=True)
        try:
            body = cloudpickle.dumps((task, _driver_threads()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - what the client function holds decides whether it pickles
            raise MethodError(f"the client function cannot be sent to a worker process ({type(exc).__name__}: {exc}); "
                              "it must not hold open files, locks, generators or other process-bound state") from None
        for w in range(len(self._procs)):
            self._call(w, "task", body)
        pending: deque[int] = deque()
        try:
            for i, indices in enumerate(chunks):
                w = i % len(self._procs)
                if len(pending) == len(self._procs):  # each worker holds one chunk at most; results in chunk order
                    yield self._receive(pending.popleft())
                self._send(w, "chunk", np.asarray(indices))
                pending.append(w)
            while pending:
                yield self._receive(pending.popleft())
        finally:  # a chunk failed or the caller stopped early: the other workers' replies must not answer the next call
            for w in pending:
                if w < len(self._procs):
                    try:
                        self._procs[w][1][1].recv_bytes()
                    except (EOFError, OSError):
                        pass

    def shutdown(self) -> None:
        for _, (send, receive) in self._procs:
            try:
                send.send_bytes(b"stop")
            except (BrokenPipeError, OSError):
                pass
            send.close()
            receive.close()
        for proc, _ in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        cleanups = self._cleanups
        self._procs, self._shipped, self._store_ref, self._cleanups = [], [], None, []
        for cleanup in cleanups:
            try:
                cleanup()
            except OSError as exc:  # a jail's mount point still busy: it is an empty folder in /tmp
                logging.getLogger(__name__).warning("could not remove a worker's jail folder: %s", exc)

    def __del__(self) -> None:
        try:
            if self._procs:
                self.shutdown()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the workers end with their pipes anyway
            pass


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
