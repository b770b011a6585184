"""One seed of a method's run: :func:`run_seed` runs the method under the budget, checks and accounts its ledger,
evaluates its artifact with the :class:`~largefedbench.run.evaluator.Evaluator` and stores the result, so a re-run
skips the seed; the method's output is kept while it is evaluated, so a kill there does not run the method again."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from largefedbench import __version__, timing
from largefedbench.environment import git_commit
from largefedbench.errors import InputError, MethodError, PrivacyError
from largefedbench.io import atomic_write_json
from largefedbench.privacy import PrivacyLedger, resolve_accountant
from largefedbench.privacy.rules import BUDGET_SLACK, over_budget
from largefedbench.rounds.checkpoints import checkpoint_files
from largefedbench.run.evaluator import REFERENCE_ROWS, Evaluator
from largefedbench.run.sandboxed import run_method_sandboxed, wants_sandbox
from largefedbench.run.seed_result import SeedResult, downstream_summary, jsonable

if TYPE_CHECKING:
    from largefedbench.run.request import Prepared

__all__ = ["METHOD_OUTPUT", "PRECISION_STAMP", "check_stored_precision", "load_method_output", "run_seed",
           "save_method_output"]


def run_seed(prep: Prepared, ev: Evaluator, seed: int, log: Callable[[str], None], audit: Any = None) -> SeedResult:
    """Run the method for one seed and evaluate it; the result is stored so a re-run skips the seed.
    ``audit`` (``largefedbench.run.audit.Audit``) adds canary clients to the federation and scores them."""
    seed_dir = prep.run_dir / f"seed-{seed}"
    done = seed_dir / "result.json"
    if done.exists():
        log(f"seed {seed}: already done, reusing {done}")
        return SeedResult.from_json(_stored_result(done), done)
    cls, budget = prep.method_cls, prep.budget
    t_seed = time.perf_counter()
    seed_dir.mkdir(parents=True, exist_ok=True)
    fed = ev.federation(cls, seed) if audit is None else audit.federation(ev, cls, seed)
    fed.budget = budget  # a release that would break the budget stops the run before it happens
    public = ev.public_resources(seed, seed_dir)
    from largefedbench.models.precision import precision_record

    precision = precision_record(ev.bundle.device)
    output, stamp = seed_dir / METHOD_OUTPUT, {"lfb": __version__, "method": prep.method.version, "precision": precision}
    kept = None if audit is not None else load_method_output(output, fed, stamp, ev.bundle.device,
                                                             new_model=ev.bundle.new_downstream)
    if kept is None:
        log(f"seed {seed}: running {prep.method.name}")
        atomic_write_json(seed_dir / PRECISION_STAMP, precision)  # what the round checkpoints below are made in
        calibrated = len(budget.calibrations)
        fed.clock.start()  # a resumed run adds its checkpoint's time: the seconds of every completed round count
        selection = getattr(fed, "selection", None)  # the method's choices on held-out data, kept with its output
        if wants_sandbox(prep):
            ran = run_method_sandboxed(prep, ev, fed, public, seed, seed_dir, log)
            artifact, guard = ran.artifact, ran.guard
            budget.calibrations.extend(ran.calibrations)
            method_seconds, carried = ran.method_seconds, ran.carried_seconds
            # its releases ran here (the door's "clients" stage) while its process waited for them
            method_stages = timing.join_stages(ran.method_stages, fed.clock.stages(), seconds=method_seconds)
            artifact.selections = selection.records() + [{**r, "on": selection.on} for r in ran.selections]
        else:
            artifact, guard = cls().train(fed, public, prep.config, budget), "none"
            artifact.selections = selection.records() if selection is not None else []
            method_seconds, method_stages = fed.clock.seconds(), fed.clock.stages()
            carried = fed.clock.before_seconds  # what earlier processes spent on the rounds this one resumed after
        artifact.sandbox = guard
        calibrations = jsonable(budget.calibrations[calibrated:])
    else:
        artifact, calibrations, method_seconds, method_stages = kept
        carried, guard = method_seconds, getattr(artifact, "sandbox", None)
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
    downstream = None
    harness_selection = ev.selection(seed)  # the harness's own choice (the downstream epoch), recorded apart
    if artifact.kind == "synthetic text":
        log(f"seed {seed}: training the downstream model on {len(artifact.texts)} synthetic samples")
        tuned = ev.fine_tune(artifact.texts, seed, harness_selection)
        model, downstream = tuned.model, downstream_summary(tuned)
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
        wall_seconds=time.perf_counter() - t_seed + carried, downstream=downstream, precision=precision,
        selections=jsonable(list(getattr(artifact, "selections", None) or []) + harness_selection.records()),
        sandbox=guard,
    )
    atomic_write_json(done, result.to_json())
    if (cls.name in REFERENCE_ROWS and prep.method.source == "built-in" and not prep.request.noise_free
            and not prep.request.shuffled_releases and prep.config == ev.reference_config(cls.name)):
        # the same computation as the reference row every entry carries: cache it, so it is not run again
        ev.remember_reference(cls.name, seed, {**test, **stats})
    public.clear_checkpoint()
    for kept_file in (METHOD_OUTPUT, PRECISION_STAMP):  # the result now holds what they did
        (seed_dir / kept_file).unlink(missing_ok=True)
    log(f"seed {seed}: test top-1 {test['top1']:.4f}, ε spent {spent:.4g}")
    return result


def check_stored_precision(run_dir: Path, seeds: Iterable[int], current: dict[str, str],
                           log: Callable[[str], None]) -> None:
    """Stop before any work when one of ``seeds`` stored in ``run_dir``, or the round checkpoints of one that was
    stopped, was made sampling or training in another precision than this process's (``current``,
    :func:`~largefedbench.models.precision.precision_record`): an entry records one precision for all its seeds and
    rounds, and a CPU without native bf16 samples in float32 where one with it samples in bf16. Seeds and checkpoints
    stored before lfb recorded their precision cannot be checked; the log names them."""
    unknown = []
    for seed in sorted(set(seeds)):
        seed_dir = run_dir / f"seed-{seed}"
        done, stamp, saved = seed_dir / "result.json", seed_dir / PRECISION_STAMP, checkpoint_files(seed_dir)
        if done.exists():
            data = _stored_result(done)
            recorded = data.get("precision") if isinstance(data, dict) else None  # not a dict: from_json says so
            made = f"{done} was made"
        elif saved:  # a stopped seed: its folder holds nothing committed, so it can be started again as a whole
            recorded = _stored_json(stamp) if stamp.exists() else None
            if recorded is not None and not (isinstance(recorded, dict) and "generation" in recorded):
                raise InputError(f"{stamp} is not a precision record ({recorded!r}): delete {seed_dir} to run that "
                                 "seed again")
            made = f"the round checkpoints in {seed_dir} ({', '.join(p.name for p in saved)}) were made"
        else:
            continue  # nothing kept but what is stamped with its own precision (the method's output)
        if recorded is None:
            unknown.append(seed_dir.name)
        elif recorded != current:
            raise InputError(_mixed_precision(made, recorded, current, f"delete {seed_dir} to run that seed again here"))
    if unknown:
        log(f"{', '.join(unknown)}: stored before lfb recorded their precision, so not checked against this "
            f"process's (sampling in {current['generation']}, training in {current['training']}); if they ran on "
            "another machine, pin LFB_GENERATION_DTYPE and LFB_TRAINING_DTYPE to what they ran in")


def _mixed_precision(made: str, recorded: dict[str, str], current: dict[str, str], fix: str) -> str:
    from largefedbench.models.precision import precision_env

    pins = " ".join(f"{var}={name}" if name else f"(unset {var})" for var, name in precision_env(recorded).items())
    return (f"{made} sampling in {recorded.get('generation')} and training in {recorded.get('training')}, "
            f"but here lfb samples in {current['generation']} and trains in {current['training']} (this machine's "
            f"default, or LFB_GENERATION_DTYPE/LFB_TRAINING_DTYPE): one entry's seeds and rounds share one precision. "
            f"Run with {pins} to match it, or {fix}")


def _stored_result(done: Path) -> Any:
    """A seed's stored ``result.json`` as JSON, or an error that names it and the fix."""
    return _stored_json(done, "a seed result")


