"""`lfb audit`: the ordinary harness run with canary clients in its train split, scored from what it released.

:class:`Audit` plugs into :func:`largefedbench.run.eval.run_eval`: it gives each seed's federation the train split
plus the included canaries (:mod:`largefedbench.audit.canaries`), scores every canary from the method's artifact,
and writes the entry's ``audit`` section: per seed the one-run ε lower bound (Steinke et al. 2023) at significance
(1 − confidence) / seeds — so the largest over the seeds holds at the confidence asked — and, for model updates,
Andrew et al.'s one-shot estimate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.audit.canaries import (
    CanaryPlan,
    canary_split,
    text_scores,
    update_scores,
    with_canaries,
    with_clients,
)
from largefedbench.audit.estimators import one_run_lower_bound, one_shot_estimate
from largefedbench.audit.releases import SCORE as RELEASE_SCORE
from largefedbench.audit.releases import ReleaseScores
from largefedbench.errors import InputError, MethodError

__all__ = ["Audit", "ESTIMATOR", "SCORES", "audit_seed"]

ESTIMATOR = ("one-run lower bound (Steinke, Nasr & Jagielski, NeurIPS 2023, Thm 5.2 with the delta term): one-sided "
             "top-k guesses, Bonferroni over thresholds; one-shot Gaussian estimate (Andrew et al., ICLR 2024) for "
             "model updates")
LEAK_CANARIES = 3
SCORES = {
    "update": "cosine between the canary's random unit direction and the released model minus the public model",
    "text": "largest cosine similarity between the canary's secret sentences and the released synthetic texts "
            "(the profile's sentence embedder)",
    "releases": RELEASE_SCORE,  # text canaries of a method that released batched noised sums (PE, PE+SFT, POPri)
}


def canary_kind(method_cls: type) -> str:
    return "update" if method_cls.output == "model" else "text"


def _summary(x: np.ndarray) -> dict[str, Any]:
    return {"n": int(len(x)), "mean": float(x.mean()) if len(x) else None,
            "std": float(x.std(ddof=1)) if len(x) > 1 else (0.0 if len(x) else None)}


def audit_seed(plan: CanaryPlan, scores: np.ndarray, *, seed: int, confidence: float, delta: float,
               n_seeds: int = 1) -> dict[str, Any]:
    """One seed's audit from its canary ``scores`` (shape (m,)); the bound at significance (1 − confidence)/n_seeds."""
    scores = np.asarray(scores, dtype=float)
    inc = plan.included
    bound = one_run_lower_bound(scores[inc], scores[~inc], confidence=1 - (1 - confidence) / n_seeds, delta=delta)
    out = {"seed": seed, "inserted": int(inc.sum()), "scores_in": _summary(scores[inc]),
           "scores_out": _summary(scores[~inc]), "guesses": bound.guesses, "correct": bound.correct,
           "thresholds": bound.thresholds_tried, "threshold": bound.threshold, "epsilon_lower_bound": bound.epsilon}
    if plan.kind == "update" and inc.sum() >= 2:
        est = one_shot_estimate(scores[inc], scores[~inc], delta)
        out["one_shot_epsilon"] = "inf" if math.isinf(est["epsilon"]) else est["epsilon"]
        out["one_shot"] = {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in est.items()}
    return out


