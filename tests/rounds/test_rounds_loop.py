"""The shared rounds loop (largefedbench/rounds/loop.py) with a dummy method: a killed run resumes to exactly the
uninterrupted result (state, history, best state, federation), a checkpoint of another configuration is refused,
best-state selection in both directions, and the CONTRIBUTING example is the plug-in's code and stays short."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from timing_free import without_timing

from largefedbench.contract import PublicResources
from largefedbench.errors import MethodError
from largefedbench.rounds import RoundsLoop

ROOT = Path(__file__).resolve().parents[2]


class FakeSnapshot:
    manifest = {"name": "fake", "dataset": "d", "window": ["2024-01", "2024-02"], "content_sha256": "0" * 64}
    public = None


class Fed:
    """A federation's resume interface: a counter a checkpoint must restore."""

    def __init__(self) -> None:
        self.releases = 0

    def state_dict(self):
        return {"releases": self.releases}

    def load_state_dict(self, state):
        self.releases = state["releases"]


@dataclass
class Walk:
    position: float
    visited: list[float]


def walk(run_dir, *, kill_at: int | None = None, fingerprint=None):
    """Six rounds of a deterministic walk; validation score = −|position − 2|, best kept."""
    fed = Fed()
    public = PublicResources(snapshot=FakeSnapshot.manifest, models=None, seed=0, run_dir=run_dir, progress=False)
    loop = RoundsLoop(fed, public, Walk(0.0, []), rounds=6, first=1, desc="walk", select="max", fingerprint=fingerprint)
    for r in loop:
        if r == kill_at:
            raise KeyboardInterrupt
        fed.releases += 1
        loop.state.position += 0.75
        loop.state.visited = loop.state.visited + [loop.state.position]
        loop.history.append({"round": r, "position": loop.state.position})
        loop.offer(-abs(loop.state.position - 2), r, loop.state.position)
    return loop, fed


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path):
    straight, fed = walk(tmp_path / "a")
    assert [h["round"] for h in straight.history] == [1, 2, 3, 4, 5, 6] and fed.releases == 6
    assert (straight.best.round, straight.best.weights) == (3, 2.25)  # |2.25 - 2| beats |1.5 - 2|
    with pytest.raises(KeyboardInterrupt):
        walk(tmp_path / "b", kill_at=4)
    resumed, fed_b = walk(tmp_path / "b")
    assert resumed.resumed and not straight.resumed
    assert resumed.state == straight.state and without_timing(resumed.history) == without_timing(straight.history)
    assert resumed.best == straight.best and fed_b.releases == 6


def test_a_checkpoint_of_another_configuration_is_refused(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        walk(tmp_path, kill_at=3, fingerprint={"lr": 1})
    with pytest.raises(MethodError, match="another configuration"):
        walk(tmp_path, fingerprint={"lr": 2})


def test_the_state_must_be_a_dataclass_instance(tmp_path):
    public = PublicResources(snapshot=FakeSnapshot.manifest, models=None, seed=0, run_dir=tmp_path, progress=False)
    with pytest.raises(MethodError, match="dataclass"):
        RoundsLoop(Fed(), public, {"position": 0}, rounds=2, desc="x")
    loop = RoundsLoop(Fed(), public, Walk(0.0, []), rounds=2, desc="x")
    with pytest.raises(MethodError, match="selects nothing"):
        loop.offer(1.0, 0, None)


def test_offer_keeps_the_lowest_or_highest_and_never_a_nan_over_a_number(tmp_path):
    public = PublicResources(snapshot=FakeSnapshot.manifest, models=None, seed=0, run_dir=None, progress=False)
    low = RoundsLoop(Fed(), public, Walk(0.0, []), rounds=1, desc="fid", select="min")
    assert low.offer(math.nan, 0, "a")  # nothing kept yet: even NaN is kept
    assert low.offer(3.0, 1, "b") and not low.offer(3.0, 2, "c") and not low.offer(math.nan, 3, "d")
    assert low.offer(1.0, 4, "e") and low.best.weights == "e"
    high = RoundsLoop(Fed(), public, Walk(0.0, []), rounds=1, desc="top1", select="max")
    assert high.offer(0.2, 0, "a") and not high.offer(0.1, 1, "b") and high.offer(0.3, 2, "c")


def test_the_contributing_example_is_the_plug_in_and_at_most_60_lines(tmp_path):
    """The example is the plug-in `lfb new method` writes (the leaderboard tests' dp-unigram-example)."""
    from largefedbench.run.scaffold import new_method

    doc = (ROOT / "CONTRIBUTING.md").read_text()
    shown = re.search(r"<!-- example:dp-unigram -->\n```python\n(.*?)```\n<!-- /example:dp-unigram -->", doc, re.S)
    assert shown, "CONTRIBUTING.md has no example block"
    paper = "an example plug-in (LargeFedBench tests): DP word histograms over Poisson cohorts"  # as conftest's
    source = (new_method("dp-unigram-example", tmp_path / "pkg", module="lfb_example_method", paper=paper)
              / "lfb_example_method" / "__init__.py").read_text()
    assert shown.group(1) in source and len(shown.group(1).splitlines()) <= 60
    assert "RoundsLoop(" in shown.group(1) and "resume(" not in source and "save_round(" not in source


def test_the_loop_times_the_server_as_the_round_less_the_clients_side(tmp_path):
    """Server seconds are the round's wall time less the time inside ``private_sum`` (the door): a round that sleeps
    0.2 s around a release that takes 0.6 s on the clients' side is charged 0.2 s, in its history and its costs, and so
    is one that also redoes 0.5 s of an earlier process's work after a resume (``fed.clock.redoing()``); work after the
    rounds in ``server_work()`` goes to the last round's costs."""
    import time

    import numpy as np

    from largefedbench.data.demo import build_demo
    from largefedbench.data.federated import load_snapshot
    from largefedbench.federation import Federation
    from largefedbench.privacy.mechanisms import Gaussian

    fd = load_snapshot(build_demo(root=tmp_path / "demo", n_clients=200, progress=False).path)
    fed = Federation(fd.train, seed=1)
    fed.clock.start()  # as the harness does before the method
    public = PublicResources(snapshot=FakeSnapshot.manifest, models=None, seed=0, run_dir=tmp_path / "run", progress=False)
    loop = RoundsLoop(fed, public, Walk(0.0, []), rounds=2, desc="timed")

    def slow_client(view):
        time.sleep(0.6 / 40)
        return np.ones(2)

    for r in loop:
        time.sleep(0.2)
        if r == 1:
            with fed.clock.redoing():
                time.sleep(0.5)
        cohort = fed.sample(40 / fed.n_clients)
        fed.private_sum(cohort, slow_client, clip=1.0, mechanism=Gaussian(1.0))
        loop.history.append({"round": r})
    with loop.server_work():
        time.sleep(0.1)
    for row in loop.history:
        assert 0.19 <= row["server_seconds"] < 0.45
    last = fed.costs.rounds[-1]
    assert 0.29 <= last["server_seconds"] < 0.55 and last["client_seconds"] > 0.3
