"""`lfb eval --synthetic FILE` refuses at read time what scoring cannot use (fewer texts than FID needs, a text over
the size cap, in CSV and JSON Lines alike), before any run folder exists, and warns about a DPSDA population file."""

from __future__ import annotations

import csv
import json
import logging

import pytest

from largefedbench.cli import main
from largefedbench.errors import InputError
from largefedbench.run.declared import declared_method

TEXTS = ["the committee met to discuss the spring garden budget", "the library will open later on sundays"]


def _csv(path, texts, header="text"):
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header.split(","))
        writer.writerows([[t, *([""] * header.count(","))] for t in texts])
    return path


def _eval(path, board):
    return main(["eval", "--synthetic", str(path), "--made-with", "a test", "--epsilon", "4", "--delta", "1e-5",
                 "--out", str(board), "--quiet"])


@pytest.mark.parametrize("name, message", [
    ("one.csv", "holds 1 non-empty text; scoring needs at least 2"),
    ("one.jsonl", "holds 1 non-empty text; scoring needs at least 2"),
    ("big.csv", f"line 2 holds a text over the {csv.field_size_limit():,} characters"),
    ("big.jsonl", f"line 1 holds a text of {csv.field_size_limit() + 1:,} characters, over the "),
])
def test_a_file_scoring_cannot_use_is_refused_before_any_work(lfb_home, tmp_path, capsys, name, message):
    path = tmp_path / name
    texts = ["x" * (csv.field_size_limit() + 1), *TEXTS] if name.startswith("big") else TEXTS[:1]
    if name.endswith(".csv"):
        _csv(path, texts)
    else:
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    board = tmp_path / "board"
    assert _eval(path, board) == 2
    err = capsys.readouterr().err
    assert f"--synthetic {path}: " in err and message in err and "Traceback" not in err
    assert not board.exists()  # no run folder, no entry


def test_a_dpsda_population_file_is_read_with_a_warning_saying_how_to_filter_it(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="largefedbench.run.declared")
    declared_method(_csv(tmp_path / "pe.csv", TEXTS), label="my-set", made_with="a test")
    assert not caplog.records  # a plain text CSV
    iteration = _csv(tmp_path / "000000010.csv", TEXTS)  # as DPSDA's SaveTextToCSV names the iteration's file
    assert declared_method(iteration, label="my-set", made_with="a test").file.texts == TEXTS
    (record,) = caplog.records
    assert "000000010.csv" in record.message and "SaveTextToCSV" in record.message
    assert "selected samples and their variations" in record.message and "PE.VARIATION_API_FOLD_ID is -1" in record.message
    caplog.clear()
    frame = _csv(tmp_path / "frame.csv", TEXTS, header="text,PE.LABEL_ID,PE.VARIATION_API_FOLD_ID")
    declared_method(frame, label="my-set", made_with="a test")
    (record,) = caplog.records
    assert "DPSDA's internal columns (PE.LABEL_ID, PE.VARIATION_API_FOLD_ID)" in record.message
    with pytest.raises(InputError, match=r"no `text` column .*PE\.TEXT.*keep the rows whose PE\.VARIATION_API_FOLD_ID "
                                         r"is -1 .* write their texts as a `text` column"):
        declared_method(_csv(tmp_path / "df.csv", TEXTS, header="PE.TEXT,PE.VARIATION_API_FOLD_ID"), label="my-set",
                        made_with="a test")
