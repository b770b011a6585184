"""``lfb bench scale``: POPri's client side through ``Federation.private_sum`` on a synthetic federation at paper scale.

The federation has ``clients`` clients with random unit ``dim``-d span embeddings (span counts 1 + a negative
binomial with mean 6.6 spans per client and a long tail, like the real datasets' clients); the ``samples`` synthetic
samples are random unit vectors too. Span texts are not generated: POPri's score reads only embeddings.

Measured, in one run on this machine: each stage's wall time, the peak RSS of this process (and, on Ray, of the
workers), and this machine's fp32 GEMM rate. The **limit** is the naive matrix product — clients × samples × dim
multiply-adds at that rate — and the **ratio** is the client side's time (the release, from span embeddings to the
noised sum) over the limit. The noised sum's ``checksum`` (SHA-256 of its float32 bytes) lets runs on two executors
be compared for the same seed.
"""

from __future__ import annotations

import hashlib
import os
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from largefedbench.data.federated import Client
from largefedbench.errors import InputError

MEAN_SPANS = 6.6
#: negative-binomial shape of the span counts: variance ≈ 4.7 × mean, a long tail of prolific clients
SPAN_SHAPE = 1.5


@dataclass
class ScaleReport:
    clients: int
    samples: int
    dim: int
    spans: int
    executor: str
    path: str
    seed: int
    stages: dict[str, float] = field(default_factory=dict)  # seconds, in run order
    gemm_gmacs: float = 0.0  # fp32 GEMM rate, 10⁹ multiply-adds per second
    limit_seconds: float = 0.0  # clients × samples × dim / rate
    client_side_seconds: float = 0.0  # the release: span embeddings → noised sum
    ratio: float = 0.0  # client side / limit
    peak_rss_bytes: int = 0  # this process
    worker_peak_rss_bytes: int = 0  # the largest Ray worker (0 on local)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)  # at the start (the machine may be shared)
    checksum: str = ""
    noised_sum_total: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SyntheticClients:
    """Client ids without texts or metadata: what ``Federation`` needs of a split for an embeddings-only benchmark."""

    def __init__(self, n: int) -> None:
        self.ids = [f"c{i:07d}" for i in range(n)]

    def spans(self, client_id: str) -> list[str]:
        return []

    def client(self, client_id: str) -> Client:
        return Client(client_id, [], {})


def span_counts(n_clients: int, rng: np.random.Generator, mean: float = MEAN_SPANS) -> np.ndarray:
    """1 + NegBin(shape 1.5) with the given mean: every client has at least one span, a few have many."""
    extra = mean - 1.0
    return 1 + rng.negative_binomial(SPAN_SHAPE, SPAN_SHAPE / (SPAN_SHAPE + extra), size=n_clients)


def unit_row_blocks(n: int, dim: int, rng: np.random.Generator, *, block: int = 65_536) -> Iterator[np.ndarray]:
    """``n`` random unit float32 rows, ``block`` rows at a time (no float64 temporary, no whole matrix)."""
    for lo in range(0, n, block):
        part = np.empty((min(block, n - lo), dim), dtype=np.float32)
        rng.standard_normal(out=part, dtype=np.float32)
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        yield part


@dataclass(frozen=True)
class UnitRowBlock:
    """``rows`` random unit float32 rows, drawn from their own seed when read, by whichever process stages them (on
    Ray a task: the driver never holds them)."""

    seed: tuple[int, ...]
    rows: int
    dim: int

    def __len__(self) -> int:
        return self.rows

    def read(self) -> np.ndarray:
        return next(unit_row_blocks(self.rows, self.dim, np.random.default_rng(np.random.SeedSequence(self.seed)),
                                    block=self.rows))


def lazy_unit_row_blocks(n: int, dim: int, seed: tuple[int, ...], *, block: int = 65_536) -> list[UnitRowBlock]:
    """``n`` random unit rows as blocks of ``block`` rows, each with its own seed (``seed`` + its index), none drawn."""
    return [UnitRowBlock((*seed, i), min(block, n - lo), dim) for i, lo in enumerate(range(0, n, block))]


def unit_rows(n: int, dim: int, rng: np.random.Generator, *, block: int = 65_536) -> np.ndarray:
    """``n`` random unit float32 rows in one array (the rows of :func:`unit_row_blocks`)."""
    out = np.empty((n, dim), dtype=np.float32)
    for lo, part in zip(range(0, n, block), unit_row_blocks(n, dim, rng, block=block)):
        out[lo : lo + len(part)] = part
    return out


