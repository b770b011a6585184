"""`lfb smoke`: the example plug-in passes; each broken method fails the check that names its fault."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from largefedbench.cli import main
from largefedbench.run.smoke import smoke

LFB = shutil.which("lfb", path=str(Path(sys.executable).parent)) or "lfb"
BROKEN = Path(__file__).parent / "broken_methods.py"


def test_the_example_plugin_passes_through_the_cli(example_plugin, tiny):
    _fd, _bundle, root = tiny
    out = subprocess.run([LFB, "smoke", "dp-unigram-example", "--home", str(root), "--quiet"], check=False, capture_output=True,
                         text=True, timeout=600, env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    for check in ("contract", "private-data", "leaks", "isolation", "artifact", "ledger", "determinism", "time"):
        assert any(line.startswith("ok ") and f" {check} " in line for line in out.stdout.splitlines()), out.stdout
    assert "smoke test of dp-unigram-example passed" in out.stdout
    assert "ε = 0.99" in out.stdout and "≤ target 1" in out.stdout


def test_lfb_methods_lists_the_plugin_by_its_distribution(example_plugin, capsys):
    assert main(["methods"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("dp-unigram-example"))
    assert "runnable" in line and "[lfb-example-method]" in line


@pytest.mark.parametrize(
    "cls, check, message",
    [
        ("Peeker", "private-data", "read fed._clients directly"),
        ("StorePeeker", "private-data", "read fed._store directly"),
        ("Greedy", "train", "this release would bring ε to"),
        ("Moody", "determinism", "the synthetic texts differ"),
        ("WrongKind", "artifact", "the class says output 'model'"),
        ("NoTiny", "contract", "Config.tiny()"),
    ],
)
def test_a_broken_method_fails_the_check_that_names_its_fault(cls, check, message, tiny):
    """In the harness's process (``--sandbox off``, as built-ins run), where the guards watch the federation."""
    _fd, _bundle, root = tiny
    report = smoke(f"{BROKEN}:{cls}", home=root, sandbox="off")
    assert not report.ok
    failed = [c for c in report.checks if not c.ok]
    assert any(c.name == check and message in c.detail for c in failed), report.format()


@pytest.mark.parametrize("cls, check, message", [("Peeker", "train", "has no attribute '_clients'"),
                                                 ("NoTiny", "contract", "Config.tiny()")])
def test_in_its_sandbox_a_broken_method_fails_the_same_check_or_finds_nothing(cls, check, message, tiny):
    """As `lfb eval` runs a plug-in: described and run in its own process, where the federation is a proxy."""
    _fd, _bundle, root = tiny
    report = smoke(f"{BROKEN}:{cls}", home=root)
    failed = [c for c in report.checks if not c.ok]
    assert any(c.name == check and message in c.detail for c in failed), report.format()
