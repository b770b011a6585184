"""The cpu profile's ε = 0 model on the generic corpus ships with the package: pretrained again, its weights differ
on a CPU with other kernels (AMX or not) or another thread count, and every entry's references start from it."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from largefedbench.data.federated import load_snapshot
from largefedbench.data.public_corpus import load_public_corpus
from largefedbench.errors import InputError
from largefedbench.models.identity import n_params
from largefedbench.models.profiles import CPU, CPU_WIDE
from largefedbench.models.tiny import load_tiny_lm, prepare_tiny_models, shipped_downstream, tiny_fingerprint


@pytest.fixture(scope="module")
def prose(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    fd = load_snapshot("demo-prose", home=home)
    return fd, load_public_corpus("generic", fd), home


def test_the_cpu_downstream_on_the_generic_corpus_is_installed_from_the_package_not_pretrained(prose):
    fd, corpus, home = prose
    shipped = shipped_downstream(CPU, corpus.kind, corpus.sha256)
    assert shipped is not None, "the cpu downstream's config or the generic corpus changed: ship a new checkpoint"
    record = json.loads((shipped / "pretraining.json").read_text())
    assert record["public"]["sha256"] == corpus.sha256 and record["pretraining"]["steps"] == CPU.downstream.pretrain_steps
    t0 = time.perf_counter()
    folder, hit = prepare_tiny_models(CPU, fd, root=home, corpus=corpus, progress=False)
    assert not hit and time.perf_counter() - t0 < 300  # the BPE is trained; 3,600 steps are not
    manifest = json.loads((folder / "manifest.json").read_text())
    down = manifest["downstream"]
    assert down["sha256"] == record["sha256"] and down["pretraining"]["shipped"] == shipped.name
    assert folder.name.endswith("-shipped")  # a cache pretrained here before never stands in for it
    assert manifest["tokenizer"]["sha256"] == record["tokenizer_sha256"]  # the ids its embeddings were trained on
    model = load_tiny_lm(folder / "downstream", "cpu")
    assert n_params(model) == down["n_params"] == record["n_params"]
    assert prepare_tiny_models(CPU, fd, root=home, corpus=corpus, progress=False) == (folder, True)


def test_other_profiles_and_the_split_corpus_have_no_shipped_checkpoint(prose):
    fd, corpus, _ = prose
    assert shipped_downstream(CPU_WIDE, corpus.kind, corpus.sha256) is None  # 12.2M parameters: pretrained where it runs
    assert shipped_downstream(CPU, "split") is None
    assert shipped_downstream(CPU, "generic", "0" * 64) is None  # another generic corpus: its own checkpoint or none


def test_a_damaged_shipped_checkpoint_is_refused(prose, tmp_path, monkeypatch):
    import shutil

    from largefedbench.models import tiny

    fd, corpus, _ = prose
    copy = tmp_path / "checkpoints"
    shutil.copytree(tiny.SHIPPED_CHECKPOINTS, copy)
    for weights in copy.glob("*/model.safetensors"):
        weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")
    monkeypatch.setattr(tiny, "SHIPPED_CHECKPOINTS", copy)
    with pytest.raises(InputError, match="damaged; reinstall"):
        prepare_tiny_models(CPU, fd, root=tmp_path / "home", corpus=corpus, progress=False)


def test_entries_on_a_shipped_public_model_get_ids_of_their_own():
    """Their ids name the shipped weights, so they never overwrite an entry made on a checkpoint pretrained before."""
    from largefedbench.models.profiles import TINY
    from largefedbench.models.tiny import SHIPPED_CHECKPOINTS
    from largefedbench.run.eval import shipped_public_model

    record, = SHIPPED_CHECKPOINTS.glob("cpu-downstream-generic-*/pretraining.json")
    assert shipped_public_model(CPU, "generic") == json.loads(record.read_text())["sha256"][:12]
    assert shipped_public_model(CPU, "split") is None and shipped_public_model(CPU_WIDE, "generic") is None
    assert shipped_public_model(TINY, "split") is None


def test_an_entry_made_on_other_weights_is_refused_by_reproduce_before_any_model_runs(prose):
    """The board's first cpu entries started from a checkpoint pretrained on a CPU with AMX; this install ships other
    weights, so re-running them cannot give their numbers: reproduce says so at once instead of after an hour."""
    from pathlib import Path

    from largefedbench.run.reproduce import reproduce

    _, _, home = prose
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    old = [p for p in sorted(board.glob("demo/public/public--demo-prose--cpu--*.json"))
           if not p.name.endswith(".reproduced.json")  # the reproduction records beside the entries
           and json.loads(p.read_text())["profile"]["downstream"].get("sha256", "").startswith("98e55e1f83c3")]
    assert old, "the board's group on the earlier cpu checkpoint (98e55e1f83c3) is gone: pick another such entry"
    from largefedbench.run.eval import shipped_public_model

    ours = shipped_public_model(CPU, "generic")
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=rf"weights 98e55e1f83c3, but this installation ships {ours} .* cannot be "
                                         r"reproduced here"):
        reproduce(old[0], home=home)
    assert time.perf_counter() - t0 < 60


def test_entries_on_the_shipped_weights_the_split_or_a_wider_model_are_not_refused(prose, tmp_path):
    """The refusal is for other ε = 0 weights only: the shipped group, entries on the snapshot's own split and the
    cpu-wide profile (pretrained where it runs) all get a request to re-run."""
    from pathlib import Path

    from largefedbench.leaderboard.files import EntryFile, board_of
    from largefedbench.leaderboard.validate import validate_entry_file
    from largefedbench.models import get_profile
    from largefedbench.run.eval import prepare, shipped_public_model
    from largefedbench.run.reproduce import _entry_profile, _prepare

    _, _, home = prose
    ours = shipped_public_model(CPU, "generic")
    board = Path(__file__).resolve().parents[2] / "leaderboard" / "entries"
    picks = {}
    for path in sorted(board.glob("demo/*/*--demo-prose--cpu*--*.json")):
        if path.name.endswith(".reproduced.json"):
            continue
        entry = json.loads(path.read_text())
        group = ("shipped" if entry["profile"]["downstream"].get("sha256", "").startswith(ours) else
                 "split" if entry.get("public", {}).get("kind", "split") == "split" else
                 "cpu-wide" if entry["config"]["profile"] == "cpu-wide" else None)
        if group and entry["method"]["name"] == "dp-fedavg":
            picks.setdefault(group, path)
    assert set(picks) == {"shipped", "split", "cpu-wide"}, picks
    for group, path in picks.items():
        entry = validate_entry_file(EntryFile(path, board_of(path))).entry
        notes = []
        request = _prepare(entry, tmp_path / "board", home, False, notes)  # raises InputError when refused
        profile = get_profile(request.profile)
        assert request.method == "dp-fedavg" and profile.name == entry.config.profile, path.name
        # the split entries predate the cpu downstream's 3,600 pretraining steps: their ε = 0 model is rebuilt
        # with the 1,200 they recorded (today's profile gave it other weights: public top-1 0.1958, not 0.2109)
        assert profile.downstream.pretrain_steps == entry.profile["downstream"]["config"]["pretrain_steps"], path.name
        assert any("pretrain_steps=1200 (now 3600)" in n for n in notes) == (group == "split"), (group, notes)
        if group == "split":  # its own model cache and run folder, never today's 3,600-step model or seeds
            prep, today = prepare(request), prepare(dataclasses.replace(request, profile=entry.config.profile))
            assert prep.run_id != today.run_id and prep.entry_id == today.entry_id == entry.entry_id
            assert tiny_fingerprint(prep.profile) != tiny_fingerprint(today.profile)
    # a shipped checkpoint is installed, not rebuilt: were the profile's settings to move, the entry keeps the name
    # (so reproduce refuses other weights rather than pretraining for hours toward weights that cannot match)
    shipped = validate_entry_file(EntryFile(picks["shipped"], board_of(picks["shipped"]))).entry
    moved = shipped.model_copy(update={"profile": {**shipped.profile, "downstream": {
        **shipped.profile["downstream"], "config": {**shipped.profile["downstream"]["config"], "pretrain_steps": 1}}}})
    assert _entry_profile(moved, []) == "cpu"
    # a setting the entry predates is rebuilt at its field default (the behaviour before it); a retired one is noted
    split = validate_entry_file(EntryFile(picks["split"], board_of(picks["split"]))).entry
    config = {k: v for k, v in split.profile["downstream"]["config"].items() if k != "pretrain_schedule"}
    older = split.model_copy(update={"profile": {**split.profile, "downstream": {
        **split.profile["downstream"], "config": {**config, "old_knob": 1}}}})
    notes = []
    assert _entry_profile(older, notes).downstream.pretrain_schedule == "constant"
    assert any("old_knob" in n and "no longer exist" in n for n in notes), notes
    assert any("pretrain_schedule='constant' (now 'cosine')" in n for n in notes), notes
