"""`lfb leaderboard reproduce ENTRY`: re-run an entry's resolved configuration and compare the numbers.

The method is looked up by its registered name (never by the entry's ``method.target``), on the snapshot with
the entry's content hash, with the entry's seeds, budget, profile, preset and resolved method config. The
re-run writes into a temporary folder; the report lists every compared number with its tolerance.

Every seed of an entry runs on its own (its own method run, references and downstream model), so ``seeds`` may
name a subset: a spot check of one seed costs roughly a third of a three-seed entry (the models, span embeddings
and public reference load either way) and compares that seed's numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from largefedbench.environment import cpu_bf16
from largefedbench.errors import InputError, SnapshotError
from largefedbench.leaderboard.check_privacy import epsilon_matches
from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.ranks import FLOOR, SPREAD_SDS, spread_tolerance
from largefedbench.leaderboard.reproduced import seeds_text
from largefedbench.leaderboard.schema import Entry, epsilon_value
from largefedbench.leaderboard.validate import validate_entry_file


@dataclass(frozen=True)
class Tolerances:
    """How far a re-run may land from the entry. On the same hardware and software a CPU re-run is exact; the
    slack is for other hardware (GPU kernels, thread counts).

    An accuracy (top-1/3/5 and the references', per seed) may move by ``accuracy_spread_sds`` sample standard
    deviations of the entry's own per-seed values of that number, and at least by ``accuracy_floor`` (what another
    CPU alone moves a seed by; all a one-seed entry gets): leaderboard/ranks.py, the rule the board ranks by.
    ``accuracy`` (absolute) replaces that rule with one fixed tolerance."""

    accuracy: float | None = None
    accuracy_floor: float = FLOOR
    accuracy_spread_sds: float = SPREAD_SDS
    gap_closed: float = 0.05  # absolute
    fid_relative: float = 0.05  # relative
    audit_epsilon: float = 0.25  # absolute, on an audit entry's empirical ε lower bound and one-shot estimate
    # ε: check_privacy.EPSILON_RTOL / EPSILON_ATOL (the accountants are deterministic)


@dataclass(frozen=True)
class Comparison:
    metric: str
    entry: float
    reproduced: float
    tolerance: str
    ok: bool

    @property
    def difference(self) -> float:
        if math.isinf(self.entry) or math.isinf(self.reproduced):
            return 0.0 if self.entry == self.reproduced else math.inf
        return self.reproduced - self.entry


@dataclass
class ReproduceResult:
    entry_id: str
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reproduced_path: Path | None = None
    seeds: list[int] | None = None  # the seeds re-run when a subset of the entry's (None: all of them)

    @property
    def ok(self) -> bool:
        return bool(self.comparisons) and all(c.ok for c in self.comparisons)

    def format(self) -> str:
        lines = [f"{'metric':<44}{'entry':>12}{'re-run':>12}{'diff':>11}  tolerance"]
        for c in self.comparisons:
            lines.append(f"{c.metric:<44}{c.entry:>12.6g}{c.reproduced:>12.6g}{c.difference:>+11.2e}  {c.tolerance}"
                         + ("" if c.ok else "   <- OUTSIDE"))
        lines += [f"note: {n}" for n in self.notes]
        bad = sum(not c.ok for c in self.comparisons)
        which = "" if self.seeds is None else f" ({seeds_text(self.seeds)} only)"
        lines.append(f"{self.entry_id}{which}: " + ("reproduced within tolerance" if self.ok else
                                             f"NOT reproduced: {bad} of {len(self.comparisons)} numbers outside"))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "ok": self.ok, "notes": self.notes, "seeds": self.seeds,
                "comparisons": [{**dataclasses.asdict(c), "difference": c.difference} for c in self.comparisons]}


def _as_override(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(_as_override(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def _entry_profile(entry: Entry, notes: list[str]) -> Any:
    """The entry's profile by name, or, where the profile's own downstream model has changed since the entry (e.g.
    more pretraining steps), the profile with the downstream model the entry recorded: its ε = 0 model, which every
    reference and method of the entry starts from, is then built as it was (cached apart, under its settings)."""
    from largefedbench.models import get_profile

    profile = get_profile(entry.config.profile)
    downstream = entry.profile.get("downstream") or {}
    recorded = downstream.get("config")
    # a shipped checkpoint is installed, never rebuilt: its entries stay with the name (and its weights check)
    if not recorded or (downstream.get("pretraining") or {}).get("shipped") or not dataclasses.is_dataclass(profile.downstream):
        return entry.config.profile
    fields = {f.name: f for f in dataclasses.fields(profile.downstream)}
    now = dataclasses.asdict(profile.downstream)
    # a setting added since the entry: its field default, the behaviour before it existed
    wanted = {k: recorded[k] if k in recorded else f.default for k, f in fields.items()
              if k in recorded or f.default is not dataclasses.MISSING}
    moved = {k: v for k, v in wanted.items() if now[k] != v}
    gone = sorted(set(recorded) - set(fields))
    if gone:
        notes.append(f"the entry's downstream settings {', '.join(gone)} no longer exist; rebuilt without them")
    if not moved:
        return entry.config.profile
    notes.append(f"the {profile.name} profile's downstream model changed since the entry; built the ε = 0 model with "
                 "the entry's " + ", ".join(f"{k}={v!r} (now {now[k]!r})" for k, v in sorted(moved.items())))
    return dataclasses.replace(profile, downstream=dataclasses.replace(profile.downstream, **moved))


def _method_class(entry: Entry, out: Path, home: Path | None) -> type:
    """The entry's method class: a built-in imported here, a plug-in as its sandboxed process describes it."""
    from largefedbench.paths import lfb_home
    from largefedbench.registry import get_method, method_target
    from largefedbench.run.described import describe_method

    if method_target(entry.method.name)[1] == "built-in":
        return get_method(entry.method.name)
    home = Path(home) if home is not None else lfb_home()
    return describe_method(entry.method.name, preset=entry.config.preset, overrides={}, home=home,
                           hidden=[home, Path(out)]).cls


