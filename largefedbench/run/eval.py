"""The harness: run one method on one snapshot under an (ε, δ) budget for several seeds -> a leaderboard entry.

Everything that can be wrong with a request (method, ``--set`` keys, budget, profile, snapshot, δ against the
number of clients, an empty window) is checked in :func:`prepare` before any model is loaded. Each seed's
result is stored under ``<out>/.runs/<run-id>/seed-<s>/`` (the run id is the entry id without the seed list) as
soon as it is done, and methods checkpoint every round there, so a killed run resumes where it stopped when the
same command is run again, and ``--seeds 0,1,2`` reuses the seed a ``--seeds 0`` run finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shlex
import sys
import time
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from largefedbench import __version__, timing
from largefedbench.config_overrides import config_from_overrides, config_to_dict
from largefedbench.contract import PublicResources
from largefedbench.deprecation import renamed_path
from largefedbench.errors import InputError, MethodError, PrivacyError, SnapshotError
from largefedbench.io import atomic_write_json
from largefedbench.leaderboard.schema import SCHEMA_VERSION, Entry
from largefedbench.paths import check_writable_dir, lfb_home
from largefedbench.privacy import PrivacyBudget, PrivacyLedger, resolve_accountant
from largefedbench.privacy.rules import BUDGET_SLACK, check_delta, over_budget
from largefedbench.registry import ResolvedMethod
from largefedbench.run.entry import build_entry
from largefedbench.run.seed_result import SeedResult, jsonable

__all__ = ["DEFAULT_DELTA", "DEFAULT_EPSILON", "EvalRequest", "EvalResult", "Prepared", "prepare", "run_eval"]

DEFAULT_EPSILON = 1.0  # POPri's strict regime (Table 1: ε ∈ {1, 7})
DEFAULT_DELTA = 3e-6  # POPri App. C: δ = 3·10⁻⁶
REFERENCE_ROWS = ("public", "non-private", "generator-only")  # the rows every entry carries (cached per seed)
ID_LIMIT = 128  # entry ids (the schema's ID_PATTERN) are at most this long
MAX_SEED = 2**32 - 1  # numpy, torch and the methods' seed arithmetic all accept 0 .. 2**32 - 1


@dataclass(frozen=True)
class EvalRequest:
    """What ``lfb eval`` was asked to do."""

    method: str
    dataset: str | None = None  # default: default_dataset(profile), an offline demo snapshot
    epsilon: float | None = None
    delta: float | None = None
    profile: str = "tiny"
    seeds: tuple[int, ...] = (0, 1, 2)
    overrides: dict[str, str] = field(default_factory=dict)
    preset: str | None = None  # "paper" | "cpu" | "tiny"; default: the profile's own (ModelProfile.preset)
    out: Path = Path("leaderboard")  # the board folder the entry is written under
    home: Path | None = None  # the LargeFedBench home instead of $LFB_HOME (snapshots, model and reference caches)
    device: str | None = None
    executor: str = "process"  # where client computations of Federation.private_sum run: process, local or ray
    ray_address: str | None = None  # join this Ray cluster instead of starting a local one
    noise_free: bool = False  # the diagnostic: calibrated for ε, released with σ = 0 (ε = ∞ recorded), never ranked
    public: str | None = None  # the public resources: generic | c4 | c4:PATH | split (default: the profile's)
    synthetic: Path | None = None  # score this file's texts (declared privacy) instead of running ``method``
    made_with: str | None = None  # with ``synthetic``: the tool that made the texts, as the entry states it
    progress: bool = True
    command: str = ""
    root: InitVar[Path | None] = None  # deprecated name of ``home``

    def __post_init__(self, root: Path | None) -> None:
        object.__setattr__(self, "home", renamed_path("EvalRequest", "home", self.home, "root", root, stacklevel=4))
        if self.dataset is None:
            object.__setattr__(self, "dataset", default_dataset(self.profile))


@dataclass
class Prepared:
    """A checked request: the method, its resolved config, budget, snapshot and profile."""

    request: EvalRequest
    method: ResolvedMethod
    config: Any
    preset: str
    budget: PrivacyBudget
    fd: Any
    profile: Any
    entry_id: str
    entry_path: Path
    run_id: str = ""  # the entry id without the seed list: seeds done for (0,) are reused by (0, 1, 2)
    public_spec: str = "split"  # the public resources (largefedbench.data.public_corpus.parse_public)

    @property
    def method_cls(self) -> type:
        return self.method.cls

    @property
    def declared(self) -> bool:
        """Is this run scoring a declared synthetic set (``--synthetic``) rather than running a method?"""
        return self.request.synthetic is not None

    @property
    def run_dir(self) -> Path:
        return self.request.out / ".runs" / (self.run_id or self.entry_id)


@dataclass
class EvalResult:
    """A finished run: its entry, the file it was written to and its plots (name -> file beside the entry)."""

    entry: Entry
    path: Path
    plots: dict[str, Path]


# -- checks before any work ---------------------------------------------------------------------------------
PRESETS = ("paper", "cpu", "tiny")


def preset_config(method_cls: type, preset: str) -> Any:
    """A method's defaults for ``preset``: ``Config()`` (the paper's), ``Config.cpu()`` (the ``cpu`` profile's
    ~15-minute settings; a method without one uses ``Config.tiny()``) or ``Config.tiny()`` (CPU tests)."""
    if preset not in PRESETS:
        raise InputError(f"--preset {preset!r}: use paper (the paper's defaults), cpu (the cpu profile's) or tiny (CPU tests)")
    if preset == "paper":
        return method_cls.Config()
    factory = getattr(method_cls.Config, "cpu", None) if preset == "cpu" else None
    return (factory or method_cls.Config.tiny)()


def _budget_for(method_cls: type, epsilon: float | None, delta: float | None) -> PrivacyBudget:
    fixed = getattr(method_cls, "fixed_epsilon", None)
    delta = DEFAULT_DELTA if delta is None else delta
    if fixed is not None:
        if epsilon is not None and float(epsilon) != fixed:
            raise InputError(f"method {method_cls.name!r} is the ε = {fixed:g} reference and runs at that ε only; "
                             "drop --epsilon")
        return PrivacyBudget(fixed, delta if fixed != 0 else 0.0)
    epsilon = DEFAULT_EPSILON if epsilon is None else epsilon
    if not epsilon > 0:
        raise PrivacyError(f"--epsilon {epsilon:g}: ε must be > 0. The ε = 0 point is the public model: "
                           "--method public (every entry carries it as a reference).")
    if math.isinf(epsilon):
        raise PrivacyError("--epsilon inf is the non-private reference: --method non-private (every entry carries "
                           "it as a reference).")
    return PrivacyBudget(epsilon, check_delta(delta, name="--delta", example=DEFAULT_DELTA))


def _check_declared(request: EvalRequest) -> None:
    """What ``--synthetic`` cannot be combined with."""
    if request.overrides:
        raise InputError("--set configures a method; --synthetic scores a file as it is: drop --set")
    if request.noise_free:
        raise InputError("--noise-free is a diagnostic of a method's noise; --synthetic declares its privacy: drop one")
    if request.epsilon is None or request.delta is None:
        raise InputError("--synthetic needs --epsilon and --delta: the (ε, δ) the tool that made the texts claims "
                         "(the entry states them as declared, e.g. --epsilon 4 --delta 3e-6)")


def _declared_budget(epsilon: float, delta: float) -> PrivacyBudget:
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise PrivacyError(f"--epsilon {epsilon:g}: a declared ε is a finite number >= 0 (0: the texts used no "
                           "private data)")
    if epsilon == 0:
        return PrivacyBudget(0.0, 0.0)
    return PrivacyBudget(epsilon, check_delta(delta, name="--delta", example=DEFAULT_DELTA))


def default_dataset(profile: str) -> str:
    """The offline snapshot a profile runs on when no dataset is named: ``demo-prose`` (text a real LLM can write)
    for the profiles whose generator is a real LLM on the CPU; the templated ``demo`` otherwise (an unknown profile
    name is reported later, by :func:`prepare`)."""
    from largefedbench.models.profiles import PROFILES

    return PROFILES[profile].default_dataset if profile in PROFILES else "demo"


def _entry_id(method: str, fd, profile: str, budget: PrivacyBudget, key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]
    eps = "inf" if math.isinf(budget.epsilon) else f"{budget.epsilon:g}"
    snap = fd.manifest["name"].lower()
    kind = "--noise-free" if key.get("noise_free") else ""
    return bounded_id(f"{method}--{snap}--{profile}--eps{eps}{kind}".replace("+", ""), digest)


def bounded_id(name: str, *digests: str) -> str:
    """``name--d1--d2…`` in at most :data:`ID_LIMIT` characters: a long name is shortened, never a digest."""
    tail = "".join(f"--{d}" for d in digests)
    return name[:ID_LIMIT - len(tail)] + tail


def prepare(request: EvalRequest) -> Prepared:
    """Resolve and check everything about ``request``; raises a clear :class:`LfbError` before any work."""
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.public_corpus import parse_public
    from largefedbench.data.snapshot import verify_snapshot
    from largefedbench.models import get_profile
    from largefedbench.registry import resolve_method

    if request.synthetic is not None:
        from largefedbench.run.declared import declared_method

        _check_declared(request)
        method = declared_method(request.synthetic, label=request.method or None, made_with=request.made_with)
    else:
        method = resolve_method(request.method)
    method_cls = method.cls
    if not request.seeds:
        raise InputError("--seeds is empty; give at least one seed, e.g. --seeds 0,1,2")
    if len(set(request.seeds)) != len(request.seeds):
        raise InputError(f"--seeds {','.join(map(str, request.seeds))} repeats a seed")
    bad = [s for s in request.seeds if not (isinstance(s, int) and 0 <= s <= MAX_SEED)]
    if bad:
        raise InputError(f"--seeds: {bad[0]} is not a seed; seeds are integers from 0 to {MAX_SEED} (2**32 - 1)")
    check_writable_dir(request.out, f"--out {request.out}")
    from largefedbench.executors import make_executor

    make_executor(request.executor, address=request.ray_address)  # checks the name and address; starts nothing
    if request.executor == "local" and method.source not in ("built-in", "declared"):  # a declared set runs no client code
        raise InputError(f"--executor local runs client functions in the method's own process, where what they keep "
                         f"can reach train(); {method_cls.name!r} is not a built-in method, so its client functions "
                         "run in worker processes: drop --executor local (or use --executor ray)")
    from largefedbench.models.device import get_device
    from largefedbench.models.precision import generation_dtype, train_in_bf16

    generation_dtype(get_device(request.device))  # a bad --device or LFB_GENERATION_DTYPE stops here,
    train_in_bf16()  # and a bad LFB_TRAINING_DTYPE
    profile = get_profile(request.profile)
    public_spec = request.public or profile.public
    public_kind, _ = parse_public(public_spec)
    preset = request.preset or profile.preset
    if request.synthetic is not None:
        config = method.config(request.made_with)
        budget = _declared_budget(request.epsilon, request.delta)
    else:
        base = preset_config(method_cls, preset)
        config = config_from_overrides(method_cls.Config, base, dict(request.overrides))
        budget = _budget_for(method_cls, request.epsilon, request.delta)
    if request.noise_free and getattr(method_cls, "fixed_epsilon", None) is not None:
        raise InputError(f"--noise-free: method {method_cls.name!r} is the ε = {method_cls.fixed_epsilon:g} reference; "
                         "the noise-free diagnostic is for private methods (it removes their noise)")
    fd = load_snapshot(request.dataset, home=request.home)
    verify_snapshot(fd, root=request.home)  # the entry states the manifest's content_sha256: it must be true
    for split in ("train", "validation", "test"):
        if len(fd[split]) == 0:
            raise SnapshotError(
                f"snapshot {fd.manifest['name']!r} has no {split} clients: its window holds too few records. "
                "Widen the window (`lfb refresh --since … --until …`) or pick another snapshot (`lfb data list`)."
            )
    n_train = len(fd.train)
    if budget.delta > 0:
        budget.check_clients(n_train)
    key = {
        "method": method.target, "config": config_to_dict(config), "preset": preset,
        "snapshot": fd.manifest["content_sha256"], "profile": profile.name, "seeds": list(request.seeds),
        "epsilon": str(budget.epsilon), "delta": budget.delta, "schema": SCHEMA_VERSION,
    }
    if request.noise_free:  # only when set, so the ids of ordinary entries stay as they were
        key["noise_free"] = True
    if request.synthetic is not None:
        key["declared"] = {"label": method.name, "made_with": request.made_with}
    if public_kind != "split":  # likewise: entries made on the snapshot's public split keep their ids
        key["public"] = public_kind
    entry_id = _entry_id(method.name, fd, profile.name, budget, key)
    # finished seeds are reused only under the same profile settings (models, downstream training), not just its name
    settings = {k: v for k, v in dataclasses.asdict(profile).items() if k not in ("description", "preset", "default_dataset")}
    settings["downstream_training"] = profile.downstream_training.to_dict()
    run_id = _entry_id(method.name, fd, profile.name, budget,
                       {**{k: v for k, v in key.items() if k != "seeds"}, "profile_settings": settings})
    dataset = fd.manifest["dataset"].lower()
    path = request.out / "entries" / dataset / method.name / f"{entry_id}.json"
    return Prepared(request, method, config, preset, budget, fd, profile, entry_id, path, run_id, public_spec)


# -- one seed -------------------------------------------------------------------------------------------------
class _Evaluator:
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
                          noise_free=self.prep.request.noise_free)

    # references, cached per (snapshot, public corpus, profile models, downstream training, config, seed)
    def _reference_path(self, name: str, seed: int | None, config: dict[str, Any] | None = None) -> Path:
        info = self.bundle.describe()
        corpus = self.bundle.public_corpus
        key = {"snapshot": self.prep.fd.manifest["content_sha256"], "profile": self.prep.profile.name,
               "downstream": info.get("downstream", {}).get("sha256") or info.get("downstream", {}).get("id"),
               "training": dataclasses.asdict(self.training), "lfb": __version__, "metrics": 2}
        if corpus.kind != "split":
            key["public"] = corpus.sha256
        if config is not None:
            key["config"] = config
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        home = self.prep.request.home or lfb_home()
        return Path(home) / "references" / digest / (f"{name}-seed{seed}.json" if seed is not None else f"{name}.json")

    def reference(self, name: str, seed: int) -> dict[str, float]:
        """The test metrics of the reference ``name`` (``public``, ``non-private`` or ``generator-only``) for
        ``seed``, computed once and cached; the generator-only row runs with the run's preset."""
        cls = self._reference_class(name)
        config = self.reference_config(name)
        path = self._reference_path(name, None if name == "public" else seed,
                                    config_to_dict(config) if name == "generator-only" else None)
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

    def reference_config(self, name: str) -> Any:
        """The config a reference row runs with: the run's preset for the generator-only row, else the default."""
        cls = self._reference_class(name)
        return preset_config(cls, self.prep.preset) if name == "generator-only" else cls.Config()

    def remember_reference(self, name: str, seed: int, metrics: dict[str, Any]) -> None:
        """Store a reference's metrics that a run of the reference method itself computed (same settings)."""
        config = config_to_dict(self.reference_config(name)) if name == "generator-only" else None
        path = self._reference_path(name, None if name == "public" else seed, config)
        if not path.exists():
            atomic_write_json(path, jsonable(metrics))

    @staticmethod
    def _reference_class(name: str) -> type:
        from largefedbench.registry import resolve_method

        return resolve_method(name).cls

    def synthetic_stats(self, texts: list[str], embeddings: np.ndarray | None = None) -> dict[str, float]:
        """FID of synthetic texts (or of their ``embeddings``, when already computed) to the validation spans and, on
        the demos, the share naming a private-only topic."""
        from largefedbench.evaluation import fid
        from largefedbench.models import embed

        synth = embed(texts, self.bundle.embedder) if embeddings is None else embeddings
        stats = {"fid": float(fid(synth, self.bundle.span_embeddings(self.prep.fd, "validation", progress=False)))}
        if self.prep.fd.synthetic:
            from largefedbench.data.demo_lexicon import private_topic_share

            stats["topic_share"] = private_topic_share(texts)
        return stats


