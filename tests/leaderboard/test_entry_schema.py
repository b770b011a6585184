"""The entry schema: version 3 with extra="forbid"; stored historic version-1 entries still load, migrate (to
version 2, which may lack calibration records) and validate (one ledger for all seeds, references called
eps0/epsinf)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from largefedbench.errors import InputError
from largefedbench.leaderboard.schema import (
    SCHEMA_VERSION,
    Entry,
    is_safe_id,
    migrate,
    parse_entry,
)
from largefedbench.leaderboard.validate import format_reports, validate_paths

HISTORIC = Path(__file__).parent / "data" / "v1" / "entries"
V1_FILES = sorted(HISTORIC.rglob("*.json"))


def test_there_are_stored_historic_entries():
    assert len(V1_FILES) >= 3
    assert all(json.loads(p.read_text())["schema_version"] == 1 for p in V1_FILES)


@pytest.mark.parametrize("path", V1_FILES, ids=[p.parent.name for p in V1_FILES])
def test_a_historic_v1_entry_migrates_to_the_current_schema(path):
    data = json.loads(path.read_text())
    before = copy.deepcopy(data)
    entry = parse_entry(data)
    assert data == before, "migrate must not change its input"
    assert entry.schema_version == 2 and SCHEMA_VERSION == 3  # migrated to the version before the calibration records
    n = len(entry.seeds)
    assert entry.privacy.ledgers == [data["privacy"]["ledger"]] * n
    assert entry.privacy.epsilon_per_seed == [data["privacy"]["epsilon"]] * n
    assert entry.metrics.reference_public.model_dump() == data["metrics"]["eps0"]
    assert entry.metrics.reference_non_private.model_dump() == data["metrics"]["epsinf"]
    assert Entry.model_validate(entry.model_dump(mode="json")) == entry  # the migrated entry round-trips


def test_historic_entries_pass_every_check():
    reports = validate_paths([HISTORIC])
    assert len(reports) == len(V1_FILES)
    assert all(r.valid for r in reports), format_reports(reports)
    assert {r.status for r in reports} == {"ranked", "unranked"}


def test_a_v1_entry_without_its_ledger_is_rejected():
    data = json.loads(V1_FILES[0].read_text())
    del data["privacy"]["ledger"]
    with pytest.raises(ValidationError, match="ledgers"):
        parse_entry(data)


@pytest.mark.parametrize("version", [0, 4, "2", None])
def test_unknown_versions_are_refused_with_what_to_do(version):
    with pytest.raises(InputError, match="upgrade largefedbench or re-run `lfb eval`"):
        migrate({"schema_version": version})


def test_unknown_fields_are_forbidden_at_every_level():
    data = migrate(json.loads(V1_FILES[0].read_text()))
    data["privacy"]["epsilon_claimed_by_me"] = 0.1
    with pytest.raises(ValidationError, match="privacy.epsilon_claimed_by_me"):
        Entry.model_validate(data)


@pytest.mark.parametrize("value, safe", [("dp-fedavg", True), ("popri--demo--tiny--eps1--ab12", True), ("a..b", False),
                                         ("../x", False), ("UPPER", False), ("", False), ("a/b", False),
                                         ("dp-fedavg\n", False), ("x\n\n", False), ("\nx", False)])
def test_safe_ids(value, safe):
    assert is_safe_id(value) is safe


@pytest.mark.parametrize("where", ["entry_id", "method.name", "dataset.snapshot"])
def test_an_id_ending_in_a_newline_is_refused_by_the_schema(where):
    data = migrate(json.loads(V1_FILES[0].read_text()))
    Entry.model_validate(data)
    section, _, key = where.rpartition(".")
    (data[section] if section else data)[key] += "\n"
    with pytest.raises(ValidationError, match="should match pattern"):
        Entry.model_validate(data)


def test_an_entry_records_its_selections_and_the_board_marks_private_ones():
    """The selection section (each seed's choices and what they were made on) validates; a record
    on other data than the section says, or a seed count that differs, is refused; entries without one read as
    having selected on the validation clients, unrecorded."""
    from types import SimpleNamespace

    from largefedbench.leaderboard.columns import COLUMNS

    data = migrate(json.loads(V1_FILES[0].read_text()))
    old = parse_entry(data)
    assert old.selection is None and old.select_on == "private" and old.selected_on_private is None
    n = len(old.seeds)
    epoch = {"by": "harness", "what": "downstream epoch", "metric": "top1", "chosen": 3, "candidates": 7}
    private = parse_entry({**data, "selection": {"on": "private", "held_out": "the validation clients' spans",
                                                 "per_seed": [[{**epoch, "on": "private"}]] * n}})
    assert private.selected_on_private is True and private.to_json()["selection"]["per_seed"][0][0]["chosen"] == 3
    public = parse_entry({**data, "selection": {"on": "public", "held_out": "a held-out public slice",
                                                "per_seed": [[{**epoch, "on": "public"}]] * n}})
    assert public.selected_on_private is False and public.select_on == "public"
    none = parse_entry({**data, "selection": {"on": "private", "held_out": "validation", "per_seed": [[]] * n}})
    assert none.selected_on_private is False
    with pytest.raises(ValidationError, match="made on public data in an entry that selects on private"):
        parse_entry({**data, "selection": {"on": "private", "held_out": "validation",
                                           "per_seed": [[{**epoch, "on": "public"}]] * n}})
    with pytest.raises(ValidationError, match="seeds' choices"):
        parse_entry({**data, "selection": {"on": "private", "held_out": "validation", "per_seed": [[]] * (n + 1)}})
    column = next(c for c in COLUMNS if c.key == "selected_on")  # the board's "Selected on" column reads the entry
    texts = [column.text(SimpleNamespace(entry=e)) for e in (old, private, public, none)]
    assert texts == ["private?", "private", "public", "–"]
