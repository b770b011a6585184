"""One seed of a run: the evaluator (validation and test texts, downstream training, the cached reference rows)
and :func:`run_seed` (the method under the budget, its artifact evaluated, the result stored so a re-run skips it)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from largefedbench import __version__, timing
from largefedbench.config_overrides import config_to_dict
from largefedbench.contract import PublicResources
from largefedbench.environment import git_commit
from largefedbench.errors import MethodError, PrivacyError
from largefedbench.io import atomic_write_json
from largefedbench.paths import lfb_home
from largefedbench.privacy import PrivacyBudget, PrivacyLedger, resolve_accountant
from largefedbench.privacy.rules import BUDGET_SLACK, over_budget
from largefedbench.run.presets import preset_config
from largefedbench.run.reference_code import reference_code_fingerprint
from largefedbench.run.seed_result import SeedResult, jsonable

if TYPE_CHECKING:
    from largefedbench.run.eval import Prepared

__all__ = ["Evaluator", "run_seed"]

REFERENCE_ROWS = ("public", "non-private", "generator-only")  # the rows every entry carries (cached per seed)
LOSS_TEXTS = 4096  # synthetic texts the ε = 0 model's loss is measured on (the paper preset writes 1,000,000)


class Evaluator:
    """The harness's side of a run: validation/test texts, downstream training, cached references."""

    def __init__(self, prep: Prepared, bundle, log: Callable[[str], None]) -> None:
        self.prep, self.bundle, self.log = prep, bundle, log
        fd = prep.fd
        self.validation_texts = fd.validation.all_spans()
        self.test_texts = fd.test.all_spans()
        self.training = prep.profile.downstream_training
        self._novel = None

    def accuracy(self, model, texts: list[str], targets=None) -> dict[str, float]:
        from largefedbench.evaluation import next_token_accuracy

        return next_token_accuracy(model, self.bundle.tokenizer, texts, max_len=self.training.max_len,
                                   batch_size=self.training.eval_batch_size, targets=targets)

    @property
    def novel(self):
        """The window-novel tokens of the snapshot (train clients against pre-window records), computed once."""
        if self._novel is None:
            from largefedbench.evaluation.novel_tokens import window_novel_tokens

            fd = self.prep.fd
            self._novel = window_novel_tokens(self.bundle.tokenizer, fd.train.all_spans(), fd.public.all_spans())
        return self._novel

    def test_metrics(self, model) -> dict[str, float]:
        """Next-token accuracy on the test clients, and top-1 on their window-novel targets (``novel_top1``)."""
        metrics = self.accuracy(model, self.test_texts)
        novel = self.accuracy(model, self.test_texts, targets=self.novel.ids) if self.novel.ids else {"top1": math.nan, "n_tokens": 0}
        return {**metrics, "novel_top1": novel["top1"], "novel_n_tokens": novel["n_tokens"]}

    def token_counts(self, texts: list[str]) -> np.ndarray:
        """The downstream tokenizer's id counts over ``texts``."""
        from largefedbench.evaluation import token_counts

        tok = self.bundle.tokenizer
        return token_counts(tok(list(texts), add_special_tokens=False)["input_ids"], len(tok))

    @functools.cached_property
    def validation_counts(self) -> np.ndarray:
        return self.token_counts(self.validation_texts)

    def replay_texts(self, n_texts: int, seed: int) -> list[str]:
        """The public spans mixed into a fine-tuning set of ``n_texts`` texts: ``public_replay`` × ``n_texts`` of them
        (at most the whole public split), drawn without replacement by ``seed``; none for an empty set."""
        if not (n_texts and self.training.public_replay):
            return []
        pool = self.bundle.public_corpus.spans
        k = min(len(pool), round(self.training.public_replay * n_texts))
        picked = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED])).choice(len(pool), size=k, replace=False)
        return [pool[i] for i in sorted(picked)]

    def train_on(self, texts: list[str], seed: int):
        from largefedbench.evaluation import train_downstream

        texts = list(texts) + self.replay_texts(len(texts), seed)
        result = train_downstream(self.bundle.new_downstream(), self.bundle.tokenizer, texts, self.validation_texts,
                                  seed=seed, progress=self.prep.request.progress, **self.training.as_kwargs())
        return result.model

    def public_resources(self, seed: int, run_dir: Path | None) -> PublicResources:
        return PublicResources(
            fd=self.prep.fd, models=self.bundle, seed=seed, run_dir=run_dir, progress=self.prep.request.progress,
            validation_accuracy=lambda m: self.accuracy(m, self.validation_texts),
            train_downstream=lambda texts: self.train_on(texts, seed), corpus=self.bundle.public_corpus,
        )

    @property
    def executor(self):
        """The run's executor, made on first use and kept for every seed (one Ray cluster, one set of workers)."""
        from largefedbench.executors import make_executor

        if getattr(self, "_executor", None) is None:
            self._executor = make_executor(self.prep.request.executor, address=self.prep.request.ray_address)
        return self._executor

    def federation(self, method_cls: type, seed: int):
        from largefedbench.federation import Federation, SpanEmbeddings

        embeddings = None
        if getattr(method_cls, "needs_span_embeddings", False):
            offsets = np.concatenate([[0], np.cumsum(self.prep.fd.train.span_counts())])
            if self.prep.request.executor == "ray":  # block by block into the object store, never whole on the driver
                from largefedbench.executors import BLOCK_BYTES

                vectors = self.executor.stage_rows(self.bundle.span_embedding_blocks(
                    self.prep.fd, "train", block_bytes=BLOCK_BYTES, progress=self.prep.request.progress))
            else:
                vectors = self.bundle.span_embeddings(self.prep.fd, "train", progress=self.prep.request.progress)
            embeddings = SpanEmbeddings(vectors, offsets)
        return Federation(self.prep.fd.train, seed=seed, embeddings=embeddings, executor=self.executor,
                          noise_free=self.prep.request.noise_free,
                          shuffle_releases=self.prep.request.shuffled_releases)

    # references, cached per (snapshot, public corpus, profile models, downstream training, config, seed, the code)
    def _reference_path(self, name: str, seed: int | None, config: dict[str, Any] | None = None) -> Path:
        info = self.bundle.describe()
        corpus = self.bundle.public_corpus
        key = {"snapshot": self.prep.fd.manifest["content_sha256"], "profile": self.prep.profile.name,
               "downstream": info.get("downstream", {}).get("sha256") or info.get("downstream", {}).get("id"),
               "training": dataclasses.asdict(self.training), "lfb": __version__, "metrics": 2,
               "code": reference_code_fingerprint(name)}
        if corpus.kind != "split":
            key["public"] = corpus.sha256
        if config is not None:  # the generator-only row: also the generator's weights and the dtype it samples in
            from largefedbench.models.precision import generation_dtype

            key["config"] = config
            key["generator"] = info.get("generator", {}).get("sha256") or info.get("generator", {}).get("id")
            key["sampling"] = [self.bundle.device.type, str(generation_dtype(self.bundle.device))]
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        home = self.prep.request.home or lfb_home()
        return Path(home) / "references" / digest / (f"{name}-seed{seed}.json" if seed is not None else f"{name}.json")

    def reference(self, name: str, seed: int) -> dict[str, float]:
        """The test metrics of the reference ``name`` (``public``, ``non-private`` or ``generator-only``) for
        ``seed``, computed once and cached; the generator-only row runs with the run's preset."""
        cls = self._reference_class(name)
        config = self.reference_config(name)
        path = self.reference_path(name, seed)
        if path.exists():
            return json.loads(path.read_text())
        self.log(f"computing the {name} reference (ε = {cls.fixed_epsilon:g}, seed {seed}); cached for later runs")
        fed = self.federation(cls, seed)
        artifact = cls().train(fed, self.public_resources(seed, None), config, PrivacyBudget(cls.fixed_epsilon, 0.0))
        model = self.train_on(artifact.texts, seed) if artifact.kind == "synthetic text" else artifact.model
        metrics = jsonable(self.test_metrics(model))
        if artifact.kind == "synthetic text":
            metrics.update(self.synthetic_stats(artifact.texts))
        atomic_write_json(path, metrics)
        return metrics

    def reference_path(self, name: str, seed: int) -> Path:
        """Where the reference row ``name`` of ``seed`` is cached (the public row: one file for every seed)."""
        config = config_to_dict(self.reference_config(name)) if name == "generator-only" else None
        return self._reference_path(name, None if name == "public" else seed, config)

    def reference_config(self, name: str) -> Any:
        """The config a reference row runs with: the run's preset for the generator-only row, else the default."""
        cls = self._reference_class(name)
        return preset_config(cls, self.prep.preset) if name == "generator-only" else cls.Config()

    def remember_reference(self, name: str, seed: int, metrics: dict[str, Any]) -> None:
        """Store a reference's metrics that a run of the reference method itself computed (same settings)."""
        path = self.reference_path(name, seed)
        if not path.exists():
            atomic_write_json(path, jsonable(metrics))

    @staticmethod
    def _reference_class(name: str) -> type:
        from largefedbench.registry import resolve_method

        return resolve_method(name).cls

    @functools.cached_property
    def public_validation_loss(self) -> float:
        """The ε = 0 downstream model's mean loss on the validation spans."""
        return self.accuracy(self.bundle.new_downstream(), self.validation_texts)["loss"]

    def public_loss_vs_clients(self, texts: list[str]) -> float | None:
        """The ε = 0 downstream's mean loss on the non-blank ``texts`` (``LOSS_TEXTS`` of them, evenly spaced, where
        there are more) minus its loss on the validation spans: how much in the texts the on-device model cannot
        already predict, against the clients' text (below 0: they are more familiar to it than the clients' are);
        None when every text is blank."""
        texts = [t for t in texts if t.strip()]
        if not texts:
            return None
        picks = np.linspace(0, len(texts) - 1, min(len(texts), LOSS_TEXTS)).round().astype(int)
        sample = [texts[i] for i in picks]
        return self.accuracy(self.bundle.new_downstream(), sample)["loss"] - self.public_validation_loss

    def synthetic_stats(self, texts: list[str], embeddings: np.ndarray | None = None) -> dict[str, float]:
        """FID of synthetic texts (or of their ``embeddings``, when already computed) to the validation spans, their
        unigram JSD to the validation spans, mean pairwise cosine (``evaluation.text_stats``) and the ε = 0 model's
        loss on them against the clients' (:meth:`public_loss_vs_clients`) and, on the demos, the share naming a
        private-only topic."""
        from largefedbench.evaluation import fid, mean_pairwise_cosine, unigram_jsd
        from largefedbench.models import embed

        synth = embed(texts, self.bundle.embedder) if embeddings is None else embeddings
        stats = {"fid": float(fid(synth, self.bundle.span_embeddings(self.prep.fd, "validation", progress=False))),
                 "pairwise_cosine": mean_pairwise_cosine(synth)}
        counts = self.token_counts(texts)
        if counts.sum() > 0:
            stats["unigram_jsd"] = unigram_jsd(counts, self.validation_counts)
        familiarity = self.public_loss_vs_clients(texts)
        if familiarity is not None:
            stats["public_loss_vs_clients"] = familiarity
        if self.prep.fd.synthetic:
            from largefedbench.data.demo_lexicon import private_topic_share

            stats["topic_share"] = private_topic_share(texts)
        return stats


