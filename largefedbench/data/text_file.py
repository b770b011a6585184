"""Synthetic texts made by another tool, read from a file: a CSV with a ``text`` column (what DPSDA's text examples
write) or JSON Lines with a ``text`` field per line (a bare JSON string per line is read as the text)."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from largefedbench.data.dpsda import TEXT, iteration_file_problem
from largefedbench.errors import InputError

__all__ = ["TextFile", "read_text_file"]

SUFFIXES = (".csv", ".jsonl")


@dataclass(frozen=True)
class TextFile:
    """The non-empty texts of a file, in file order, with the file's name and content hash."""

    name: str
    sha256: str
    texts: list[str]
    skipped: int  # empty or whitespace-only texts left out
    columns: tuple[str, ...] = ()  # a CSV's header (the other columns are not read)


def read_text_file(path: str | Path, *, what: str = "--synthetic") -> TextFile:
    """The texts of ``path`` (``.csv`` with a ``text`` column, or ``.jsonl``); every problem is an
    :class:`InputError` that names the file, the line and what to do."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputError(f"{what} {path}: no such file; give a .csv (a `text` column, as DPSDA writes) or a .jsonl "
                         "(one {\"text\": ...} object per line)")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"{what} {path}: unknown format {suffix or '(no suffix)'!r}; use .csv (a `text` column) or "
                         ".jsonl (one {\"text\": ...} object per line)")
    raw = path.read_bytes()
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path}: not UTF-8 text ({exc}); save the file as UTF-8") from None
    columns: tuple[str, ...] = ()
    if suffix == ".csv":
        columns, values = _csv_texts(content, path, what)
    else:
        values = _jsonl_texts(content, path, what)
    texts = [t for t in values if t.strip()]
    if not texts:
        raise InputError(f"{what} {path}: holds no non-empty text ({len(values)} rows read)")
    return TextFile(name=path.name, sha256=hashlib.sha256(raw).hexdigest(), texts=texts, skipped=len(values) - len(texts),
                    columns=columns)


def _csv_texts(content: str, path: Path, what: str) -> tuple[tuple[str, ...], list[str]]:
    """The CSV's header and its `text` column."""
    reader = csv.DictReader(content.splitlines(keepends=True))
    try:
        columns = tuple(reader.fieldnames or ())
        if "text" not in columns:
            problem = iteration_file_problem(path.name, columns) if TEXT in columns else None
            raise InputError(f"{what} {path}: the CSV has no `text` column (columns: {', '.join(columns) or 'none'}); "
                             + (problem if problem else "name the column of texts `text`"))
        return columns, [row["text"] or "" for row in reader]
    except csv.Error as exc:
        if "field limit" in str(exc):  # csv's own cap on one field
            raise InputError(f"{what} {path}: line {reader.reader.line_num} holds a text over the {csv.field_size_limit():,} "
                             "characters a text may have; split it into texts of sample size") from None
        raise InputError(f"{what} {path}: not a readable CSV ({exc})") from None


def _jsonl_texts(content: str, path: Path, what: str) -> list[str]:
    texts = []
    for number, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{what} {path}: line {number} is not JSON ({exc.msg}); write one JSON object per line") from None
        if isinstance(value, dict):
            value = value.get("text")
        if not isinstance(value, str):
            raise InputError(f"{what} {path}: line {number} has no string `text` field; write "
                             "{\"text\": \"...\"} per line")
        if len(value) > csv.field_size_limit():  # the cap a CSV field has, so both formats refuse alike
            raise InputError(f"{what} {path}: line {number} holds a text of {len(value):,} characters, over the "
                             f"{csv.field_size_limit():,} a text may have; split it into texts of sample size")
        texts.append(value)
    return texts
