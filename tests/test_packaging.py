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


def test_every_data_file_of_the_library_ships_in_the_wheel():
    """A file the library reads (a corpus, a topic list, a checkpoint) matches a [tool.setuptools.package-data]
    pattern, else an installed wheel lacks it. READMEs are for people browsing the repository."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["largefedbench"]
    root = REPO / "largefedbench"
    files = {p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
             and "__pycache__" not in p.parts and p.name != "README.md"}
    missing = sorted(str(f) for f in files if not any(f.match(pattern) for pattern in patterns))
    assert not missing, f"add patterns for {missing} to [tool.setuptools.package-data] in pyproject.toml"
