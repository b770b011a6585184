"""Whether a run's method goes into the sandbox (:mod:`largefedbench.sandbox`), and what its process is told: the
method and its configuration, the budget, the public corpus and the snapshot's public description, the client
count and ids, and how selection runs. Plug-ins always go in; built-in methods only with ``--sandbox on``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from largefedbench.config_overrides import config_to_dict
from largefedbench.paths import lfb_home
from largefedbench.run.seed_result import jsonable
from largefedbench.sandbox.server import SandboxRun, run_sandboxed

if TYPE_CHECKING:
    from largefedbench.run.request import Prepared
    from largefedbench.run.evaluator import Evaluator

SANDBOX_MODES = ("auto", "on", "off")  # lfb eval --sandbox: plug-ins only (default), every method, none
SNAPSHOT_FIELDS = ("name", "dataset", "window", "content_sha256")


def wants_sandbox(prep: Prepared) -> bool:
    mode = getattr(prep.request, "sandbox", "auto")
    if mode == "off" or prep.declared:
        return False
    return mode == "on" or prep.method.source != "built-in"


def method_reference(prep: Prepared) -> tuple[str, list[str]]:
    """How the method's process imports the class the harness resolved: ``path/to/file.py:Class`` (absolute) for a
    method file, else ``module:Class`` with the folder its top-level package lies in (a plug-in registered in this
    process only, or imported from a folder on this process's path, is found the same way there)."""
    cls = prep.method.cls
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if cls.__module__.startswith("lfb_user_method_") and file:
        return f"{Path(file).resolve()}:{cls.__qualname__}", []
    top = getattr(sys.modules.get(cls.__module__.split(".")[0]), "__file__", None)
    if not top:
        return prep.method.target, []
    top_path = Path(top).resolve()
    return prep.method.target, [str(top_path.parent.parent if top_path.name == "__init__.py" else top_path.parent)]


def run_method_sandboxed(prep: Prepared, ev: Evaluator, fed, public, seed: int, seed_dir: Path,
                         log: Callable[[str], None]) -> SandboxRun:
    """The method's ``train()`` for ``seed`` in its own process, served by ``fed``."""
    corpus, sel = public.corpus, fed.selection
    reference, folders = method_reference(prep)
    init: dict[str, Any] = {
        "method": reference, "sys_path": folders, "preset": prep.preset, "overrides": dict(prep.request.overrides),
        "config": jsonable(config_to_dict(prep.config)), "seed": int(seed),
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
