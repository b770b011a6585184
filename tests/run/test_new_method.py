"""`lfb new method NAME`: a plug-in package that installs and passes `lfb smoke` as written; a profile whose preset
the method lacks is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import largefedbench
from largefedbench.cli import main

LFB = shutil.which("lfb", path=str(Path(sys.executable).parent)) or "lfb"
REPO = Path(largefedbench.__file__).resolve().parent.parent


def _install(package: Path, site: Path) -> dict:
    """``pip install`` of the package into a folder of its own (the venv stays untouched); the env that sees it."""
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                          "--target", str(site), str(package)], check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))


@pytest.mark.slow
def test_the_new_package_installs_passes_its_own_tests_and_lfb_smoke(tiny, tmp_path, capsys):
    _fd, _bundle, root = tiny
    package = tmp_path / "lfb-my-unigram"
    assert main(["new", "method", "my-unigram", "--dir", str(package)]) == 0
    assert "pip install -e ." in capsys.readouterr().out
    assert sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()) == [
        ".gitignore", "README.md", "lfb_my_unigram/__init__.py", "pyproject.toml", "tests/test_method.py"]
    env = _install(package, tmp_path / "site")

    shown = subprocess.run([LFB, "methods", "my-unigram"], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and "lfb_my_unigram" in shown.stdout, shown.stdout + shown.stderr
    assert all(p in shown.stdout for p in ("paper", "cpu", "tiny"))
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=package,
                           capture_output=True, text=True, env=env, timeout=300)
    assert tests.returncode == 0 and "3 passed" in tests.stdout, tests.stdout + tests.stderr
    smoke = subprocess.run([LFB, "smoke", "my-unigram", "--home", str(root), "--quiet"], capture_output=True, text=True,
                           env=env, timeout=600)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "smoke test of my-unigram passed" in smoke.stdout


def test_the_package_names_its_method_and_installs_largefedbench_from_this_checkout(tmp_path):
    from largefedbench.run.scaffold import new_method

    package = new_method("my.method_2", tmp_path / "pkg")
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    assert project["name"] == "lfb-my-method-2"
    assert project["entry-points"]["largefedbench.methods"] == {"my.method_2": "lfb_my_method_2:MyMethod2"}
    # largefedbench is not on PyPI: a dependency on it could not resolve in a fresh environment
    assert not any(d.lower().startswith("largefedbench") for d in project["dependencies"])
    readme = (package / "README.md").read_text()
    assert f"pip install -e {REPO}" in readme and "lfb smoke my.method_2" in readme
    source = (package / "lfb_my_method_2" / "__init__.py").read_text()
    assert all(f"def {p}(cls)" in source for p in ("paper", "cpu", "tiny")) and "{{" not in source


@pytest.mark.parametrize("argv, message", [
    (["new", "method", "My Method"], "safe id"),
    (["new", "method", "ok\n"], "safe id"),
    (["new", "method", "dp-fedavg"], "built-in method"),
])
def test_a_bad_name_is_refused_with_a_message(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err and not any(tmp_path.iterdir())


def test_an_existing_folder_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mine.py").write_text("x = 1\n")
    assert main(["new", "method", "my-method", "--dir", str(tmp_path / "pkg")]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "pkg").iterdir()] == ["mine.py"]


def test_every_template_file_is_package_data():
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["largefedbench"]
    from largefedbench.run.scaffold import TEMPLATE_FILES

    folder = REPO / "largefedbench" / "templates" / "method"
    assert sorted(p.name for p in folder.iterdir()) == sorted(TEMPLATE_FILES)
    assert all(any(p.relative_to(REPO / "largefedbench").match(pat) for pat in patterns) for p in folder.iterdir())


def test_eval_under_a_profile_whose_preset_the_method_lacks_is_refused(tmp_path, capsys):
    method = tmp_path / "mine.py"
    method.write_text(
        "from dataclasses import dataclass\n"
        "from largefedbench.api import Method\n\n\n"
        "@dataclass(frozen=True)\nclass Settings:\n    rounds: int = 20\n\n"
        "    @classmethod\n    def tiny(cls):\n        return cls(rounds=2)\n\n\n"
        "class Mine(Method):\n    name = 'mine'\n    paper = 'p'\n    output = 'synthetic text'\n    Config = Settings\n\n"
        "    def train(self, fed, public, cfg, budget):\n        raise AssertionError('must not run')\n")
    assert main(["eval", "--method", f"{method}:Mine", "--profile", "cpu", "--seeds", "0",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "'mine' has no cpu preset" in err and "--preset tiny" in err and "Traceback" not in err
