"""Scoring synthetic text made by another tool (``lfb eval --synthetic FILE``): a declared-privacy entry.

The texts go through the same pipeline as a method's (downstream training with public replay, the references, FID,
the window-novel metric), but their privacy is *declared*: the user states ε, δ and the tool that made them. Nothing
here can check that claim, so the entry says so (``privacy.accountant == "declared"``, a ``declared`` section) and
the board shows it apart, never ranked with computed claims.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from largefedbench.contract import Artifact, Method
from largefedbench.data.dpsda import iteration_file_problem
from largefedbench.data.text_file import TextFile, read_text_file
from largefedbench.errors import InputError
from largefedbench.registry import ResolvedMethod

__all__ = ["DECLARED_NOTE", "DeclaredConfig", "DeclaredMethod", "DeclaredSynthetic", "declared_method"]

DECLARED_NOTE = ("declared privacy: the synthetic texts were made outside LargeFedBench and their (ε, δ) is the "
                 "submitter's statement, not computed from a ledger; shown apart, never ranked with computed claims")
log = logging.getLogger(__name__)
MIN_TEXTS = 2  # FID's minimum sample count
LABEL = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")


@dataclass(frozen=True)
class DeclaredConfig:
    """What the entry records of the file: its name, content hash, number of texts and the tool that made it."""

    file: str
    sha256: str
    n_texts: int
    made_with: str

    @classmethod
    def tiny(cls) -> DeclaredConfig:  # the contract's CPU-test configuration; a declared run has only its file's
        raise InputError("a declared synthetic set has no presets: its configuration is its file")


class DeclaredSynthetic(Method):
    """Returns the file's texts; never touches the federation (it has nothing to release)."""

    name = "declared"
    paper = "declared: synthetic text made outside LargeFedBench"
    output = "synthetic text"
    Config = DeclaredConfig
    texts: tuple[str, ...] = ()

    def train(self, fed, public, cfg: DeclaredConfig, budget) -> Artifact:
        return Artifact.synthetic(self.texts, file=cfg.file, sha256=cfg.sha256, made_with=cfg.made_with)


@dataclass(frozen=True)
class DeclaredMethod(ResolvedMethod):
    """A declared synthetic set as the run records it: named by its label, targeted by its file."""

    label: str = "declared"
    file: TextFile | None = None

    @property
    def name(self) -> str:
        return self.label

    @property
    def target(self) -> str:
        return f"declared:{self.file.name if self.file else ''}"

    def config(self, made_with: str) -> DeclaredConfig:
        return DeclaredConfig(file=self.file.name, sha256=self.file.sha256, n_texts=len(self.file.texts),
                              made_with=made_with)


def declared_method(path: str | Path, *, label: str | None, made_with: str | None) -> DeclaredMethod:
    """Read and check ``--synthetic PATH`` with its ``--name`` and ``--made-with``; every problem is an InputError."""
    from largefedbench.registry import method_names

    if not (made_with and made_with.strip()):
        raise InputError("--synthetic needs --made-with: the tool (and version or commit) that made the texts and how, "
                         "e.g. --made-with 'DPSDA PE text example, commit 1a2b3c, 10 iterations'; the entry states it")
    file = read_text_file(path)
    if (problem := iteration_file_problem(file.name, file.columns)) is not None:
        log.warning("--synthetic %s: %s (it is scored as it is)", path, problem)
    if len(file.texts) < MIN_TEXTS:
        raise InputError(f"--synthetic {path}: holds {len(file.texts)} non-empty text; scoring needs at least "
                         f"{MIN_TEXTS} (FID compares two sets of samples), and a useful score many more")
    if not label:  # the file's stem, made a name; kept apart from the registered methods' names
        label = re.sub(r"[^a-z0-9._-]+", "-", Path(path).stem.lower()).strip("-._")[:55] or "declared"
        label = f"{label}-declared" if label in method_names() else label
    if not LABEL.match(label):
        raise InputError(f"--name {label!r}: use 1-64 lower-case letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit")
    if label in method_names():
        raise InputError(f"--name {label!r} is a registered method's name; a declared set needs its own name, "
                         f"e.g. --name {label}-declared")
    cls = type("DeclaredSynthetic", (DeclaredSynthetic,), {"texts": tuple(file.texts), "__module__": __name__})
    from largefedbench import __version__

    return DeclaredMethod(cls=cls, source="declared", version=f"{__version__}+file-{file.sha256[:12]}",
                          label=label, file=file)


def as_info(method: DeclaredMethod, made_with: str) -> dict[str, Any]:
    """The entry's ``declared`` section."""
    return {"made_with": made_with.strip(), "file": method.file.name, "sha256": method.file.sha256,
            "n_texts": len(method.file.texts), "note": DECLARED_NOTE}
