"""Natural prose for the demo's records, written by a real LLM (the templated demo is out of an LLM's reach).

The templated demo is a closed world: a downstream model pretrained on its public split scores top-1 0.73 on its
private text but 0.01 on real bioRxiv abstracts and 0.03 on what SmolLM2 writes, so no synthetic-data method with a
real LLM can beat the public model on it. This module writes, for every demo record, a continuation by a causal LM
of a prompt made from the record's metadata only (kind, category or chamber, date, title, a speech's opening line),
so the text is natural prose on the record's topic and the topics still drift as the demo's do: private-window
topics never appear in the public split.

The texts are written once, appended to a JSONL file batch by batch (a killed run resumes at the first unfinished
batch, with the same random stream), and shipped with the package; building the demo never runs an LLM.

    python -m largefedbench.writers.demo_prose --out demo-prose.jsonl [--limit N] [--home DIR] [--pack FILE.jsonl.gz]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from largefedbench.data.records import Record
from largefedbench.errors import InputError
from largefedbench.io import atomic_write_bytes

WRITER_VERSION = "1"
BATCH = 32  # records per generation batch: the unit of resumption and of the random stream
MAX_NEW_TOKENS = 96
TEMPERATURE, TOP_P = 0.8, 0.95
MIN_WORDS = 12  # shorter continuations are kept but flagged in the file (``short``), never silently dropped

_HEADERS = {
    "USA": "Congressional Record, {chamber}, {date:%B} {date.day}, {date.year}.\n{speaker}. {opening}",
    "GBR": "Hansard, {chamber}, {date.day} {date:%B} {date.year}.\n{speaker}: {opening}",
    "CAN": "House of Commons Debates (Canada), {date:%B} {date.day}, {date.year}.\n{speaker}: {opening}",
}


def opening_sentence(text: str) -> str:
    """The first sentence of a templated speech (its greeting and topic), the fixed start of the written one."""
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def writer_prompt(record: Record) -> str:
    """The prompt a record's text continues: metadata only, never another record's text."""
    date = dt.date.fromisoformat(record.date)
    if record.source.endswith("biorxiv"):
        return f"bioRxiv preprint ({record.category}), {date.year}.\nTitle: {record.title}\nAbstract:"
    header = _HEADERS.get(record.country)
    if header is None:
        raise InputError(f"record {record.id}: no speech header for country {record.country!r}")
    return header.format(chamber=record.chamber, date=date, speaker=record.speaker, opening=opening_sentence(record.text))


def written_text(record: Record, continuation: str) -> str:
    """The record's new text: a speech keeps its opening line; the continuation is cut after its last full sentence."""
    body = " ".join(continuation.split())
    end = max(body.rfind(". "), body.rfind("? "), body.rfind("! "))
    if body[-1:] in ".?!":
        end = len(body) - 1
    body = body[: end + 1] if end > 0 else body
    if record.source.endswith("biorxiv"):
        return body
    return f"{opening_sentence(record.text)} {body}".strip()


def read_done(path: Path) -> dict[str, dict]:
    """The rows already written (a torn last line from a kill is ignored)."""
    rows: dict[str, dict] = {}
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[row["id"]] = row
    return rows


def write_texts(records: Sequence[Record], model, tokenizer, out: Path, *, seed: int = 0, batch_size: int = BATCH,
                progress: bool = True) -> dict[str, dict]:
    """Write every record's text to ``out`` (JSONL, one row per record), resuming where a previous run stopped.

    Batches are fixed slices of ``records`` with seed ``seed_for(seed, batch index)``, so a resumed run writes what
    an uninterrupted one would. Returns all rows by record id."""
    by_id = {r.id: r for r in records}

    def row(record_id: str, continuation: str) -> dict:
        text = written_text(by_id[record_id], continuation)
        return {"text": text, "writer_version": WRITER_VERSION, **({"short": True} if len(text.split()) < MIN_WORDS else {})}

    return write_batches([(r.id, writer_prompt(r)) for r in records], row, model, tokenizer, out, seed=seed,
                         batch_size=batch_size, max_new_tokens=MAX_NEW_TOKENS, progress=progress, desc="writing demo prose")


