"""The entry's audit section: validated by `lfb leaderboard validate` (bounds recomputed from the guess counts,
inserted counts from the coin flips), and shown on the board beside the claimed ε, flagged when it exceeds it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from largefedbench.audit.canaries import CanaryPlan
from largefedbench.leaderboard.render import render_board
from largefedbench.leaderboard.validate import validate_paths
from largefedbench.privacy import PrivacyBudget, PrivacyLedger
from largefedbench.run.audit import Audit

BOARD = Path(__file__).resolve().parents[2] / "leaderboard" / "entries" / "demo" / "dp-fedavg"


def audited_entry(separation: float, canaries: int) -> dict:
    """A committed demo entry with an audit section computed from made-up canary scores."""
    entry = json.loads(next(BOARD.glob("*--demo--tiny--eps1--??????????.json")).read_text())  # the unaudited tiny entry
    audit = Audit(canaries=canaries, confidence=0.95, inclusion_seed=3)
    audit.plan = CanaryPlan(canaries, 3, "update")
    inc = audit.plan.included
    rng = np.random.default_rng(0)
    results = [{"seed": s, "audit": {"scores": list(rng.normal(0, 0.01, canaries) + separation * inc)}}
               for s in entry["seeds"]]
    entry["audit"] = audit.section(results, PrivacyBudget(1.0, entry["privacy"]["delta"]))
    # the audited federation held the inserted and the leak canaries too: its Poisson rate is
    # clients_per_round / (N + inserted + leak canaries)
    priv = entry["privacy"]
    extra = int(inc.sum()) + entry["audit"].get("leak_canaries", 0)
    rate = entry["config"]["method"]["clients_per_round"] / (priv["n_train_clients"] + extra)
    for ledger in priv["ledgers"]:
        for event in ledger["events"]:
            event["sample_rate"] = rate
    priv["epsilon_per_seed"] = [PrivacyLedger.from_dict(g).epsilon(priv["delta"], priv["accountant"])
                                for g in priv["ledgers"]]
    priv["epsilon"] = max(priv["epsilon_per_seed"])
    return entry


def write(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "entries" / "demo" / "dp-fedavg" / f"{entry['entry_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entry))
    for png in BOARD.glob("*.png"):
        (path.parent / png.name).write_bytes(png.read_bytes())
    return path


def findings(tmp_path: Path, entry: dict):
    write(tmp_path, entry)
    [report] = validate_paths([tmp_path / "entries"])
    return report


def test_a_consistent_audit_validates_and_a_falsified_claim_is_flagged(tmp_path):
    quiet = findings(tmp_path / "a", audited_entry(0.0, 100))
    assert quiet.valid and not [f for f in quiet.findings if f.check == "audit"]
    assert quiet.entry.audit.epsilon_lower_bound <= 1.0
    leaky = audited_entry(1.0, 400)  # perfectly separated scores: the bound is above ε = 1
    report = findings(tmp_path / "b", leaky)
    assert report.valid and leaky["audit"]["epsilon_lower_bound"] > 1
    assert [f.check for f in report.notes if f.check == "audit"] == ["audit"]
    render_board(tmp_path / "b")
    board = (tmp_path / "b" / "README.md").read_text()
    assert "Audited ε" in board and "⚠ exceeds ε" in board
    assert "Audited ε" in (tmp_path / "b" / "index.html").read_text()


@pytest.mark.parametrize("tamper, field", [
    (lambda a: a["per_seed"][0].update(epsilon_lower_bound=a["per_seed"][0]["epsilon_lower_bound"] + 0.5),
     "audit.per_seed[0].epsilon_lower_bound"),
    (lambda a: a["per_seed"][1].update(inserted=a["per_seed"][1]["inserted"] + 1), "audit.per_seed[1].inserted"),
    (lambda a: a.update(epsilon_lower_bound=a["epsilon_lower_bound"] + 1), "audit.epsilon_lower_bound"),
    (lambda a: a.update(delta=0.01), "audit.delta"),
])
def test_an_inconsistent_audit_is_an_error(tmp_path, tamper, field):
    entry = copy.deepcopy(audited_entry(0.03, 200))
    tamper(entry["audit"])
    report = findings(tmp_path, entry)
    assert not report.valid
    assert field in [f.field for f in report.errors if f.check == "audit"]


def test_the_sampling_rate_counts_the_inserted_canaries(tmp_path):
    entry = audited_entry(0.0, 100)
    assert findings(tmp_path / "a", entry).valid
    entry["audit"] = None  # the same ledgers without the audit: the rate no longer matches N alone
    report = findings(tmp_path / "b", entry)
    assert "counts" in [f.check for f in report.errors]


def test_the_sampling_rate_counts_the_leak_canaries(tmp_path):
    entry = audited_entry(0.0, 100)
    assert entry["audit"]["leak_canaries"] > 0  # the default audit adds them
    assert findings(tmp_path / "a", entry).valid
    entry["audit"]["leak_canaries"] = 0  # ledgers that sampled over N + inserted + 3, read as N + inserted
    assert "counts" in [f.check for f in findings(tmp_path / "b", entry).errors]


@pytest.mark.slow
def test_an_audit_with_the_default_settings_writes_an_entry_that_validates(tiny, tmp_path):
    """`lfb audit --method dp-fedavg` with the audit's default canaries and leak canaries on the demo: the entry it
    writes passes every check, its sampling rate recomputed over every client the federation held (one short round
    of 20 clients keeps it quick; the references are cached in the session's shared home)."""
    from largefedbench.leaderboard.validate import format_reports
    from largefedbench.run.audit import LEAK_CANARIES
    from largefedbench.run.eval import EvalRequest, run_eval

    _fd, _bundle, root = tiny
    request = EvalRequest(method="dp-fedavg", seeds=(0,), epsilon=4.0, out=tmp_path / "board", home=root,
                          progress=False, overrides={"rounds": "1", "clients_per_round": "20", "max_local_steps": "1"})
    result = run_eval(request, log=lambda m: None, audit=Audit(progress=False))
    section = result.entry.audit
    assert section.leak_canaries == LEAK_CANARIES > 0 and section.per_seed[0].inserted > 0
    assert result.entry.config.method["clients_per_round"] < result.entry.privacy.n_train_clients  # a sampled rate
    (report,) = validate_paths([tmp_path / "board" / "entries"])
    assert report.valid, format_reports([report])