def _run_seed(prep: Prepared, ev: _Evaluator, seed: int, log: Callable[[str], None], audit: Any = None) -> SeedResult:
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
    log(f"seed {seed}: running {prep.method.name}")
    stages_before = timing.totals()
    calibrated = len(budget.calibrations)
    t0 = time.perf_counter()
    artifact = cls().train(fed, public, prep.config, budget)
    calibrations = jsonable(budget.calibrations[calibrated:])
    method_seconds = time.perf_counter() - t0
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
        stage_seconds=timing.stage_breakdown(stages_before, timing.totals(), time.perf_counter() - t0),
        calibrations=calibrations if len(ledger) and not prep.declared else None,
    )
    atomic_write_json(done, result.to_json())
    if (cls.name in REFERENCE_ROWS and prep.method.source == "built-in" and not prep.request.noise_free
            and prep.config == ev.reference_config(cls.name)):
        # the same computation as the reference row every entry carries: cache it, so it is not run again
        ev.remember_reference(cls.name, seed, {**test, **stats})
    public.clear_checkpoint()
    log(f"seed {seed}: test top-1 {test['top1']:.4f}, ε spent {spent:.4g}")
    return result


# -- the entry's command ----------------------------------------------------------------------------------
def _names_a_folder(value: str) -> bool:
    """Is a command-line value a local path with a folder part (not a name, module or hf:// address)?"""
    return "://" not in value and ("/" in value or "\\" in value or Path(value).is_absolute())


