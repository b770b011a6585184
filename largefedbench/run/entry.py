"""The leaderboard entry of a run, built once from the checked request, the seeds' results and the references."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from largefedbench.config_overrides import config_to_dict
from largefedbench.errors import InputError
from largefedbench.leaderboard.schema import (
    CALIBRATED_SINCE,
    SCHEMA_VERSION,
    SYNTHETIC_TEXT_STATS,
    AccuracySection,
    AuditSection,
    ContaminationSection,
    CostsSection,
    DatasetSection,
    DeclaredSection,
    DiagnosticSection,
    Entry,
    EnvironmentSection,
    MethodSection,
    MetricsSection,
    PrivacySection,
    PublicSection,
    RunConfig,
    SelectionSection,
    Stat,
    UnitStat,
    WindowNovelSection,
    WindowSection,
    epsilon_json,
)
from largefedbench.run.seed_result import SeedResult, jsonable

if TYPE_CHECKING:
    from largefedbench.run.request import Prepared

__all__ = ["NOISE_FREE_NOTE", "SHUFFLED_NOTE", "build_entry", "portable_profile"]

NOISE_FREE_NOTE = ("diagnostic: the method's settings and noise calibration are those of the target ε, but every "
                   "release is the exact clipped sum (σ = 0; the ledger's ε is ∞). It shows what the noise costs; "
                   "it is never ranked")
SHUFFLED_NOTE = ("control: the method's settings, noise and ledger are those of the target ε, but every noised sum "
                 "was randomly permuted (public randomness) before the method saw it, so its feedback kept its size "
                 "and noise and lost what it said about the clients. Its gain over the generator-only row is what "
                 "the method gets without information from the clients; it is never ranked")
SPLITS = ("train", "validation", "test", "public")


def build_entry(prep: Prepared, bundle, results: list[SeedResult], *, reference_public: dict[str, float],
                reference_non_private: list[dict[str, float]], wall_seconds: float, command: str,
                audit: dict[str, Any] | None = None, reference_generator_only: list[dict[str, float]] | None = None,
                novel: dict[str, Any] | None = None, held_out: str | None = None) -> Entry:
    """The run's :class:`Entry` (each section validated as it is made). ``reference_public`` is the ε = 0 model's
    test accuracy, ``reference_non_private`` the ε = ∞ model's per seed, ``reference_generator_only`` the no-signal
    row's per seed (synthetic-text methods); ``novel`` describes the window-novel tokens; ``audit`` an ``lfb audit``
    run's section; ``held_out`` what model selection ran on (the selection section: every seed's choices)."""
    from largefedbench.environment import peak_memory_mb
    from largefedbench.paths import lfb_home

    method = prep.method
    eps = [r.epsilon for r in results]
    sections: dict[str, Any] = {}
    if audit is not None:
        sections["audit"] = AuditSection.model_validate(audit)
    if prep.request.noise_free:
        sections["diagnostic"] = DiagnosticSection(kind="noise-free", note=NOISE_FREE_NOTE)
    if prep.request.shuffled_releases:
        sections["diagnostic"] = DiagnosticSection(kind="shuffled-releases", note=SHUFFLED_NOTE)
    if prep.declared:
        from largefedbench.run.declared import as_info

        sections["declared"] = DeclaredSection(**as_info(method, prep.request.made_with))
    select_on = getattr(prep.request, "select_on", "private")
    if held_out is not None and (select_on != "private" or all(r.selections is not None for r in results)):
        # seeds stored before choices were recorded leave the section out (they selected on the validation clients)
        sections["selection"] = SelectionSection(on=select_on, held_out=held_out,
                                                 per_seed=[r.selections or [] for r in results])
    corpus = getattr(bundle, "public_corpus", None)
    if corpus is not None and corpus.kind != "split":  # entries on the public split read as before
        sections["public"] = PublicSection(**corpus.describe())
    return Entry(
        schema_version=_schema_version(results),
        entry_id=prep.entry_id,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        method=MethodSection(name=method.name, version=method.version, source=method.source, target=method.target,
                             paper=method.cls.paper, output=method.cls.output, **_provenance(method)),
        dataset=_dataset(prep.fd),
        contamination=_contamination(prep, bundle),
        privacy=PrivacySection(epsilon=epsilon_json(max(eps)), delta=prep.budget.delta, unit="user",
                               accountant=results[0].accountant, target_epsilon=epsilon_json(prep.budget.epsilon),
                               epsilon_per_seed=[epsilon_json(e) for e in eps], ledgers=[r.ledger for r in results],
                               n_train_clients=len(prep.fd.train), **_calibrations(results)),
        profile=jsonable(portable_profile(bundle.describe(), prep.request.home or lfb_home())),
        metrics=_metrics(results, reference_public, reference_non_private, reference_generator_only, novel),
        costs=CostsSection(**_mean_costs(results), wall_seconds=wall_seconds, peak_memory_mb=peak_memory_mb()),
        environment=_environment(results, prep.request.executor, bundle.device),
        seeds=[r.seed for r in results],
        config=RunConfig(method=config_to_dict(prep.config), preset=prep.preset, overrides=dict(prep.request.overrides),
                         profile=prep.profile.name,
                         downstream_training=prep.profile.downstream_training.to_dict(), command=command),
        artifacts={},
        history=[r.history for r in results],
        **sections,
    )


def _provenance(method) -> dict[str, Any]:
    """A plug-in's distribution and source checkout (run/provenance.py); nothing for built-in and declared methods."""
    if method.source in ("built-in", "declared"):
        return {}
    from largefedbench.run.provenance import method_provenance

    found = method_provenance(method.cls.__module__, getattr(method, "file", None))
    return {k: v for k, v in found.items() if v is not None}


