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
import sys
import time
from collections.abc import Callable
from typing import Any

from largefedbench.config_overrides import config_from_overrides, config_to_dict
from largefedbench.errors import InputError, PrivacyError, SnapshotError
from largefedbench.io import atomic_write_json
from largefedbench.paths import check_writable_dir
from largefedbench.privacy import PrivacyBudget
from largefedbench.privacy.rules import check_delta
from largefedbench.run.command import command_for
from largefedbench.run.entry import build_entry
from largefedbench.run.evaluator import Evaluator
from largefedbench.run.presets import preset_config
from largefedbench.run.reference_lock import locked_reference
from largefedbench.run.request import EvalRequest, EvalResult, Prepared, default_dataset  # also imported from here
from largefedbench.run.sandboxed import SANDBOX_MODES
from largefedbench.run.seed import check_stored_precision, run_seed
from largefedbench.run.seed_result import SeedResult

__all__ = ["DEFAULT_DELTA", "DEFAULT_EPSILON", "EvalRequest", "EvalResult", "Prepared", "default_dataset", "prepare",
           "run_eval", "shipped_public_model"]

DEFAULT_EPSILON = 1.0  # POPri's strict regime (Table 1: ε ∈ {1, 7})
DEFAULT_DELTA = 3e-6  # POPri App. C: δ = 3·10⁻⁶
ID_LIMIT = 128  # entry ids (the schema's ID_PATTERN) are at most this long
#: the schema version entry and run ids hash: version 3 changed no field (it requires the calibration records), so
#: ids, and the finished seeds a run resumes by them, stay those of version 2
ID_SCHEMA = 2
MAX_SEED = 2**32 - 1  # numpy, torch and the methods' seed arithmetic all accept 0 .. 2**32 - 1


# -- checks before any work ---------------------------------------------------------------------------------


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
    if request.noise_free or request.shuffled_releases:
        flag = "--noise-free" if request.noise_free else "--shuffled-releases"
        raise InputError(f"{flag} is a diagnostic of a method's releases; --synthetic declares its privacy: drop one")
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


def _entry_id(method: str, fd, profile: str, budget: PrivacyBudget, key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]
    eps = "inf" if math.isinf(budget.epsilon) else f"{budget.epsilon:g}"
    snap = fd.manifest["name"].lower()
    kind = "--noise-free" if key.get("noise_free") else "--shuffled" if key.get("shuffled_releases") else ""
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
    from largefedbench.registry import method_target

    if request.synthetic is not None:
        from largefedbench.run.declared import declared_method

        _check_declared(request)
        method = declared_method(request.synthetic, label=request.method or None, made_with=request.made_with)
        source = method.source
    else:
        source = method_target(request.method)[1]  # an unknown name stops here; nothing is imported yet
    if request.sandbox not in SANDBOX_MODES:
        raise InputError(f"--sandbox {request.sandbox!r}: choose auto (plug-ins in their own guarded process), on "
                         "(every method) or off (in the harness's process; the entry says so)")
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
    if request.executor == "local" and source not in ("built-in", "declared"):  # a declared set runs no client code
        raise InputError(f"--executor local runs client functions in the method's own process, where what they keep "
                         f"can reach train(); {request.method!r} is not a built-in method, so its client functions "
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
        from largefedbench.run.described import DescribedMethod
        from largefedbench.run.sandboxed import resolve_for_run

        method = resolve_for_run(request, preset)
        if isinstance(method, DescribedMethod):  # a plug-in: its configuration was resolved in its sandbox
            config = method.config
        else:
            config = config_from_overrides(method.cls.Config, preset_config(method.cls, preset), dict(request.overrides))
        budget = _budget_for(method.cls, request.epsilon, request.delta)
    method_cls = method.cls
    if request.noise_free and request.shuffled_releases:
        raise InputError("--noise-free and --shuffled-releases are two diagnostics: run one at a time")
    from largefedbench.contract import SELECT_ON

    if request.select_on not in SELECT_ON:
        raise InputError(f"--select-on {request.select_on!r}: choose private (the validation clients, as every entry "
                         "before it) or public (a held-out tenth of the public corpus, which no training sees)")
    if (request.noise_free or request.shuffled_releases) and getattr(method_cls, "fixed_epsilon", None) is not None:
        flag, what = (("--noise-free", "noise-free diagnostic is for private methods (it removes their noise)")
                      if request.noise_free else
                      ("--shuffled-releases", "shuffled control is for private methods (it permutes their releases)"))
        raise InputError(f"{flag}: method {method_cls.name!r} is the ε = {method_cls.fixed_epsilon:g} reference; the "
                         f"{what}")
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
        "epsilon": str(budget.epsilon), "delta": budget.delta, "schema": ID_SCHEMA,
    }
    if request.noise_free:  # only when set, so the ids of ordinary entries stay as they were
        key["noise_free"] = True
    if request.shuffled_releases:
        key["shuffled_releases"] = True
    if request.synthetic is not None:
        key["declared"] = {"label": method.name, "made_with": request.made_with}
    if public_kind != "split":  # likewise: entries made on the snapshot's public split keep their ids
        key["public"] = public_kind
    if request.select_on != "private":  # likewise: entries selecting on the validation clients keep their ids
        key["select_on"] = request.select_on
    shipped = shipped_public_model(profile, public_kind)
    if shipped is not None:  # a shipped ε = 0 model: these entries are not those made on a checkpoint pretrained here
        key["public_model"] = shipped
    entry_id = _entry_id(method.name, fd, profile.name, budget, key)
    # finished seeds are reused only under the same profile settings (models, downstream training), not just its name
    settings = {k: v for k, v in dataclasses.asdict(profile).items() if k not in ("description", "preset", "default_dataset")}
    settings["downstream_training"] = profile.downstream_training.to_dict()
    run_id = _entry_id(method.name, fd, profile.name, budget,
                       {**{k: v for k, v in key.items() if k != "seeds"}, "profile_settings": settings})
    dataset = fd.manifest["dataset"].lower()
    path = request.out / "entries" / dataset / method.name / f"{entry_id}.json"
    return Prepared(request, method, config, preset, budget, fd, profile, entry_id, path, run_id, public_spec)


