"""`lfb eval --synthetic FILE`: synthetic text made by another tool, scored by the same pipeline, in an entry whose
(ε, δ) is declared; the validator accepts the claim only as a declared one and the board shows it apart."""

from __future__ import annotations

import copy
import json

import pytest

from largefedbench.cli import main
from largefedbench.data.text_file import read_text_file
from largefedbench.errors import InputError, PrivacyError
from largefedbench.leaderboard.board import build_board
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.markdown import render_markdown
from largefedbench.leaderboard.validate import format_reports, validate_entry_file
from largefedbench.run.eval import EvalRequest, prepare, run_eval

from .entry_variants import save

TEXTS = [f"the committee met on day {i} to discuss the spring garden budget and the new library hours" for i in range(24)]


def _csv(path, texts=TEXTS, column="text"):
    lines = [f"{column},label"] + [f'"{t}",x' for t in texts]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- reading the file ---------------------------------------------------------------------------------------------
def test_a_dpsda_style_csv_and_a_jsonl_read_to_the_same_texts(tmp_path):
    csv_file = _csv(tmp_path / "pe.csv", TEXTS + ["  "])
    jsonl = tmp_path / "pe.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS) + json.dumps("a bare string") + "\n")
    a, b = read_text_file(csv_file), read_text_file(jsonl)
    assert a.texts == TEXTS and a.skipped == 1 and len(a.sha256) == 64
    assert b.texts == TEXTS + ["a bare string"] and b.skipped == 0


@pytest.mark.parametrize("name, content, message", [
    ("x.csv", "words,label\n\"a\",b\n", "no `text` column"),
    ("x.jsonl", '{"text": "fine"}\nnot json\n', "line 2 is not JSON"),
    ("x.jsonl", '{"txt": "a"}\n', "line 1 has no string `text` field"),
    ("x.jsonl", '{"text": "   "}\n', "holds no non-empty text"),
    ("x.txt", "a\n", "unknown format '.txt'"),
])
def test_a_bad_file_is_an_input_error_naming_what_is_wrong(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=message):
        read_text_file(tmp_path / name)


def test_a_missing_file_says_which_formats_are_read(tmp_path):
    with pytest.raises(InputError, match="no such file.*text` column"):
        read_text_file(tmp_path / "absent.csv")


# -- the request ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, error, message", [
    ({"made_with": None}, InputError, "needs --made-with"),
    ({"epsilon": None}, InputError, "needs --epsilon and --delta"),
    ({"overrides": {"rounds": "2"}}, InputError, "drop --set"),
    ({"noise_free": True}, InputError, "drop one"),
    ({"epsilon": -1.0}, PrivacyError, "finite number >= 0"),
    ({"method": "popri"}, InputError, "registered method's name"),
    ({"method": "Bad Name"}, InputError, "--name 'Bad Name'"),
])
def test_a_declared_request_is_checked_before_any_work(tiny, tmp_path, extra, error, message):
    _fd, _bundle, root = tiny
    request = dict(method=None, synthetic=_csv(tmp_path / "pe.csv"), made_with="DPSDA PE, test", epsilon=4.0,
                   delta=1e-4, seeds=(0,), out=tmp_path / "board", home=root, progress=False)
    with pytest.raises(error, match=message):
        prepare(EvalRequest(**{**request, **extra}))


def test_the_cli_takes_either_a_method_or_a_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--method", "public", "--synthetic", str(tmp_path / "a.csv")])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["eval", "--method", "public", "--made-with", "x"]) == 2
    assert "--made-with and --name describe a --synthetic file" in capsys.readouterr().err


# -- the entry --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def declared(tiny, tmp_path_factory):
    _fd, _bundle, root = tiny
    folder = tmp_path_factory.mktemp("declared")
    request = EvalRequest(method=None, synthetic=_csv(folder / "dpsda-pe.csv"), made_with="DPSDA PE text example (test)",
                          epsilon=4.0, delta=1e-4, seeds=(0,), out=folder / "board", home=root, progress=False)
    return run_eval(request, log=lambda m: None)


