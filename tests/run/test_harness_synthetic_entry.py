"""`lfb eval` of a synthetic-text method (POPri, one round): the entry's gain over the generator-only row, its
window-novel accuracy and text statistics, the recorded selections, and the generator-only row run as a method."""

from __future__ import annotations

import json
import math

import pytest

from largefedbench.run.eval import EvalRequest, run_eval


def test_a_synthetic_entry_reports_its_gain_over_the_generator_only_row_and_window_novel_accuracy(tiny, tmp_path):
    from largefedbench.leaderboard.validate import validate_paths

    _fd, _bundle, root = tiny
    logs: list[str] = []
    result = run_eval(EvalRequest(method="popri", seeds=(0,), epsilon=4, out=tmp_path, home=root, progress=False,
                                  overrides={"rounds": "1"}), log=logs.append)
    m = result.entry.metrics
    assert m.reference_generator_only is not None  # computed here or cached by an earlier run on this home
    assert m.gain_over_generator_only.per_seed[0] == pytest.approx(
        m.next_token_accuracy.top1.per_seed[0] - m.reference_generator_only.top1.per_seed[0])
    w = m.window_novel
    assert w is not None and w.n_tokens > 0 and w.n_test_positions > 0 and w.k == 3.0
    assert 0 <= w.top1.mean <= 1 and w.reference_public <= 1
    assert m.topic_share is not None  # the demo knows its window's topics
    assert 0 < m.unigram_jsd.mean < 1 and -1 <= m.pairwise_cosine.mean < 1  # the samples' vocabulary and diversity
    assert math.isfinite(m.public_loss_vs_clients.mean)  # how familiar the samples are to the ε = 0 model
    assert result.entry.public is None and result.entry.public_kind == "split"  # tiny: the snapshot's public split
    report, = validate_paths([result.path])
    assert report.valid, [f.message for f in report.findings]
    # the seed keeps its downstream fine-tuning's epochs: the kept one is the first with the best validation top-1
    stored = json.loads(next(tmp_path.glob(".runs/popri--*/seed-0/result.json")).read_text())
    assert stored["precision"] == result.entry.environment.precision  # each seed records what it sampled in
    tuned = stored["downstream"]
    assert tuned["epochs"] == len(tuned["validation_top1"]) - 1 >= 1
    assert tuned["best_epoch"] == tuned["validation_top1"].index(max(tuned["validation_top1"]))
    assert tuned["validation_top1"][tuned["best_epoch"]] == pytest.approx(stored["validation"]["top1"], abs=1e-6)
    # every choice on the validation clients is recorded: POPri's lowest-FID round, the epoch
    (rounds, epoch) = stored["selections"]
    assert rounds["by"] == "method" and rounds["metric"] == "fid" and rounds["on"] == "private"
    assert rounds["candidates"] == result.entry.config.method["rounds"] + 1  # every round, and the state after them
    assert epoch == {"by": "harness", "what": "downstream epoch", "metric": "top1", "chosen": tuned["best_epoch"],
                     "candidates": tuned["epochs"] + 1, "on": "private"}
    sel = result.entry.selection
    assert sel.on == "private" and [r.model_dump() for r in sel.per_seed[0]] == stored["selections"]
    assert result.entry.selected_on_private and "--select-on" not in result.entry.config.command

    # the no-signal row is a method of its own too: ε = 0, nothing released, the untouched generator's text
    row = run_eval(EvalRequest(method="generator-only", seeds=(0,), out=tmp_path, home=root, progress=False),
                   log=lambda line: None)
    assert row.entry.privacy.epsilon == 0.0 and row.entry.privacy.ledgers[0]["events"] == []
    assert row.entry.metrics.next_token_accuracy.top1.mean == pytest.approx(m.reference_generator_only.top1.mean)