def write_batches(items: Sequence[tuple[str, str]], make_row: Callable[[str, str], dict], model, tokenizer, out: Path, *,
                  seed: int, batch_size: int, max_new_tokens: int, temperature: float = TEMPERATURE, top_p: float = TOP_P,
                  progress: bool = True, desc: str = "writing") -> dict[str, dict]:
    """Continue each ``(id, prompt)`` of ``items`` once with the LLM and append ``{"id", "batch", **make_row(id,
    continuation)}`` to the JSONL file ``out``, resuming where a previous run stopped.

    Batches are fixed slices of ``items`` sampled with seed ``seed_for(seed, batch index)``, so a resumed run writes
    what an uninterrupted one would; a batch is written with one write and fsynced, so a kill loses at most it.
    Returns every row of the file by id."""
    from tqdm.auto import tqdm

    from largefedbench.synthetic.generation import generate_flat, seed_for

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = read_done(out)
    batches = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    bar = tqdm(total=len(items), desc=desc, disable=not progress, initial=sum(1 for i, _ in items if i in done))
    torn = False
    if out.is_file() and out.stat().st_size:
        with out.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
    with out.open("a", encoding="utf-8") as fh:
        if torn:
            fh.write("\n")  # end a line a kill tore, so the next row starts a line of its own
        for index, batch in enumerate(batches):
            new = sum(1 for item_id, _ in batch if item_id not in done)
            if not new:
                continue
            continuations = generate_flat(model, tokenizer, [prompt for _, prompt in batch], max_new_tokens=max_new_tokens,
                                          temperature=temperature, top_p=top_p, batch_size=batch_size,
                                          seed=seed_for(seed, index), stop=())
            lines = []
            for (item_id, _), continuation in zip(batch, continuations):
                row = {"id": item_id, "batch": index, **make_row(item_id, continuation)}
                done[item_id] = row
                lines.append(json.dumps(row, ensure_ascii=False))
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            bar.update(new)
    bar.close()
    return done


def pack(rows: dict[str, dict], records: Sequence[Record], out: Path) -> str:
    """Write the texts of ``records`` (in their order: id and text only) as a byte-reproducible gzipped JSONL (no
    timestamp in the header); returns its sha256. Every record must have a text."""
    missing = [r.id for r in records if r.id not in rows]
    if missing:
        raise InputError(f"{len(missing)} of {len(records)} records have no text yet (first: {missing[0]}); run the "
                         "writer again, it resumes")
    lines = "".join(json.dumps({"id": r.id, "text": rows[r.id]["text"]}, ensure_ascii=False) + "\n" for r in records)
    data = gzip.compress(lines.encode("utf-8"), compresslevel=9, mtime=0)
    atomic_write_bytes(out, data)
    return hashlib.sha256(data).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    from largefedbench.data.demo import demo_records
    from largefedbench.models.gguf import prepare_gguf_model
    from largefedbench.models.profiles import SMOLLM2_135M

    parser = argparse.ArgumentParser(prog="python -m largefedbench.writers.demo_prose", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write (appended to; resumes)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N records (a trial)")
    parser.add_argument("--home", type=Path, default=None, help="LargeFedBench home of the converted model cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pack", type=Path, default=None, metavar="GZ",
                        help="then write the finished texts as the shipped gzipped JSONL GZ (needs every record)")
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, _hit, _info = prepare_gguf_model(SMOLLM2_135M, root=args.home)
    tokenizer = AutoTokenizer.from_pretrained(folder)  # generate_ids pads on the left itself
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    records = demo_records()[: args.limit]
    rows = write_texts(records, model, tokenizer, args.out, seed=args.seed)
    short = sum(1 for r in rows.values() if r.get("short"))
    print(f"{len(rows)} texts in {args.out} ({short} shorter than {MIN_WORDS} words)")
    if args.pack is not None:
        print(f"packed into {args.pack}: sha256 {pack(rows, records, args.pack)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