def gemm_rate(dim: int, samples: int, *, rows: int = 1024, repeats: int = 3) -> float:
    """Best-of-``repeats`` fp32 GEMM rate (multiply-adds/s) on the naive product's shape: (rows × dim) @ (dim × M)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, dim), dtype=np.float32)
    b = rng.standard_normal((dim, samples), dtype=np.float32)
    out = np.empty((rows, samples), dtype=np.float32)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - start)
    return rows * dim * samples / best


class _Watch:
    """Passes an executor's chunk results through, remembering the largest worker RSS."""

    def __init__(self, executor: Any) -> None:
        self.executor, self.worker_peak = executor, 0

    def prepare(self, store: Any) -> None:
        self.executor.prepare(store)

    def start(self) -> None:
        self.executor.start()

    def stage_rows(self, blocks: Any) -> Any:
        return self.executor.stage_rows(blocks)

    def map_chunks(self, store: Any, chunks: Sequence[np.ndarray], **task: Any) -> Iterator[Any]:
        for result in self.executor.map_chunks(store, chunks, **task):
            self.worker_peak = max(self.worker_peak, result.peak_rss_bytes)
            yield result


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_scale(clients: int = 133_000, samples: int = 18_000, *, dim: int = 384, executor: str = "local",
              ray_address: str | None = None, seed: int = 0, path: str = "shortcut", chunk_clients: int | None = None,
              noise_multiplier: float = 1.0, progress: bool = True,
              log: Callable[[str], None] | None = None) -> ScaleReport:
    """Build the synthetic federation and release POPri's noised score sum once (see the module docstring)."""
    from largefedbench.executors import make_executor
    from largefedbench.federation import Federation, SpanEmbeddings
    from largefedbench.privacy.mechanisms import Gaussian
    from largefedbench.synthetic.scoring import PopriScores

    if clients < 1 or samples < 2 or dim < 2:
        raise InputError(f"--clients {clients}, --samples {samples}, dim {dim}: need ≥ 1 client, ≥ 2 samples, dim ≥ 2")
    if path not in ("shortcut", "general"):
        raise InputError(f"--path {path!r}: choose shortcut (exact algebra in {dim}-d) or general (streamed rows)")
    log = log or (lambda _msg: None)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CA1E]))
    report = ScaleReport(clients, samples, dim, 0, executor, path, seed, load_average=os.getloadavg())

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        report.stages[name] = time.perf_counter() - start
        log(f"{name}: {report.stages[name]:.2f} s")
        return out

    report.gemm_gmacs = stage("measure fp32 GEMM rate", lambda: gemm_rate(dim, samples)) / 1e9  # on a quiet box
    report.limit_seconds = clients * samples * dim / (report.gemm_gmacs * 1e9)
    watch = _Watch(make_executor(executor, address=ray_address))
    stage("start executor", watch.start)
    counts = span_counts(clients, rng)
    report.spans = int(counts.sum())
    # block by block into the executor (on Ray: drawn by tasks into the object store, never a row on the driver)
    vectors = stage("generate span embeddings",
                    lambda: watch.stage_rows(lazy_unit_row_blocks(report.spans, dim, (seed, 0x5CA1E, 1))))
    synthetic = stage("generate synthetic samples", lambda: unit_rows(samples, dim, rng))

    embeddings = SpanEmbeddings(vectors, np.concatenate([[0], np.cumsum(counts)]))
    fed = Federation(SyntheticClients(clients), embeddings=embeddings, seed=seed, executor=watch)
    stage("ship clients", lambda: watch.prepare(fed._store))
    score = PopriScores(synthetic)
    client_fn = score if path == "shortcut" else (lambda chunk: score(chunk))  # a lambda has no shortcut
    chunk = chunk_clients or (8192 if path == "shortcut" else 1024)

    from tqdm.auto import tqdm

    with tqdm(total=clients, desc=f"POPri scores ({path}, {executor})", unit="client", disable=not progress,
              leave=False) as bar:
        start = time.perf_counter()
        noisy = fed.private_sum(fed.everyone(), client_fn, clip=1.0, mechanism=Gaussian(noise_multiplier),
                                batched=True, chunk_clients=chunk, broadcast=synthetic,
                                progress=bar.update)
        report.client_side_seconds = time.perf_counter() - start
    costs = fed.costs.rounds[0]
    report.stages["release: client computation (summed over chunks)"] = costs["client_seconds"]
    report.stages["release: noise and ledger"] = costs["server_seconds"]
    report.stages["release: wall"] = report.client_side_seconds
    report.ratio = report.client_side_seconds / report.limit_seconds
    report.peak_rss_bytes = _rss()
    report.worker_peak_rss_bytes = watch.worker_peak if executor != "local" else 0
    report.checksum = hashlib.sha256(np.ascontiguousarray(noisy, dtype=np.float32).tobytes()).hexdigest()[:16]
    report.noised_sum_total = float(np.sum(noisy, dtype=np.float64))
    return report


def format_report(r: ScaleReport) -> str:
    gb = 1024**3
    lines = [f"POPri client side: {r.clients:,} clients ({r.spans:,} spans, {r.spans / r.clients:.2f} each) × "
             f"{r.samples:,} samples × {r.dim}-d, executor {r.executor}, {r.path} path, seed {r.seed}",
             f"load average at start: {r.load_average[0]:.2f} {r.load_average[1]:.2f} {r.load_average[2]:.2f} "
             f"({os.cpu_count()} cores)", "", f"{'stage':<52}{'seconds':>10}"]
    lines += [f"{name:<52}{sec:>10.2f}" for name, sec in r.stages.items()]
    lines += ["", f"fp32 GEMM rate: {r.gemm_gmacs:.1f} GMAC/s; naive matrix-product limit: {r.limit_seconds:.1f} s",
              f"client side: {r.client_side_seconds:.2f} s = {r.ratio:.3f} × the limit (target ≤ 0.5)",
              f"peak RSS: {r.peak_rss_bytes / gb:.2f} GB (target ≤ 2 GB)"
              + (f"; largest Ray worker {r.worker_peak_rss_bytes / gb:.2f} GB" if r.executor != "local" else ""),
              f"checksum of the noised sum: {r.checksum}"]
    return "\n".join(lines)