def run_seed(prep: Prepared, ev: Evaluator, seed: int, log: Callable[[str], None], audit: Any = None) -> SeedResult:
    """Run the method for one seed and evaluate it; the result is stored so a re-run skips the seed.
    ``audit`` (``largefedbench.run.audit.Audit``) adds canary clients to the federation and scores them."""
    seed_dir = prep.run_dir / f"seed-{seed}"
    done = seed_dir / "result.json"
    if done.exists():
        log(f"seed {seed}: already done, reusing {done}")
        return SeedResult.from_json(json.loads(done.read_text()), done)
    cls, budget = prep.method_cls, prep.budget
    seed_dir.mkdir(parents=True, exist_ok=True)
    fed = ev.federation(cls, seed) if audit is None else audit.federation(ev, cls, seed)
    fed.budget = budget  # a release that would break the budget stops the run before it happens
    public = ev.public_resources(seed, seed_dir)
    output, stamp = seed_dir / METHOD_OUTPUT, {"lfb": __version__, "method": prep.method.version}
    kept = None if audit is not None else load_method_output(output, fed, stamp, ev.bundle.device)
    if kept is None:
        log(f"seed {seed}: running {prep.method.name}")
        stages_before = timing.totals()
        calibrated = len(budget.calibrations)
        t0 = time.perf_counter()
        artifact = cls().train(fed, public, prep.config, budget)
        calibrations = jsonable(budget.calibrations[calibrated:])
        method_seconds = time.perf_counter() - t0
        method_stages = timing.stage_breakdown(stages_before, timing.totals(), method_seconds)
    else:
        artifact, calibrations, method_seconds, method_stages = kept
        log(f"seed {seed}: {prep.method.name} had finished; evaluating what it produced ({output})")
    t_mid, stages_mid = time.perf_counter(), timing.totals()
    if audit is not None:
        audit.search_leaks(artifact, seed, seed_dir)
    audit_scores = None if audit is None else audit.score(artifact, ev.bundle, seed)
    ledger: PrivacyLedger = fed.ledger
    accountant = resolve_accountant(ledger.events) if len(ledger) else "rdp"
    spent = ledger.epsilon(budget.delta, accountant) if len(ledger) else 0.0
    if prep.declared:  # nothing was released here: the ε is the submitter's statement
        accountant, spent = "declared", budget.epsilon
    if prep.request.noise_free and len(ledger) and not math.isinf(spent):
        raise PrivacyError(f"--noise-free: method {cls.name!r} released with noise (ε = {spent:.4g}): every release "
                           "must go through fed.private_sum, which drops the noise in this diagnostic")
    if len(ledger) and prep.declared:
        raise MethodError("a declared synthetic set released through the federation; it must not")
    if over_budget(spent, budget.epsilon) and not prep.request.noise_free:
        raise PrivacyError(
            f"method {cls.name!r} spent ε = {spent:.4g} at δ = {budget.delta:g} (its ledger, {accountant} accountant) "
            f"but the budget is ε = {budget.epsilon:g} (+{BUDGET_SLACK:.0%} calibration slack): the method calibrated its noise for fewer or quieter releases "
            "than it made. Fix the method's calibration plan."
        )
    if cls.fixed_epsilon is None and not len(ledger) and not prep.declared:
        raise MethodError(f"method {cls.name!r} released nothing through the federation (empty ledger): a private "
                          "method must learn from the private clients through fed.private_sum")
    if audit is None and kept is None:  # checked: a kill during the evaluation below resumes there
        save_method_output(output, fed, artifact, calibrations, method_seconds, method_stages, stamp)
    t1 = time.perf_counter()
    stats: dict[str, float] = {}
    if artifact.kind == "synthetic text":
        log(f"seed {seed}: training the downstream model on {len(artifact.texts)} synthetic samples")
        model = ev.train_on(artifact.texts, seed)
        from largefedbench.models import embed

        synth = embed(artifact.texts, ev.bundle.embedder)
        stats = ev.synthetic_stats(artifact.texts, synth)
        np.save(seed_dir / "synthetic-embeddings.npy", synth.astype(np.float32))
        (seed_dir / "synthetic.json").write_text(json.dumps(artifact.texts[:2000], ensure_ascii=False))
    else:
        model = artifact.model
    validation = ev.accuracy(model, ev.validation_texts)
    test = jsonable(ev.test_metrics(model))
    result = SeedResult(
        seed=seed, test=test, validation=validation, fid=stats.get("fid"), epsilon=spent, accountant=accountant,
        ledger=ledger.to_dict(), costs=fed.costs.summary(), method_seconds=method_seconds,
        downstream_seconds=time.perf_counter() - t1, history=jsonable(artifact.history), info=jsonable(artifact.info),
        n_synthetic=len(artifact.texts) if artifact.texts else None, audit=audit_scores, topic_share=stats.get("topic_share"),
        unigram_jsd=stats.get("unigram_jsd"), pairwise_cosine=stats.get("pairwise_cosine"),
        public_loss_vs_clients=stats.get("public_loss_vs_clients"),
        stage_seconds=timing.add_stages(method_stages,
                                        timing.stage_breakdown(stages_mid, timing.totals(), time.perf_counter() - t_mid)),
        calibrations=calibrations if len(ledger) and not prep.declared else None,
        made_with={"lfb_version": __version__, "git_commit": git_commit()},
    )
    atomic_write_json(done, result.to_json())
    if (cls.name in REFERENCE_ROWS and prep.method.source == "built-in" and not prep.request.noise_free
            and not prep.request.shuffled_releases and prep.config == ev.reference_config(cls.name)):
        # the same computation as the reference row every entry carries: cache it, so it is not run again
        ev.remember_reference(cls.name, seed, {**test, **stats})
    public.clear_checkpoint()
    (seed_dir / METHOD_OUTPUT).unlink(missing_ok=True)
    log(f"seed {seed}: test top-1 {test['top1']:.4f}, ε spent {spent:.4g}")
    return result


