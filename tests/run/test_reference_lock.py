"""Runs sharing a home compute a reference row once: the second waits for the first and reads its cached row."""

import json
import threading

import pytest

from largefedbench.run.reference_lock import locked_reference


def _row(cache, computed, started, release):
    """A reference row as ``Evaluator.reference`` makes it: read the cache, else compute and cache."""
    def compute():
        if cache.exists():
            return json.loads(cache.read_text())
        computed.append(1)
        started.set()
        release.wait(10)  # the row is computing until the second run has asked for the lock
        cache.write_text(json.dumps({"top1": 0.25}))
        return {"top1": 0.25}
    return compute


def test_second_run_waits_and_reads_the_cached_row(tmp_path):
    cache, computed, logs, rows = tmp_path / "non-private-seed0.json", [], [], []
    started, release = threading.Event(), threading.Event()

    def log(msg):
        logs.append(msg)
        release.set()  # the second run said it waits: let the first one finish

    def run():
        rows.append(locked_reference(_row(cache, computed, started, release), cache.with_suffix(".lock"),
                                     what="non-private reference of seed 0", log=log))
    first, second = threading.Thread(target=run), threading.Thread(target=run)
    first.start()
    assert started.wait(10)  # the first run holds the lock and is computing
    second.start()
    first.join(20)
    second.join(20)
    assert len(computed) == 1  # without the lock both would have found no cache and computed
    assert rows == [{"top1": 0.25}, {"top1": 0.25}]
    assert len(logs) == 1 and "waiting" in logs[0] and "non-private reference of seed 0" in logs[0]


def test_rows_under_other_locks_do_not_wait(tmp_path):
    logs = []
    row = locked_reference(lambda: locked_reference(lambda: {"ok": 1}, tmp_path / "b" / "seed1.lock", what="seed 1",
                                                    log=logs.append),
                           tmp_path / "a" / "seed0.lock", what="seed 0", log=logs.append)
    assert row == {"ok": 1} and logs == []


def test_the_lock_is_released_when_the_row_fails(tmp_path):
    def fail():
        raise RuntimeError("out of memory")
    with pytest.raises(RuntimeError):
        locked_reference(fail, tmp_path / "public.lock", what="public reference", log=print)
    logs = []
    assert locked_reference(lambda: {"top1": 0.1}, tmp_path / "public.lock", what="public reference",
                            log=logs.append) == {"top1": 0.1}
    assert logs == []


def test_a_home_that_cannot_hold_a_lock_reads_its_rows_without_one(tmp_path):
    """A read-only home (or another account's lock file) must not stop a run whose rows are cached: here the lock's
    folder cannot be made (its name is a file), which fails for root too."""
    (tmp_path / "references").write_text("not a folder")
    logs = []
    assert locked_reference(lambda: {"top1": 0.2}, tmp_path / "references" / "abc" / "public.lock",
                            what="public reference", log=logs.append) == {"top1": 0.2}
    assert len(logs) == 1 and "without the lock" in logs[0]