def _environment(results: list[SeedResult], executor: str, device) -> EnvironmentSection:
    """This process's environment; ``seed_commits`` when a seed ran at another commit (None: a seed stored before
    seeds recorded theirs)."""
    from largefedbench.environment import environment
    from largefedbench.models.precision import precision_record

    env = environment()
    commits = {str(r.seed): (r.made_with or {}).get("git_commit") for r in results}
    differs = any(c != env["git_commit"] for c in commits.values())
    guards = {r.sandbox for r in results}
    sandbox = None if None in guards else guards.pop() if len(guards) == 1 else "mixed"
    return EnvironmentSection(**env, client_executor=executor, seed_commits=commits if differs else None,
                              precision=precision_record(device), sandbox=sandbox)


def _schema_version(results: list[SeedResult]) -> int:
    """The current version, or the one before the calibration records where a seed that released something was
    stored before seeds recorded them (valid without them; the board marks its σ as checked only by re-running)."""
    unrecorded = any(r.calibrations is None and (r.ledger or {}).get("events") for r in results)
    return CALIBRATED_SINCE - 1 if unrecorded else SCHEMA_VERSION


def _calibrations(results: list[SeedResult]) -> dict[str, Any]:
    """The privacy section's ``calibrations`` when every seed recorded its own (seeds run before they were recorded,
    and methods that release nothing, have none)."""
    if any(r.calibrations is None for r in results):
        return {}
    return {"calibrations": [r.calibrations for r in results]}


def _dataset(fd) -> DatasetSection:
    m = fd.manifest
    return DatasetSection(name=m["dataset"].lower(), snapshot=m["name"].lower(), content_sha256=m["content_sha256"],
                          synthetic=bool(m.get("synthetic", False)),
                          window=WindowSection(**{k: m["window"].get(k) for k in ("since", "until", "public_since")}),
                          clients={s: len(fd[s]) for s in SPLITS},
                          spans={s: int(fd[s].span_counts().sum()) for s in SPLITS})


def _contamination(prep: Prepared, bundle) -> ContaminationSection:
    from largefedbench.data.windows import get_cutoff, parse_date
    from largefedbench.models import TinyGPT2

    since = prep.fd.manifest["window"]["since"]
    role = "generator" if prep.method.cls.output == "synthetic text" else "downstream"
    source = getattr(prep.profile, role)
    if isinstance(source, TinyGPT2):
        from largefedbench.leaderboard.check_provenance import PRETRAINED_ON_PUBLIC_CORPUS, PRETRAINED_ON_PUBLIC_SPLIT

        corpus = getattr(bundle, "public_corpus", None)
        kind = PRETRAINED_ON_PUBLIC_SPLIT if corpus is None or corpus.kind == "split" else PRETRAINED_ON_PUBLIC_CORPUS
        return ContaminationSection(model=bundle.describe()[role]["id"], model_cutoff=since[:7], cutoff_kind=kind,
                                    window_start=since, after_cutoff=True)
    try:
        cutoff = get_cutoff(source.id)
    except InputError:
        return ContaminationSection(model=source.id, model_cutoff=None, cutoff_kind="unknown", window_start=since,
                                    after_cutoff=None)
    start = cutoff.window_start()
    return ContaminationSection(model=source.id, model_cutoff=cutoff.binding, cutoff_kind=cutoff.kind,
                                window_start=since, after_cutoff=None if start is None else parse_date(since) >= start)


