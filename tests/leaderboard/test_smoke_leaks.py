"""`lfb smoke` on methods that leak what their client functions see (closure, module global, method attribute, a
file, the artifact's info) and on one that releases nothing: each fails the check that names its leak, and the CLI
exits non-zero. (A file of its own beside test_smoke_method.py, so that the two halves run on different workers.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from largefedbench.cli import main
from largefedbench.run.smoke import smoke

BROKEN = Path(__file__).parent / "broken_methods.py"


@pytest.mark.parametrize(
    "cls, failures",
    [
        ("LeakyClosure", [("isolation", "the client function changed state the method reads"),
                          ("leaks", "run 3: artifact.texts[")]),
        ("LeakyGlobal", [("isolation", "the synthetic texts differ"),
                         ("leaks", "private client text left the federation")]),
        ("LeakyAttribute", [("isolation", "the client function changed state the method reads")]),
        ("LeakyFile", [("leaks", "lfb-leaky-method.txt"), ("leaks", "artifact.texts[")]),
        ("LeakyInfo", [("leaks", "artifact.info.notes")]),
    ],
)
def test_a_leaky_method_fails_smoke_saying_what_leaked_and_where(cls, failures, tiny):
    """Client functions that keep what they see (closure, module global, method attribute) or write it to
    a file; isolation or the private-text search catches each."""
    _fd, _bundle, root = tiny
    report = smoke(f"{BROKEN}:{cls}", home=root, sandbox="off")
    failed = [c for c in report.checks if not c.ok]
    for check, message in failures:
        assert any(c.name == check and message in c.detail for c in failed), report.format()


def test_a_failing_smoke_exits_non_zero(tiny, capsys):
    _fd, _bundle, root = tiny
    code = main(["smoke", f"{BROKEN}:Silent", "--home", str(root), "--quiet", "--json"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert '"ok": false' in out and "empty: the method released nothing" in out  # the ledger check names it
