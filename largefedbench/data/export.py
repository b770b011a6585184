"""`lfb data export`: a snapshot in the formats other tools read.

- ``flower``: a ``datasets.DatasetDict`` saved with ``save_to_disk`` (read it with ``datasets.load_from_disk``): one
  row per sample (a 64-token span) with ``client_id``, ``span`` (its index within the client) and ``text``, one
  split per snapshot split. flwr-datasets' ``NaturalIdPartitioner(partition_by="client_id")`` makes one partition
  per client, as the snapshot has them.
- ``dpsda``: ``private.csv`` (the train split's spans) and ``public.csv`` (the public split's) with the ``text``
  column that Microsoft's Private Evolution library reads (``pe.data.TextCSV(csv_path, text_column="text")``) and
  each span's client in ``PE.CLIENT_ID``, the column its client-level voting reads (not a label: keep
  ``label_columns`` empty). Score what PE made there with ``lfb eval`` here.

The folder is built beside ``out`` and moved into place only when complete; an existing ``out`` is never touched.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

from largefedbench.data import dpsda
from largefedbench.errors import InputError
from largefedbench.io import publish_dir

FORMATS = ("flower", "dpsda")


def _rows(split: Any) -> dict[str, list[Any]]:
    ids, spans, texts = [], [], []
    for cid, client_spans in zip(split.table["id"], split.table["spans"]):
        for k, text in enumerate(client_spans):
            ids.append(cid)
            spans.append(k)
            texts.append(text)
    return {"client_id": ids, "span": spans, "text": texts}


def _write_flower(fd: Any, splits: list[str], folder: Path) -> None:
    import datasets

    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        datasets.DatasetDict({name: datasets.Dataset.from_dict(_rows(fd[name])) for name in splits}).save_to_disk(
            str(folder))
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()


def _write_csv(path: Path, rows: dict[str, list[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", dpsda.CLIENT_ID])
        writer.writerows(zip(rows["text"], rows["client_id"]))


def _write_dpsda(fd: Any, folder: Path) -> None:
    folder.mkdir(parents=True)
    _write_csv(folder / "private.csv", _rows(fd["train"]))
    _write_csv(folder / "public.csv", _rows(fd["public"]))


def export_snapshot(fd: Any, fmt: str, out: Path) -> list[str]:
    """Write snapshot ``fd`` as ``fmt`` (see the module docstring) into the new folder ``out``; the splits written."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"--out {out} already exists and is not an empty folder; give a new folder")
    splits = [name for name in ("train", "validation", "test", "public") if len(fd[name])]
    if fmt == "dpsda" and not len(fd["public"]):
        raise InputError(f"snapshot {fd.name} has no public split to write public.csv from; build it with "
                         "--public-months >= 1")
    tmp = out.with_name(f".{out.name}.partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    if fmt == "flower":
        _write_flower(fd, splits, tmp)
    else:
        _write_dpsda(fd, tmp)
    if out.exists():
        out.rmdir()  # empty, checked above
    publish_dir(tmp, out)
    return splits if fmt == "flower" else ["train", "public"]
