"""The ``process`` executor: client computations in worker processes of this machine (``python -c``, not
multiprocessing: a forked child of a process that ran torch's OpenMP pool hangs, and a spawned one would re-run the
caller's script), what ``lfb eval``, ``lfb audit`` and ``lfb smoke`` use; see :mod:`largefedbench.executors` for what
every executor does.

The workers start once and hold each federation's client store (shipped once) and each release's task (the client
function, pickled with cloudpickle, and the settings); a worker drops the store or task a message replaces before
its body arrives and hands the freed heap back (:func:`release_memory`). They run torch with the driver's thread count
(a driver without torch: the count torch would take there), as many as fit the cores at that count. A sandboxed
plug-in's run starts them through a launcher (:meth:`ProcessExecutor.confine`) that puts them behind the method's
guard, replies come back as builtins and arrays only, and two spare confined workers are kept started for the
sensitivity probe (:meth:`ProcessExecutor.isolated_sums`).
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.client_views import (
    ChunkResult,
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


def _read(block: Any) -> np.ndarray:
    """A block of rows: an array as is, a lazy block (anything with ``read()``) read here."""
    return block if isinstance(block, np.ndarray) else block.read()


def _driver_threads() -> int | None:
    """torch's intra-op thread count on the driver, if the driver uses torch (workers match it: same float sums)."""
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None


def _worker_threads() -> int:
    """The torch and BLAS threads of each worker: the driver's torch count, or where the driver has not loaded torch
    (a sandboxed plug-in's harness) the count torch takes when it loads: ``OMP_NUM_THREADS``, else the machine's
    physical cores. Workers x threads then fit the cores, and a worker's sums are those of the same run with torch
    loaded in the driver. A worker a core at torch's default threads would put two OpenMP threads per worker on two
    cores (measured 13x slower a release: docs/architecture.md, the sandbox paragraph)."""
    if (threads := _driver_threads()) is not None:
        return threads
    preset = os.environ.get("OMP_NUM_THREADS", "")
    if preset.isdigit() and int(preset) > 0:
        return int(preset)
    return _physical_cores()


def _physical_cores() -> int:
    """Cores, not hardware threads, as torch counts them for its default (Linux's CPU topology; else the CPU count)."""
    cores = set()
    for topology in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip()))
        except OSError:
            continue
    return len(cores) or os.cpu_count() or 1


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


def _import_quietly(names: Iterable[str]) -> None:
    """Import each of ``names`` that imports (a spare worker's preload)."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001, S112 - a module that fails here fails again, loudly, with the task
            continue


def _worker_main(inbox: int, outbox: int, confined: bool = False, preload: bool = False) -> None:
    """A ``process`` worker (``python -c``, reading and writing the pipes ``inbox`` and ``outbox``): keeps the client
    store and the task it was last sent (none, after one that failed to load), runs chunks, returns their sums
    (``confined``: as builtins and arrays only, see :func:`~largefedbench.client_views.plain_reply`). ``preload``
    (a spare for the sensitivity probe) loads the modules a ``preload`` message names and answers a task with the
    modules it then holds."""
    from multiprocessing.connection import Connection

    import cloudpickle


    conn_in, conn = Connection(inbox, writable=False), Connection(outbox, readable=False)
    store = task = None
    while True:
        try:  # two frames a message: its kind, then its pickled body
            kind = conn_in.recv_bytes()
            if kind == b"preload":  # a spare: what the last probe's workers imported with their task (no reply)
                _import_quietly(pickle.loads(conn_in.recv_bytes()))
                continue
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
                reply = ("modules", sorted(sys.modules)) if preload else ("ok", None)  # a spare: nothing seen yet
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


def _task_key(task: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Which task this is (its settings' objects), to tell a probe's task from the release's just sent."""
    return tuple(sorted((name, id(value)) for name, value in task.items()))


class _Briefing(threading.Thread):
    """Sends a spare worker a task and reads its answer (the modules it holds), or the modules to preload (no answer),
    in a thread beside the release, after ``after``'s message."""

    def __init__(self, spare: ProcessExecutor, kind: str, body: bytes, after: _Briefing | None) -> None:
        super().__init__(name="lfb-probe-briefing", daemon=True)
        self.spare, self.kind, self.body, self.after = spare, kind, body, after
        self.error: BaseException | None = None
        self.modules: list[str] = []

    def run(self) -> None:
        if self.after is not None:
            self.after.join()
        try:
            if self.kind == "task":
                self.modules = self.spare._call(0, "task", self.body) or []
            else:
                self.spare._send(0, self.kind, self.body)
        except BaseException as exc:  # noqa: BLE001 - raised where the task is needed (result())
            self.error = exc

    def result(self) -> None:
        """Wait until the worker has loaded the task; raise what loading it raised."""
        self.join()
        if self.error is not None:
            raise self.error


