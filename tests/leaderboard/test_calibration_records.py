"""An entry records its noise calibrations, so a consistent forgery of σ (every σ scaled, ε
recomputed from the scaled ledger) no longer validates: the σ is not what calibrating the entry's own plan for its
target gives."""

from __future__ import annotations

import copy
import re

import pytest

from largefedbench.leaderboard.check_privacy import sigma_checked_only_by_rerun
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.schema import SCHEMA_VERSION
from largefedbench.leaderboard.validate import format_reports, validate_entry_file
from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, PrivacyLedger

from .entry_variants import save
from .test_forged_entries import FEDAVG, _load, _report


def _validate(tmp_path, data, source):
    path = save(tmp_path / "board", data, artifacts_from=source.parent)
    return validate_entry_file(EntryFile(path, board_of(path)))


def _scale_sigma(data: dict, factor: float, *, records: bool) -> dict:
    """Every σ of the ledgers (and, with ``records``, of the calibration records) × factor; ε recomputed."""
    data = copy.deepcopy(data)
    p = data["privacy"]
    for ledger in p["ledgers"]:
        for event in ledger["events"]:
            event["noise_multiplier"] *= factor
    for seed in p["calibrations"] if records else []:
        for rec in seed:
            rec["sigma"] *= factor
            for event in rec["events"]:
                event["noise_multiplier"] *= factor
    eps = [PrivacyLedger.from_dict(ledger).epsilon(p["delta"], p["accountant"]) for ledger in p["ledgers"]]
    p["epsilon_per_seed"], p["epsilon"] = eps, max(eps)
    return data


def test_a_budget_records_each_calibration_with_its_planned_events():
    budget = PrivacyBudget(1.0, 1e-5)
    sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=0.01, steps=50), n_clients=10_000)
    (rec,) = budget.calibrations
    assert rec["sigma"] == sigma and rec["target_epsilon"] == 1.0 and rec["delta"] == 1e-5 and rec["accountant"] == "rdp"
    assert [e["noise_multiplier"] for e in rec["events"]] == [sigma] and rec["events"][0]["steps"] == 50


def test_a_fresh_entry_carries_its_calibrations_and_validates(produced):
    e = produced.entry
    (records,) = e.privacy.calibrations
    assert records and all(r["target_epsilon"] == e.privacy.target_epsilon for r in records)
    report = validate_entry_file(EntryFile(produced.path, board_of(produced.path)))
    assert report.valid and not [f for f in report.findings if f.check == "privacy-calibration"], format_reports([report])


def test_a_consistent_sigma_forgery_is_rejected(produced, tmp_path):
    forged = _scale_sigma(produced.entry.to_json(), 1.5, records=True)
    assert forged["privacy"]["epsilon"] < produced.entry.privacy.epsilon  # a smaller, self-consistent ε claim
    report = _validate(tmp_path, forged, produced.path)
    assert not report.valid
    assert any(f.check == "privacy-calibration" and "is not the calibration of this entry's plan and target" in f.message
               for f in report.errors), format_reports([report])


def test_a_ledger_sigma_no_calibration_planned_is_rejected(produced, tmp_path):
    report = _validate(tmp_path, _scale_sigma(produced.entry.to_json(), 1.5, records=False), produced.path)
    assert any(f.check == "privacy-calibration" and "which no calibration of seed 0 planned" in f.message
               for f in report.errors), format_reports([report])


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["calibrations"][0][0].update(target_epsilon=8.0), "was made for ε = 8"),
    (lambda p: p["calibrations"].append([]), "lists for 1 seeds"),
])
def test_edited_calibration_records_are_rejected(produced, tmp_path, edit, message):
    data = copy.deepcopy(produced.entry.to_json())
    edit(data["privacy"])
    report = _validate(tmp_path, data, produced.path)
    assert any(message in f.message for f in report.errors), format_reports([report])


def test_an_entry_made_before_the_records_is_valid_with_a_note(tmp_path):
    data = _load(FEDAVG)
    assert data["schema_version"] == 2 and "calibrations" not in data["privacy"]
    report = _report(tmp_path, data)
    assert report.valid and any(f.check == "privacy-calibration" and "records no noise calibration" in f.message
                                for f in report.notes)
    assert sigma_checked_only_by_rerun(report.entry)


def test_a_current_entry_with_its_calibrations_deleted_is_rejected(produced, tmp_path):
    """The σ forgery with the records deleted: a version-3 entry must carry them."""
    forged = _scale_sigma(produced.entry.to_json(), 1.5, records=False)
    assert forged["schema_version"] == SCHEMA_VERSION == 3
    del forged["privacy"]["calibrations"]
    report = _validate(tmp_path, forged, produced.path)
    assert not report.valid and any(f.check == "privacy-calibration" and "carries no noise calibrations" in f.message
                                    for f in report.errors), format_reports([report])
    forged["schema_version"] = 2  # claiming the older schema does not hide it: the board marks its σ
    old = _validate(tmp_path / "old", forged, produced.path)
    assert old.valid and sigma_checked_only_by_rerun(old.entry)
    assert not sigma_checked_only_by_rerun(produced.entry)


def test_the_board_marks_a_sigma_only_a_rerun_can_check(produced, tmp_path):
    from largefedbench.leaderboard.columns import SIGMA_BY_RERUN_NOTE
    from largefedbench.leaderboard.render import render_board

    from .entry_variants import relabel, with_noise

    board = tmp_path / "board"
    save(board, produced.entry.to_json(), artifacts_from=produced.path.parent)
    older = relabel(with_noise(produced.entry.to_json(), 2.0), entry_id="dp-unigram-example--demo--tiny--older")
    save(board, older, artifacts_from=produced.path.parent)
    result = render_board(board)
    assert not result.invalid, format_reports(result.invalid)
    rows = {m[1]: line for line in (board / "README.md").read_text().splitlines()
            if (m := re.search(r"`([^`]+)` \[json\]", line))}
    assert " ‡ |" in rows["dp-unigram-example--demo--tiny--older"]
    assert " ‡ |" not in rows[produced.entry.entry_id]
    assert SIGMA_BY_RERUN_NOTE.split(":")[0] in (board / "README.md").read_text()
    assert "σ checked only by re-running" in (board / "index.html").read_text()


def test_an_entry_of_seeds_stored_before_the_records_is_written_as_version_2():
    """A resumed run whose finished seeds predate the records writes the version that may lack them (valid, marked);
    every other run writes the current version, which must carry them."""
    from types import SimpleNamespace

    from largefedbench.run.entry import _schema_version

    released, silent = {"events": [{"noise_multiplier": 1.0}]}, {"events": []}
    seed = lambda calibrations, ledger: SimpleNamespace(calibrations=calibrations, ledger=ledger)  # noqa: E731
    assert _schema_version([seed([{"sigma": 1.0}], released), seed(None, released)]) == 2
    assert _schema_version([seed([{"sigma": 1.0}], released), seed([], released)]) == SCHEMA_VERSION
    assert _schema_version([seed(None, silent)]) == SCHEMA_VERSION  # a reference releases nothing to calibrate
