"""Whether a run's method goes into the sandbox (:mod:`largefedbench.sandbox`), and what its process is told: the
method and its configuration, the budget, the public corpus and the snapshot's public description, the client
count and ids, and how selection runs. Plug-ins always go in; built-in methods only with ``--sandbox on``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from largefedbench.config_overrides import config_json
from largefedbench.paths import lfb_home
from largefedbench.registry import ResolvedMethod, method_target, resolve_method
from largefedbench.run.described import DescribedMethod, describe_method
from largefedbench.sandbox.server import SandboxRun, run_sandboxed

if TYPE_CHECKING:
    from largefedbench.run.evaluator import Evaluator
    from largefedbench.run.request import EvalRequest, Prepared

SANDBOX_MODES = ("auto", "on", "off")  # lfb eval --sandbox: plug-ins only (default), every method, none
SNAPSHOT_FIELDS = ("name", "dataset", "window", "content_sha256")


def wants_sandbox(prep: Prepared) -> bool:
    mode = getattr(prep.request, "sandbox", "auto")
    if mode == "off" or prep.declared:
        return False
    return mode == "on" or prep.method.source != "built-in"


def resolve_for_run(request: EvalRequest, preset: str) -> ResolvedMethod:
    """The method a run scores. A built-in (or any method under ``--sandbox off``) is imported here; a plug-in is
    described by its own sandboxed process (:mod:`largefedbench.run.described`) and never imported in this one,
    which trains and scores what it returns."""
    if method_target(request.method)[1] == "built-in" or request.sandbox == "off":
        return resolve_method(request.method)
    home = Path(request.home) if request.home is not None else lfb_home()
    hidden = [home, Path(request.out)] + ([Path(request.dataset)] if Path(request.dataset).exists() else [])
    return describe_method(request.method, preset=preset, overrides=dict(request.overrides), home=home, hidden=hidden)


def method_reference(prep: Prepared) -> tuple[str, list[str]]:
    """How the method's process imports the method, and the folders it adds to its path: a plug-in as its description
    says (a method file by its absolute path, else ``module:Class`` and its top-level package's folder); a built-in
    (run with ``--sandbox on``) by its target, from the harness's own code."""
    if isinstance(prep.method, DescribedMethod):
        return prep.method.reference, list(prep.method.folders)
    return prep.method.target, []


def run_method_sandboxed(prep: Prepared, ev: Evaluator, fed, public, seed: int, seed_dir: Path,
                         log: Callable[[str], None]) -> SandboxRun:
    """The method's ``train()`` for ``seed`` in its own process, served by ``fed``."""
    corpus, sel = public.corpus, fed.selection
    reference, folders = method_reference(prep)
    init: dict[str, Any] = {
        "method": reference, "sys_path": folders, "preset": prep.preset, "overrides": dict(prep.request.overrides),
        "config": config_json(prep.config), "seed": int(seed),
        "epsilon": float(prep.budget.epsilon), "delta": float(prep.budget.delta),
        "profile": prep.profile.name, "device": str(ev.bundle.device), "progress": bool(prep.request.progress),
        "corpus": {"kind": corpus.kind, "source": corpus.source, "documents": [list(d) for d in corpus.documents],
                   "sha256": corpus.sha256, "metadata": [dict(m) for m in corpus.metadata]},
        "manifest": {k: prep.fd.manifest.get(k) for k in SNAPSHOT_FIELDS},
        "n_clients": fed.n_clients, "client_ids": list(fed.client_ids),
        "selection": {"on": sel.on, "source": sel.source, "texts": list(sel.texts) if sel.on == "public" else None},
    }
    home = Path(prep.request.home) if prep.request.home is not None else lfb_home()
    hidden = [home, Path(prep.fd.path), Path(prep.request.out)]
    return run_sandboxed(init, fed=fed, seed_dir=seed_dir, home=home, hidden=hidden, device=ev.bundle.device,
                         new_model=ev.bundle.new_downstream, log=log)