def _request(entry: Entry, out: Path, home: Path | None, progress: bool, overrides: dict[str, str],
             seeds: tuple[int, ...], profile: Any = None, cls: type | None = None):
    from largefedbench.run.eval import EvalRequest

    cls = cls or _method_class(entry, out, home)
    fixed = getattr(cls, "fixed_epsilon", None) is not None
    return EvalRequest(method=entry.method.name, dataset=entry.dataset.snapshot,
                       epsilon=None if fixed else epsilon_value(entry.privacy.target_epsilon),
                       delta=entry.privacy.delta, profile=profile or entry.config.profile, seeds=seeds,
                       overrides=overrides, preset=entry.config.preset, out=out, home=home, progress=progress,
                       noise_free=entry.diagnostic is not None and entry.diagnostic.kind == "noise-free",
                       shuffled_releases=entry.diagnostic is not None and entry.diagnostic.kind == "shuffled-releases",
                       public=entry.public_kind,  # entries made before the choice ran on the snapshot's split
                       select_on=entry.select_on,  # entries made before --select-on selected on the validation clients
                       # the executors release the same sums; a built-in diagnostic that keeps raw numbers in the
                       # client's process (FedBis's record_agreement) needs the entry's local one; Ray needs a cluster
                       executor="local" if entry.environment.client_executor == "local" else "process",
                       command=f"lfb leaderboard reproduce {entry.entry_id}")


