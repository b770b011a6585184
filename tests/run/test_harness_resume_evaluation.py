"""`lfb eval` killed after its method returned: the seed resumes in the evaluation without running the method
again, and the entry is the one an uninterrupted run writes."""

from __future__ import annotations

import json

import pytest

from largefedbench.errors import InputError
from largefedbench.run.eval import EvalRequest, run_eval


def test_a_seed_killed_while_its_output_is_evaluated_resumes_without_running_the_method_again(tiny, tmp_path,
                                                                                              monkeypatch):
    """The method's output and its federation (ledger, costs) are kept once it returns: a kill in the downstream
    training or evaluation resumes there, and the entry is the one an uninterrupted run writes."""
    from conftest import Killed

    from largefedbench.contract import PublicResources
    from largefedbench.run.evaluator import Evaluator
    from largefedbench.run.seed import METHOD_OUTPUT, PRECISION_STAMP

    _fd, _bundle, root = tiny
    request = dict(method="dp-fedavg", seeds=(0,), epsilon=4, home=root, progress=False, overrides={"rounds": "2"})
    whole = run_eval(EvalRequest(**request, out=tmp_path / "whole"), log=lambda line: None)

    test_metrics = Evaluator.test_metrics

    def dies(self, *args, **kwargs):  # the test-set evaluation comes only after the method has returned
        raise Killed

    monkeypatch.setattr(Evaluator, "test_metrics", dies)
    save_round, stamped = PublicResources.save_round, []

    def stamped_before(self, *args, **kwargs):  # each round checkpoint is written after the seed's precision stamp
        stamped.append((self.run_dir / PRECISION_STAMP).exists())
        return save_round(self, *args, **kwargs)

    monkeypatch.setattr(PublicResources, "save_round", stamped_before)
    with pytest.raises(Killed):
        run_eval(EvalRequest(**request, out=tmp_path / "killed"), log=lambda line: None)
    kept = list((tmp_path / "killed" / ".runs").glob(f"*/seed-0/{METHOD_OUTPUT}"))
    assert len(kept) == 1 and stamped and all(stamped)
    stamp = kept[0].parent / PRECISION_STAMP  # written before the method ran: what its round checkpoints are made in
    assert json.loads(stamp.read_text()) == whole.entry.environment.precision
    monkeypatch.setattr(Evaluator, "test_metrics", test_metrics)
    logs: list[str] = []
    resumed = run_eval(EvalRequest(**request, out=tmp_path / "killed"), log=logs.append)
    assert any("had finished; evaluating what it produced" in line for line in logs), logs
    assert not any(": running dp-fedavg" in line for line in logs)
    assert not kept[0].exists() and not stamp.exists()  # gone once the seed's result is stored
    assert resumed.entry.entry_id == whole.entry.entry_id
    assert resumed.entry.metrics.next_token_accuracy == whole.entry.metrics.next_token_accuracy
    assert resumed.entry.privacy.ledgers == whole.entry.privacy.ledgers
    assert resumed.entry.privacy.epsilon == whole.entry.privacy.epsilon
    # the method's choice (DP-FedAvg's best round of 0..2 by validation top-1) is kept with its output
    (best,) = whole.entry.selection.per_seed[0]
    assert (best.by, best.metric, best.candidates, best.on) == ("method", "top1", 3, "private")
    scores = [(h["validation_top1"], -h["round"]) for h in whole.entry.history[0] if "validation_top1" in h]
    assert best.chosen == -max(scores)[1]  # the first round with the best validation top-1
    assert resumed.entry.selection == whole.entry.selection
    # the run checks its seeds' precision before any work: a seed made in another one is not pooled into the entry
    done = next((tmp_path / "killed" / ".runs").glob("*/seed-0/result.json"))
    done.write_text(json.dumps({**json.loads(done.read_text()), "precision": {"generation": "float16",
                                                                               "training": "float16"}}))
    with pytest.raises(InputError, match=r"seed-0/result.json was made sampling in float16 and training in float16"):
        run_eval(EvalRequest(**request, out=tmp_path / "killed"), log=lambda line: None)
