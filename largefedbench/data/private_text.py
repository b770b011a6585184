"""Private text where it must not be: word runs only the private clients have, and secret canary strings.

`lfb smoke` and `lfb leaderboard validate` search what a method put out (its synthetic texts, info and history, the
run and board folders, files it left in the temp folder) for two things:

- **a private word run**: ``n`` consecutive words (lower-cased ``\\w+`` tokens) that occur in a private client's
  spans and in none of the texts a method may read (the public split, the validation split, the public corpus).
  A method that copies private text out, through any channel, leaves such runs (a span is about 45 words); text a
  generator wrote from public prompts does not at this length (:data:`RUN_WORDS` is 1.6× the longest private-only run
  a built-in method's honest output held on the templated demo; docs/privacy.md gives the measurement).
- **a canary string**: a secret random word that only a canary client's spans hold (:func:`canary_texts`); found
  anywhere, even inside a binary file, it proves private data left the federation other than as a noised sum.

Runs are hashed (a polynomial rolling hash of the words' hashes, vectorised with numpy), so the index of a large
snapshot is one sorted ``uint64`` array.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: words per searched run; chosen by measurement (see the module docstring)
RUN_WORDS = 32
#: files larger than this are not read by the folder search
MAX_FILE_BYTES = 256 << 20
#: files whose text the folder search reads for word runs; every file is searched for canaries. A method's binary
#: state (a round checkpoint holding PE's whole population over the rounds) can hold a long private-only run its
#: generator wrote: PE's on the tiny demo held one of 20 words
TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".csv", ".tsv", ".md", ".html", ".log", ".yaml", ".yml", "")
_WORD = re.compile(r"\w+")
_BASE = np.uint64(1099511628211)  # the FNV-1 64-bit prime, as the rolling hash's base


@dataclass(frozen=True)
class Leak:
    """What was found (a word run or a canary string) and where (an output, a file, a JSON path)."""

    what: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what!r}"


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _word_hashes(tokens: list[str]) -> np.ndarray:
    return np.fromiter((hash(t) for t in tokens), dtype=np.int64, count=len(tokens)).view(np.uint64)


def run_hashes(texts: Iterable[str], n: int) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """The hash of every ``n``-word run inside each text: (hashes, the text each run starts in, the texts' words)."""
    tokens = [words(t) for t in texts]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    flat = _word_hashes([w for t in tokens for w in t])
    owner = np.repeat(np.arange(len(tokens)), lengths)
    m = len(flat) - n + 1
    if m <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), tokens
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * _BASE + flat[k : k + m]
    inside = owner[:m] == owner[n - 1 :]  # a run may not cross from one text into the next
    return h[inside], owner[:m][inside], tokens


class PrivateRuns:
    """The ``n``-word runs of the private texts that no readable text has: ``find`` reports them in other texts."""

    def __init__(self, private: Iterable[str], readable: Iterable[str], *, n: int = RUN_WORDS) -> None:
        if n < 2:
            raise ValueError(f"n={n}: a searched run needs at least 2 words")
        self.n = n
        mine = np.unique(run_hashes(private, n)[0])
        self.hashes = np.setdiff1d(mine, run_hashes(readable, n)[0], assume_unique=False)

    def __len__(self) -> int:
        return len(self.hashes)

    def hits(self, texts: Iterable[str], *, limit: int = 3) -> list[tuple[int, str]]:
        """Up to ``limit`` (text index, leaked run) pairs among ``texts``, one per text."""
        hashes, owner, tokens = run_hashes(texts, self.n)
        if not len(hashes) or not len(self.hashes):
            return []
        starts = np.concatenate([[0], np.cumsum([max(len(t) - self.n + 1, 0) for t in tokens])])
        out: list[tuple[int, str]] = []
        for i in np.flatnonzero(np.isin(hashes, self.hashes)):
            t = int(owner[i])
            if out and out[-1][0] == t:  # runs come in text order: one per text
                continue
            at = int(i - starts[t])
            out.append((t, " ".join(tokens[t][at : at + self.n])))
            if len(out) >= limit:
                break
        return out

    def find(self, texts: Iterable[str], where: str, *, limit: int = 3) -> list[Leak]:
        """Up to ``limit`` leaks among ``texts``, one per text, named ``where`` (``where[i]`` for several texts)."""
        texts = list(texts)
        return [Leak(run, where if len(texts) == 1 else f"{where}[{t}]") for t, run in self.hits(texts, limit=limit)]


