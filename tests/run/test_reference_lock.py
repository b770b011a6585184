"""Runs sharing a home compute a reference row once: the second waits for the first and reads its cached row."""

import json
import threading
import time

from largefedbench.run.reference_lock import lock_path, locked_reference


def _row(cache, computed):
    """A reference row as ``Evaluator.reference`` makes it: read the cache, else compute (slowly) and cache."""
    def compute():
        if cache.exists():
            return json.loads(cache.read_text())
        computed.append(time.monotonic())
        time.sleep(0.4)
        cache.write_text(json.dumps({"top1": 0.25}))
        return {"top1": 0.25}
    return compute


def test_second_run_waits_and_reads_the_cached_row(tmp_path):
    cache, computed, logs, rows = tmp_path / "non-private-seed0.json", [], [], []
    path = lock_path(tmp_path, "ab" * 32, "non-private", 0)
    runs = [threading.Thread(target=lambda: rows.append(
        locked_reference(_row(cache, computed), path, what="non-private reference of seed 0", log=logs.append)))
        for _ in range(2)]
    for run in runs:
        run.start()
        time.sleep(0.1)  # the first run holds the lock before the second asks
    for run in runs:
        run.join()
    assert len(computed) == 1  # without the lock both would have found no cache and computed
    assert rows == [{"top1": 0.25}, {"top1": 0.25}]
    assert len(logs) == 1 and "waiting" in logs[0] and "non-private reference of seed 0" in logs[0]


def test_rows_of_other_seeds_and_snapshots_do_not_wait(tmp_path):
    paths = {lock_path(tmp_path, "ab" * 32, "non-private", 0), lock_path(tmp_path, "ab" * 32, "non-private", 1),
             lock_path(tmp_path, "cd" * 32, "non-private", 0), lock_path(tmp_path, "ab" * 32, "public", None),
             lock_path(tmp_path, "ab" * 32, "generator-only", 0)}
    assert len(paths) == 5
    assert all(p.parent == tmp_path / "references" / ".locks" for p in paths)
    logs = []
    outer = lock_path(tmp_path, "ab" * 32, "non-private", 0)
    inner = lock_path(tmp_path, "ab" * 32, "non-private", 1)
    row = locked_reference(lambda: locked_reference(lambda: {"ok": 1}, inner, what="seed 1", log=logs.append), outer,
                           what="seed 0", log=logs.append)
    assert row == {"ok": 1} and logs == []


def test_the_lock_is_released_when_the_row_fails(tmp_path):
    path = lock_path(tmp_path, "ab" * 32, "public", None)

    def fail():
        raise RuntimeError("out of memory")
    try:
        locked_reference(fail, path, what="public reference", log=print)
    except RuntimeError:
        pass
    logs = []
    assert locked_reference(lambda: {"top1": 0.1}, path, what="public reference", log=logs.append) == {"top1": 0.1}
    assert logs == []