METHOD_OUTPUT = "method-output.pt"


def save_method_output(path: Path, fed, artifact, calibrations: list, method_seconds: float,
                       method_stages: dict[str, float], stamp: dict[str, Any]) -> None:
    """What the method returned and the federation after it (ledger, costs, RNG), written atomically once the
    harness's privacy checks passed: its own record, so a run killed while the output is evaluated resumes without
    running the method again. ``stamp`` (LargeFedBench's and the method's versions) must match to be reused."""
    import io

    import torch

    from largefedbench.io import atomic_write_bytes

    buf = io.BytesIO()
    torch.save({"stamp": stamp, "artifact": artifact, "federation": fed.state_dict(), "calibrations": calibrations,
                "method_seconds": method_seconds, "method_stages": method_stages}, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_method_output(path: Path, fed, stamp: dict[str, Any], device) -> tuple[Any, list, float, dict[str, float]] | None:
    """``(artifact, calibrations, method seconds, method stages)`` saved by :func:`save_method_output`, its tensors on
    ``device``, restoring ``fed``'s ledger, costs and RNG; None when there is none, or it was made by another version
    of LargeFedBench or of the method (the method then runs again)."""
    if not path.exists():
        return None
    import torch

    saved = torch.load(path, map_location=device, weights_only=False)
    if saved.get("stamp") != stamp:
        return None
    fed.load_state_dict(saved["federation"])
    return saved["artifact"], saved["calibrations"], saved["method_seconds"], saved["method_stages"]
