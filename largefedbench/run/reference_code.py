"""The fingerprint of the code that computes a reference row, part of the row's cache key.

The reference rows (public, non-private, generator-only) are cached under ``$LFB_HOME/references/`` and reused by
every later run. Keyed by the package version alone, a row outlived the code that wrote it: within 0.3.0 the
sampler changed (issue 26), and entries made afterwards reported their gain over generator-only rows the old sampler
had written (seed 0: 15.51 % cached, 15.10 % recomputed by the current code). The fingerprint hashes the source of
the modules a reference row runs, so a change to any of them computes the rows again.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

#: what a reference row runs: sampling, prompts and models, the downstream training and metrics, the reference
#: methods themselves and the harness code that calls them
REFERENCE_MODULES: tuple[str, ...] = (
    "largefedbench.synthetic", "largefedbench.evaluation", "largefedbench.models",
    "largefedbench.methods.references", "largefedbench.methods.generator_only", "largefedbench.run.seed",
)


def _sources(module: str) -> tuple[Path, list[Path]]:
    """The folder names are relative to, and the module's source files (a package: every module below it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"cannot find {module}'s source to fingerprint the reference rows")
    if spec.submodule_search_locations:
        base = Path(spec.submodule_search_locations[0])
        return base, sorted(base.rglob("*.py"))
    return Path(spec.origin).parent, [Path(spec.origin)]


@lru_cache(maxsize=1)
def reference_code_fingerprint() -> str:
    """SHA-256 (16 hex digits) of the source files of :data:`REFERENCE_MODULES`, each named relative to its module."""
    digest = hashlib.sha256()
    for module in REFERENCE_MODULES:
        base, paths = _sources(module)
        for path in paths:
            digest.update(f"{module}:{path.relative_to(base).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
