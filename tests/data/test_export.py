"""`lfb data export`: a snapshot for Flower (one row per sample, partitioned by client_id) and for DPSDA (text CSVs).

flwr-datasets itself is not installed: its release pins datasets < 5 and huggingface-hub < 2, below this package's
(datasets 5.2, huggingface-hub 2.4). The test partitions the export the way its NaturalIdPartitioner is documented
to (one partition per unique value of ``partition_by``, the dataset filtered to it)."""

from __future__ import annotations

import csv

import pytest

from largefedbench.cli import main
from largefedbench.data.export import export_snapshot
from largefedbench.errors import InputError


def test_a_flower_export_partitions_into_the_snapshots_clients(tiny, tmp_path):
    from datasets import load_from_disk

    fd, _bundle, _root = tiny
    splits = export_snapshot(fd, "flower", tmp_path / "flower")
    assert splits[:3] == ["train", "validation", "test"]
    data = load_from_disk(str(tmp_path / "flower"))
    train = data["train"]
    assert set(train.column_names) == {"client_id", "span", "text"} and len(train) == int(fd.train.span_counts().sum())
    ids = train.unique("client_id")  # NaturalIdPartitioner(partition_by="client_id"): one partition per unique id
    assert sorted(ids) == sorted(fd.train.ids)
    for cid in ids[:5]:
        partition = train.filter(lambda row, cid=cid: row["client_id"] == cid)
        assert partition["text"] == fd.train.spans(cid) and partition["span"] == list(range(len(partition)))
    with pytest.raises(InputError, match="already exists"):
        export_snapshot(fd, "flower", tmp_path / "flower")


def test_a_dpsda_export_has_the_text_column_private_evolution_reads(tiny, tmp_path, capsys):
    fd, _bundle, root = tiny
    assert main(["data", "export", str(fd.path), "--format", "dpsda", "--out", str(tmp_path / "pe"),
                 "--home", str(root)]) == 0
    assert "written as dpsda" in capsys.readouterr().out
    for name, split in (("private.csv", "train"), ("public.csv", "public")):
        with (tmp_path / "pe" / name).open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
        assert reader.fieldnames == ["text", "PE.CLIENT_ID"]  # the client column DPSDA's client-level voting reads
        assert [r["text"] for r in rows] == fd[split].all_spans()
        owners = [cid for cid in fd[split].table["id"] for _ in fd[split].spans(cid)]
        assert [r["PE.CLIENT_ID"] for r in rows] == owners
    with pytest.raises(SystemExit) as exit_:  # argparse names the choices
        main(["data", "export", str(fd.path), "--format", "parquet", "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2 and "choose from 'flower', 'dpsda'" in capsys.readouterr().err