class ProcessExecutor:
    """Chunks in ``workers`` spawned processes of this machine; see the module docstring."""

    name = "process"

    #: fresh confined workers kept started for the sensitivity probe (one probe runs two)
    SPARES = 2

    def __init__(self, workers: int | None = None, *, spare: bool = False) -> None:
        if workers is not None and workers < 1:
            raise InputError(f"workers={workers} must be at least 1 (client worker processes)")
        self.workers = workers
        self._spare = spare  # a probe's worker: preloads what it is told, names the modules its task needed, has no spares
        self._spares: list[ProcessExecutor] = []  # started, never sent a store or a task
        self._retired: list[ProcessExecutor] = []  # spares used by a probe and told to stop, not yet reaped
        self._briefing: _Briefing | None = None  # a spare's: the task it is sent or was sent last
        self._briefed: tuple[Any, bytes | None] = (None, None)  # the last release's task (its key, its body)
        self._preloads: list[str] = []  # the modules the last probe's workers held with their task
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
        nothing an earlier chunk left behind. The workers stop when their sums are back. They are spares started before
        (:meth:`_restock`), which loaded torch and this release's task while its chunks ran (:meth:`map_chunks`), and
        are then replaced. On the tiny demo's DP-FedAvg the task loaded at probe time took 6-9 s a worker, one worker
        after the other, and the chunks 0.2-0.8 s."""
        solos: list[ProcessExecutor] = []
        self._reap()
        try:
            key, briefed = self._briefed
            body = briefed if briefed is not None and key == _task_key(task) else self._task_body(task)  # else: sent now
            self._restock(len(index_sets))
            solos, self._spares = self._spares[:len(index_sets)], self._spares[len(index_sets):]
            for solo in solos:
                solo._brief(body)
            for solo in solos:  # side by side from here: the task, the clients, the chunk
                assert solo._briefing is not None
                solo._briefing.result()
                self._preloads = solo._briefing.modules or self._preloads
            for solo, indices in zip(solos, index_sets):
                solo._send(0, "store", pickle.dumps(store.held(indices), protocol=pickle.HIGHEST_PROTOCOL))
            for solo in solos:
                solo._receive(0)
            for solo, indices in zip(solos, index_sets):
                solo._send(0, "chunk", np.arange(len(indices)))
            return [solo._receive(0) for solo in solos]
        finally:
            for solo in solos:
                solo.stop()  # they exit on their own; shutdown() reaps them
            self._retired += solos
            self._restock(self.SPARES)  # the next release's probe: they start while the method goes on

    def _reap(self) -> None:
        """Wait for the retired spares that have exited (a long run retires two a release) and remove their jails."""
        done = [w for w in self._retired if all(proc.poll() is not None for proc, _ in w._procs)]
        self._retired = [w for w in self._retired if w not in done]
        for worker in done:
            worker.shutdown()

    def _brief(self, body: bytes, kind: str = "task") -> None:
        """Send a spare the task ``body`` (or a ``preload``) in a thread of this process, unless it has it or is being
        sent it."""
        if self._briefing is None or self._briefing.body is not body:
            self._briefing = _Briefing(self, kind, body, after=self._briefing)
            self._briefing.start()

    def _restock(self, count: int) -> None:
        """Start confined spare workers (one worker each) until ``count`` are running. Each loads, as it starts, the
        modules the last probe's workers held once they had loaded their task (a plug-in's task can take seconds to
        import: torch, transformers, the model's classes), so a probe's workers wait on little but the chunks."""
        while len(self._spares) < count:
            spare = ProcessExecutor(workers=1, spare=True)
            spare.confine(self._launcher)
            spare.start(())
            if self._preloads:
                spare._brief(pickle.dumps(self._preloads, protocol=pickle.HIGHEST_PROTOCOL), kind="preload")
            self._spares.append(spare)

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

        threads = _worker_threads()
        n = self.workers or max(1, (os.cpu_count() or 1) // threads)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),  # what the driver imports from
                   OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        for _ in range(n):
            to_worker, from_worker = os.pipe(), os.pipe()
            confined = self._launcher is not None
            code = (f"from largefedbench.process_executor import _worker_main; "
                    f"_worker_main({to_worker[0]}, {from_worker[1]}, confined={confined}, preload={self._spare})")
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

    def _task_body(self, task: dict[str, Any]) -> bytes:
        """``task`` and the driver's torch threads, as the message a worker loads."""
        import cloudpickle

        _by_value_modules(cloudpickle, task.get("client_fn"))
        if self.confined:  # the sensitivity probe replays clients elsewhere: a per-client call must not depend on order
            task = dict(task, seed_globals=True)
        try:
            return cloudpickle.dumps((task, _driver_threads()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - what the client function holds decides whether it pickles
            raise MethodError(f"the client function cannot be sent to a worker process ({type(exc).__name__}: {exc}); "
                              "it must not hold open files, locks, generators or other process-bound state") from None

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        self._ship_store(store)
        body = self._task_body(task)
        if self.confined and not self._spare:  # the probe's workers start and load the task beside the chunks
            self._restock(self.SPARES)
            self._briefed = (_task_key(task), body)
            for spare in self._spares:
                spare._brief(body)
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

    def stop(self) -> None:
        """Tell the workers to exit and close their pipes, without waiting (:meth:`shutdown` waits)."""
        for _, (send, receive) in self._procs:
            if send.closed:
                continue
            try:
                send.send_bytes(b"stop")
            except (BrokenPipeError, OSError):
                pass
            send.close()
            receive.close()

    def shutdown(self) -> None:
        spares, retired, self._spares, self._retired = self._spares, self._retired, [], []
        self._briefed = (None, None)
        for spare in spares:  # sent no client: no need to wait for its interpreter to finish loading
            for proc, _ in spare._procs:
                proc.kill()
        for spare in spares:  # a task still being sent fails on the closed pipe
            if spare._briefing is not None:
                spare._briefing.join()
        for worker in (*spares, *retired):
            worker.shutdown()
        self.stop()
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
            if self._procs or self._spares or self._retired:
                self.shutdown()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the workers end with their pipes anyway
            pass