def _command_for(prep: Prepared) -> str:
    r = prep.request
    if prep.declared:  # the file by its name; the entry's declared section holds its hash
        dataset = prep.fd.manifest["name"] if _names_a_folder(r.dataset) else r.dataset
        return shlex.join(["lfb", "eval", "--synthetic", Path(r.synthetic).name, "--name", prep.method.name,
                           "--made-with", r.made_with, "--dataset", dataset, "--profile", prep.profile.name,
                           "--seeds", ",".join(map(str, r.seeds)), "--epsilon", f"{prep.budget.epsilon:g}",
                           "--delta", f"{prep.budget.delta:g}"]
                          + (["--public", prep.public_spec.partition(":")[0]] if prep.public_spec != prep.profile.public else []))
    # a published command names no folder of this machine: a file method by its file name, a snapshot by its name
    file, _, cls = r.method.rpartition(":")
    method = f"{Path(file).name}:{cls}" if file and _names_a_folder(file) else r.method
    dataset = prep.fd.manifest["name"] if _names_a_folder(r.dataset) else r.dataset
    parts = ["lfb", "eval", "--method", method, "--dataset", dataset, "--profile", prep.profile.name,
             "--seeds", ",".join(map(str, r.seeds)), "--preset", prep.preset]
    if prep.method_cls.fixed_epsilon is None:
        parts += ["--epsilon", f"{prep.budget.epsilon:g}", "--delta", f"{prep.budget.delta:g}"]
    if r.noise_free:
        parts.append("--noise-free")
    if prep.public_spec != prep.profile.public:  # a local C4 path is this machine's: the command names the kind
        parts += ["--public", prep.public_spec.partition(":")[0]]
    for k, v in sorted(r.overrides.items()):
        parts += ["--set", f"{k}={v}"]
    return shlex.join(parts)