def _prepare(entry: Entry, out: Path, home: Path | None, progress: bool, notes: list[str],
             seeds: tuple[int, ...] | None = None):
    """The request that resolves to the entry's config (adding overrides where the method's defaults moved), for
    ``seeds`` (default: the entry's)."""
    seeds = tuple(entry.seeds) if seeds is None else seeds
    from largefedbench.config_overrides import config_to_dict
    from largefedbench.run.eval import prepare, shipped_public_model

    method_cls = _method_class(entry, out, home)
    retired = getattr(method_cls, "retired_settings", {})
    gone = sorted(k for k in entry.config.method if k in retired)
    for k in gone:
        notes.append(f"the entry's setting {k}={entry.config.method[k]!r} is retired ({retired[k]}); re-run without it")
    wanted = {k: v for k, v in entry.config.method.items() if k not in retired}
    overrides = {k: v for k, v in entry.config.overrides.items() if k not in retired}
    # settings added since the entry: the value the method declares as its behaviour before them, else the preset's,
    # taken to be what the entry's version did (the comparison of the numbers checks it)
    introduced = getattr(method_cls, "introduced_settings", {})
    overrides.update({k: _as_override(v) for k, v in introduced.items() if k not in entry.config.method})
    profile = _entry_profile(entry, notes)
    request = _request(entry, out, home, progress, overrides, seeds, profile, method_cls)
    prep = prepare(request)
    moved = {k: v for k, v in wanted.items() if config_to_dict(prep.config).get(k) != v}
    if moved:
        notes.append(f"the method's {entry.config.preset} defaults changed since the entry; re-applied "
                     f"{', '.join(sorted(moved))} from the entry's resolved config")
        overrides.update({k: _as_override(v) for k, v in moved.items()})
        request = _request(entry, out, home, progress, overrides, seeds, profile, method_cls)
        prep = prepare(request)
    got = config_to_dict(prep.config)
    if {k: v for k, v in got.items() if k in wanted} != wanted or set(wanted) - set(got):
        raise InputError(f"cannot rebuild the entry's method config {wanted} with this version of "
                         f"{entry.method.name!r} (got {got})")
    newer = {k: v for k, v in got.items() if k not in wanted}
    if newer:
        notes.append(f"the method has settings the entry predates, run at the values before them (else the "
                     f"{entry.config.preset} preset's): "
                     + ", ".join(f"{k}={v!r}" for k, v in sorted(newer.items())))
    if prep.fd.manifest["content_sha256"] != entry.dataset.content_sha256:
        raise SnapshotError(f"the snapshot {entry.dataset.snapshot!r} here has content hash "
                            f"{prep.fd.manifest['content_sha256'][:16]}…, the entry's is {entry.dataset.content_sha256[:16]}…: "
                            "get the same snapshot (e.g. from the hub, `--dataset hf://…`) or rebuild it with the same settings")
    ours = shipped_public_model(prep.profile, entry.public_kind, entry.public.sha256 if entry.public else None)
    if ours is not None and entry.public_model and entry.public_model != ours:
        raise InputError(f"the entry's ε = 0 model has weights {entry.public_model}, but this installation ships "
                         f"{ours} for the {prep.profile.name} profile on {entry.public_kind} public resources; every "
                         "reference and method of the entry starts from those weights, so its numbers cannot be "
                         "reproduced here (they were pretrained on a CPU whose kernels give other weights: "
                         f"docs/profiles.md). The board keeps it in its own group (ε = 0 model {entry.public_model}); "
                         f"compare with the entries of group {ours}, or run the method again to add it there")
    if ours is None and entry.public_model:
        notes.extend(pretraining_here_notes(entry, prep.profile.name, cpu_bf16()))
    if prep.profile.downstream_training.to_dict() != entry.config.downstream_training:
        notes.append("the profile's downstream training settings differ from the entry's: accuracies may move")
    if prep.method.target != entry.method.target:
        notes.append(f"method {entry.method.name!r} is now {prep.method.target}; the entry was made with "
                     f"{entry.method.target}")
    return request


def accuracy_tolerance(per_seed: Sequence[float], tol: Tolerances) -> tuple[float, str]:
    """How far a re-run of one of the entry's seeds may move an accuracy whose per-seed values are ``per_seed``,
    and how the report says it."""
    if tol.accuracy is not None:
        return tol.accuracy, f"±{tol.accuracy:g}"
    atol = spread_tolerance(per_seed, sds=tol.accuracy_spread_sds, floor=tol.accuracy_floor)
    return atol, f"±{atol:.2g} ({tol.accuracy_spread_sds:g} SD of seeds, ≥ {tol.accuracy_floor:g})"


