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


def test_a_resumed_job_reports_the_time_of_its_completed_rounds_not_only_its_last_process(tmp_path):
    """The method's seconds go through the round checkpoint: a kill and a resume count each completed round once;
    the resumed process's set-up before the checkpoint is loaded (redone work) is not counted again."""
    import torch  # noqa: F401 - imported before the clock starts: save_round's first import would take a second
    from test_federation_private_sum import small_split  # tests/ is on sys.path (rootdir conftest)

    from largefedbench.federation import Federation
    from largefedbench.rounds.checkpoints import load_round, save_round
    from largefedbench.rounds.state_file import read_state, write_state

    clients, emb = small_split(20, seed=1)
    first = Federation(clients, embeddings=emb, seed=0)
    first.clock.start()
    with timing.stage("generation"):
        time.sleep(0.06)
    time.sleep(0.04)
    save_round(tmp_path / "ckpt.safetensors", first, 0, {})
    time.sleep(0.2)  # a round the kill interrupts: redone, so not counted
    resumed = Federation(clients, embeddings=emb, seed=0)
    resumed.clock.start()
    time.sleep(0.3)  # loading the models again before the checkpoint
    load_round(tmp_path / "ckpt.safetensors", resumed)
    with timing.stage("sft"):
        time.sleep(0.05)
    seconds, stages = resumed.clock.seconds(), resumed.clock.stages()
    assert 0.15 <= seconds < 0.35
    assert stages["generation"] >= 0.06 and stages["sft"] >= 0.05 and stages["generation"] < 0.2
    assert sum(stages.values()) == pytest.approx(seconds, abs=2e-3)
    saved = read_state(tmp_path / "ckpt.safetensors", fix="")
    saved["clock"] = None  # a checkpoint written before the clock: counted from this process
    write_state(tmp_path / "old.safetensors", saved)
    old = Federation(clients, embeddings=emb, seed=0)
    old.clock.start()
    load_round(tmp_path / "old.safetensors", old)
    assert old.clock.before_seconds == 0.0 and old.clock.seconds() < 0.1
    old.load_state_dict(first.state_dict())  # a federation's state alone (DP-FTRL replays an epoch) leaves the clock
    assert old.clock.before_seconds == 0.0


def test_work_redone_after_a_resume_is_left_out_of_the_jobs_seconds_and_stages():
    """Time inside ``redoing()`` — including its stages, and a stage open around it — is not the job's: a
    resumed process that rebuilds what an earlier one built (and was counted for) reports it once."""
    clock = timing.JobClock()
    clock.start()
    with timing.stage("generation"):
        time.sleep(0.05)
        with clock.redoing():
            time.sleep(0.1)  # the open generation stage, while redoing
            with timing.stage("embedding"):
                time.sleep(0.1)
        time.sleep(0.05)
    seconds, stages = clock.seconds(), clock.stages()
    assert clock.redone_seconds >= 0.2
    assert 0.1 <= seconds < 0.18 and 0.1 <= stages["generation"] < 0.18 and stages["embedding"] < 0.01
    assert sum(stages.values()) == pytest.approx(seconds, abs=2e-3)
    clock.start()  # a later resume in the same process counts from there; the redone seconds stay out
    time.sleep(0.05)
    assert 0.05 <= clock.seconds() < 0.1
    idle = timing.JobClock()  # not started: nothing counted, so nothing left out
    with idle.redoing(), timing.stage("generation"):
        time.sleep(0.02)
    assert idle.redone_seconds == 0 and idle.seconds() == 0 and idle.stages()["generation"] == 0


def test_stages_timed_in_two_processes_at_once_add_and_the_rest_is_other():
    from largefedbench.timing import join_stages

    method = {"generation": 30.0, "dpo": 20.0, "other": 50.0}  # the method's process: waiting for releases is "other"
    harness = {"clients": 40.0, "evaluation": 5.0, "other": 55.0}  # the harness served them meanwhile
    joined = join_stages(method, harness, seconds=100.0)
    assert joined["clients"] == 40.0 and joined["generation"] == 30.0 and joined["evaluation"] == 5.0
    assert joined["other"] == 5.0 and sum(joined.values()) == 100.0
    assert join_stages(method, harness, seconds=10.0)["other"] == 0.0  # never negative
