"""The ceiling of the synthetic-text rows: real private text at their budget (ε = ∞).

``real-at-budget`` trains the downstream model the harness's way (same training, replay and epoch choice as every
synthetic row) on ``n_spans`` real private train spans drawn without replacement, where ``n_spans`` is the number of
final synthetic texts the group's synthetic methods release (POPri's ``n_final`` of the run's preset). It reads the
clients in the clear, recorded as one noiseless release, so its ε is ∞. Beside ``non-private`` (every span) it says
how much of the gap a perfect synthetic set of that size could close: when this row is far above the synthetic rows,
the budget is not what holds them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from largefedbench.methods.popri import POPriConfig

from largefedbench.contract import Artifact, Method, selection_of

DEVIATIONS = ("not a method of the papers: the downstream model trained on real private spans at the synthetic rows' "
              "text budget, ε = ∞ — the ceiling a synthetic set of that size could reach",)


@dataclass(frozen=True)
class RealAtBudgetConfig:
    """``n_spans``: real spans drawn (the synthetic budget: POPri's ``n_final`` of the same preset)."""

    n_spans: int = POPriConfig().n_final

    @classmethod
    def tiny(cls) -> RealAtBudgetConfig:
        return cls(n_spans=POPriConfig.tiny().n_final)

    @classmethod
    def cpu(cls) -> RealAtBudgetConfig:
        return cls(n_spans=POPriConfig.cpu().n_final)


class RealAtBudget(Method):
    name = "real-at-budget"
    paper = ("LargeFedBench's ceiling for synthetic text: the downstream model trained on as many real private spans as "
             "the synthetic rows release, ε = ∞")
    output = "model"
    Config = RealAtBudgetConfig
    fixed_epsilon = math.inf

    def train(self, fed, public, cfg: RealAtBudgetConfig, budget) -> Artifact:
        texts = fed.release_without_noise()
        n = min(int(cfg.n_spans), len(texts))
        pick = public.rng(stream=1).choice(len(texts), size=n, replace=False)
        chosen = [texts[i] for i in sorted(pick)]
        return Artifact.trained_model(selection_of(fed).train_downstream(chosen), n_train_spans=n,
                                      note=f"{n} of {len(texts)} real private train spans, drawn per seed")
