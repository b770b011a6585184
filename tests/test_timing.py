"""Seconds per stage: each second counted once, in the innermost stage; the breakdown a seed's entry carries."""

from __future__ import annotations

import time

import pytest

from largefedbench import timing


def test_nested_stages_count_each_second_once_in_the_innermost():
    before = timing.totals()
    start = time.perf_counter()
    with timing.stage("dpo"):
        time.sleep(0.05)
        with timing.stage("generation"):
            time.sleep(0.1)
        time.sleep(0.05)
    wall = time.perf_counter() - start
    after = timing.totals()
    spent = {k: after[k] - before[k] for k in timing.STAGES}
    assert spent["generation"] >= 0.1 and spent["dpo"] >= 0.1
    assert sum(spent.values()) == pytest.approx(wall, abs=1e-3)  # nothing counted twice (nested: dpo would gain 0.1 s)
    breakdown = timing.stage_breakdown(before, after, wall + 0.5)
    assert breakdown["other"] == pytest.approx(0.5, abs=1e-2) and set(breakdown) == {*timing.STAGES, "other"}


def test_a_stage_that_raises_still_counts_and_unknown_stages_are_refused():
    before = timing.totals()["sft"]

    @timing.timed("sft")
    def fails():
        time.sleep(0.02)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fails()
    assert timing.totals()["sft"] - before >= 0.02
    with pytest.raises(ValueError, match="unknown stage 'gen'"):
        with timing.stage("gen"):
            pass
