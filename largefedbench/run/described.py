"""A plug-in method as the harness knows it without importing it: the description its own sandboxed process gave
(:func:`largefedbench.sandbox.server.describe_sandboxed`) as a stand-in class with the same contract attributes,
module and name (so the entry's target and id are those of the imported class) and a Config dataclass with the same
fields, holding the configuration resolved there. Its ``train`` cannot run here: the method runs only in its sandbox.

So the scoring process never executes a plug-in's code, not even what its module runs on import."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from largefedbench.contract import Method
from largefedbench.errors import MethodError
from largefedbench.registry import (
    ResolvedMethod,
    distribution_of,
    file_module_name,
    method_target,
    module_location,
    module_roots,
)

__all__ = ["DescribedMethod", "describe_method", "plugin_code"]


@dataclass(frozen=True)
class DescribedMethod(ResolvedMethod):
    """A plug-in resolved in its sandbox: ``reference`` is what its process imports, ``folders`` what it must read to
    do so, ``config`` the configuration it resolved, ``file`` its module's file (for the entry's provenance)."""

    reference: str = ""
    folders: tuple[str, ...] = ()
    config: Any = None
    file: Path | None = None
    presets: Any = None  # each preset's configuration as JSON (None where the method has none)
    config_doc: str = ""


def plugin_code(target: str) -> tuple[str, list[str], Path | None]:
    """How a sandboxed process imports ``target`` (``module:Class`` or ``file.py:Class``), found without running it:
    the reference it is given (a method file's absolute path), the folders to put on its ``sys.path`` and read, and
    the module's file."""
    module, _, attr = target.partition(":")
    if module.endswith(".py"):
        path = Path(module).resolve()
        if not path.is_file():
            raise MethodError(f"no method file {module}: give an existing .py file as path/to/file.py:Class")
        return f"{path}:{attr}", [str(path.parent)], path
    found = module_location(module)
    if found is None:
        raise MethodError(f"no module {module!r} (from {target!r}): give an importable module:Class, or "
                          "path/to/file.py:Class for a file")
    return target, [str(root) for root in module_roots(module)], found


#: the contract attributes a description gives, each with the types it may have
ATTRIBUTE_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "paper": (str,), "output": (str,), "status": (str,), "fixed_epsilon": (type(None),),
    "needs_span_embeddings": (bool,), "audit_by_releases": (bool,), "retired_settings": (dict,),
    "introduced_settings": (dict,), "version": (str, type(None))}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def _checked(d: dict[str, Any], target: str) -> dict[str, Any]:
    """The description's contract attributes, refused unless each has its type, the method is a plug-in (not a
    reference: no fixed ε; not a built-in's name or module) and its module lies in the target's package."""
    from largefedbench.contract import OUTPUT_KINDS
    from largefedbench.leaderboard.schema import is_safe_id
    from largefedbench.registry import BUILTIN_METHODS

    attrs = d.get("attributes")
    if not isinstance(attrs, dict) or set(attrs) != set(ATTRIBUTE_TYPES):
        raise MethodError(f"{target}: its process described {sorted(attrs) if isinstance(attrs, dict) else attrs!r}, "
                          f"not the contract's attributes {sorted(ATTRIBUTE_TYPES)}")
    bad = [k for k, types in ATTRIBUTE_TYPES.items() if not isinstance(attrs[k], types)]
    if bad:
        why = "; a plug-in is never a reference (fixed_epsilon must stay None)" if "fixed_epsilon" in bad else ""
        raise MethodError(f"{target}: the class attributes {', '.join(bad)} have the wrong type{why}")
    if not is_safe_id(attrs["name"]) or attrs["name"] in BUILTIN_METHODS:
        raise MethodError(f"{target}: name {attrs['name']!r} is not a plug-in's: use lower-case letters, digits, '.', "
                          "'_' or '-', and not a built-in method's name")
    if attrs["output"] not in OUTPUT_KINDS:
        raise MethodError(f"{target}: output {attrs['output']!r} is not one of {OUTPUT_KINDS}")
    module, qualname = str(d.get("module")), str(d.get("qualname"))
    top = target.partition(":")[0]
    expected = None if top.endswith(".py") else top.split(".")[0]
    if not (_IDENTIFIER.match(module) and _IDENTIFIER.match(qualname)) or module.startswith("largefedbench.methods") \
            or (expected is not None and module.split(".")[0] != expected):
        raise MethodError(f"{target}: its class says it is {module}:{qualname}, outside the package it was imported "
                          "from; leave the class's __module__ as Python sets it")
    if not all(isinstance(f, list) and len(f) == 2 and _IDENTIFIER.match(str(f[0])) for f in d.get("fields", [])) \
            or not isinstance(d.get("config"), dict) or not _IDENTIFIER.match(str(d.get("config_class"))):
        raise MethodError(f"{target}: its Config was not described as a dataclass of named fields")
    return attrs