@dataclass
class Audit:
    """The audit settings of one ``lfb audit`` run and its hooks into the harness."""

    canaries: int = 100
    confidence: float = 0.95
    inclusion_seed: int = 0
    progress: bool = True
    #: extra train clients whose spans are random 12-letter words, searched for in every output of each seed (a hit
    #: stops the audit: client text left the federation other than as a noised sum); 0 in audits made before them
    leak_canaries: int = LEAK_CANARIES

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise InputError(f"--confidence {self.confidence}: give a probability in (0, 1), e.g. 0.95")
        if not (isinstance(self.leak_canaries, int) and 0 <= self.leak_canaries <= 100):
            raise InputError(f"--leak-canaries {self.leak_canaries}: give a count from 0 to 100 (default {LEAK_CANARIES})")
        self.plan: CanaryPlan | None = None
        self._clip: float | None = None
        self._scores: dict[int, list[float]] = {}
        self._releases: ReleaseScores | None = None

    # -- before the run: the entry id and the canaries ----------------------------------------------------------
    def prepare(self, prep):
        """The harness's checked request with its own entry id (an audit run is not the plain run) and command."""
        if prep.budget.epsilon == 0 or math.isinf(prep.budget.epsilon):
            raise InputError(f"method {prep.method_cls.name!r} is a reference (ε = {prep.budget.epsilon:g}); audit a "
                             "private method")
        kind = canary_kind(prep.method_cls)
        votes = kind == "text" and prep.method_cls.audit_by_releases
        if votes:  # the canaries' texts come from the run's public corpus, as the method's own prompts do
            from largefedbench.data.public_corpus import load_public_corpus

            pool = tuple(t for t in load_public_corpus(prep.public_spec, prep.fd).spans if t.strip())
        else:
            pool = ()
        self.plan = CanaryPlan(self.canaries, self.inclusion_seed, kind, pool)
        if kind == "update":
            clip = getattr(prep.config, "clip", None)
            if not (isinstance(clip, (int, float)) and clip > 0):
                raise MethodError(f"method {prep.method_cls.name!r} releases a model but its config has no clip norm "
                                  "(`clip`), which model-update canaries are scaled to; it cannot be audited yet")
            self._clip = float(clip)
        entry_id, run_id = (self._audit_id(i) for i in (prep.entry_id, prep.run_id or prep.entry_id))
        command = prep.request.command or self._command(prep)
        request = dataclasses.replace(prep.request, command=command)
        return dataclasses.replace(prep, request=request, entry_id=entry_id, run_id=run_id,
                                   entry_path=prep.entry_path.with_name(f"{entry_id}.json"))

    def _audit_id(self, plain_id: str) -> str:
        """``<plain id>--audit-<digest of the canary settings>``, shortened in its name part, never a digest."""
        from largefedbench.run.eval import bounded_id

        settings = [plain_id, self.canaries, self.inclusion_seed] + ([self.leak_canaries] if self.leak_canaries else [])
        key = json.dumps(settings, sort_keys=True)
        name, _, plain_digest = plain_id.rpartition("--")
        return bounded_id(name, plain_digest, f"audit-{hashlib.sha256(key.encode()).hexdigest()[:8]}")

    def _command(self, prep) -> str:
        from largefedbench.run.command import command_for

        parts = shlex.split(command_for(prep))
        parts[1] = "audit"
        return shlex.join(parts + ["--canaries", str(self.canaries), "--confidence", f"{self.confidence:g}",
                                   "--inclusion-seed", str(self.inclusion_seed), "--leak-canaries", str(self.leak_canaries)])

    def leak_texts(self, seed: int) -> dict[str, list[str]]:
        """The seed's leak canaries: id → one span of six random 12-letter words (fixed by the inclusion seed and
        the seed, so a resumed seed has the same clients)."""
        from largefedbench.data.private_text import canary_texts

        rng = np.random.default_rng(np.random.SeedSequence([self.inclusion_seed, seed, 0x1EA4]))
        return {f"leak-canary-{seed}-{i}": spans for i, spans in enumerate(canary_texts(rng, self.leak_canaries))}

    # -- during each seed -----------------------------------------------------------------------------------
    def federation(self, ev, method_cls: type, seed: int):
        """The seed's federation over the train split plus the included canaries (canary hook set for updates)."""
        from largefedbench.federation import Federation, SpanEmbeddings
        from largefedbench.models import embed

        plan = self.plan
        leaks = self.leak_texts(seed)
        split = with_clients(with_canaries(ev.prep.fd.train, plan), leaks)
        self._since = time.time()
        embeddings = None
        if getattr(method_cls, "needs_span_embeddings", False):
            base = ev.bundle.span_embeddings(ev.prep.fd, "train", progress=ev.prep.request.progress)
            extra = [s for j in np.flatnonzero(plan.included) for s in plan.texts(int(j))]
            extra += [s for spans in leaks.values() for s in spans]
            vectors = np.concatenate([base, embed(extra, ev.bundle.embedder).astype(base.dtype)]) if extra else base
            embeddings = SpanEmbeddings(vectors, np.concatenate([[0], np.cumsum(split.span_counts())]))
        fed = Federation(split, seed=seed, embeddings=embeddings, noise_free=ev.prep.request.noise_free,
                         executor=getattr(ev, "executor", None))
        make_selection = getattr(ev, "selection", None)  # model selection as in lfb eval (a test's stand-in: none)
        if make_selection is not None:
            fed.selection = make_selection(seed)
        if plan.kind == "update":
            fed.client_outputs = plan.federation_hook(self._clip)
        elif plan.pool and embeddings is not None:  # canaries scored against every noised sum the method releases
            from largefedbench.client_views import ClientStore

            canaries = canary_split(plan, ev.prep.fd.train)
            vectors = embed([s for j in range(plan.m) for s in plan.texts(j)], ev.bundle.embedder).astype(base.dtype)
            store = ClientStore(canaries, SpanEmbeddings(vectors, np.concatenate([[0], np.cumsum(canaries.span_counts())])))
            run_dir = getattr(ev.prep, "run_dir", None)  # the seed's folder: scores survive a kill and resume
            path = None if run_dir is None else run_dir / f"seed-{seed}" / "audit-release-scores.npz"
            self._releases = fed.on_release = ReleaseScores(store, plan.m, path)
        return fed

    def search_leaks(self, artifact, seed: int, seed_dir) -> None:
        """Stop the audit if a leak canary's words are in the artifact (texts, info, history), the seed's folder or a
        file the run left in the system temp folder: they reach the method only by leaking."""
        from largefedbench.data.private_text import LeakSearch

        words = [w for spans in self.leak_texts(seed).values() for t in spans for w in t.split()]
        if not words:
            return
        search = LeakSearch(None, words)
        if isinstance(getattr(artifact, "texts", None), (list, tuple)):
            search.texts(artifact.texts, "artifact.texts")
        search.value(getattr(artifact, "info", None), "artifact.info")
        search.value(getattr(artifact, "history", None), "artifact.history")
        if seed_dir is not None:
            search.folder(seed_dir)
        search.folder(Path(tempfile.gettempdir()), newer_than=getattr(self, "_since", None), depth=2)
        if search.leaks:
            raise MethodError(f"audit seed {seed}: a leak canary's secret word left the federation other than as a "
                              f"noised sum ({'; '.join(str(leak) for leak in search.leaks[:3])}). Only fed.private_sum's "
                              "noised result may depend on the clients; run `lfb smoke` on the method to see how")

    def score(self, artifact, bundle, seed: int) -> dict[str, Any]:
        """Every canary's score from the released artifact (stored in the seed's result)."""
        plan = self.plan
        if plan.kind == "update":
            if artifact.kind != "model":
                raise MethodError("model-update canaries need a released model; the method released synthetic text")
            from largefedbench.fedtrain import FlatParams

            delta = FlatParams(artifact.model).get().cpu() - FlatParams(bundle.new_downstream()).get().cpu()
            scores = update_scores(plan, delta, progress=self.progress)
        elif self._releases is not None and self._releases.scored:
            scores, self._releases = self._releases.scores, None
            return {"scores": [float(s) for s in scores], "score": "releases"}
        else:
            from largefedbench.models import embed

            scores = text_scores(plan, artifact.texts or [], lambda t: embed(t, bundle.embedder))
        return {"scores": [float(s) for s in scores], "score": plan.kind}

    # -- after the run: the entry's section -----------------------------------------------------------------
    def section(self, results: list[dict[str, Any]], budget) -> dict[str, Any]:
        plan = self.plan
        seeds = [audit_seed(plan, np.asarray(r["audit"]["scores"]), seed=r["seed"], confidence=self.confidence,
                            delta=budget.delta, n_seeds=len(results)) for r in results]
        shots = [s["one_shot_epsilon"] for s in seeds if s.get("one_shot_epsilon") is not None]
        shot = None
        if shots:
            vals = [math.inf if v == "inf" else v for v in shots]
            mean = float(np.mean(vals))
            shot = "inf" if math.isinf(mean) else mean
        used = {r["audit"].get("score", plan.kind) for r in results}
        if len(used) != 1:
            raise MethodError(f"the seeds' canaries were scored differently ({', '.join(sorted(used))}); re-run the audit")
        leak = {"leak_canaries": self.leak_canaries} if self.leak_canaries else {}
        return {**leak, "canaries": plan.m, "kind": plan.kind, "inclusion_seed": plan.seed, "score": SCORES[used.pop()],
                "estimator": ESTIMATOR, "confidence": self.confidence, "delta": budget.delta,
                "epsilon_lower_bound": max(s["epsilon_lower_bound"] for s in seeds), "one_shot_epsilon": shot,
                "per_seed": seeds}
