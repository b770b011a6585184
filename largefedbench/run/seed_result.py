"""One seed's run, evaluated: what the harness stores as ``seed-<s>/result.json`` and builds the entry from."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.errors import InputError
from largefedbench.leaderboard.schema import SYNTHETIC_TEXT_STATS

__all__ = ["SeedResult", "downstream_summary", "jsonable"]


@dataclass(frozen=True)
class SeedResult:
    """The method's run for one seed and the harness's evaluation of what it produced."""

    seed: int
    test: dict[str, float]  # next-token accuracy on the test clients: top1, top3, top5, n_tokens
    validation: dict[str, float]  # the same on the validation clients
    fid: float | None  # synthetic vs validation spans (synthetic-text methods only)
    epsilon: float  # spent, from the seed's ledger
    accountant: str
    ledger: dict[str, Any]  # PrivacyLedger.to_dict()
    costs: dict[str, Any]  # Costs.summary()
    method_seconds: float
    downstream_seconds: float
    history: list[dict[str, Any]]  # the artifact's, one JSON-ready dict per round
    info: dict[str, Any]  # the artifact's method-specific detail
    n_synthetic: int | None
    audit: dict[str, Any] | None = None  # the canaries' scores (``lfb audit`` runs only)
    topic_share: float | None = None  # demos only: share of the synthetic samples naming a private-only topic
    unigram_jsd: float | None = None  # synthetic texts vs validation spans, downstream token ids (evaluation.text_stats)
    pairwise_cosine: float | None = None  # mean cosine between two synthetic samples' embeddings (1: one mode)
    public_loss_vs_clients: float | None = None  # the ε = 0 model's loss on the texts minus on the validation spans
    stage_seconds: dict[str, float] | None = None  # wall seconds per stage (largefedbench.timing), method and evaluation
    calibrations: list[dict[str, Any]] | None = None  # the method's budget.calibrate calls (PrivacyBudget.calibrations)
    made_with: dict[str, Any] | None = None  # the lfb version and git commit the seed ran with (a resumed run's may differ)
    wall_seconds: float | None = None  # the seed's wall time, earlier processes' completed work included (None: older)
    downstream: dict[str, Any] | None = None  # synthetic-text methods: the fine-tuning's kept epoch (downstream_summary)
    precision: dict[str, str] | None = None  # what the seed sampled and trained in (models.precision.precision_record)
    #: every choice made on held-out data (contract.Selection.records: by, what, metric, chosen, candidates, on);
    #: [] when none was made, None in results stored before selections were recorded
    selections: list[dict[str, Any]] | None = None
    #: how the method's train() was kept from the data and the scorer: "namespaces" (its own process behind the OS
    #: guard), "process" (its own process, no OS guard on this platform), "none" (in the harness's process)
    sandbox: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (``result.json``): every field; the optional ones (``audit``, ``topic_share``, the text
        statistics, ``stage_seconds``, ``calibrations``, ``made_with``, ``wall_seconds``, ``downstream``,
        ``precision``, ``selections``) only when set."""
        data = dataclasses.asdict(self)
        for key in ("audit", *SYNTHETIC_TEXT_STATS, "stage_seconds", "calibrations", "made_with", "wall_seconds",
                    "downstream", "precision", "selections", "sandbox"):
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: Any, where: Path | str = "result.json") -> SeedResult:
        """A stored result back (as :meth:`to_json` wrote it, or as earlier versions of lfb did)."""
        names = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
        missing = sorted(required - set(data)) if isinstance(data, dict) else sorted(required)
        if missing:
            raise InputError(f"{where} is not a seed result (missing {', '.join(missing)}): delete its seed folder "
                             "to run that seed again")
        return cls(**{k: v for k, v in data.items() if k in names})


def downstream_summary(tuned) -> dict[str, Any]:
    """What a seed keeps of its downstream fine-tuning (a :class:`~largefedbench.evaluation.downstream.DownstreamResult`):
    the kept epoch — 0 is the ε = 0 model as given, so the synthetic set never raised validation top-1 above it and
    the seed's test numbers are the public row's — and validation top-1 after each epoch (epoch 0 first)."""
    return {"best_epoch": int(tuned.best_epoch), "epochs": len(tuned.history) - 1,
            "validation_top1": [round(float(r.validation["top1"]), 6) for r in tuned.history]}


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars as Python numbers, non-finite floats as strings and anything else unknown as its
    repr: what a method puts in its artifact's ``info`` and ``history``, made safe to store."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)