def _compare(entry: dict[str, Any], again: dict[str, Any], tol: Tolerances) -> list[Comparison]:
    """Every per-seed number of the re-run ``again`` against the same seed's in ``entry`` (the re-run may hold a
    subset of the entry's seeds), and an audit entry's audit numbers."""
    out = []
    index = {seed: i for i, seed in enumerate(entry["seeds"])}
    pairs = [(seed, index[seed], j) for j, seed in enumerate(again["seeds"])]
    for seed, i, j in pairs:
        a, b = epsilon_value(entry["privacy"]["epsilon_per_seed"][i]), epsilon_value(again["privacy"]["epsilon_per_seed"][j])
        out.append(Comparison(f"ε, seed {seed}", a, b, "1e-3 relative", epsilon_matches(a, b)))
    metrics = [("next_token_accuracy", k) for k in ("top1", "top3", "top5")]
    metrics += [("reference_public", "top1"), ("reference_non_private", "top1")]
    for section, k in metrics:
        per_seed = entry["metrics"][section][k]["per_seed"]
        atol, says = accuracy_tolerance(per_seed, tol)
        for seed, i, j in pairs:
            a, b = per_seed[i], again["metrics"][section][k]["per_seed"][j]
            out.append(Comparison(f"{section}.{k}, seed {seed}", a, b, says, abs(a - b) <= atol))
    for seed, i, j in pairs:
        a, b = entry["metrics"]["gap_closed"]["per_seed"][i], again["metrics"]["gap_closed"]["per_seed"][j]
        out.append(Comparison(f"gap_closed, seed {seed}", a, b, f"±{tol.gap_closed:g}", abs(a - b) <= tol.gap_closed))
    if entry["metrics"].get("fid") and again["metrics"].get("fid"):
        for seed, i, j in pairs:
            a, b = entry["metrics"]["fid"]["per_seed"][i], again["metrics"]["fid"]["per_seed"][j]
            ok = abs(a - b) <= tol.fid_relative * max(abs(a), 1e-12)
            out.append(Comparison(f"fid, seed {seed}", a, b, f"{tol.fid_relative:.0%} relative", ok))
    if entry.get("audit") and again.get("audit"):
        for key in ("epsilon_lower_bound", "one_shot_epsilon"):
            a, b = entry["audit"].get(key), again["audit"].get(key)
            if a is None and b is None:
                continue
            a, b = epsilon_value(a) if a is not None else math.nan, epsilon_value(b) if b is not None else math.nan
            ok = a == b or abs(a - b) <= tol.audit_epsilon
            out.append(Comparison(f"audit.{key}", a, b, f"±{tol.audit_epsilon:g}", ok))
    return out


def _seeds_to_run(entry: Entry, seeds: Sequence[int] | None) -> tuple[int, ...]:
    """The entry's seeds, or the subset ``seeds`` of them (in the entry's order)."""
    if seeds is None:
        return tuple(entry.seeds)
    unknown = sorted(set(seeds) - set(entry.seeds))
    if unknown or not seeds:
        raise InputError(f"--seeds {','.join(map(str, seeds)) or '(none)'}: the entry {entry.entry_id} ran seeds "
                         f"{', '.join(map(str, entry.seeds))}; name one or more of those")
    if entry.audit is not None and set(seeds) != set(entry.seeds):
        raise InputError(f"{entry.entry_id} is an audit entry: its audit numbers pool every seed, so it is re-run "
                         "whole (leave out --seeds)")
    wanted = set(seeds)
    return tuple(s for s in entry.seeds if s in wanted)


def _audit(entry: Entry, progress: bool):
    """The audit an audit entry was made with (its canaries change the federation, hence σ and ε), else None."""
    if entry.audit is None:
        return None
    from largefedbench.run.audit import Audit

    a = entry.audit
    return Audit(canaries=a.canaries, confidence=a.confidence, inclusion_seed=a.inclusion_seed, progress=progress,
                 leak_canaries=a.leak_canaries)


def bf16_here_notes(entry: Entry, device_type: str, here: str | None) -> list[str]:
    """What this machine's bf16 support means for re-running an entry whose method (or its generator-only row)
    sampled or trained in bfloat16 on a CPU (``here``: this CPU's native bf16 instructions,
    :func:`~largefedbench.environment.cpu_bf16`). A method that outputs a model samples nothing, whatever the
    machine-wide ``environment.precision`` says."""
    uses = sorted(stage for stage, dtype in (entry.environment.precision or {}).items() if dtype == "bfloat16")
    if not uses or device_type != "cpu" or entry.method.output != "synthetic text":
        return []
    hardware = entry.environment.hardware or {}
    made_on = hardware.get("gpu") or hardware.get("cpu_bf16")
    stages = " and ".join(uses)
    if here is None:
        than = (f"than on the {made_on} machine that made it" if made_on else "as it was where the entry was made")
        return [f"this CPU has no native bf16 instructions (no avx512_bf16 or amx_bf16): the entry's bfloat16 "
                f"{stages} runs emulated here, one to two orders of magnitude slower {than} (`lfb bench llm` "
                "measures both dtypes)"]
    if not hardware.get("gpu") and made_on is not None and made_on != here:
        return [f"bfloat16 {stages} runs on {here} here, on {made_on} where the entry was made: the kernels round "
                "differently, so sampled texts may differ and accuracies move within the seeds' spread rather than "
                "repeat to the digit"]
    return []