def _stored_json(path: Path, what: str = "a precision record") -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise InputError(f"{path} is not {what} (not JSON: {err}): delete its seed folder {path.parent} to run "
                         "that seed again") from None


PRECISION_STAMP = "precision.json"  # a seed folder's: the precision its round checkpoints were made in


METHOD_OUTPUT = "method-output.safetensors"


def save_method_output(path: Path, fed, artifact, calibrations: list, method_seconds: float,
                       method_stages: dict[str, float], stamp: dict[str, Any]) -> None:
    """What the method returned and the federation after it (ledger, costs, RNG), written atomically once the
    harness's privacy checks passed: its own record, so a run killed while the output is evaluated resumes without
    running the method again. ``stamp`` (LargeFedBench's and the method's versions) must match to be reused.
    Tensors and JSON (:mod:`~largefedbench.rounds.state_file`); a model artifact is kept as its weights."""
    from largefedbench.rounds.artifact_state import split_model
    from largefedbench.rounds.state_file import write_state

    artifact, weights = split_model(artifact)
    write_state(path, {"stamp": stamp, "artifact": artifact, "model": weights, "federation": fed.state_dict(),
                       "calibrations": calibrations, "method_seconds": method_seconds,
                       "method_stages": method_stages}, what="method output")


def load_method_output(path: Path, fed, stamp: dict[str, Any], device,
                       new_model: Callable[[], Any] | None = None) -> tuple[Any, list, float, dict[str, float]] | None:
    """``(artifact, calibrations, method seconds, method stages)`` saved by :func:`save_method_output`, restoring
    ``fed``'s ledger, costs and RNG; a model artifact's weights are loaded into ``new_model()`` (the bundle's
    ``new_downstream``) on ``device``. None when there is none, or it was made by another version of LargeFedBench or
    of the method, or its weights do not fit ``new_model()``'s (the method then runs again). A pickle
    ``method-output.pt`` (the old pickle format) is refused."""
    from largefedbench.rounds.artifact_state import join_model
    from largefedbench.rounds.state_file import read_state, refuse_legacy

    fix = f"Delete {{}} to run the method of that seed again (or delete its seed folder, {Path(path).parent})."
    legacy = Path(path).with_suffix(".pt")
    if not path.exists():
        if legacy != Path(path) and legacy.exists():
            refuse_legacy(legacy, fix=fix.format(legacy))
        return None
    saved = read_state(path, fix=fix.format(path))  # on the CPU: torch generator states must be CPU tensors
    if saved.get("stamp") != stamp:
        return None
    artifact, kept = saved["artifact"], saved.get("model")
    if kept is not None and new_model is None:
        raise InputError(f"{path} holds a model: load_method_output needs new_model= to load its weights into")
    if not join_model(artifact, kept, new_model, device):
        return None
    fed.load_state_dict(saved["federation"])
    return artifact, saved["calibrations"], saved["method_seconds"], saved["method_stages"]
