"""`lfb audit` refuses bad input with a clear message before any model is loaded."""

from __future__ import annotations

import pytest

from largefedbench.cli import main


@pytest.mark.parametrize("args, message", [
    (["--canaries", "1"], "at least 2 canaries"),
    (["--confidence", "1.5"], "--confidence 1.5"),
])
def test_bad_audit_settings(args, message, capsys):
    assert main(["audit", "--method", "dp-fedavg", *args]) == 2
    assert message in capsys.readouterr().err


def test_references_cannot_be_audited(shared_root, capsys):
    assert main(["audit", "--method", "public", "--home", str(shared_root), "--quiet"]) == 2
    assert "is a reference" in capsys.readouterr().err
