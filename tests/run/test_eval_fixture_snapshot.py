"""`lfb eval` on a snapshot refreshed from real recorded bioRxiv responses (not only on the demo)."""

from __future__ import annotations

import math

import pytest
from biorxiv_replay import BiorxivApp, corpus
from largefedbench.scrapers.refresh import RefreshPlan, refresh, window_for
from replay_server import ReplayServer

from largefedbench.data.spans import SpanSettings
from largefedbench.leaderboard.schema import parse_entry
from largefedbench.privacy import PrivacyLedger
from largefedbench.run.eval import EvalRequest, run_eval


@pytest.fixture(scope="module")
def fixture_snapshot(tmp_path_factory):
    """bioRxiv records replayed through the real scraper: 2024-09 private clients, 2024-08 public ones."""
    root = tmp_path_factory.mktemp("fixture-root")
    records = corpus(4)
    public = [{**r, "doi": r["doi"] + ".pub", "date": f"2024-08-{1 + i % 28:02d}"} for i, r in enumerate(corpus(2))]
    with ReplayServer(BiorxivApp(records + public)) as srv:
        plan = RefreshPlan(window=window_for("2024-09", "2024-09-30", None, 1), sources=["biorxiv"],
                           span=SpanSettings(tokenizer="minilm-wordpiece"), base_urls={"biorxiv": srv.url})
        (result,) = refresh(plan, home=root, progress=False)
    return root, result.path.name


@pytest.mark.parametrize("method", ["dp-fedavg", "dp-ftrl"])
def test_eval_writes_an_entry_on_a_refreshed_snapshot(fixture_snapshot, method, tmp_path):
    root, name = fixture_snapshot
    request = EvalRequest(method=method, dataset=name, seeds=(0,), out=tmp_path, home=root, progress=False,
                          epsilon=8.0, delta=1e-4, overrides={"clients_per_round": "10", "rounds": "2"})
    result = run_eval(request, log=lambda m: None)
    entry = parse_entry(result.entry)
    assert entry.dataset.name == "biorxiv" and entry.dataset.snapshot == name.lower()
    assert entry.dataset.clients["train"] >= 40
    (ledger,) = entry.privacy.ledgers
    spent = PrivacyLedger.from_dict(ledger).epsilon(1e-4, entry.privacy.accountant)
    assert spent == pytest.approx(entry.privacy.epsilon) and spent <= 8.0 * 1.01
    assert all(math.isfinite(v) for v in entry.metrics.next_token_accuracy.top1.per_seed)
    assert entry.metrics.reference_public.top1.mean < entry.metrics.reference_non_private.top1.mean
    assert result.path.parent.name == method