def shipped_public_model(profile, public_kind: str, corpus_sha256: str | None = None) -> str | None:
    """The weights hash (12 hex digits) of the ε = 0 checkpoint the package ships for ``profile`` on public corpora of
    ``public_kind`` (and that ``corpus_sha256``, when given; ``models/checkpoints/``), or None where the checkpoint is
    built where the run happens."""
    from largefedbench.models.tiny import shipped_downstream

    folder = shipped_downstream(profile, public_kind, corpus_sha256)
    return json.loads((folder / "pretraining.json").read_text())["sha256"][:12] if folder is not None else None


def _seed_wall(result: SeedResult) -> float:
    """A seed's wall time; a result stored before it was recorded counts its method and downstream seconds."""
    return result.wall_seconds if result.wall_seconds is not None else result.method_seconds + result.downstream_seconds


def _reference(prep: Prepared, ev: Evaluator, name: str, seed: int, log: Callable[[str], None]) -> dict[str, float]:
    """The reference row ``name`` of ``seed``, computed by one run at a time among those sharing the home; the board's
    copy is made wherever the row came from (a home that cached it before the board kept copies too), and a damaged
    copy is set aside (``.damaged``) rather than read."""
    what = f"{name} reference" + ("" if name == "public" else f" of seed {seed}")
    board = ev.board_reference_path(name, seed)
    if board.exists() and not isinstance(_json_or_none(board), dict):
        log(f"{board} is not a reference row (damaged?): set aside as {board.name}.damaged; the row is read from the "
            "home or computed again")
        board.replace(board.with_name(board.name + ".damaged"))
    metrics = locked_reference(lambda: ev.reference(name, seed), ev.reference_path(name, seed).with_suffix(".lock"),
                               what=what, log=log)
    if not board.exists():
        atomic_write_json(board, metrics)
    return metrics


def _json_or_none(path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


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
    ev = Evaluator(prep, bundle, log)
    prep.run_dir.mkdir(parents=True, exist_ok=True)
    from largefedbench.models.precision import precision_record

    check_stored_precision(prep.run_dir, request.seeds, precision_record(bundle.device), log)
    results: list[SeedResult] = []
    non_private: list[dict[str, float]] = []
    generator_only: list[dict[str, float]] = []
    # the no-signal row is our generator's; a declared set was made by another tool's (with other prompts)
    with_generator_row = (prep.method_cls.output == "synthetic text" and prep.method_cls.fixed_epsilon is None
                          and not prep.declared)
    public = _reference(prep, ev, "public", request.seeds[0], log)
    in_seeds = 0.0  # this process's time in run_seed: replaced by each seed's own wall time (earlier processes' too)
    for seed in request.seeds:
        t_seed = time.perf_counter()
        results.append(run_seed(prep, ev, seed, log, audit))
        in_seeds += time.perf_counter() - t_seed
        non_private.append(_reference(prep, ev, "non-private", seed, log))
        if with_generator_row:
            generator_only.append(_reference(prep, ev, "generator-only", seed, log))
    section = None if audit is None else audit.section([r.to_json() for r in results], prep.budget)
    entry = build_entry(prep, bundle, results, reference_public=public, reference_non_private=non_private,
                        reference_generator_only=generator_only or None, novel=ev.novel.describe(),
                        wall_seconds=time.perf_counter() - start - in_seeds + sum(map(_seed_wall, results)),
                        command=prep.request.command or command_for(prep),
                        audit=section, held_out=ev.held_out_description)
    from largefedbench.evaluation.plots import write_entry_plots

    plots = write_entry_plots(entry.to_json(), prep.run_dir, prep.entry_path,
                              validation=bundle.span_embeddings(prep.fd, "validation", progress=False))
    # the plot files are named after the entry id (a checked id), so their names need no second validation
    entry = entry.model_copy(update={"artifacts": {name: p.name for name, p in plots.items()}})
    atomic_write_json(prep.entry_path, entry.to_json())
    return EvalResult(entry, prep.entry_path, plots)
