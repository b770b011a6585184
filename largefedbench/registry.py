"""The method registry (DESIGN.md §4): built-ins as lazy ``"module:Class"`` strings, third-party methods through
the entry-point group ``largefedbench.methods``, and ``MODULE:Class`` / ``path/to/file.py:Class`` references for
trying a method before packaging it. Nothing is imported until a method is asked for.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from largefedbench.contract import OUTPUT_KINDS, Method
from largefedbench.errors import MethodError

__all__ = ["BUILTIN_METHODS", "ENTRY_POINT_GROUP", "MethodInfo", "ResolvedMethod", "distribution_of", "file_module_name",
           "get_method", "list_methods", "method_names", "method_target", "module_location", "module_roots",
           "resolve_method"]

ENTRY_POINT_GROUP = "largefedbench.methods"

#: name -> "module:Class" of every built-in method (imported on first use).
BUILTIN_METHODS: dict[str, str] = {
    "public": "largefedbench.methods.references:PublicReference",
    "non-private": "largefedbench.methods.references:NonPrivateReference",
    "generator-only": "largefedbench.methods.generator_only:GeneratorOnly",
    "real-at-budget": "largefedbench.methods.real_at_budget:RealAtBudget",
    "dp-fedavg": "largefedbench.methods.dp_fedavg:DPFedAvg",
    "dp-ftrl": "largefedbench.methods.dp_ftrl:DPFTRL",
    "pe": "largefedbench.methods.pe:PrivateEvolution",
    "pe-sft": "largefedbench.methods.pe:PrivateEvolutionSFT",
    "popri": "largefedbench.methods.popri:POPri",
    "dp-resample": "largefedbench.methods.dp_resample:DPInstructionResampling",
    "fedbis": "largefedbench.methods.fedbiscuit:FedBis",
    "fedbiscuit": "largefedbench.methods.fedbiscuit:FedBiscuit",
    "weak-client-voting": "largefedbench.methods.weak_client_voting:WeakClientVoting",
    "ctcl": "largefedbench.methods.ctcl:CTCL",
}


@dataclass(frozen=True)
class MethodInfo:
    """One row of ``lfb methods``."""

    name: str
    target: str
    source: str  # "built-in" or the distribution that registered it
    paper: str = ""
    output: str = ""
    status: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("name", "target", "source", "paper", "output", "status", "error")}


def _third_party() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "entry point"
        found[ep.name] = (ep.value, dist)
    return found


def _all_targets() -> dict[str, tuple[str, str]]:
    targets = {name: (target, "built-in") for name, target in BUILTIN_METHODS.items()}
    for name, (target, dist) in _third_party().items():
        if name in targets:
            continue  # a built-in name cannot be taken over by a plug-in
        targets[name] = (target, dist)
    return targets


def method_names() -> list[str]:
    """Every registered name (built-ins first)."""
    return list(_all_targets())


def method_target(name: str) -> tuple[str, str]:
    """The ``module:Class`` (or ``file.py:Class``) that ``name`` stands for and its source ("built-in", the
    registering distribution, or the reference itself), found without importing anything."""
    targets = _all_targets()
    if name in targets:
        return targets[name]
    if ":" in name:
        return name, name
    close = difflib.get_close_matches(name, targets, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise MethodError(f"unknown method {name!r}.{hint} Known methods: {', '.join(sorted(targets))} "
                      "(`lfb methods` lists them; a plug-in registers in the entry-point group "
                      f"{ENTRY_POINT_GROUP!r}, or pass module:Class).")


def file_module_name(path: Path) -> str:
    """The module name a method file is imported under: fixed by its absolute path, so every process (the harness,
    the method's sandbox, a resumed run) names it, and the entry's target, the same."""
    return "lfb_user_method_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def module_location(module: str) -> Path | None:
    """The file of ``module`` (a package's ``__init__.py``), found without running any of its code: the top-level
    name through the import system's finders (an editable install's too), the rest by path; None if not found."""
    from importlib.machinery import PathFinder

    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: finding it imports no parent
        for depth in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = PathFinder.find_spec(".".join(parts[:depth + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return Path(spec.origin).resolve()


def module_roots(module: str) -> list[Path]:
    """The ``sys.path`` folders the top-level package of ``module`` is found in, without running its code: a
    package's parent folder, each portion's for a namespace package (it may span several), a module file's folder."""
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        roots = [Path(loc).resolve().parent for loc in spec.submodule_search_locations]
    else:
        roots = [Path(spec.origin).resolve().parent] if spec.has_location and spec.origin else []
    return list(dict.fromkeys(roots))


def _import_target(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        raise MethodError(f"{target!r} is not a 'module:Class' reference")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise MethodError(f"no method file {path}: give an existing .py file as path/to/file.py:Class")
        spec = importlib.util.spec_from_file_location(file_module_name(path), path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's file: any error while running it is reported, not raised
            sys.modules.pop(spec.name, None)
            raise MethodError(f"method file {path} failed to load: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(module_name)
        except (ModuleNotFoundError, ValueError, TypeError) as exc:  # ValueError/TypeError: not a module name
            missing = getattr(exc, "name", None)
            if isinstance(exc, ModuleNotFoundError) and not (
                missing and (module_name == missing or module_name.startswith(missing + "."))
            ):
                raise  # the module exists but one of its own imports is missing
            raise MethodError(f"no module {module_name!r} (from {target!r}): give an importable module:Class, "
                              "or path/to/file.py:Class for a file") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise MethodError(f"module {module_name!r} has no attribute {attr!r}") from None


#: what Method gives every subclass a default for (status, fixed_epsilon, needs_span_embeddings)
_METHOD_DEFAULTS = tuple(attr for attr, value in vars(Method).items() if not attr.startswith("_") and not callable(value))


def check_method_class(cls: Any, where: str) -> type:
    """Raise :class:`MethodError` naming what is missing unless ``cls`` follows the method contract."""
    problems = []
    if not inspect.isclass(cls):
        raise MethodError(f"{where} is not a class: a method is a subclass of largefedbench.contract.Method with name, "
                          "paper, output, Config and train")
    if not issubclass(cls, Method):
        lacking = [attr for attr in _METHOD_DEFAULTS if not hasattr(cls, attr)]
        missing = f", so it lacks {', '.join(lacking)}, which the harness reads" if lacking else ""
        problems.append(f"it does not subclass largefedbench.contract.Method{missing}; declare it as "
                        "`class MyMethod(Method)` (from largefedbench.contract import Method), which gives every "
                        "optional attribute its default")
    for attr in ("name", "paper", "output", "Config"):
        if not hasattr(cls, attr):
            problems.append(f"class attribute {attr!r} is missing")
    if not callable(getattr(cls, "train", None)) or getattr(cls, "train", None) is Method.train:
        problems.append("train(self, fed, public, cfg, budget) is not implemented")
    cfg = getattr(cls, "Config", None)
    if cfg is not None:
        if not is_dataclass(cfg):
            problems.append("Config must be a dataclass")
        elif not callable(getattr(cfg, "tiny", None)):
            problems.append("Config.tiny() (a configuration for CPU tests) is missing")
    if getattr(cls, "output", None) not in OUTPUT_KINDS:
        problems.append(f"output must be one of {OUTPUT_KINDS}, got {getattr(cls, 'output', None)!r}")
    if problems:
        raise MethodError(f"{where} does not follow the method contract: " + "; ".join(problems)
                          + ". See CONTRIBUTING.md, 'Writing a method'.")
    return cls


def get_method(name: str) -> type:
    """The method class registered as ``name`` (or loaded from ``module:Class`` / ``file.py:Class``)."""
    if ":" in name and name not in _all_targets():
        try:
            cls = _import_target(name)
        except ImportError as exc:
            raise MethodError(f"method {name!r} cannot be imported: {exc}. Install what it needs.") from exc
        return check_method_class(cls, name)
    target, _source = method_target(name)
    try:
        cls = _import_target(target)
    except ImportError as exc:
        raise MethodError(f"method {name!r} ({target}) cannot be imported: {exc}. Install its dependencies "
                          "(pip install -e '.[train]' for the built-ins).") from exc
    return check_method_class(cls, f"method {name!r} ({target})")


@dataclass(frozen=True)
class ResolvedMethod:
    """A method as a run records it: its class, where it came from and its version."""

    cls: type
    source: str  # "built-in" for a built-in name, else the module that defines the class
    version: str  # lfb's for a built-in; else its top-level package's distribution version, cls.version or "unversioned"

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def target(self) -> str:
        """``module:Class`` of the class that ran."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


def distribution_of(module: str):
    """The installed distribution (``importlib.metadata.Distribution``) that holds ``module``'s top-level package,
    found by ``packages_distributions()`` (a distribution's name need not be its module's), else None."""
    from importlib.metadata import PackageNotFoundError, distribution, packages_distributions

    for name in packages_distributions().get(module.split(".")[0], []):
        try:
            return distribution(name)
        except PackageNotFoundError:
            continue
    return None


def _version_of(cls: type) -> str:
    dist = distribution_of(cls.__module__)
    return (dist.version if dist is not None else None) or getattr(cls, "version", None) or "unversioned"


def resolve_method(name: str) -> ResolvedMethod:
    """:func:`get_method` with the class's source and version, as an entry states them."""
    from largefedbench import __version__

    cls = get_method(name)
    if name in BUILTIN_METHODS:
        return ResolvedMethod(cls, "built-in", __version__)
    return ResolvedMethod(cls, getattr(cls, "__module__", "?"), _version_of(cls))


def list_methods(describe: Callable[[str], type] | None = None) -> list[MethodInfo]:
    """Every registered method with paper, output kind and status; a method that fails to load says why. A plug-in
    is imported here, or given to ``describe`` (its name -> a class with its contract attributes) where it must not be
    (``lfb methods`` describes plug-ins in their sandbox)."""
    rows = []
    for name, (target, source) in _all_targets().items():
        try:
            cls = get_method(name) if describe is None or source == "built-in" else describe(name)
        except Exception as exc:  # noqa: BLE001 - a broken plug-in must not hide the others
            rows.append(MethodInfo(name, target, source, status="broken", error=str(exc)))
            continue
        rows.append(MethodInfo(name, target, source, paper=cls.paper, output=cls.output, status=cls.status))
    return rows
