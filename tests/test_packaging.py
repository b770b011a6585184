"""A wheel holds every package: each folder of the library with an ``__init__.py`` is listed in pyproject.toml
(a missing one imports from a clone but not from an installed wheel)."""

from __future__ import annotations

from pathlib import Path

import tomllib

import largefedbench

REPO = Path(largefedbench.__file__).parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "largefedbench").rglob("__init__.py")}
    folders |= {"largefedbench.methods", "largefedbench.scrapers"}
    assert folders - listed == set(), f"add {sorted(folders - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert listed - folders == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - folders)}"
