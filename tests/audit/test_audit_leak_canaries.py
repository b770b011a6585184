"""`lfb audit` adds leak canaries — train clients whose spans are random 12-letter words — and searches every output
of each seed for them: a method whose client function smuggles text out (here through a temp file) stops the audit.
The audit is the check behind the sandbox (whose confined workers cannot write where ``train`` reads), so the leak is
run here with ``--sandbox off``, where the file reaches ``train``."""

from __future__ import annotations

from pathlib import Path

import pytest

from largefedbench.errors import InputError, MethodError
from largefedbench.run.audit import Audit
from largefedbench.run.eval import EvalRequest, run_eval

BROKEN = Path(__file__).resolve().parents[1] / "leaderboard" / "broken_methods.py"


def test_leak_canaries_are_fixed_per_seed_and_distinct_across_seeds():
    audit = Audit(canaries=4, leak_canaries=3)
    first, again, other = audit.leak_texts(0), audit.leak_texts(0), audit.leak_texts(1)
    assert first == again and len(first) == 3 and set(first) != set(other)
    (span,) = next(iter(first.values()))
    assert len(span.split()) == 6 and all(len(w) == 12 and w.isalpha() for w in span.split())
    assert Audit(canaries=4, leak_canaries=0).leak_texts(0) == {}
    with pytest.raises(InputError, match="--leak-canaries 101"):
        Audit(leak_canaries=101)


def test_old_audit_ids_are_kept_without_leak_canaries():
    assert Audit(leak_canaries=0)._audit_id("x--d") != Audit(leak_canaries=3)._audit_id("x--d")


def test_a_method_that_smuggles_client_text_through_a_file_stops_the_audit(tiny, tmp_path):
    _fd, _bundle, root = tiny
    request = EvalRequest(method=f"{BROKEN}:LeakyFile", seeds=(0,), epsilon=1.0, out=tmp_path / "board", home=root,
                          progress=False, sandbox="off")
    with pytest.raises(MethodError, match="a leak canary's secret word left the federation other than as a noised sum"):
        run_eval(request, log=lambda m: None, audit=Audit(canaries=4, leak_canaries=10, progress=False))
    assert not list((tmp_path / "board").glob("entries/**/*.json"))  # no entry written
