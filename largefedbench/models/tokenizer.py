"""Tokenizers: the tiny profile's byte-level BPE (HF ``tokenizers`` + a tiktoken twin) and LM sequence encoding.

The trained BPE uses GPT-2's byte-level alphabet and pre-tokenisation, no prefix space, and puts the single
special token ``<|endoftext|>`` at the last id. Its ``.tiktoken`` export lists every ordinary token's bytes with
its id as rank; because BPE merges are learnt in id order, tiktoken's rank-ordered merging reproduces the HF
ids exactly (tested). The same file works as a snapshot span tokenizer (``--span-tokenizer path.tiktoken``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import torch

from largefedbench.errors import InputError
from largefedbench.io import atomic_write_bytes

EOT = "<|endoftext|>"
TOKENIZER_FILE = "tokenizer.json"
TIKTOKEN_FILE = "bpe.tiktoken"


def train_bpe(texts: Iterable[str], vocab_size: int = 4096, special_token: str = EOT):
    """Train a byte-level BPE (``tokenizers.Tokenizer``) with at most ``vocab_size`` ids, special token last."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257 + 1:
        raise InputError(f"vocab_size={vocab_size} is too small: a byte-level BPE needs 256 byte ids plus the special token")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([special_token])
    return tok


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """GPT-2's printable-unicode stand-in for each byte, inverted (the ByteLevel alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def tiktoken_ranks(tokenizer) -> dict[bytes, int]:
    """The ordinary tokens of a byte-level BPE as ``{token bytes: id}`` (tiktoken's mergeable ranks)."""
    table = _unicode_to_byte()
    specials = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    ranks = {}
    for token, idx in tokenizer.get_vocab(with_added_tokens=False).items():
        if token in specials:
            continue
        ranks[bytes(table[ch] for ch in token)] = idx
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise InputError("the BPE's ordinary ids are not 0..n-1; train it with train_bpe (special token last)")
    return ranks


def save_tiktoken(tokenizer, path: Path) -> Path:
    """Write the tokenizer's ordinary tokens as a ``.tiktoken`` file (base64 bytes and rank per line), atomically."""
    ranks = tiktoken_ranks(tokenizer)
    lines = b"".join(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n" for tok, rank in sorted(ranks.items(), key=lambda x: x[1]))
    atomic_write_bytes(Path(path), lines)
    return Path(path)


def load_tiktoken(path: Path, special_token: str = EOT):
    """Load a ``.tiktoken`` file as a ``tiktoken.Encoding`` with GPT-2's pattern; the special token gets the next id."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str

    path = Path(path)
    if not path.is_file():
        raise InputError(f"tiktoken file {path} does not exist")
    ranks = load_tiktoken_bpe(str(path))
    return tiktoken.Encoding(name=path.stem, pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={special_token: len(ranks)})


def save_trained_tokenizer(tokenizer, folder: Path) -> dict:
    """Save ``tokenizer.json`` and ``bpe.tiktoken`` into ``folder``; returns their sha256 digests."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / TOKENIZER_FILE, tokenizer.to_str().encode("utf-8"))
    save_tiktoken(tokenizer, folder / TIKTOKEN_FILE)
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in (TOKENIZER_FILE, TIKTOKEN_FILE)}


def load_trained_tokenizer(folder: Path, special_token: str = EOT):
    """The saved BPE as a ``PreTrainedTokenizerFast`` whose BOS, EOS and padding token are ``special_token``."""
    from transformers import PreTrainedTokenizerFast

    path = Path(folder) / TOKENIZER_FILE
    if not path.is_file():
        raise InputError(f"no {TOKENIZER_FILE} in {folder}; delete the folder so it is rebuilt")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token=special_token, eos_token=special_token,
                                   pad_token=special_token, unk_token=None, model_max_length=1_000_000)


def ensure_special_tokens(tokenizer):
    """Give a hub tokenizer a BOS and a padding token if it lacks them (GPT-2 style: both = EOS).

    Padding positions are excluded by the attention mask everywhere in LargeFedBench, never by id, so a pad id
    equal to EOS is safe (the POPri reference adds a separate ``[PAD]`` row instead; same counted positions).
    """
    if tokenizer.eos_token is None:
        raise InputError(f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no EOS token; it cannot frame LM sequences")
    if tokenizer.bos_token is None:
        tokenizer.bos_token = tokenizer.eos_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def lm_sequences(tokenizer, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """Each text as ``[BOS] + tokens + [EOS]`` truncated to ``max_len`` ids (POPri spec item 12, clean mode).

    Tokens come from ``tokenizer(text, add_special_tokens=False)`` — the clean encoding, not the reference's
    ``is_split_into_words`` re-tokenisation (spec item 13).
    """
    if max_len < 2:
        raise InputError(f"max_len={max_len} must be at least 2 (BOS and one target)")
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is None or eos is None:
        raise InputError("the tokenizer needs BOS and EOS tokens; pass it through ensure_special_tokens first")
    if not texts:
        return []
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [([bos] + list(seq) + [eos])[:max_len] for seq in ids]


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists to the longest one: ``(input_ids, attention_mask)``, both ``long`` of shape (B, T)."""
    if not seqs:
        raise InputError("cannot pad an empty batch")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids, mask
