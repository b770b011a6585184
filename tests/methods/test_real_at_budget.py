"""The ceiling row: the downstream model trained on real private spans at the synthetic budget, ε = ∞."""

from __future__ import annotations

import math
from types import SimpleNamespace

from largefedbench.methods.popri import POPriConfig
from largefedbench.methods.real_at_budget import RealAtBudget, RealAtBudgetConfig

from largefedbench.contract import PublicResources
from largefedbench.leaderboard.board import REFERENCES, bucket_of


def test_the_budget_is_the_synthetic_rows_final_set():
    assert RealAtBudgetConfig.cpu().n_spans == POPriConfig.cpu().n_final == 1024
    assert RealAtBudgetConfig.tiny().n_spans == POPriConfig.tiny().n_final
    assert math.isinf(RealAtBudget.fixed_epsilon) and bucket_of(RealAtBudget.fixed_epsilon) == REFERENCES


class _Fed:
    """The clients' spans released in the clear (as the federation does for an ε = ∞ row) and a selection that
    records what it trained on."""

    def __init__(self, spans):
        self.spans, self.released, self.trained = spans, 0, []
        self.selection = SimpleNamespace(train_downstream=lambda texts: self.trained.append(texts) or "model")

    def release_without_noise(self):
        self.released += 1
        return list(self.spans)


def _train(n_spans: int, seed: int, spans):
    fed = _Fed(spans)
    art = RealAtBudget().train(fed, PublicResources(models=None, seed=seed), RealAtBudgetConfig(n_spans=n_spans), None)
    return fed, art


def test_real_at_budget_trains_on_that_many_distinct_real_spans_drawn_per_seed():
    spans = [f"span {i}" for i in range(100)]
    fed, art = _train(20, 0, spans)
    assert fed.released == 1 and art.model == "model" and art.info["n_train_spans"] == 20
    (chosen,) = fed.trained
    assert len(set(chosen)) == 20 and set(chosen) <= set(spans)
    assert _train(20, 0, spans)[0].trained[0] == chosen  # the same seed draws the same spans
    assert _train(20, 1, spans)[0].trained[0] != chosen  # another seed other spans
    assert _train(500, 0, spans)[0].trained[0] == spans  # a budget above the clients' spans takes them all