def canary_texts(rng: np.random.Generator, m: int, *, words_each: int = 6) -> list[list[str]]:
    """``m`` canary clients' spans: one span each of ``words_each`` random 12-letter words (its secrets)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return [[" ".join("".join(rng.choice(letters, 12)) for _ in range(words_each))] for _ in range(m)]


def json_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a JSON-like value (keys included), with its path (``info.notes[2]``)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}" if path else str(key), str(key)
            yield from json_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from json_strings(item, f"{path}[{i}]")


class LeakSearch:
    """Searches outputs for :class:`PrivateRuns` and canary strings; collects what it finds in ``leaks``."""

    def __init__(self, runs: PrivateRuns | None, canaries: Iterable[str] = ()) -> None:
        self.runs = runs
        self.canaries = sorted({c.lower() for c in canaries})
        self.leaks: list[Leak] = []
        self.searched: list[str] = []

    def texts(self, texts: Iterable[str], where: str) -> None:
        texts = [t for t in texts if isinstance(t, str)]
        self.searched.append(where)
        if self.runs is not None:
            self.leaks += self.runs.find(texts, where)
        for i, text in enumerate(texts):
            self._canaries(text.lower(), where if len(texts) == 1 else f"{where}[{i}]")

    def value(self, value: Any, where: str) -> None:
        """A JSON-like value (an artifact's info or history, an entry): every string in it."""
        pairs = list(json_strings(value))
        self.searched.append(where)
        if self.runs is not None:
            for i, run in self.runs.hits([s for _, s in pairs]):
                self.leaks.append(Leak(run, f"{where}.{pairs[i][0]}" if pairs[i][0] else where))
        for key, text in pairs:
            self._canaries(text.lower(), f"{where}.{key}" if key else where)

    def folder(self, folder: Path, *, newer_than: float | None = None, depth: int = 6) -> None:
        """Every file under ``folder`` (those modified after ``newer_than`` only, if given): bytes for canaries; the
        text of text files (:data:`TEXT_SUFFIXES`; JSON strings for ``.json``) for word runs."""
        folder = Path(folder)
        if not folder.is_dir():
            return
        self.searched.append(str(folder))
        for path in _files(folder, depth):
            try:
                stat = path.stat()
                if stat.st_size > MAX_FILE_BYTES or (newer_than is not None and stat.st_mtime < newer_than):
                    continue
                data = path.read_bytes()
            except OSError:
                continue  # gone or unreadable: another process's file
            lowered = data.lower()
            for canary in self.canaries:
                if canary.encode() in lowered:
                    self.leaks.append(Leak(canary, f"file {path}"))
            if self.runs is None or path.suffix.lower() not in TEXT_SUFFIXES:
                continue
            text = data.decode("utf-8", errors="ignore")
            strings = [text]
            if path.suffix == ".json":
                try:
                    strings = [s for _, s in json_strings(json.loads(text))]
                except ValueError:
                    pass
            for _, run in self.runs.hits(strings, limit=1):
                self.leaks.append(Leak(run, f"file {path}"))

    def _canaries(self, lowered: str, where: str) -> None:
        for canary in self.canaries:
            if canary in lowered:
                self.leaks.append(Leak(canary, where))


def _files(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_file():
            yield entry
        elif entry.is_dir() and depth > 0:
            yield from _files(entry, depth - 1)
