"""Names and ids end at the end of the string: a trailing newline is not accepted (``$`` would match before it)."""

import pytest

from largefedbench.data.releases import check_release_name
from largefedbench.data.snapshot import check_snapshot_name
from largefedbench.errors import InputError
from largefedbench.run.declared import LABEL, declared_method


@pytest.mark.parametrize("check, good", [(check_release_name, "r9"), (check_snapshot_name, "demo-x")])
def test_a_trailing_newline_is_refused(check, good):
    check(good)
    for bad in (good + "\n", good + "\n\n", "\n" + good):
        with pytest.raises(InputError):
            check(bad)


def test_declared_sets_refuse_a_label_with_a_newline_and_a_single_text(tmp_path):
    assert LABEL.match("my-set") and not LABEL.match("my-set\n")
    one = tmp_path / "one.jsonl"
    one.write_text('{"text": "only one text here"}\n')
    with pytest.raises(InputError, match="at least 2"):
        declared_method(one, label="one", made_with="a test")
    two = tmp_path / "two.jsonl"
    two.write_text('{"text": "a first text"}\n{"text": "a second text"}\n')
    with pytest.raises(InputError, match="--name"):
        declared_method(two, label="two\n", made_with="a test")
    assert declared_method(two, label="two", made_with="a test").label == "two"


def test_a_jsonl_text_over_the_csv_field_cap_is_refused(tmp_path):
    import csv
    import json

    from largefedbench.data.text_file import read_text_file

    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"text": "x" * (csv.field_size_limit() + 1)}) + "\n")
    with pytest.raises(InputError, match="characters"):
        read_text_file(big)


def test_the_cli_refuses_a_release_name_with_a_newline_before_any_work(lfb_home, capsys):
    from largefedbench.cli import main

    assert main(["release", "r9\n", "--snapshots", "demo"]) == 2  # refused before the snapshot is looked up
    err = capsys.readouterr().err
    assert "release name 'r9\\n'" in err and "Traceback" not in err
    assert not (lfb_home / "releases").exists()


def test_the_cli_refuses_a_declared_name_with_a_newline_before_any_work(lfb_home, tmp_path, capsys):
    from largefedbench.cli import main

    good = tmp_path / "good.csv"
    good.write_text('text\n"a first text"\n"a second text"\n')
    board = tmp_path / "board"
    code = main(["eval", "--synthetic", str(good), "--made-with", "a test", "--name", "evil\n", "--epsilon", "4",
                 "--delta", "1e-5", "--out", str(board), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--name 'evil\\n'" in err and "Traceback" not in err
    assert not board.exists()  # no run folder, no entry


def test_a_granule_id_with_a_trailing_newline_is_not_a_granule_id():
    from largefedbench.scrapers.us_congress import granule_chamber

    good = {"granuleId": "CREC-2024-09-10-pt1-PgS6001"}
    assert granule_chamber(good) == ("Senate", None)
    assert granule_chamber({"granuleId": good["granuleId"] + "\n"}) == (None, "unknown_granule_class")