def _stat(values: list[float]) -> dict[str, Any]:
    arr = np.asarray(values, dtype=float)
    return {"per_seed": [float(v) for v in arr], "mean": float(arr.mean()),
            "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0}


def _accuracy(rows: list[dict[str, float]]) -> AccuracySection:
    return AccuracySection(**{k: UnitStat(**_stat([r[k] for r in rows])) for k in ("top1", "top3", "top5")})


def _metrics(results: list[SeedResult], public: dict[str, float], non_private: list[dict[str, float]],
             generator_only: list[dict[str, float]] | None = None, novel: dict[str, Any] | None = None) -> MetricsSection:
    from largefedbench.evaluation import gap_closed

    gaps = [gap_closed(r.test["top1"], public["top1"], ri["top1"]) for r, ri in zip(results, non_private)]
    fids = [r.fid for r in results if r.fid is not None]
    extra: dict[str, Any] = {}
    if generator_only:
        extra["reference_generator_only"] = _accuracy(generator_only)
        extra["gain_over_generator_only"] = Stat(**_stat([r.test["top1"] - g["top1"] for r, g in zip(results, generator_only)]))
        extra["gap_closed_over_generator_only"] = Stat(**_stat(
            [gap_closed(r.test["top1"], g["top1"], ri["top1"]) for r, g, ri in zip(results, generator_only, non_private)]))
    section = _window_novel(results, public, non_private, generator_only, novel)
    if section is not None:
        extra["window_novel"] = section
    for key in SYNTHETIC_TEXT_STATS:  # when every seed has it (older seeds may not)
        values = [getattr(r, key) for r in results]
        if values and None not in values:
            extra[key] = Stat(**_stat(values))
    return MetricsSection(
        next_token_accuracy=_accuracy([r.test for r in results]),
        validation_top1=UnitStat(**_stat([r.validation["top1"] for r in results])),
        reference_public=_accuracy([public] * len(results)),
        reference_non_private=_accuracy(non_private),
        gap_closed=Stat(**_stat(gaps)),
        fid=Stat(**_stat(fids)) if fids else None,
        n_test_tokens=int(results[0].test["n_tokens"]),
        **extra,
    )


def _novel_top1(metrics: dict[str, Any]) -> float | None:
    value = metrics.get("novel_top1")
    return float(value) if isinstance(value, (int, float)) and np.isfinite(value) else None


def _window_novel(results: list[SeedResult], public: dict[str, float], non_private: list[dict[str, float]],
                  generator_only: list[dict[str, float]] | None, novel: dict[str, Any] | None) -> WindowNovelSection | None:
    """The window-novel section, when every seed and reference has a finite novel-token top-1."""
    rows = [_novel_top1(r.test) for r in results]
    refs = [_novel_top1(m) for m in non_private]
    gens = [_novel_top1(m) for m in generator_only or []]
    base = _novel_top1(public)
    if novel is None or base is None or None in rows + refs + gens:
        return None
    from largefedbench.evaluation import gap_closed
    from largefedbench.evaluation.novel_tokens import interval95

    n_positions = int(results[0].test.get("novel_n_tokens", 0))
    return WindowNovelSection(
        k=novel["k"], min_count=novel["min_count"], n_tokens=novel["n_tokens"], n_test_positions=n_positions,
        reference=novel.get("reference"), ci95=interval95(float(np.mean(rows)), n_positions) if n_positions else None,
        top1=Stat(**_stat(rows)),
        reference_public=base, reference_non_private=Stat(**_stat(refs)),
        reference_generator_only=Stat(**_stat(gens)) if gens else None,
        gap_closed=None if base in refs else Stat(**_stat([gap_closed(a, base, b) for a, b in zip(rows, refs)])),
    )


def _mean_costs(results: list[SeedResult]) -> dict[str, Any]:
    keys = ("floats_down_per_client_per_round", "floats_up_per_client_per_round", "client_seconds_per_client_per_round",
            "server_seconds_per_round")
    out: dict[str, Any] = {"rounds": int(max(r.costs.get("rounds", 0) for r in results))}
    for k in keys:
        vals = [r.costs[k] for r in results if k in r.costs]
        out[k] = float(np.mean(vals)) if vals else None
    stages = [r.stage_seconds for r in results if r.stage_seconds]
    if stages:  # seeds run before the breakdown existed have none
        out["stage_seconds"] = {k: round(float(np.mean([s.get(k, 0.0) for s in stages])), 3) for k in stages[0]}
    out["method_seconds"] = float(np.mean([r.method_seconds for r in results]))
    out["downstream_seconds"] = float(np.mean([r.downstream_seconds for r in results]))
    return out


def portable_profile(info: dict[str, Any], home: Path) -> dict[str, Any]:
    """The models' description without paths of this machine: the model cache folder as ``$LFB_HOME/…`` (left
    out when it is not under the LFB home ``home``)."""
    cache = info.get("cache")
    if not isinstance(cache, dict) or not cache.get("dir"):
        return info
    try:
        rel = Path(cache["dir"]).resolve().relative_to(Path(home).resolve()).as_posix()
    except ValueError:
        rel = None
    portable = {k: v for k, v in cache.items() if k != "dir"}
    if rel is not None:
        portable["dir"] = f"$LFB_HOME/{rel}"
    return {**info, "cache": portable}
