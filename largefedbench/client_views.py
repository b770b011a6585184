"""What a client computation sees, and the clipped sum of one chunk of clients (run locally or on a Ray worker).

``Federation.private_sum`` cuts a cohort into chunks of clients. For each chunk, :func:`clipped_chunk_sum` builds
the clients' views from the :class:`ClientStore` (the federation's private data), runs the method's client
function, clips every client's vector to L2 ≤ clip and keeps only the chunk's sum. Nothing per client leaves this
module: executors add chunk sums, the federation adds the mechanism's noise.

- per client: ``client_fn(ClientView) -> vector`` (numpy array or torch tensor);
- batched (``batched=True``): ``client_fn(ChunkView) -> (n_clients, …)``, one row per client of the chunk,
  vectorised over clients (it must not mix clients).

Views load spans and metadata lazily (an embeddings-only computation never reads texts). Client-side randomness
comes from ``view.rng()`` (``chunk.rng(i)``): seeded by the federation seed, the round and the client id (and an
optional stream, for independent uses), so it is the same whatever executor or chunking runs the client.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import re
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.privacy.clipping import clip_rows


def client_seed(fed_seed: int, round_: int, client_id: str) -> int:
    """The seed of a client's own randomness in a round (stable across processes and executors)."""
    digest = hashlib.blake2b(f"{fed_seed}/{round_}/{client_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _client_rng(seed: int, stream: tuple[int, ...]) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *map(int, stream)]) if stream else seed)


class RowBlocks:
    """A ``(n, d)`` matrix held as consecutive blocks of rows (e.g. each block an object in Ray's object store, read
    zero-copy): span embeddings built and shipped in pieces, never as one array. Reads like an array of rows:
    ``len``, ``shape``, ``dtype``, a slice of rows (a view inside one block, a copy across blocks) or an array of row
    indices. ``refs`` (one per block) and ``holder`` are the executor's handles on the blocks, if it staged them."""

    def __init__(self, blocks: Sequence[np.ndarray], *, refs: Sequence[Any] | None = None, holder: Any = None) -> None:
        if not blocks:
            raise InputError("RowBlocks needs at least one block of rows")
        if len({(b.shape[1:], b.dtype) for b in blocks}) != 1:
            raise InputError("every block of rows must have the same row shape and dtype")
        self.blocks = list(blocks)
        self.refs, self.holder = (list(refs) if refs is not None else None), holder
        self.starts = np.concatenate([[0], np.cumsum([len(b) for b in self.blocks])]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self), *self.blocks[0].shape[1:])

    @property
    def dtype(self) -> np.dtype:
        return self.blocks[0].dtype

    def covering(self, lo: int, hi: int) -> range:
        """The blocks holding rows ``lo:hi``."""
        if hi <= lo:
            return range(0)
        first = int(np.searchsorted(self.starts, lo, side="right")) - 1
        return range(first, int(np.searchsorted(self.starts, hi, side="left")))

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step != 1:
                raise InputError("RowBlocks takes slices of consecutive rows only")
            parts = [self.blocks[b][max(lo - self.starts[b], 0) : hi - self.starts[b]] for b in self.covering(lo, hi)]
            if not parts:
                return self.blocks[0][:0]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        rows = np.asarray(key, dtype=np.int64)
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        block = np.searchsorted(self.starts, rows, side="right") - 1
        for b in np.unique(block):
            mine = block == b
            out[mine] = self.blocks[b][rows[mine] - self.starts[b]]
        return out