def _stand_in(d: dict[str, Any], attrs: dict[str, Any]) -> type:
    config_cls = dataclasses.make_dataclass(str(d["config_class"]), [(str(n), str(t)) for n, t in d["fields"]],
                                            frozen=True)
    config_cls.__module__, config_cls.__qualname__ = d["module"], str(d["config_class"])

    def train(self, fed, public, cfg, budget):
        raise MethodError(f"{d['module']}:{d['qualname']} runs in its sandboxed process only")

    cls = type(d["qualname"].rpartition(".")[2], (Method,), {**{k: attrs[k] for k in ATTRIBUTE_TYPES},
                                                             "Config": config_cls, "train": train})
    cls.__module__, cls.__qualname__ = d["module"], d["qualname"]
    return cls


#: descriptions already given in this process (``lfb leaderboard reproduce`` resolves an entry's method more than
#: once), by what was asked and the content of the plug-in's code: an edited file is described again
_DESCRIPTIONS: dict[tuple, dict[str, Any]] = {}


def _code_stamp(reference: str, folders: list[str]) -> str:
    """The sha256 of the plug-in's own source files: a method file's folder (its siblings it may import), or every
    file of its top-level package in each folder it spans."""
    module = reference.partition(":")[0]
    if module.endswith(".py"):
        files = sorted(Path(module).parent.glob("*.py"))
    else:
        top = module.split(".")[0]
        files = sorted(f for root in folders for f in [*(Path(root) / top).rglob("*.py"), Path(root) / f"{top}.py"])
    digest = hashlib.sha256()
    for f in files:
        try:
            if f.is_file():
                digest.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
        except OSError:  # a file that went away between the listing and the read
            continue
    return digest.hexdigest()


def describe_method(name: str, *, preset: str, overrides: dict[str, str], home: Path, hidden: list[Path],
                    log=lambda msg: None) -> DescribedMethod:
    """The plug-in ``name`` (registered name, ``module:Class`` or ``file.py:Class``) described by its own sandboxed
    process with the configuration of ``preset`` and ``overrides``."""
    from largefedbench.sandbox.server import describe_sandboxed

    target, source = method_target(name)
    reference, folders, file = plugin_code(target)
    key = (reference, tuple(folders), preset, tuple(sorted(overrides.items())), str(home), tuple(map(str, hidden)),
           _code_stamp(reference, folders))
    if key not in _DESCRIPTIONS:
        if len(_DESCRIPTIONS) >= 32:
            _DESCRIPTIONS.pop(next(iter(_DESCRIPTIONS)))
        _DESCRIPTIONS[key] = describe_sandboxed(
            {"method": reference, "sys_path": folders, "preset": preset, "overrides": dict(overrides)},
            home=home, hidden=hidden, log=log)
    d = copy.deepcopy(_DESCRIPTIONS[key])
    if reference.partition(":")[0].endswith(".py") and d["module"] != file_module_name(Path(file)):
        raise MethodError(f"the method file {file} named its class's module {d['module']!r}: leave __module__ as it is")
    attrs = _checked(d, target)
    try:
        cls = _stand_in(d, attrs)
        config = cls.Config(**d["config"])
    except (TypeError, ValueError) as exc:
        raise MethodError(f"{target}: its description does not make a method class here ({exc})") from None
    dist = distribution_of(d["module"])
    version = (dist.version if dist is not None else None) or d["attributes"].get("version") or "unversioned"
    presets, doc = d.get("presets"), d.get("config_doc")
    if not (isinstance(presets, dict) and all(isinstance(v, (dict, type(None))) for v in presets.values())
            and isinstance(doc, str)):
        raise MethodError(f"{target}: its process described its presets as {type(presets).__name__} and its Config's "
                          f"docstring as {type(doc).__name__}, not a dict of configurations and a str")
    return DescribedMethod(cls, d["module"], str(version), reference=reference, folders=tuple(folders),
                           config=config, file=file, presets=presets, config_doc=doc)
