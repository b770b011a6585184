"""The harness and `lfb eval`: bad input stops before any work; entries carry a recomputable ε and the references."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from largefedbench import __version__
from largefedbench.data.records import Record
from largefedbench.data.snapshot import BuildSpec, build_snapshot
from largefedbench.data.spans import SpanSettings
from largefedbench.data.windows import Window
from largefedbench.errors import (
    InputError,
    LfbError,
    MethodError,
    PrivacyError,
    SnapshotError,
)
from largefedbench.leaderboard.schema import Entry, parse_entry
from largefedbench.privacy import PrivacyLedger
from largefedbench.run.eval import EvalRequest, prepare, run_eval

LFB = shutil.which("lfb", path=str(Path(sys.executable).parent)) or "lfb"
TEXT = "The committee heard evidence on river pollution and the cost of cleaning it up for every town. " * 6


def lfb(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([LFB, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


def test_lfb_methods_lists_the_registry_with_paper_output_and_status():
    rows = {r["name"]: r for r in json.loads(lfb("methods", "--json").stdout)}
    assert {"public", "non-private", "dp-fedavg", "dp-ftrl"} <= rows.keys()
    assert rows["public"]["output"] == "model" and rows["public"]["status"] == "runnable"
    assert all(r["status"] == "runnable" for r in rows.values()), [r for r in rows.values() if r["status"] != "runnable"]
    assert "McMahan" in rows["dp-fedavg"]["paper"]
    table = lfb("methods").stdout
    assert "dp-ftrl" in table and "Kairouz" in table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "dp-fedvag"], "did you mean 'dp-fedavg'"),
        (["--method", "dp-fedavg", "--profile", "huge"], "unknown model profile 'huge'"),
        (["--method", "dp-fedavg", "--dataset", "no-such-snapshot"], "no snapshot 'no-such-snapshot'"),
        (["--method", "dp-fedavg", "--epsilon", "0"], "--method public"),
        (["--method", "dp-fedavg", "--epsilon", "-1"], "must be > 0"),
        (["--method", "dp-fedavg", "--epsilon", "inf"], "--method non-private"),
        (["--method", "dp-fedavg", "--delta", "0.01"], "must be below 1/n_clients"),
        (["--method", "dp-fedavg", "--set", "roundz=3"], "unknown --set key roundz"),
        (["--method", "dp-fedavg", "--set", "rounds=three"], "--set rounds=three: expected int"),
        (["--method", "dp-fedavg", "--set", "rounds"], "must look like KEY=VALUE"),
        (["--method", "public", "--epsilon", "3"], "runs at that ε only"),
        (["--method", "dp-fedavg", "--seeds", "0,x"], "comma-separated integers"),
    ],
)
def test_bad_input_stops_before_any_work_with_a_clear_message(args, message, lfb_home):
    out = lfb("eval", *args, "--quiet", "--out", str(lfb_home / "board"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert message.lower() in out.stderr.lower(), out.stderr
    assert "Traceback" not in out.stderr
    assert not (lfb_home / "models").exists(), "models were built before the request was checked"
    assert not (lfb_home / "board").exists()


def _rec(i: int, date: str) -> Record:
    return Record(id=f"t:{i}", source="t", date=date, title=f"T{i}", text=TEXT, url=f"u{i}", license="cc_by")


def test_a_window_without_clients_is_refused(lfb_home):
    only_public = [_rec(i, f"2024-08-{1 + i:02d}") for i in range(5)]
    spec = BuildSpec(dataset="t", window=Window.parse("2024-09", "2024-10", public_months=1),
                     span=SpanSettings(tokenizer="minilm-wordpiece"), name="empty-window")
    build_snapshot(only_public, spec, Counter(), progress=False)
    with pytest.raises(SnapshotError, match="no train clients.*Widen the window"):
        prepare(EvalRequest(method="dp-fedavg", dataset="empty-window"))


def test_prepare_resolves_the_config_and_a_stable_entry_id(lfb_home):
    a = prepare(EvalRequest(method="dp-fedavg", overrides={"rounds": "2"}, out=lfb_home / "b"))
    b = prepare(EvalRequest(method="dp-fedavg", overrides={"rounds": "2"}, out=lfb_home / "b"))
    c = prepare(EvalRequest(method="dp-fedavg", overrides={"rounds": "3"}, out=lfb_home / "b"))
    assert a.config.rounds == 2 and a.preset == "tiny"
    assert a.entry_id == b.entry_id != c.entry_id
    one = prepare(EvalRequest(method="dp-fedavg", overrides={"rounds": "2"}, seeds=(0,), out=lfb_home / "b"))
    assert one.entry_id != a.entry_id and one.run_dir == a.run_dir != c.run_dir  # seeds resume across seed lists
    assert a.entry_path == lfb_home / "b" / "entries" / "demo" / "dp-fedavg" / f"{a.entry_id}.json"
    assert a.budget.epsilon == 1.0 and a.budget.delta == 3e-6


def test_select_on_public_is_its_own_run_and_command(lfb_home):
    """--select-on public names another entry and run (its seeds select on other data) and the
    recorded command re-runs it; private, the default, keeps the ids and command of every entry before it."""
    from largefedbench.cli import build_parser
    from largefedbench.run.command import command_for

    private = prepare(EvalRequest(method="dp-fedavg", out=lfb_home / "b"))
    public = prepare(EvalRequest(method="dp-fedavg", select_on="public", out=lfb_home / "b"))
    assert private.entry_id != public.entry_id and private.run_dir != public.run_dir
    assert "--select-on" not in command_for(private) and command_for(public).endswith("--select-on public")
    args = build_parser().parse_args(command_for(public).split()[1:])
    assert args.select_on == "public" and build_parser().parse_args(["eval", "--method", "pe"]).select_on == "private"
    with pytest.raises(InputError, match="--select-on 'validation'"):
        prepare(EvalRequest(method="dp-fedavg", select_on="validation", out=lfb_home / "b"))


def test_finished_seeds_are_not_reused_after_the_profile_settings_change(lfb_home, monkeypatch):
    import dataclasses

    from largefedbench.models import profiles

    before = prepare(EvalRequest(method="public", out=lfb_home / "b"))
    tiny = profiles.PROFILES["tiny"]
    retrained = dataclasses.replace(tiny, downstream_training=dataclasses.replace(tiny.downstream_training, lr=1e-4))
    monkeypatch.setitem(profiles.PROFILES, "tiny", retrained)
    after = prepare(EvalRequest(method="public", out=lfb_home / "b"))
    assert after.entry_id == before.entry_id and after.run_dir != before.run_dir  # same entry, fresh seeds


def test_public_replay_mixes_seeded_public_spans_into_every_fine_tuning_set(lfb_home, monkeypatch):
    import dataclasses
    from types import SimpleNamespace

    from largefedbench.models import profiles
    from largefedbench.run import eval as harness

    tiny = profiles.PROFILES["tiny"]
    before = prepare(EvalRequest(method="public", out=lfb_home / "b"))
    replaying = dataclasses.replace(tiny, downstream_training=dataclasses.replace(tiny.downstream_training, public_replay=0.5))
    monkeypatch.setitem(profiles.PROFILES, "tiny", replaying)
    prep = prepare(EvalRequest(method="public", out=lfb_home / "b"))
    assert prep.run_dir != before.run_dir  # seeds trained without replay are not reused
    from largefedbench.data.public_corpus import load_public_corpus

    corpus = load_public_corpus("split", prep.fd)
    ev = harness.Evaluator(prep, SimpleNamespace(new_downstream=lambda: "model", tokenizer="tok", public_corpus=corpus,
                                                 embedder=None, embedder_id="none", root=lfb_home), lambda m: None)
    public = prep.fd.public.all_spans()
    assert corpus.spans == public  # the tiny profile's public resources are the snapshot's pre-window split
    a, b = ev.replay_texts(40, seed=0), ev.replay_texts(40, seed=1)
    assert len(a) == 20 and set(a) <= set(public)  # half as many, all public
    assert a == ev.replay_texts(40, seed=0) and a != b  # drawn by the seed
    assert ev.replay_texts(0, seed=0) == []  # nothing to fine-tune: nothing mixed in
    assert len(ev.replay_texts(10 * len(public), seed=0)) == len(public)  # at most the whole public split

    seen = {}
    monkeypatch.setattr("largefedbench.evaluation.downstream.train_downstream",
                        lambda model, tok, texts, validation, **kw: seen.update(texts=texts) or
                        SimpleNamespace(model=model, best_epoch=0, history=[None]))
    assert ev.train_on(["synthetic one", "synthetic two"], seed=3) == "model"
    assert seen["texts"] == ["synthetic one", "synthetic two", *ev.replay_texts(2, seed=3)]


def test_a_long_snapshot_name_shortens_the_entry_id_but_never_its_config_digest():
    from types import SimpleNamespace

    from largefedbench.privacy import PrivacyBudget
    from largefedbench.run.eval import _entry_id

    fd = SimpleNamespace(manifest={"name": "biorxiv-" + "x" * 150})
    ids = [_entry_id("popri", fd, "cpu", PrivacyBudget(4.0, 1e-6), {"rounds": r}) for r in (2, 3)]
    assert all(len(i) == 128 and i.startswith("popri--biorxiv-x") for i in ids)
    assert ids[0][-10:] != ids[1][-10:] and ids[0][:-12] == ids[1][:-12]  # only the digest tells them apart
    from largefedbench.run.audit import Audit

    audited = [Audit(canaries=100, inclusion_seed=0)._audit_id(i) for i in ids]
    assert all(len(a) == 128 and f"--{i[-10:]}--audit-" in a for a, i in zip(audited, ids))


def test_budget_errors_are_library_errors(lfb_home):
    for request, error in [
        (EvalRequest(method="nope"), MethodError),
        (EvalRequest(method="dp-fedavg", epsilon=0), PrivacyError),
        (EvalRequest(method="dp-fedavg", seeds=()), InputError),
        (EvalRequest(method="dp-fedavg", seeds=(1, 1)), InputError),
    ]:
        with pytest.raises(error):
            prepare(request)
    assert issubclass(SnapshotError, LfbError)


def _check_entry(entry: Entry, path: Path) -> None:
    written = json.loads(path.read_text())
    assert written == entry.to_json() and parse_entry(written) == entry  # what the run returns is what it wrote
    privacy = entry.privacy
    for ledger, eps in zip(privacy.ledgers, privacy.epsilon_per_seed):
        recomputed = PrivacyLedger.from_dict(ledger).epsilon(privacy.delta, privacy.accountant) \
            if ledger["events"] else 0.0
        claimed = math.inf if eps == "inf" else eps
        assert recomputed == pytest.approx(claimed, rel=1e-9)
    m = entry.metrics
    assert 0 < m.reference_public.top1.mean < m.reference_non_private.top1.mean <= 1
    for acc, gap, ref_inf in zip(m.next_token_accuracy.top1.per_seed, m.gap_closed.per_seed,
                                 m.reference_non_private.top1.per_seed):
        assert gap == pytest.approx((acc - m.reference_public.top1.mean) / (ref_inf - m.reference_public.top1.mean))


def test_the_references_run_end_to_end_on_the_demo(tiny, tmp_path):
    _fd, _bundle, root = tiny
    public = run_eval(EvalRequest(method="public", seeds=(0,), out=tmp_path, home=root, progress=False), log=lambda m: None)
    _check_entry(public.entry, public.path)
    assert public.entry.privacy.epsilon == 0.0 and public.entry.privacy.ledgers[0]["events"] == []
    assert public.entry.metrics.gap_closed.mean == 0.0
    assert public.entry.contamination.after_cutoff is True
    assert public.entry.method.source == "built-in" and public.entry.method.version == __version__

    logs: list[str] = []
    nonpriv = run_eval(EvalRequest(method="non-private", seeds=(0,), out=tmp_path, home=root, progress=False), log=logs.append)
    _check_entry(nonpriv.entry, nonpriv.path)
    assert nonpriv.entry.privacy.epsilon == "inf"
    assert nonpriv.entry.metrics.gap_closed.mean == pytest.approx(1.0)
    assert nonpriv.path.parent == tmp_path / "entries" / "demo" / "non-private"
    # the same command again reuses the finished seed instead of training again
    again: list[str] = []
    reused = run_eval(EvalRequest(method="non-private", seeds=(0,), out=tmp_path, home=root, progress=False),
                      log=again.append)
    assert any("already done" in line for line in again) and not any("running" in line for line in again)
    costs = reused.entry.costs  # the entry still counts the seed's time, though this process did not spend it
    assert costs.wall_seconds >= costs.method_seconds + costs.downstream_seconds == pytest.approx(
        nonpriv.entry.costs.method_seconds + nonpriv.entry.costs.downstream_seconds)


def test_presets_follow_the_profile_and_a_missing_cpu_preset_is_refused():
    from largefedbench.methods.dp_ftrl import DPFTRL
    from largefedbench.methods.popri import POPri
    from largefedbench.methods.references import PublicReference

    from largefedbench.run.presets import preset_config, settings_table

    assert preset_config(POPri, "cpu") == POPri.Config.cpu() != POPri.Config.tiny()
    assert preset_config(POPri, "paper") == POPri.Config()
    assert preset_config(DPFTRL, "cpu") == DPFTRL.Config.cpu() != DPFTRL.Config.tiny()
    assert preset_config(PublicReference, "cpu") == PublicReference.Config()  # no settings: every preset is the same

    @dataclass(frozen=True)
    class PluginConfig:  # a plug-in method's config with no cpu preset, and a paper() of its own
        rounds: int = 20

        @classmethod
        def tiny(cls):
            return cls(rounds=2)

        @classmethod
        def paper(cls):
            return cls(rounds=50)

    plugin = type("Plugin", (), {"Config": PluginConfig, "name": "my-plugin"})
    with pytest.raises(InputError, match=r"'my-plugin' has no cpu preset.*cpu\(\).*--preset tiny"):
        preset_config(plugin, "cpu")  # not its tiny settings, silently
    assert preset_config(plugin, "paper") == PluginConfig(rounds=50) and preset_config(plugin, "tiny").rounds == 2
    assert settings_table(plugin) == [{"setting": "rounds", "type": "int", "paper": 50, "cpu": None, "tiny": 2}]
    with pytest.raises(InputError, match="--preset 'huge'"):
        preset_config(POPri, "huge")


def test_the_public_models_loss_on_synthetic_text_is_measured_against_its_loss_on_the_clients(tiny, lfb_home):
    """0 on the validation spans themselves; below 0 on the public split the ε = 0 model was pretrained on (nothing
    there to teach it); the ε = 0 model's mean loss on the texts, minus the clients'."""
    from largefedbench.evaluation import next_token_accuracy
    from largefedbench.run import evaluator

    fd, bundle, root = tiny
    prep = prepare(EvalRequest(method="popri", out=lfb_home / "b", home=root))
    ev = evaluator.Evaluator(prep, bundle, lambda m: None)
    assert ev.public_loss_vs_clients(ev.validation_texts) == pytest.approx(0.0, abs=1e-9)
    public = fd.public.all_spans()
    familiar = ev.public_loss_vs_clients(public)
    assert familiar < -0.1  # its own pretraining text: far more predictable to it than the clients' spans
    assert len(public) > evaluator.LOSS_TEXTS  # so the measured texts are a spread of 4,096 of them
    picks = np.linspace(0, len(public) - 1, evaluator.LOSS_TEXTS).round().astype(int)
    assert len(set(picks)) == evaluator.LOSS_TEXTS and picks[0] == 0 and picks[-1] == len(public) - 1
    sample = [public[i] for i in picks]
    own = next_token_accuracy(bundle.new_downstream(), bundle.tokenizer, sample, max_len=ev.training.max_len)["loss"]
    assert familiar == pytest.approx(own - ev.public_validation_loss)
    few = public[:40]
    assert ev.public_loss_vs_clients(few + [" ", "\n"] * 5) == pytest.approx(ev.public_loss_vs_clients(few))
    assert ev.public_loss_vs_clients([" ", "\n", ""]) is None  # nothing to measure: no number, no crash
    stats = ev.synthetic_stats(public[:50])
    assert stats["public_loss_vs_clients"] == pytest.approx(ev.public_loss_vs_clients(public[:50]))


def test_a_reference_method_run_caches_its_row_instead_of_training_it_twice(tiny, tmp_path):
    """`lfb eval --method non-private` trains on the private clients once: the run is the reference row."""
    _fd, _bundle, root = tiny
    home = tmp_path / "home"
    shutil.copytree(root, home, ignore=shutil.ignore_patterns("references"))  # the snapshot and models, no cached rows
    logs: list[str] = []
    result = run_eval(EvalRequest(method="non-private", seeds=(0,), out=tmp_path / "board", home=home, progress=False),
                      log=logs.append)
    assert not any("computing the non-private reference" in line for line in logs), logs
    assert any("computing the public reference" in line for line in logs)
    np_top1 = result.entry.metrics.reference_non_private.top1.per_seed[0]
    assert np_top1 == result.entry.metrics.next_token_accuracy.top1.per_seed[0]
    # the board keeps a copy of both rows (committed with its seeds): a fresh home beside it computes neither again
    assert sorted(p.name for p in (tmp_path / "board" / ".runs" / "references").rglob("*.json")) == [
        "non-private-seed0.json", "public.json"]
    fresh = tmp_path / "fresh-home"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns("references"))
    later: list[str] = []
    public = run_eval(EvalRequest(method="public", seeds=(0,), out=tmp_path / "board", home=fresh, progress=False),
                      log=later.append)
    assert not any("computing the" in line for line in later), later
    assert public.entry.metrics.reference_non_private.top1.per_seed[0] == np_top1
    # a row only the home holds (cached before the board kept copies) gets its copy; a damaged copy is set aside
    copies = {p.name: p for p in (tmp_path / "board" / ".runs" / "references").rglob("*.json")}
    copies["public.json"].unlink()
    copies["non-private-seed0.json"].write_text("{")
    again: list[str] = []
    run_eval(EvalRequest(method="public", seeds=(0,), out=tmp_path / "board", home=fresh, progress=False),
             log=again.append)
    assert json.loads(copies["public.json"].read_text())["top1"] == public.entry.metrics.reference_public.top1.mean
    assert json.loads(copies["non-private-seed0.json"].read_text())["top1"] == np_top1
    assert any("set aside as non-private-seed0.json.damaged" in line for line in again), again


def test_a_method_output_of_another_version_is_not_reused(tmp_path):
    """`method-output.pt` is reused only by the LargeFedBench and method versions that wrote it: after an upgrade or
    a fix to the method, the method runs again."""
    from largefedbench.run.seed import load_method_output, save_method_output

    class Fed:
        def __init__(self):
            self.loaded = None

        def state_dict(self):
            return {"round": 3}

        def load_state_dict(self, state):
            self.loaded = state

    path, stamp = tmp_path / "method-output.pt", {"lfb": "1.0", "method": "1.0"}
    save_method_output(path, Fed(), {"texts": ["a"]}, [], 1.5, {"other": 1.5}, stamp)
    fed = Fed()
    assert load_method_output(path, fed, {"lfb": "1.1", "method": "1.0"}, "cpu") is None and fed.loaded is None
    assert load_method_output(path, fed, stamp, "cpu") == ({"texts": ["a"]}, [], 1.5, {"other": 1.5})
    assert fed.loaded == {"round": 3}
    assert load_method_output(tmp_path / "none.pt", Fed(), stamp, "cpu") is None


def test_each_reference_row_is_locked_beside_its_own_cache_file(lfb_home, monkeypatch):
    """The lock is keyed as the cache: the public row is one file (and one lock) for every seed, the others one per
    seed, and a generator-only row of another preset never waits for this one."""
    from types import SimpleNamespace

    import torch

    from largefedbench.data.public_corpus import load_public_corpus
    from largefedbench.run import eval as harness

    prep = prepare(EvalRequest(method="popri", epsilon=4, out=lfb_home / "b"))
    bundle = SimpleNamespace(describe=lambda: {"downstream": {"sha256": "d" * 64}, "generator": {"sha256": "g" * 64}},
                             public_corpus=load_public_corpus("split", prep.fd), device=torch.device("cpu"))
    ev = harness.Evaluator(prep, bundle, lambda m: None)
    assert ev.reference_path("public", 0) == ev.reference_path("public", 1)
    assert ev.reference_path("non-private", 0) != ev.reference_path("non-private", 1)
    assert ev.reference_path("generator-only", 0).parent != ev.reference_path("non-private", 0).parent  # its config
    locks = []
    monkeypatch.setattr(harness, "locked_reference", lambda compute, lock, **kw: locks.append(lock) or {"top1": 0.0})
    for name, seed in (("public", 0), ("public", 1), ("non-private", 1), ("generator-only", 2)):
        harness._reference(prep, ev, name, seed, lambda m: None)
    assert locks == [ev.reference_path(n, s).with_suffix(".lock")
                     for n, s in (("public", 0), ("public", 0), ("non-private", 1), ("generator-only", 2))]