# -- the whole run ----------------------------------------------------------------------------------------------
def run_eval(request: EvalRequest, *, log: Callable[[str], None] | None = None, audit: Any = None) -> EvalResult:
    """Run ``request`` (see :class:`EvalRequest`) and write its entry; returns the entry and where it is.
    With ``audit`` (``largefedbench.run.audit.Audit``) the run carries canary clients and the entry an audit section."""
    log = log or (lambda msg: print(f"lfb eval: {msg}", file=sys.stderr))
    prep = prepare(request) if audit is None else audit.prepare(prepare(request))
    start = time.perf_counter()
    from largefedbench.models import load_models

    bundle = load_models(prep.profile, prep.fd, device=request.device, progress=request.progress, home=request.home,
                         public=prep.public_spec)
    ev = _Evaluator(prep, bundle, log)
    prep.run_dir.mkdir(parents=True, exist_ok=True)
    results: list[SeedResult] = []
    non_private: list[dict[str, float]] = []
    generator_only: list[dict[str, float]] = []
    # the no-signal row is our generator's; a declared set was made by another tool's (with other prompts)
    with_generator_row = (prep.method_cls.output == "synthetic text" and prep.method_cls.fixed_epsilon is None
                          and not prep.declared)
    public = ev.reference("public", request.seeds[0])
    for seed in request.seeds:
        results.append(_run_seed(prep, ev, seed, log, audit))
        non_private.append(ev.reference("non-private", seed))
        if with_generator_row:
            generator_only.append(ev.reference("generator-only", seed))
    section = None if audit is None else audit.section([r.to_json() for r in results], prep.budget)
    entry = build_entry(prep, bundle, results, reference_public=public, reference_non_private=non_private,
                        reference_generator_only=generator_only or None, novel=ev.novel.describe(),
                        wall_seconds=time.perf_counter() - start, command=prep.request.command or _command_for(prep),
                        audit=section)
    from largefedbench.evaluation.plots import write_entry_plots

    plots = write_entry_plots(entry.to_json(), prep.run_dir, prep.entry_path,
                              validation=bundle.span_embeddings(prep.fd, "validation", progress=False))
    # the plot files are named after the entry id (a checked id), so their names need no second validation
    entry = entry.model_copy(update={"artifacts": {name: p.name for name, p in plots.items()}})
    atomic_write_json(prep.entry_path, entry.to_json())
    return EvalResult(entry, prep.entry_path, plots)
