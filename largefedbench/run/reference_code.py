"""The fingerprint of the code that computes a reference row, part of the row's cache key.

The reference rows (public, non-private, generator-only) are cached under ``$LFB_HOME/references/`` and reused by every
later run. Keyed by the package version alone, a row outlived the code that wrote it: within 0.3.0 the sampler changed
(docs/speed.md), and entries made afterwards reported their gain over generator-only rows the old sampler had written
(seed 0: 15.51 % cached, 15.10 % recomputed by the current code). The fingerprint hashes the source of the modules a
reference row runs, so a change to any of them computes the rows again; the key also names the generator's weights and
the dtype the row samples in (``LFB_GENERATION_DTYPE``), which no source file shows.
Not covered, on purpose: the data layer (the snapshot's content hash is in the key) and the federation (the
non-private row takes its spans through ``release_without_noise``, which returns the snapshot's spans as they are).
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cache
from pathlib import Path

#: what every reference row runs: the models, the downstream training and metrics, the resources handed to a
#: method, the reference methods and the harness code that calls them
BASE_MODULES: tuple[str, ...] = (
    "largefedbench.models", "largefedbench.evaluation", "largefedbench.contract", "largefedbench.methods.references",
    "largefedbench.run.evaluator", "largefedbench.run.seed",
)
#: what the generator-only row runs besides: sampling, prompts and texts
GENERATOR_ONLY_MODULES: tuple[str, ...] = ("largefedbench.synthetic", "largefedbench.methods.generator_only")


def reference_modules(name: str) -> tuple[str, ...]:
    """The modules whose source the reference row ``name`` depends on (the public and non-private rows sample nothing,
    so a change to the sampler does not recompute them)."""
    return BASE_MODULES + (GENERATOR_ONLY_MODULES if name == "generator-only" else ())


def _sources(module: str) -> tuple[Path, list[Path]]:
    """The folder names are relative to, and the module's source files (a package: every module below it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"cannot find {module}'s source to fingerprint the reference rows")
    if spec.submodule_search_locations:
        base = Path(spec.submodule_search_locations[0])
        return base, sorted(base.rglob("*.py"))
    return Path(spec.origin).parent, [Path(spec.origin)]


@cache
def reference_code_fingerprint(name: str) -> str:
    """SHA-256 (16 hex digits) of the source files of :func:`reference_modules` of the row ``name``, each named
    relative to its module. Third-party packages (torch, transformers) are not in it: their versions are in every
    entry's environment."""
    digest = hashlib.sha256()
    for module in reference_modules(name):
        base, paths = _sources(module)
        for path in paths:
            data = path.read_bytes()
            digest.update(f"{module}:{path.relative_to(base).as_posix()}:{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()[:16]