def test_the_declared_entry_states_its_claim_and_scores_the_texts(declared):
    e = declared.entry
    assert e.method.name == "dpsda-pe" and e.method.source == "declared" and e.method.target == "declared:dpsda-pe.csv"
    assert e.privacy.accountant == "declared" and e.privacy.epsilon == 4.0 and e.privacy.target_epsilon == 4.0
    assert all(not ledger.get("events") for ledger in e.privacy.ledgers)
    assert e.declared.made_with == "DPSDA PE text example (test)" and e.declared.n_texts == len(TEXTS)
    assert e.declared.sha256 == read_text_file(declared.path.parents[4] / "dpsda-pe.csv").sha256
    assert e.metrics.reference_generator_only is None  # our generator's no-signal row is not theirs
    assert e.metrics.fid is not None and 0.0 <= e.metrics.next_token_accuracy.top1.mean <= 1.0
    assert "--synthetic dpsda-pe.csv" in e.config.command and "--made-with" in e.config.command
    assert "/" not in e.config.command.split("--synthetic ")[1].split()[0]  # the file by its name only


def test_the_declared_entry_is_valid_and_shown_apart(declared):
    report = validate_entry_file(EntryFile(declared.path, board_of(declared.path)))
    assert report.valid and report.status == "declared", format_reports([report])
    assert not [f for f in report.findings if f.check == "seeds"]  # never ranked: no note asking for more seeds
    board = build_board([report])
    assert [r.status for r in board.rows] == ["declared"] and board.rows[0].rank is None
    assert "1 declared" in board.counts_text()
    page = render_markdown(board, {})
    assert "### Declared privacy, never ranked with computed claims" in page
    assert "declared (ε, δ); made with DPSDA PE text example (test)" in page


@pytest.mark.parametrize("forge, message", [
    (lambda d: d.pop("declared"), "is 'declared' but the entry has no declared section"),
    (lambda d: d["privacy"].update(accountant="rdp"), "on a declared entry"),
    (lambda d: d["privacy"].update(epsilon=1.0, epsilon_per_seed=[1.0]), "differs from the declared"),
    (lambda d: d["privacy"]["ledgers"][0].setdefault("events", []).append({"kind": "gaussian"}), "records releases"),
])
def test_a_forged_declared_entry_is_invalid(declared, tmp_path, forge, message):
    data = copy.deepcopy(declared.entry.to_json())
    forge(data)
    path = save(tmp_path / "board", data, artifacts_from=declared.path.parent)
    report = validate_entry_file(EntryFile(path, board_of(path)))
    assert not report.valid and any(message in f.message for f in report.errors), format_reports([report])


def test_a_default_name_that_is_a_method_name_is_kept_apart(tiny, tmp_path):
    _fd, _bundle, root = tiny
    prep = prepare(EvalRequest(method=None, synthetic=_csv(tmp_path / "PE.csv"), made_with="DPSDA", epsilon=4.0,
                               delta=1e-4, seeds=(0,), out=tmp_path / "board", home=root, progress=False))
    assert prep.method.name == "pe-declared" and prep.entry_path.parent.name == "pe-declared"


def test_the_declared_command_names_the_file_not_its_folder(tmp_path):
    from types import SimpleNamespace

    from largefedbench.run.command import command_for

    request = SimpleNamespace(select_on="private", synthetic=tmp_path / "deep" / "pe.csv", made_with="DPSDA PE", dataset=str(tmp_path / "snap"),
                              seeds=(0, 1, 2))
    prep = SimpleNamespace(request=request, declared=True, method=SimpleNamespace(name="pe-declared"),
                           fd=SimpleNamespace(manifest={"name": "snap-x"}), profile=SimpleNamespace(name="cpu", public="generic"),
                           budget=SimpleNamespace(epsilon=4.0, delta=3e-6), public_spec="generic")
    command = command_for(prep)
    assert str(tmp_path) not in command
    assert command == ("lfb eval --synthetic pe.csv --name pe-declared --made-with 'DPSDA PE' --dataset snap-x "
                       "--profile cpu --seeds 0,1,2 --epsilon 4 --delta 3e-06")
