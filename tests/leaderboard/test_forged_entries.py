"""Forgeries and hostile files found by an adversarial pass, on copies of the
committed real entries (3 seeds, ranked): a hub model labelled as trained on the public split, consistent
forgeries of the ledger, NaN / ∞ budgets, an unknown snapshot hash, a deeply nested file, absolute paths."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from largefedbench.leaderboard.check_paths import local_paths
from largefedbench.leaderboard.files import MAX_NESTING
from largefedbench.leaderboard.render import render_board
from largefedbench.leaderboard.validate import format_reports, validate_paths
from largefedbench.privacy import PrivacyLedger

from .entry_variants import save

REPO = Path(__file__).resolve().parents[2]
ENTRIES = REPO / "leaderboard" / "entries" / "demo"
FEDAVG = next((ENTRIES / "dp-fedavg").glob("*--demo--tiny--eps1--??????????.json"))  # the tiny demo entries: one each
FTRL = next((ENTRIES / "dp-ftrl").glob("*--demo--tiny--eps1--??????????.json"))
PUBLIC = next((ENTRIES / "public").glob("*--demo--tiny--eps0--??????????.json"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _save(board: Path, data: dict, source: Path = FEDAVG) -> Path:
    return save(board, data, artifacts_from=source.parent)


def _report(tmp_path: Path, data: dict, source: Path = FEDAVG):
    _save(tmp_path / "board", data, source)
    (report,) = validate_paths([tmp_path / "board" / "entries"])
    return report


def _recompute_epsilon(data: dict) -> dict:
    """ε per seed and the max recomputed from the (edited) ledgers: the forgery is consistent with them."""
    p = data["privacy"]
    eps = [PrivacyLedger.from_dict(ledger).epsilon(p["delta"], p["accountant"]) for ledger in p["ledgers"]]
    p["epsilon_per_seed"], p["epsilon"] = eps, max(eps)
    return data


def _errors(report, check: str) -> list:
    return [f for f in report.errors if f.check == check]


def test_the_committed_entries_are_ranked_as_the_baseline(tmp_path):
    assert _report(tmp_path, _load(FEDAVG)).status == "ranked"


# -- item 14: a hub model labelled "pretrained on the snapshot's public split" -----------------------------------
def test_a_hub_model_of_a_hub_profile_cannot_claim_the_label(tmp_path):
    data = _load(FEDAVG)  # a model-output method: the contamination model is the downstream model
    data["config"]["profile"] = "small"  # downstream distilgpt2, a hub model LargeFedBench does not train
    data["profile"]["downstream"]["id"] = data["contamination"]["model"] = "distilgpt2"
    report = _report(tmp_path, data)
    hits = _errors(report, "contamination")
    assert hits and hits[0].field == "contamination.cutoff_kind", format_reports([report])
    assert "does not train its downstream" in hits[0].message and "distilgpt2" in hits[0].message


def test_a_tiny_profile_entry_cannot_relabel_a_hub_model(tmp_path):
    data = _load(FEDAVG)
    data["profile"]["downstream"]["id"] = data["contamination"]["model"] = "Qwen/Qwen2.5-0.5B"
    report = _report(tmp_path, data)
    hits = _errors(report, "contamination")
    assert hits and hits[0].field == "contamination.model" and "lfb/ ids" in hits[0].message, format_reports([report])


# -- item 15: consistent forgeries, NaN / ∞ budgets, unknown snapshot hashes --------------------------------------
def _fewer_steps(d):
    for ledger in d["privacy"]["ledgers"]:
        ledger["events"][0]["steps"] = 1


def _fewer_steps_and_rounds(d):
    _fewer_steps(d)
    d["costs"]["rounds"] = 1


def _lower_sample_rate(d):
    for ledger in d["privacy"]["ledgers"]:
        ledger["events"][0]["sample_rate"] /= 4


def _one_history_missing(d):
    d["history"] = d["history"][:2]


FORGED = [
    ("ledger-steps-3-to-1", _fewer_steps, "privacy.ledgers[0]", "covers 1 round(s) of releases, but seed 0 ran at least 3"),
    ("costs-rounds-agrees-with-the-ledger", _fewer_steps_and_rounds, "costs.rounds", "config.method.rounds = 3"),
    ("history-outlives-costs", _fewer_steps_and_rounds, "history[0]", "reaches round 3, but costs.rounds = 1"),
    ("sampling-rate-quartered", _lower_sample_rate, "privacy.ledgers[0]", "clients_per_round / privacy.n_train_clients"),
    ("history-for-two-of-three-seeds", _one_history_missing, "history", "2 per-seed histories for 3 seeds"),
]


@pytest.mark.parametrize("case, forge, field, message", FORGED, ids=[f[0] for f in FORGED])
def test_a_consistent_forgery_of_a_count_is_caught(case, forge, field, message, tmp_path):
    data = _load(FEDAVG)
    forge(data)
    report = _report(tmp_path, _recompute_epsilon(data))
    assert not _errors(report, "privacy-epsilon"), "ε agrees with the forged ledgers"
    hits = [f for f in _errors(report, "counts") if f.field == field]
    assert hits and message in hits[0].message, f"{case}:\n{format_reports([report])}"
    assert report.status == "invalid"


def test_dp_ftrl_tree_epochs_cover_its_rounds(tmp_path):
    data = _load(FTRL)
    assert _report(tmp_path / "a", data, FTRL).status == "ranked"
    data["costs"]["rounds"] = data["config"]["method"]["rounds"] = 40  # 40 rounds need 3 trees of 15
    report = _report(tmp_path / "b", data, FTRL)
    assert any("covers 15 round(s)" in f.message for f in _errors(report, "counts")), format_reports([report])


@pytest.mark.parametrize("value", [float("nan"), -1.0, "NaN"], ids=["nan", "negative", "nan-string"])
def test_a_nan_or_negative_target_epsilon_is_refused(value, tmp_path):
    data = _load(FEDAVG)
    data["privacy"]["target_epsilon"] = value
    report = _report(tmp_path, data)
    (hit,) = [f for f in report.errors if f.field == "privacy.target_epsilon"]
    assert hit.check == "privacy-range" and "finite number ≥ 0" in hit.message


def test_an_infinite_target_for_a_finite_epsilon_is_refused(tmp_path):
    data = _load(FEDAVG)
    data["privacy"]["target_epsilon"] = "inf"
    report = _report(tmp_path, data)
    (hit,) = _errors(report, "privacy-budget")
    assert hit.field == "privacy.target_epsilon" and "only the non-private reference" in hit.message


def test_a_changed_snapshot_hash_is_unknown_not_contaminated(tmp_path):
    data = _load(FEDAVG)
    data["dataset"]["content_sha256"] = "f" * 64
    report = _report(tmp_path, data)
    assert report.status == "invalid" and not report.contaminated, format_reports([report])
    (hit,) = _errors(report, "snapshot")
    assert hit.field == "dataset.content_sha256" and "unknown snapshot" in hit.message and "'demo'" in hit.message


def test_an_unknown_snapshot_contradicting_the_profile_is_unknown(tmp_path):
    data = _load(FEDAVG)
    data["dataset"]["snapshot"] = "demo-copy"  # not a known name: only the profile's hash says what it was
    data["entry_id"] = data["entry_id"].replace("--demo--", "--demo-copy--")
    data["dataset"]["content_sha256"] = "e" * 64
    report = _report(tmp_path, data)
    (hit,) = _errors(report, "snapshot")
    assert "no known snapshot has content hash eeeeeeeeeeee" in hit.message and "(demo)" in hit.message
    assert not report.contaminated


def test_models_pretrained_on_another_known_snapshot_are_still_possibly_contaminated(tmp_path):
    data = _load(FEDAVG)
    data["profile"]["downstream"]["snapshot_sha256"] = "0" * 64
    report = _report(tmp_path, data)
    assert report.status == "contaminated" and not report.errors, format_reports([report])


# -- item 16: a deeply nested file among good ones ------------------------------------------------------------
def test_a_deeply_nested_file_is_rejected_and_the_others_are_read(tmp_path):
    board = tmp_path / "board"
    good = _save(board, _load(FEDAVG))
    bomb = good.parent / "nested.json"
    bomb.write_text("[" * 100_000 + "]" * 100_000)
    assert bomb.stat().st_size == 200_000
    (good.parent / "nested-500.json").write_text("[" * 500 + "]" * 500)  # parses, but deeper than any entry
    strings = good.parent / "brackets-in-strings.json"
    strings.write_text(json.dumps({"text": "[" * 5000}))  # brackets inside strings are not nesting
    reports = {r.path.name: r for r in validate_paths([board / "entries"])}
    assert reports[good.name].status == "ranked"
    for name in ("nested.json", "nested-500.json"):
        (hit,) = reports[name].errors
        assert hit.check == "json" and f"nested deeper than {MAX_NESTING} levels" in hit.message
    assert all(f.check != "json" for f in reports["brackets-in-strings.json"].errors)
    result = render_board(board)
    assert len(result.invalid) == 3 and result.board.count("ranked") == 1
    assert good.stem in (board / "README.md").read_text()


# -- item 18: absolute paths ---------------------------------------------------------------------------------
@pytest.mark.parametrize("where, value", [
    ("profile.cache.dir", "/home/someone/.cache/largefedbench/models/tiny/x"),
    ("config.command", "lfb eval --method dp-fedavg --dataset /srv/data/snapshots/biorxiv-x"),
    ("history[0][1].checkpoint", "C:\\Users\\someone\\run\\round-1.pt"),
    ("profile.generator.source", "~/models/llama"),
])
def test_absolute_paths_anywhere_are_refused(where, value, tmp_path):
    data = _load(FEDAVG)
    if where == "profile.cache.dir":
        data["profile"]["cache"]["dir"] = value
    elif where == "config.command":
        data["config"]["command"] = value
    elif where.startswith("history"):
        data["history"][0][1]["checkpoint"] = value
    else:
        data["profile"]["generator"]["source"] = value
    report = _report(tmp_path, data)
    hits = _errors(report, "paths")
    assert [h.field for h in hits] == [where], format_reports([report])
    assert "path of the machine" in hits[0].message


def test_the_committed_entries_name_no_local_path():
    for path in sorted((REPO / "leaderboard" / "entries").rglob("*.json")):
        assert local_paths(_load(path)) == [], path
    assert _load(FEDAVG)["profile"]["cache"]["dir"].startswith("$LFB_HOME/models/tiny/")


def test_a_valid_reference_entry_stays_valid(tmp_path):
    data = copy.deepcopy(_load(PUBLIC))
    assert _report(tmp_path, data, PUBLIC).status == "ranked"


def test_the_demo_snapshot_builds_to_its_known_hash(shared_root):
    from largefedbench.data.federated import load_snapshot
    from largefedbench.leaderboard.snapshots import known_hashes

    assert load_snapshot("demo", home=shared_root).manifest["content_sha256"] in known_hashes("demo", "demo")


def test_entries_are_built_without_paths_of_this_machine(tmp_path):
    from types import SimpleNamespace

    from largefedbench.run.command import command_for
    from largefedbench.run.entry import portable_profile

    home = tmp_path / "home"
    info = {"profile": "tiny", "cache": {"dir": str(home / "models" / "tiny" / "abc"), "hit": True}}
    assert portable_profile(info, home)["cache"] == {"dir": "$LFB_HOME/models/tiny/abc", "hit": True}
    assert portable_profile(info, tmp_path / "elsewhere")["cache"] == {"hit": True}
    request = SimpleNamespace(select_on="private", method=str(tmp_path / "methods" / "mine.py") + ":Mine", dataset=str(tmp_path / "snap"),
                              seeds=(0, 1, 2), overrides={}, noise_free=False, shuffled_releases=False)
    prep = SimpleNamespace(request=request, profile=SimpleNamespace(name="tiny", public="split"), preset="tiny",
                           method_cls=SimpleNamespace(fixed_epsilon=0), fd=SimpleNamespace(manifest={"name": "snap-x"}),
                           public_spec=f"c4:{tmp_path / 'c4'}", declared=False)
    command = command_for(prep)
    assert command.endswith("--public c4") and str(tmp_path) not in command  # the kind, never a local C4 path
    assert "--method mine.py:Mine" in command and "--dataset snap-x" in command and not local_paths(command)
    request.method, request.dataset = "dp-fedavg", "hf://owner/snapshot"
    assert "--method dp-fedavg --dataset hf://owner/snapshot" in command_for(prep)


def test_a_ledger_claiming_an_unsupported_pair_is_invalid(tmp_path):
    """ε is recomputed under the recorded (sampling, relation) pair; Poisson + replace-one is refused."""
    data = _load(FEDAVG)
    for ledger in data["privacy"]["ledgers"]:
        for event in ledger["events"]:
            event.update(relation="replace_one", sampling="poisson", sensitivity=2.0)
    report = _report(tmp_path, data)
    assert not report.valid
    assert any(f.check == "privacy-ledger" and "relation 'replace_one'" in f.message for f in report.errors), \
        format_reports([report])
    data = _load(FEDAVG)  # the same ledger stating its assumptions explicitly is the same claim
    for ledger in data["privacy"]["ledgers"]:
        for event in ledger["events"]:
            event.update(relation="add_remove", sampling="poisson", sensitivity=1.0)
    assert _report(tmp_path / "explicit", data).valid