def pretraining_here_notes(entry: Entry, profile: str, here: str | None) -> list[str]:
    """For an entry whose ε = 0 model the run pretrains (not shipped): built on a CPU with other matrix kernels (AMX
    against AVX-512 or none), the weights built here will differ (docs/profiles.md, "The ε = 0 checkpoint is shipped,
    not rebuilt"), and with them every accuracy. Where the model was pretrained is its pretraining stats' ``cpu_bf16``
    (recorded since 2026-12-02), else the CPU the entry ran on. ``here``: this CPU's native bf16 instructions."""
    hardware = entry.environment.hardware or {}
    stats = ((entry.profile or {}).get("downstream") or {}).get("pretraining") or {}
    if hardware.get("gpu") or stats.get("device", "cpu") != "cpu":
        return []
    if "cpu_bf16" in stats:
        there, where = stats["cpu_bf16"], "it was pretrained on a CPU with"
    elif "cpu_bf16" in hardware:
        there, where = hardware["cpu_bf16"], "the entry ran (and most likely pretrained it) on a CPU with"
    else:
        return []
    if there == here:
        return []
    steps = f"{stats['steps']:,} steps" if "steps" in stats else "its pretraining"
    return [f"the entry's ε = 0 model ({entry.public_model}) is not shipped for the {profile} profile, so it is "
            f"pretrained here unless this home holds it: {where} {there or 'no native bf16'}, this one has "
            f"{here or 'no native bf16'}, and other kernels round otherwise over {steps} (docs/profiles.md), so the "
            "weights, and every accuracy with them, may move; a CPU like the entry's rebuilds them"]


@contextlib.contextmanager
def _precision_as(entry: Entry, notes: list[str]):
    """Sample and train in the dtypes the entry recorded (``environment.precision``), whatever this machine's
    default or this shell's ``LFB_*_DTYPE``; restored afterwards. Worker processes start inside, so they inherit it."""
    from largefedbench.models.device import get_device
    from largefedbench.models.precision import default_precision, precision_env

    recorded = entry.environment.precision
    if recorded is None:
        notes.append("the entry records no dtypes (written before they were recorded): sampled and trained in this "
                     "machine's, or this shell's LFB_GENERATION_DTYPE / LFB_TRAINING_DTYPE")
    wanted = precision_env(recorded)
    here = default_precision(get_device(None))
    differs = sorted(f"{key} {value} (here: {here[key]})" for key, value in (recorded or {}).items()
                     if here.get(key) != value)
    if differs:
        notes.append(f"sampled and trained in the entry's dtypes, not this machine's default: {', '.join(differs)}")
    before = {var: os.environ.get(var) for var in wanted}
    for var, name in wanted.items():
        if name is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = name
    try:
        yield
    finally:
        for var, value in before.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def reproduce(path: Path, *, home: Path | None = None, tolerances: Tolerances = Tolerances(),
              out: Path | None = None, progress: bool = False, seeds: Sequence[int] | None = None,
              log: Callable[[str], None] | None = None) -> ReproduceResult:
    """Re-run the entry at ``path`` (snapshots and caches from the LargeFedBench ``home``, default ``$LFB_HOME``)
    and compare; ``seeds``: only these of the entry's seeds. Raises :class:`InputError` if the entry is not valid."""
    from largefedbench.run.eval import run_eval

    path = Path(path)
    report = validate_entry_file(EntryFile(path, board_of(path)))
    if not report.valid:
        problems = "; ".join(f.format() for f in report.errors)
        raise InputError(f"{path} is not a valid entry, so there is nothing trustworthy to reproduce: {problems}")
    entry: Entry = report.entry
    run_seeds = _seeds_to_run(entry, seeds)
    result = ReproduceResult(entry.entry_id, seeds=None if set(run_seeds) == set(entry.seeds) else list(run_seeds))
    from largefedbench.models.device import get_device

    log = log or (lambda msg: None)
    result.notes.extend(bf16_here_notes(entry, get_device(None).type, cpu_bf16()))
    with tempfile.TemporaryDirectory(prefix="lfb-reproduce-") as tmp, _precision_as(entry, result.notes):
        board = Path(out) if out is not None else Path(tmp)
        request = _prepare(entry, board, home, progress, result.notes, run_seeds)
        for note in result.notes:  # said before the re-run (which may take hours), and again in the result
            log(note)
        again = run_eval(request, log=log, audit=_audit(entry, progress))
        if out is not None:
            result.reproduced_path = again.path
        if again.entry.public_model != entry.public_model:
            result.notes.append(f"the ε = 0 model built here has weights {again.entry.public_model or '(a hub model)'}, "
                                f"the entry's {entry.public_model or '(a hub model)'}: every accuracy may move with them")
        original = entry.model_dump(mode="json")
        result.comparisons = _compare(original, again.entry.model_dump(mode="json"), tolerances)
    return result
