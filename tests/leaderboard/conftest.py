"""Leaderboard test setup: the example plug-in installed for the session, and one real entry produced with it.

The plug-in is what `lfb new method dp-unigram-example` writes (the template in largefedbench/templates/method/,
its own pyproject.toml with a ``largefedbench.methods`` entry point), built into a wheel and installed from that
folder as a package index (``pip install --no-index --find-links WHEELS --target DIR``), as ``pip install
NAME==VERSION`` installs a published package; DIR is put on ``sys.path`` and ``PYTHONPATH``: the venv is never
modified, other sessions never see it, and removing DIR uninstalls it. Without setuptools (Python ≥ 3.12 venvs)
the wheel's ``.dist-info`` is written from the pyproject instead.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from largefedbench.run.eval import EvalRequest, run_eval

HERE = Path(__file__).resolve().parent
EXAMPLE = "dp-unigram-example"
#: the example's module and distribution (`lfb new method` would name them lfb_dp_unigram_example, lfb-dp-unigram-example)
EXAMPLE_NAMES = {"module": "lfb_example_method", "distribution": "lfb-example-method",
                 "paper": "an example plug-in (LargeFedBench tests): DP word histograms over Poisson cohorts"}


def write_example(folder: Path) -> Path:
    """The example plug-in's package, as `lfb new method` writes it, in ``folder``."""
    from largefedbench.run.scaffold import new_method

    return new_method(EXAMPLE, folder, **EXAMPLE_NAMES)


def _dist_info_by_hand(source: Path, site: Path) -> None:
    import tomllib

    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    shutil.copytree(source / EXAMPLE_NAMES["module"], site / EXAMPLE_NAMES["module"])
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    points = project["entry-points"]["largefedbench.methods"]
    (info / "top_level.txt").write_text(EXAMPLE_NAMES["module"] + "\n")  # packages_distributions() reads it
    (info / "entry_points.txt").write_text("[largefedbench.methods]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))


def install_example(tmp: Path) -> Path:
    source, wheels, site = write_example(tmp / "src"), tmp / "wheels", tmp / "site"
    try:
        import setuptools  # noqa: F401
    except ImportError:
        _dist_info_by_hand(source, site)
        return site
    pip = [sys.executable, "-m", "pip", "-q"]
    for args in (["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(source)],
                 ["install", "--no-deps", "--no-index", "--find-links", str(wheels), "--target", str(site),
                  "lfb-example-method==0.1.0"]):
        out = subprocess.run(pip + args, check=False, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"installing the example plug-in failed:\n{out.stdout}\n{out.stderr}"
    return site


@pytest.fixture(scope="session")
def example_site(tmp_path_factory):
    """The example method package installed into a folder of its own, for this session (see the module docstring)."""
    site = install_example(tmp_path_factory.mktemp("example-plugin"))
    yield site
    for name in [m for m in sys.modules if m.startswith("lfb_example_method")]:
        del sys.modules[name]
    shutil.rmtree(site.parent, ignore_errors=True)


@contextlib.contextmanager
def _on_path(site: Path):
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        importlib.invalidate_caches()


@pytest.fixture()
def example_plugin(example_site, monkeypatch) -> Path:
    """The example plug-in visible to this test only: on sys.path and on PYTHONPATH for the `lfb` it starts."""
    monkeypatch.syspath_prepend(str(example_site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(example_site), os.environ.get("PYTHONPATH")) if p))
    return example_site


@pytest.fixture(scope="session")
def produced(example_site, tiny, tmp_path_factory):
    """One real entry: `lfb eval` of the example plug-in on the demo (tiny profile, seed 0), made once per session.

    One seed keeps the session short (each extra seed costs a non-private reference training); ranked, 3-seed
    entries are derived from it with every derived number recomputed (see entry_variants.py). Under pytest-xdist
    one worker runs the seed; each other worker's `lfb eval` resumes from a copy of the stored seed (the run's
    ``.runs`` folder, as a re-run of the same command does) and writes the entry into a board of its own."""
    from conftest import built_once

    _fd, _bundle, root = tiny
    board = tmp_path_factory.mktemp("produced-board")
    stored = root / "produced-runs"
    with _on_path(example_site), built_once(root, "produced"):
        if stored.is_dir():
            shutil.copytree(stored, board / ".runs")
        result = run_eval(EvalRequest(method=EXAMPLE, seeds=(0,), out=board, home=root, progress=False,
                                      command=f"lfb eval --method {EXAMPLE} --seeds 0"), log=lambda m: None)
        if not stored.is_dir():
            shutil.copytree(board / ".runs", stored.with_name(".produced-runs.partial"), dirs_exist_ok=True)
            stored.with_name(".produced-runs.partial").rename(stored)
        return result


@pytest.fixture()
def entry(produced) -> dict:
    """A fresh deep copy of the produced entry as its JSON dict."""
    import copy

    return copy.deepcopy(produced.entry.to_json())


@pytest.fixture(scope="session")
def board(produced, tmp_path_factory):
    """A board with every kind of row, rendered once: (folder, RenderResult, {role: entry dict}).

    Derived from the produced entry: two more ranked methods in the ε ≤ 1 bucket, one in 1 < ε ≤ 4, the ε = 0
    and ε = ∞ references, the produced 1-seed entry (unranked), a possibly contaminated one, an invalid one (NaN)
    and one whose free-text fields carry HTML that must stay inert."""
    from largefedbench.leaderboard.render import render_board

    from .entry_variants import (
        as_reference,
        relabel,
        save,
        shift_accuracy,
        with_noise,
        with_seeds,
    )

    folder = tmp_path_factory.mktemp("board")
    art = produced.path.parent
    base = with_seeds(produced.entry.to_json(), [0, 1, 2])
    roles = {
        "a": relabel(base, entry_id="dp-unigram-example--demo--tiny--eps1--ranked-a"),
        "b": relabel(shift_accuracy(base, 0.01), method="dp-unigram-b", entry_id="dp-unigram-b--demo--tiny--eps1--b",
                     version="<script>window.__pwned = 1</script>"),
        "c": relabel(shift_accuracy(with_noise(base, 0.6), -0.004), method="dp-unigram-c",
                     entry_id="dp-unigram-c--demo--tiny--eps2.4--c"),
        "public": as_reference(base, "public"),
        "non-private": as_reference(base, "non-private"),
        "unranked": produced.entry.to_json(),
        "contaminated": relabel(base, entry_id="dp-unigram-example--demo--tiny--eps1--contaminated"),
        "invalid": relabel(base, entry_id="dp-unigram-example--demo--tiny--eps1--invalid"),
    }
    roles["b"]["method"]["paper"] = '<img src=x onerror="window.__pwned = 2">'
    # same window, but a generator with no registered knowledge cutoff: the window may overlap its training data
    roles["contaminated"]["contamination"] = {"model": "example-org/unregistered-llm", "model_cutoff": None,
                                              "cutoff_kind": "unknown", "after_cutoff": None,
                                              "window_start": roles["contaminated"]["dataset"]["window"]["since"]}
    roles["invalid"]["metrics"]["next_token_accuracy"]["top1"]["per_seed"][1] = float("nan")
    for data in roles.values():
        save(folder, data, artifacts_from=art)
    return folder, render_board(folder), roles
