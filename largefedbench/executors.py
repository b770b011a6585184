"""Where client computations run: in this process (``local``, the default) or on a Ray cluster (``ray``).

An executor runs :func:`largefedbench.client_views.clipped_chunk_sum` for every chunk of a cohort and yields the
chunk results in chunk order; the federation adds them (in that order, so both executors give the same sum) and
draws the noise once, on the driver.

``ray`` (``pip install largefedbench[ray]``) starts a local cluster (``ray.init(num_cpus=2)``) unless given an
address (``--ray-address``) to join. The federation's private data (client split and cached span embeddings) go
into the object store once (``ray.put``) and the client function once per release; each task gets a chunk's
client indices and returns only that chunk's clipped sum.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from largefedbench.client_views import ChunkResult, ClientStore, clipped_chunk_sum
from largefedbench.errors import InputError

EXECUTORS = ("local", "ray")


class LocalExecutor:
    """Chunks one after another in this process."""

    name = "local"

    def prepare(self, store: ClientStore) -> None:
        """Nothing to ship: chunks read the store in this process."""

    def map_chunks(self, store: ClientStore, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[ChunkResult]:
        for indices in chunks:
            yield clipped_chunk_sum(store, indices, **task)


def _ray_task(store: ClientStore, indices: np.ndarray, task: dict[str, Any]) -> ChunkResult:
    return clipped_chunk_sum(store, indices, **task)


class RayExecutor:
    """Chunks as Ray tasks; see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int = 2) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._ray: Any = None
        self._remote: Any = None
        self._stored: tuple[ClientStore, Any] | None = None

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

    def _store_ref(self, store: ClientStore) -> Any:
        if self._stored is None or self._stored[0] is not store:
            self._stored = (store, self._ray.put(store))  # once per federation: workers read it zero-copy
        return self._stored[1]

    def prepare(self, store: ClientStore) -> None:
        """Start (or join) the cluster and put ``store`` into the object store now rather than at the first release."""
        self._start()
        self._store_ref(store)

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
        store_ref, task_ref = self._store_ref(store), ray.put(task)
        futures = [self._remote.remote(store_ref, indices, task_ref) for indices in chunks]
        for future in futures:  # in chunk order, so the driver adds the sums in the same order as ``local``
            yield ray.get(future)

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
