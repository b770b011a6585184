"""A wheel holds every package: each folder of the library with an ``__init__.py`` is listed in pyproject.toml
(a missing one imports from a clone but not from an installed wheel)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

import largefedbench

REPO = Path(largefedbench.__file__).parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "largefedbench").rglob("__init__.py")}
    for installed in ("methods", "scrapers"):  # installed as largefedbench.methods and largefedbench.scrapers
        folders |= {".".join(("largefedbench", *p.parent.relative_to(REPO).parts))
                    for p in (REPO / installed).rglob("__init__.py")}
    assert folders - listed == set(), f"add {sorted(folders - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert listed - folders == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - folders)}"


def test_every_data_file_of_the_library_matches_a_package_data_pattern():
    """A file the library reads (a corpus, a topic list, a checkpoint) matches a [tool.setuptools.package-data]
    pattern, else an installed wheel lacks it. Checked on the files git tracks (not a wheel build); READMEs are for
    people browsing the repository, and methods/ and scrapers/ hold code only."""
    import subprocess

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["largefedbench"]
    tracked = subprocess.run(["git", "ls-files", "largefedbench", "methods", "scrapers"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    data = [Path(f) for f in tracked if not f.endswith(".py") and Path(f).name != "README.md"]
    assert all(f.parts[0] == "largefedbench" for f in data), f"data files outside the library: {data}"
    missing = sorted(str(f) for f in data if not any(f.relative_to("largefedbench").match(p) for p in patterns))
    assert not missing, f"add patterns for {missing} to [tool.setuptools.package-data] in pyproject.toml"


def test_the_package_metadata_is_ready_for_an_index():
    """What PyPI shows and checks: a version, a licence expression, a readme, classifiers it knows the form of."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "largefedbench" and re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert project["license"] == "Apache-2.0" and project["readme"] == "README.md" and project["authors"]
    assert [(REPO / f).read_text().lstrip().startswith("Apache License") for f in project["license-files"]] == [True]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639: the expression only
    assert all(re.fullmatch(r"[A-Z][\w /.+-]*( :: [\w /.+()-]+)+", c) for c in project["classifiers"])