class ClientStore:
    """The federation's private data as executors see it: the client split and the cached span embeddings.

    ``clients`` needs ``ids``, ``spans(client_id)`` and ``client(client_id).meta`` (a ``ClientSplit``);
    ``embeddings`` is a ``SpanEmbeddings`` or None."""

    def __init__(self, clients: Any, embeddings: Any = None) -> None:
        self.clients = clients
        self.ids: list[str] = list(clients.ids)
        self.embeddings = embeddings

    def files(self) -> list[str]:
        """The files this store's pickled form reads where it is loaded: a memory-mapped split's Arrow files."""
        table = getattr(self.clients, "table", None)
        return [str(f["filename"]) for f in getattr(table, "cache_files", None) or []]

    def spans(self, indices: np.ndarray) -> list[list[str]]:
        return [list(self.clients.spans(self.ids[i])) for i in indices]

    def metadata(self, indices: np.ndarray) -> list[dict[str, Any]]:
        return [dict(self.clients.client(self.ids[i]).meta) for i in indices]

    def embedding_rows(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The span embeddings of the clients ``indices`` stacked in their order, and each row's chunk-local owner."""
        if self.embeddings is None:
            raise InputError("this federation was built without span embeddings; pass embeddings= to Federation to "
                             "give client functions their cached span embeddings")
        vectors = self.embeddings.vectors
        owner = np.repeat(np.arange(len(indices)), self.span_counts(indices))
        rows = self.row_range(indices)
        if rows is not None:  # consecutive clients: a view, no copy
            return vectors[rows[0] : rows[1]], owner
        return vectors[self.row_indices(indices)], owner

    def row_indices(self, indices: np.ndarray) -> np.ndarray:
        """The span-embedding rows of the clients ``indices``, stacked in their order."""
        counts = self.span_counts(indices)
        starts = np.repeat(self.embeddings.offsets[indices] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        return starts + np.arange(int(counts.sum()))

    def span_counts(self, indices: np.ndarray) -> np.ndarray:
        """How many span-embedding rows each of the clients ``indices`` owns."""
        off = self.embeddings.offsets
        return off[indices + 1] - off[indices]

    def row_range(self, indices: np.ndarray) -> tuple[int, int] | None:
        """The span-embedding rows ``lo:hi`` of the clients ``indices`` if they are consecutive (else None)."""
        if not len(indices) or np.any(np.diff(indices) != 1):
            return None
        off = self.embeddings.offsets
        return int(off[indices[0]]), int(off[indices[-1] + 1])

    def without_embeddings(self) -> ClientStore:
        """The clients alone (spans and metadata, read lazily): what an executor ships once per federation."""
        return ClientStore(self.clients)

    def held(self, indices: np.ndarray) -> ClientStore:
        """The clients ``indices`` alone, read into memory (no file behind it): a worker given it can reach no other
        client's data. Their indices in it are ``0 … len - 1``, in this order; ids (so client seeds) are kept."""
        indices = np.asarray(indices, dtype=np.int64)
        ids = [self.ids[i] for i in indices]
        clients = HeldClients(ids, self.spans(indices), self.metadata(indices))
        if self.embeddings is None:
            return ClientStore(clients)
        vectors = np.array(self.embedding_rows(indices)[0])
        offsets = np.concatenate([[0], np.cumsum(self.span_counts(indices))]).astype(np.int64)
        return ClientStore(clients, HeldEmbeddings(vectors, offsets))


@dataclass(frozen=True)
class HeldEmbeddings:
    """Span-embedding rows held in memory: client ``i`` owns ``vectors[offsets[i]:offsets[i + 1]]``."""

    vectors: np.ndarray
    offsets: np.ndarray


class HeldClients:
    """A few clients' spans and metadata held in memory, with a client split's ``ids``/``spans``/``client`` reads."""

    def __init__(self, ids: Sequence[str], spans: Sequence[Sequence[str]], metadata: Sequence[dict[str, Any]]) -> None:
        self.ids = list(ids)
        self._spans = dict(zip(self.ids, (list(s) for s in spans)))
        self._meta = dict(zip(self.ids, (dict(m) for m in metadata)))

    def spans(self, client_id: str) -> list[str]:
        return self._spans[client_id]

    def client(self, client_id: str) -> SimpleNamespace:
        return SimpleNamespace(meta=self._meta[client_id])


class ChunkStore(ClientStore):
    """One chunk's part of a :class:`ClientStore`, as a remote worker gets it: the clients (shipped once per
    federation) and the span-embedding rows of the chunk's clients (shipped with the chunk)."""

    def __init__(self, clients: ClientStore, indices: np.ndarray, rows: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.clients, self.ids, self.embeddings = clients.clients, clients.ids, None
        self._indices, self._rows = np.asarray(indices), rows

    def embedding_rows(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._rows is None:
            return super().embedding_rows(indices)  # no embeddings: the same error as the federation's store
        if not np.array_equal(indices, self._indices):
            raise InputError("a chunk's store holds the span embeddings of that chunk's clients only")
        return self._rows


class _Lazy:
    """Spans and metadata of one chunk's clients, read from the store on first use."""

    def __init__(self, store: ClientStore, indices: np.ndarray) -> None:
        self._store, self._indices = store, indices

    @cached_property
    def spans(self) -> list[list[str]]:
        return self._store.spans(self._indices)

    @cached_property
    def metadata(self) -> list[dict[str, Any]]:
        return self._store.metadata(self._indices)

    @cached_property
    def embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        return self._store.embedding_rows(self._indices)


@dataclass(frozen=True)
class ClientView:
    """One client's own data in one round: its spans, cached span embeddings and metadata."""

    id: str
    round: int
    seed: int
    _lazy: _Lazy = field(repr=False, compare=False)
    _pos: int = field(repr=False, compare=False)

    @property
    def spans(self) -> list[str]:
        return self._lazy.spans[self._pos]

    @property
    def metadata(self) -> dict[str, Any]:
        return self._lazy.metadata[self._pos]

    @property
    def embeddings(self) -> np.ndarray:
        """``(n_spans, d)``: this client's cached span embeddings."""
        vectors, owner = self._lazy.embeddings
        lo, hi = np.searchsorted(owner, [self._pos, self._pos + 1])
        return vectors[lo:hi]

    def rng(self, *stream: int) -> np.random.Generator:
        """This client's own randomness for this round (seeded by federation seed, round and client id); ``stream``
        (integers) gives independent generators for independent uses."""
        return _client_rng(self.seed, stream)


@dataclass(frozen=True)
class ChunkView:
    """A chunk of clients for a vectorised client function: ``embeddings[k]`` belongs to client ``owner[k]``."""

    ids: tuple[str, ...]
    round: int
    seeds: tuple[int, ...]
    _lazy: _Lazy = field(repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def spans(self) -> list[list[str]]:
        return self._lazy.spans

    @property
    def metadata(self) -> list[dict[str, Any]]:
        return self._lazy.metadata

    @property
    def embeddings(self) -> np.ndarray:
        """``(n_spans, d)``: the chunk's cached span embeddings, client after client."""
        return self._lazy.embeddings[0]

    @property
    def owner(self) -> np.ndarray:
        """``(n_spans,)``: the chunk-local client (0 … len-1) of each embedding row, non-decreasing."""
        return self._lazy.embeddings[1]

    def rng(self, i: int, *stream: int) -> np.random.Generator:
        """Client ``i``'s own randomness for this round (and ``stream``, as :meth:`ClientView.rng`)."""
        return _client_rng(self.seeds[i], stream)

    def clients(self) -> list[ClientView]:
        return [ClientView(cid, self.round, s, self._lazy, i) for i, (cid, s) in enumerate(zip(self.ids, self.seeds))]


@dataclass(frozen=True)
class ChunkResult:
    """What one chunk returns to the federation: the sum of its clipped client vectors and costs, nothing per client."""

    total: Any
    n_clients: int
    width: int
    seconds: float
    peak_rss_bytes: int


def chunk_view(store: ClientStore, indices: np.ndarray, *, round_: int, fed_seed: int) -> ChunkView:
    ids = tuple(store.ids[i] for i in indices)
    return ChunkView(ids, round_, tuple(client_seed(fed_seed, round_, c) for c in ids), _Lazy(store, indices))


def exact_shortcut(client_fn: Any) -> Callable[[ChunkView, float], Any] | None:
    """A library client function's exact algebraic ``clipped_sum(chunk, clip)``, if it has one.

    Only functions defined in ``largefedbench`` qualify: the federation trusts them to return exactly the sum of
    the chunk's clipped rows (each is tested against the general path)."""
    method = getattr(type(client_fn), "clipped_sum", None)
    if method is None or not type(client_fn).__module__.startswith("largefedbench."):
        return None
    return client_fn.clipped_sum


def _rows_clipped_sum(rows: Any, clip: float, n: int) -> tuple[Any, int]:
    if len(rows) != n:
        raise InputError(f"the batched client function returned {len(rows)} vectors for {n} clients: one per client")
    shape = tuple(rows.shape[1:])
    flat = rows.reshape(n, int(np.prod(shape)))
    return clip_rows(flat, clip).sum(0).reshape(shape), int(np.prod(shape)) if shape else 1


def all_finite(values: Any) -> bool:
    """Whether every entry of a numpy array or torch tensor is finite (no NaN, no ±inf)."""
    if type(values).__module__.split(".")[0] == "torch":
        import torch

        return bool(torch.isfinite(values).all())
    return bool(np.isfinite(values).all())


def _stack(rows: Sequence[Any]) -> Any:
    if type(rows[0]).__module__.split(".")[0] == "torch":
        import torch

        return torch.stack(list(rows))
    return np.stack([np.asarray(r) for r in rows])


def seed_global_rngs(seed: int) -> None:
    """Seed Python's, numpy's and (where installed) torch's global generators from a client's seed: a per-client
    function that draws from them (dropout, a shuffle) then gives a client the same vector whichever clients ran
    before it in its worker, as the sensitivity probe (:func:`largefedbench.worker_checks.probe_sensitivity`)
    requires."""
    import random

    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:  # imported here even if the function has not yet: its first client draws from a seeded torch too
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)


def clipped_chunk_sum(store: ClientStore, indices: np.ndarray, *, round_: int, fed_seed: int, client_fn: Callable,
                      clip: float, batched: bool, shortcut: bool = True, seed_globals: bool = False) -> ChunkResult:
    """Run ``client_fn`` on the clients ``indices``, clip each client's vector to L2 ≤ ``clip``, return their sum
    (``seed_globals``: seed the global generators from each client's seed before a per-client call)."""
    view = chunk_view(store, np.asarray(indices, dtype=np.int64), round_=round_, fed_seed=fed_seed)
    start = time.perf_counter()
    fast = exact_shortcut(client_fn) if batched and shortcut else None
    total = None if fast is None else fast(view, clip)
    if total is not None and all_finite(total):
        width = int(np.prod(np.shape(total)))
    elif batched:  # also a shortcut's non-finite sum: the rows' path zeroes each non-finite row (clip_rows)
        total, width = _rows_clipped_sum(client_fn(view), clip, len(view))
    elif len(view):
        total, width = None, 0
        for client in view.clients():  # one client's vector at a time; only the running sum is kept
            if seed_globals:
                seed_global_rngs(client.seed)
            part, width = _rows_clipped_sum(_stack([client_fn(client)]), clip, 1)
            total = part if total is None else total + part
    else:
        total, width = None, 0
    seconds = time.perf_counter() - start
    return ChunkResult(total, len(view), width, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


# -- a confined worker's reply: arrays and builtins only -------------------------------------------------------------
_PLAIN_NUMPY = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
                ("numpy", "ndarray"), ("numpy", "dtype")}


#: a dotted module name, and how many a spare worker's reply may name (see ``executors.ProcessExecutor._restock``)
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
MAX_PRELOADS = 5000


class _PlainUnpickler(pickle.Unpickler):
    """Reads only builtins and plain numpy arrays: a confined worker's reply, which its client function could forge,
    can name no other class or function to run here."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PLAIN_NUMPY:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a confined worker's reply")


def plain_reply(reply: tuple[str, Any], text: str | None) -> bytes:
    """A confined worker's reply as builtins and numpy arrays: a chunk's sum (a tensor as an array and a flag), or the
    error's traceback text."""
    if text is not None:
        return pickle.dumps(("error", text), protocol=pickle.HIGHEST_PROTOCOL)
    part = reply[1]
    if not isinstance(part, ChunkResult):
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    total, is_tensor = part.total, type(part.total).__module__.split(".")[0] == "torch"
    plain = {"total": None if total is None else (total.detach().cpu().numpy() if is_tensor else np.asarray(total)),
             "tensor": is_tensor, "n_clients": int(part.n_clients), "width": int(part.width),
             "seconds": float(part.seconds), "peak_rss_bytes": int(part.peak_rss_bytes)}
    return pickle.dumps(("chunk", plain), protocol=pickle.HIGHEST_PROTOCOL)


def read_plain_reply(data: bytes) -> Any:
    """The value of a confined worker's reply, checked: a chunk's sum comes back a :class:`ChunkResult`."""
    try:
        status, value = _PlainUnpickler(io.BytesIO(data)).load()
        if status == "error":
            raise MethodError(f"a client function failed in a worker process:\n{str(value)[-20000:]}")
        if status == "ok" and value is None:
            return None
        if status == "modules":  # what a probe's spare imported with the task: names, preloaded by the next spares
            return [m for m in value[:MAX_PRELOADS] if isinstance(m, str) and MODULE_NAME.fullmatch(m)]
        if status != "chunk":
            raise ValueError(f"reply {status!r}")
        total = value["total"]
        if total is not None and not (isinstance(total, np.ndarray) and total.dtype.kind in "fiu"):
            raise ValueError("a chunk's sum that is not a numeric array")
        if total is not None and value["tensor"]:
            import torch

            total = torch.from_numpy(np.array(total))
        return ChunkResult(total, int(value["n_clients"]), int(value["width"]), float(value["seconds"]),
                           int(value["peak_rss_bytes"]))
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, EOFError, AttributeError) as exc:
        raise MethodError(f"a confined client worker sent a reply that is not a chunk's sum ({exc})") from None
