"""`lfb leaderboard validate`: a real entry passes; each way of breaking it is rejected by the right check, naming
the field and what to do; entry files are data only and cannot make the tool read outside the board."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from largefedbench.cli import main
from largefedbench.leaderboard.check_privacy import EPSILON_RTOL
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.validate import (
    format_reports,
    validate_entry_file,
    validate_paths,
)

from .entry_variants import (
    as_reference,
    entry_path,
    load,
    relabel,
    save,
    shift_accuracy,
    with_noise,
    with_seeds,
)

LFB = shutil.which("lfb", path=str(Path(sys.executable).parent)) or "lfb"


def _validate(path: Path):
    return validate_entry_file(EntryFile(path, board_of(path)))


def test_the_produced_entry_is_valid_and_unranked_with_one_seed(produced):
    report = _validate(produced.path)
    assert report.valid, format_reports([report])
    assert report.status == "unranked"
    assert [f.check for f in report.notes] == ["seeds"]
    assert produced.entry.artifacts, "the example method reports σ by round, so the entry has a plot"


def test_the_produced_entry_names_no_path_of_this_machine(produced):
    from largefedbench.leaderboard.check_paths import local_paths

    assert local_paths(produced.entry.to_json()) == []
    assert produced.entry.profile["cache"]["dir"].startswith("$LFB_HOME/models/tiny/")


def test_three_seeds_are_ranked_and_the_references_are_valid(entry, produced, tmp_path):
    ranked = relabel(with_seeds(entry, [0, 1, 2]), entry_id="ranked-three-seeds")
    paths = [save(tmp_path, ranked, artifacts_from=produced.path.parent),
             save(tmp_path, as_reference(ranked, "public")), save(tmp_path, as_reference(ranked, "non-private"))]
    reports = validate_paths([tmp_path / "entries"])
    assert {r.path for r in reports} == set(paths)
    assert all(r.status == "ranked" for r in reports), format_reports(reports)


def _set(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    if isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


def _drop(data: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    del data[last]


# Each case: (id, mutate(data, board) -> path written or None for the default place, check, field, message part)
def _sigma_doubled(d, b):
    d["privacy"]["ledgers"][0]["events"][0]["noise_multiplier"] *= 2


def _wrong_folder(d, b):
    return save(b, d, path=b / "entries" / "demo" / "some-other-method" / f"{d['entry_id']}.json")


def _escaping_symlink(d, b):
    outside = b.parent / f"outside-{b.name}.json"
    outside.write_text(json.dumps(d))
    link = entry_path(b, d)
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, link)
    return link


def _pre_cutoff(d, b):
    d["dataset"]["window"].update(since="2022-06-01", public_since="2022-05-01")
    d["contamination"].update(model="meta-llama/Meta-Llama-3-8B", model_cutoff="2023-03", cutoff_kind="reported",
                              window_start="2022-06-01", after_cutoff=True)


def _two_seeds_three_results(d, b):
    d.update(with_seeds(d, [0, 1, 2]))
    d["seeds"] = [0, 1]
    if d.get("selection"):  # the selection section agrees with the seeds, so the metrics' count is what is wrong
        d["selection"]["per_seed"] = d["selection"]["per_seed"][:2]


def _missing_artifact(d, b):
    d["artifacts"]["loss_by_round"] = f"{d['entry_id']}.loss-by-round.png"


def _traversal_id(d, b):
    path = b / "entries" / "demo" / d["method"]["name"] / "innocent-name.json"
    d["entry_id"] = "../../../etc/passwd"
    return save(b, d, path=path)


def _duplicate_key(d, b):
    path = save(b, d, artifacts_from=None)
    text = path.read_text()
    path.write_text(text.replace('"seeds": [', '"seeds": [7], "seeds": [', 1))
    return path


def _not_json(d, b):
    path = entry_path(b, d)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"schema_version": 2, "entry_id": ')
    return path


BROKEN = [
    ("epsilon-not-the-ledgers", lambda d, b: _set(d, "privacy.epsilon_per_seed.0", d["privacy"]["epsilon_per_seed"][0] / 2),
     "privacy-epsilon", "privacy.epsilon_per_seed[0]", "ledger gives"),
    ("ledger-sigma-changed", _sigma_doubled, "privacy-epsilon", "privacy.epsilon_per_seed[0]", "ledger gives"),
    ("max-epsilon-understated", lambda d, b: _set(d, "privacy.epsilon", 0.1), "privacy-epsilon", "privacy.epsilon",
     "largest ε over the seeds"),
    ("over-budget", lambda d, b: _set(d, "privacy.target_epsilon", 0.5), "privacy-budget", "privacy.target_epsilon",
     "over the target"),
    ("delta-too-large", lambda d, b: _set(d, "privacy.delta", 0.01), "privacy-delta", "privacy.delta",
     "must be below 1/n_train_clients"),
    ("delta-zero-with-releases", lambda d, b: _set(d, "privacy.delta", 0.0), "privacy-delta", "privacy.delta",
     "only meaningful for ε = 0"),
    ("nan-accuracy", lambda d, b: _set(d, "metrics.next_token_accuracy.top1.per_seed.0", math.nan), "metrics-range",
     "metrics.next_token_accuracy.top1.per_seed[0]", "finite and within [0, 1]"),
    ("accuracy-above-one", lambda d, b: _set(d, "metrics.next_token_accuracy.top5.mean", 1.2), "metrics-range",
     "metrics.next_token_accuracy.top5.mean", "finite and within [0, 1]"),
    ("mean-not-of-per-seed", lambda d, b: _set(d, "metrics.next_token_accuracy.top1.mean",
                                              d["metrics"]["next_token_accuracy"]["top1"]["mean"] + 0.01),
     "metrics-consistency", "metrics.next_token_accuracy.top1.mean", "mean of per_seed"),
    ("gap-closed-not-recomputable", lambda d, b: _set(d, "metrics.gap_closed.per_seed.0", 0.9), "gap-closed",
     "metrics.gap_closed.per_seed[0]", "(acc − acc₀)/(acc∞ − acc₀)"),
    ("top3-below-top1", lambda d, b: _set(d, "metrics.next_token_accuracy", {
        "top1": d["metrics"]["next_token_accuracy"]["top3"], "top3": d["metrics"]["next_token_accuracy"]["top1"],
        "top5": d["metrics"]["next_token_accuracy"]["top5"]}), "metrics-consistency", "metrics.next_token_accuracy",
     "cannot fall"),
    ("fid-missing-for-text", lambda d, b: _set(d, "metrics.fid", None), "metrics-consistency", "metrics.fid", "no FID"),
    ("token-jsd-above-one", lambda d, b: _set(d, "metrics.unigram_jsd", {
        "per_seed": [1.5] * len(d["seeds"]), "mean": 1.5, "std": 0.0}), "metrics-range", "metrics.unigram_jsd",
     "outside [0, 1]"),
    ("seeds-missing", lambda d, b: _drop(d, "seeds"), "schema", "seeds", "required field is missing"),
    ("fewer-seeds-than-results", _two_seeds_three_results, "metrics-consistency",
     "metrics.next_token_accuracy.top1.per_seed", "3 values for 2 seeds"),
    ("repeated-seed", lambda d, b: d.update(with_seeds(d, [0, 0, 1])), "seeds", "seeds", "repeats a seed"),
    ("unknown-schema-version", lambda d, b: _set(d, "schema_version", 99), "schema-version", "schema_version",
     "unknown schema_version 99"),
    ("extra-unknown-field", lambda d, b: _set(d, "leaderboard_rank", 1), "schema", "leaderboard_rank", "unknown field"),
    ("pre-cutoff-window", _pre_cutoff, "contamination", "contamination.after_cutoff",
     "starts after the knowledge cutoff of meta-llama/Meta-Llama-3-8B"),
    ("window-start-mismatch", lambda d, b: _set(d, "contamination.window_start", "2020-01-01"), "contamination",
     "contamination.window_start", "the dataset's window starts"),
    ("path-traversal-in-id", _traversal_id, "schema", "entry_id", "should match pattern"),
    ("dots-in-method-name", lambda d, b: _set(d, "method", {**d["method"], "name": "a..b"}), "ids", "method.name",
     "not a safe id"),
    ("profile-with-slash", lambda d, b: _set(d, "config", {**d["config"], "profile": "../x"}), "ids", "config.profile",
     "not a safe id"),
    ("artifact-with-dotdot", lambda d, b: _set(d, "artifacts", {"pca": "../../outside.png"}), "artifacts",
     "artifacts", "plain file name"),
    ("artifact-missing", _missing_artifact, "artifacts", "artifacts.loss_by_round", "not beside the entry"),
    ("wrong-folder-for-its-method", _wrong_folder, "path", "entry_id", "its dataset, method and entry_id say"),
    ("negative-cost", lambda d, b: _set(d, "costs.method_seconds", -1.0), "costs-range", "costs.method_seconds",
     "non-negative"),
    ("missing-environment", lambda d, b: _drop(d, "environment"), "environment", "environment",
     "required field is missing"),
    ("empty-environment", lambda d, b: _set(d, "environment", {**d["environment"], "packages": {}}), "environment",
     "environment.packages", "no package versions"),
    ("train-clients-mismatch", lambda d, b: _set(d, "privacy.n_train_clients", 10), "privacy-delta",
     "privacy.n_train_clients", "dataset.clients.train"),
    ("private-without-releases", lambda d, b: d["privacy"].update(
        ledgers=[{"format": "lfb-privacy-ledger/1", "events": []}], epsilon=0.0, epsilon_per_seed=[0.0]),
     "privacy-ledger", "privacy.ledgers[0]", "records no release"),
    ("bad-creation-time", lambda d, b: _set(d, "created_at", "yesterday"), "environment", "created_at", "ISO 8601"),
    ("unknown-precision", lambda d, b: _set(d, "environment", {**d["environment"], "precision": {"generation": "fp8",
     "training": "float32"}}), "environment", "environment.precision", "`lfb eval` writes"),
    ("duplicate-json-key", _duplicate_key, "json", "file", "duplicate key 'seeds'"),
    ("symlink-escaping-the-folder", _escaping_symlink, "file", "path", "leads outside"),
    ("not-json", _not_json, "json", "file", "not readable JSON"),
]


@pytest.mark.parametrize("case, mutate, check, field, message", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_entry_is_rejected_with_the_right_message(case, mutate, check, field, message, entry, produced,
                                                           tmp_path):
    board = tmp_path / "board"
    path = mutate(entry, board) or save(board, entry, artifacts_from=produced.path.parent)
    report = _validate(path)
    assert report.status == "invalid"
    hits = [f for f in report.errors if f.check == check and f.field.startswith(field)]
    assert hits, f"{case}: expected [{check}] {field}, got:\n{format_reports([report])}"
    assert any(message in f.message for f in hits), f"{case}: {[f.message for f in hits]}"
    assert all(f.fix for f in report.errors), "every failure says what to do"


def test_there_are_at_least_fifteen_distinct_broken_entries():
    assert len({b[0] for b in BROKEN}) >= 15 and len({(b[2], b[3]) for b in BROKEN}) >= 15


def test_epsilon_within_the_stated_tolerance_passes(entry, produced, tmp_path):
    eps = entry["privacy"]["epsilon_per_seed"][0]
    entry["privacy"]["epsilon_per_seed"][0] = entry["privacy"]["epsilon"] = eps * (1 + EPSILON_RTOL / 2)
    assert _validate(save(tmp_path, entry, artifacts_from=produced.path.parent)).valid
    entry["privacy"]["epsilon_per_seed"][0] = entry["privacy"]["epsilon"] = eps * (1 + EPSILON_RTOL * 3)
    assert not _validate(save(tmp_path, entry, artifacts_from=produced.path.parent)).valid


@pytest.mark.parametrize(
    "contamination, window, why",
    [
        ({"model": "meta-llama/Meta-Llama-3-8B", "model_cutoff": "2023-03", "cutoff_kind": "reported",
          "after_cutoff": False}, "2023-02-01", "registry's cutoff"),
        # the entry's own cutoff is wrong; the registry (Qwen2.5: release-bound 2024-09) says the window is not after it
        ({"model": "Qwen/Qwen2.5-7B", "model_cutoff": "2024-01", "cutoff_kind": "release-bound", "after_cutoff": True},
         "2024-09-01", "the entry claims after_cutoff=true"),
        ({"model": "acme/unregistered-llm", "model_cutoff": None, "cutoff_kind": "unknown", "after_cutoff": None},
         "2024-09-01", "no knowledge cutoff is registered"),
        ({"model": "lfb/tiny-gpt2", "model_cutoff": "2024-09", "cutoff_kind": "pretrained on the snapshot's public split",
          "after_cutoff": True, "_profile_sha": "0" * 64}, "2024-09-01", "pretrained on"),
    ],
    ids=["honest-before-cutoff", "registry-overrules-the-flag", "unregistered-model", "tiny-model-of-another-snapshot"],
)
def test_possibly_contaminated_entries_are_valid_but_apart(contamination, window, why, entry, produced, tmp_path):
    contamination = dict(contamination)
    sha = contamination.pop("_profile_sha", None)
    if sha:
        entry["profile"]["generator"]["snapshot_sha256"] = sha
    entry["dataset"]["window"].update(since=window, public_since="2019-01-01")
    entry["contamination"] = {**contamination, "window_start": window}
    report = _validate(save(tmp_path, entry, artifacts_from=produced.path.parent))
    assert report.valid, format_reports([report])
    assert report.status == "contaminated"
    assert any(why in f.message for f in report.notes if f.check == "contamination"), format_reports([report])


def test_a_registered_cutoff_before_the_window_is_clean(entry, produced, tmp_path):
    entry["contamination"] = {"model": "meta-llama/Meta-Llama-3-8B", "model_cutoff": "2023-03",
                              "cutoff_kind": "reported", "window_start": entry["dataset"]["window"]["since"],
                              "after_cutoff": True}
    report = _validate(save(tmp_path, with_seeds(entry, [0, 1, 2]), artifacts_from=produced.path.parent))
    assert report.status == "ranked", format_reports([report])


def test_the_method_target_is_never_imported(entry, produced, tmp_path, monkeypatch):
    trap = tmp_path / "trapdir"
    trap.mkdir()
    marker = tmp_path / "imported"
    (trap / "lfb_trap_method.py").write_text(f"open({str(marker)!r}, 'w').write('executed')\nclass Trap: pass\n")
    monkeypatch.syspath_prepend(str(trap))
    entry["method"]["target"] = "lfb_trap_method:Trap"
    board = tmp_path / "board"
    save(board, entry, artifacts_from=produced.path.parent)
    from largefedbench.leaderboard.render import render_board

    assert validate_paths([board / "entries"])[0].valid
    render_board(board)
    assert not marker.exists() and "lfb_trap_method" not in sys.modules


def test_symlinked_folders_are_refused_and_reads_stay_inside(entry, produced, tmp_path):
    outside = tmp_path / "outside" / "entries" / "demo" / entry["method"]["name"]
    save(tmp_path / "outside", entry, artifacts_from=produced.path.parent)
    board = tmp_path / "board"
    (board / "entries").mkdir(parents=True)
    os.symlink(outside.parent, board / "entries" / "demo")
    reports = validate_paths([board / "entries"])
    assert len(reports) == 1 and reports[0].errors[0].check == "file"
    assert "symlinked folder" in reports[0].errors[0].message


def test_an_artifact_symlink_out_of_the_board_is_refused(entry, produced, tmp_path):
    board = tmp_path / "board"
    path = save(board, entry)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG not yours")
    for name in entry["artifacts"].values():
        os.symlink(secret, path.parent / name)
    report = _validate(path)
    assert any(f.check == "artifacts" and "leads outside" in f.message for f in report.errors)


def test_cli_validate_exit_codes_and_messages(entry, produced, tmp_path, capsys, monkeypatch):
    board = tmp_path / "board"
    good = save(board, with_seeds(relabel(entry, entry_id="good-one"), [0, 1, 2]), artifacts_from=produced.path.parent)
    bad = shift_accuracy(relabel(entry, entry_id="bad-one"), 0.0)
    bad["metrics"]["gap_closed"]["mean"] += 0.5
    save(board, bad, artifacts_from=produced.path.parent)
    env = {**os.environ}
    out = subprocess.run([LFB, "leaderboard", "validate", str(board / "entries")], check=False, capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "error [metrics-consistency] metrics.gap_closed.mean" in out.stdout
    assert "2 entries: 1 ranked, 0 unranked, 0 possibly contaminated, 0 diagnostic, 1 invalid" in out.stdout
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(good), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "ranked"
    (tmp_path / "empty" / "leaderboard" / "entries").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "empty")
    assert main(["leaderboard", "validate"]) == 0, "an empty board passes"
    assert "0 entries" in capsys.readouterr().out


def test_a_noisier_variant_recomputes_a_smaller_epsilon(entry, produced, tmp_path):
    quieter = with_noise(relabel(entry, entry_id="noisier"), 2.0)
    assert quieter["privacy"]["epsilon"] < entry["privacy"]["epsilon"]
    assert _validate(save(tmp_path, quieter, artifacts_from=produced.path.parent)).valid
    assert load(produced.path) == produced.entry.to_json()
