"""Write the ``generic`` public corpus (:mod:`largefedbench.data.public_corpus`) with the cpu profile's LLM, resumably.

Each text answers one chat instruction "Write <genre> about <topic>." (the chat template of the instruct model),
sampled at temperature 0.8, top-p 0.95; the answer is cut after its last full sentence and stripped of markdown.
Rows are appended batch by batch (a killed run resumes at the first unfinished batch, with the same random
stream), then packed into the byte-reproducible ``generic_corpus.jsonl.gz`` that ships with the package.

    python -m largefedbench.writers.generic_corpus --out generic.jsonl [--limit N] [--device cuda] [--batch-size 256]
        [--pack largefedbench/data/generic_corpus.jsonl.gz]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

from largefedbench.data.public_corpus import generic_items, instruction
from largefedbench.errors import InputError
from largefedbench.io import atomic_write_bytes
from largefedbench.synthetic.prompts import chat_prompt
from largefedbench.writers.demo_prose import MIN_WORDS, write_batches

WRITER_VERSION = "1"
BATCH = 64
MAX_NEW_TOKENS = 224
_MARKDOWN = re.compile(r"(^|\s)#+\s*|\*\*?|__|`+|^\s*[-•]\s+", re.MULTILINE)


def writer_prompt(tokenizer, genre: str, topic: str) -> str:
    """The instruction for (genre, topic) in the model's chat template, ready for the assistant's answer."""
    return chat_prompt(tokenizer, instruction(genre, topic))


def clean_answer(answer: str) -> str:
    """The answer as plain prose: markdown marks removed, whitespace collapsed, cut after the last full sentence."""
    body = " ".join(_MARKDOWN.sub(" ", answer).split())
    if body[-1:] not in ".?!\"'":
        end = max(body.rfind(". "), body.rfind("? "), body.rfind("! "))
        body = body[: end + 1] if end > 0 else body
    return body.strip()


def write_corpus(model, tokenizer, out: Path, *, limit: int | None = None, seed: int = 0, batch_size: int = BATCH,
                 progress: bool = True) -> dict[str, dict]:
    """Write the corpus's texts (the first ``limit`` items) to the JSONL ``out``, resuming; returns rows by id."""
    items = generic_items()[:limit]
    prompts = {(g, t): writer_prompt(tokenizer, g, t) for _, g, t in items}
    meta = {i: (g, t) for i, g, t in items}

    def row(item_id: str, continuation: str) -> dict:
        text = clean_answer(continuation)
        genre, topic = meta[item_id]
        return {"text": text, "genre": genre, "topic": topic, "writer_version": WRITER_VERSION,
                **({"short": True} if len(text.split()) < MIN_WORDS else {})}

    return write_batches([(i, prompts[g, t]) for i, g, t in items], row, model, tokenizer, out, seed=seed,
                         batch_size=batch_size, max_new_tokens=MAX_NEW_TOKENS, progress=progress,
                         desc="writing the generic corpus")


def pack(rows: dict[str, dict], ids: Sequence[str], out: Path) -> tuple[str, int]:
    """Write the texts of ``ids`` that are not short (in order: id, genre, topic, text) as a byte-reproducible gzipped
    JSONL; returns its sha256 and the number of short texts left out."""
    missing = [i for i in ids if i not in rows]
    if missing:
        raise InputError(f"{len(missing)} of {len(ids)} texts are not written yet (first: {missing[0]}); run the writer "
                         "again, it resumes")
    kept = [rows[i] for i in ids if not rows[i].get("short")]
    lines = "".join(json.dumps({k: r[k] for k in ("id", "genre", "topic", "text")}, ensure_ascii=False) + "\n" for r in kept)
    data = gzip.compress(lines.encode("utf-8"), compresslevel=9, mtime=0)
    atomic_write_bytes(out, data)
    return hashlib.sha256(data).hexdigest(), len(ids) - len(kept)


def main(argv: Sequence[str] | None = None) -> int:
    from largefedbench.models.gguf import prepare_gguf_model
    from largefedbench.models.profiles import SMOLLM2_135M

    parser = argparse.ArgumentParser(prog="python -m largefedbench.writers.generic_corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write (appended to; resumes)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N texts (a trial)")
    parser.add_argument("--home", type=Path, default=None, help="LargeFedBench home of the converted model cache")
    parser.add_argument("--model", type=Path, default=None, help="an HF folder of the model instead of the packaged GGUF")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--batch-size", type=int, default=BATCH, help="texts per batch: the unit of resumption and of "
                        "the random stream, so keep it to resume a file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pack", type=Path, default=None, metavar="GZ", help="then write the finished texts as GZ")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = args.model or prepare_gguf_model(SMOLLM2_135M, root=args.home)[0]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).to(torch.device(args.device)).eval()
    start = time.perf_counter()
    rows = write_corpus(model, tokenizer, args.out, limit=args.limit, seed=args.seed, batch_size=args.batch_size)
    short = sum(1 for r in rows.values() if r.get("short"))
    print(f"{len(rows)} texts in {args.out} ({short} shorter than {MIN_WORDS} words); {time.perf_counter() - start:.0f} s")
    if args.pack is not None:
        digest, left_out = pack(rows, [i for i, _, _ in generic_items()[: args.limit]], args.pack)
        print(f"packed into {args.pack}: sha256 {digest} ({left_out} short texts left out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
