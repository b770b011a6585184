"""Snapshot integrity: content hash checked at load for eval, damaged files named with a
rebuild command, safe names, no temporary folders left by a failed build, manifests with a reversed window."""

from __future__ import annotations

import errno
import json
import os
from collections import Counter
from pathlib import Path

import pytest

import largefedbench.data.snapshot as snap
from largefedbench.data.federated import load_snapshot
from largefedbench.data.records import Record
from largefedbench.data.snapshot import BuildSpec, build_snapshot, list_snapshots
from largefedbench.data.spans import SpanSettings
from largefedbench.data.windows import Window
from largefedbench.errors import InputError, SnapshotError

TEXT = "The committee heard evidence on river pollution and the cost of cleaning it up for every town. " * 6
ARROW = "data/train/data-00000-of-00001.arrow"


def rec(i: int, date: str) -> Record:
    return Record(id=f"t:{i}", source="t", date=date, title=f"T{i}", text=TEXT, url=f"u{i}", license="cc_by")


def spec(name: str | None = "snap") -> BuildSpec:
    return BuildSpec(dataset="t", window=Window.parse("2024-09", "2024-10", public_months=1),
                     span=SpanSettings(tokenizer="minilm-wordpiece"), name=name,
                     sources={"biorxiv": {"base_url": "http://x"}})


def records() -> list[Record]:
    return [rec(i, f"2024-09-{1 + i % 28:02d}") for i in range(40)] + [rec(100 + i, "2024-08-03") for i in range(5)]


def build(name: str | None = "snap") -> Path:
    return build_snapshot(records(), spec(name), Counter(), progress=False).path


def patch_one_byte(file: Path) -> None:
    """Edit the text of one client in place (same size, still a valid Arrow file)."""
    data = file.read_bytes()
    at = data.index(b"river pollution")
    file.write_bytes(data[:at] + b"rivet" + data[at + 5:])


# -- item 10: the content hash ---------------------------------------------------------------------------------
def test_content_hash_is_verified_once_then_only_stat(lfb_home, monkeypatch):
    path = build()
    calls = []
    real = snap.content_hash
    monkeypatch.setattr(snap, "content_hash", lambda splits: calls.append(1) or real(splits))
    assert snap.verify_snapshot(load_snapshot(path)) is True
    assert snap.verify_snapshot(load_snapshot(path)) is False and len(calls) == 1  # second load: stat only
    patch_one_byte(path / ARROW)
    with pytest.raises(SnapshotError, match=r"does not match its manifest.*rebuild it: `lfb refresh .*--name snap"):
        snap.verify_snapshot(load_snapshot(path))
    assert len(calls) == 2


def test_a_failed_full_verify_is_not_answered_from_memory_later(lfb_home):
    """An edit that keeps the file's size and time passes the stat check; `lfb data verify` (full) finds it, and
    from then on the ordinary load hashes again instead of trusting the remembered verification."""
    path = build()
    assert snap.verify_snapshot(load_snapshot(path)) is True
    arrow = path / ARROW
    times = arrow.stat()
    patch_one_byte(arrow)
    os.utime(arrow, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert snap.verify_snapshot(load_snapshot(path)) is False  # size and time unchanged: only stat
    with pytest.raises(SnapshotError, match="does not match its manifest"):
        snap.verify_snapshot(load_snapshot(path), full=True)
    with pytest.raises(SnapshotError, match="does not match its manifest"):
        snap.verify_snapshot(load_snapshot(path))


def test_a_full_verify_that_stops_midway_forgets_the_remembered_verification(lfb_home, monkeypatch):
    path = build()
    assert snap.verify_snapshot(load_snapshot(path)) is True  # hashed and remembered
    real, calls = snap.content_hash, []

    def unreadable(splits):
        raise OSError(errno.EIO, "Input/output error")  # a damaged disk under the data files

    monkeypatch.setattr(snap, "content_hash", unreadable)
    with pytest.raises(OSError):
        snap.verify_snapshot(load_snapshot(path), full=True)
    monkeypatch.setattr(snap, "content_hash", lambda splits: calls.append(1) or real(splits))
    assert snap.verify_snapshot(load_snapshot(path)) is True and calls == [1]  # hashed again, not from memory


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_a_snapshots_files_follow_the_umask(lfb_home, umask, mode):
    import stat

    old = os.umask(umask)
    try:
        path = build()
    finally:
        os.umask(old)
    for name in ("manifest.json", "README.md"):  # written by the atomic writer
        assert stat.S_IMODE((path / name).stat().st_mode) == mode, name


def test_eval_refuses_an_edited_snapshot(lfb_home):
    from largefedbench.run.eval import EvalRequest, prepare

    path = build()
    patch_one_byte(path / ARROW)
    with pytest.raises(SnapshotError, match="content_sha256.*rebuild"):
        prepare(EvalRequest(method="dp-fedavg", dataset="snap", out=lfb_home / "board"))


# -- item 11: damaged files ------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", [
    lambda p: (p / ARROW).write_bytes(b""),  # emptied
    lambda p: os.truncate(p / ARROW, (p / ARROW).stat().st_size // 2),  # truncated mid-batch
    lambda p: os.truncate(p / ARROW, 100),  # truncated in the schema
    lambda p: (p / "data/train/state.json").write_text('{"_data_files": '),  # broken state.json
    lambda p: (p / "data/train/state.json").write_text("[1]"),  # valid JSON, wrong shape
    lambda p: (p / "data/dataset_dict.json").write_text(""),
], ids=["empty", "truncated", "truncated-schema", "state-json", "state-shape", "dataset-dict"])
def test_damaged_data_files_name_the_snapshot_and_the_rebuild_command(lfb_home, damage):
    path = build()
    damage(path)
    with pytest.raises(SnapshotError) as err:
        load_snapshot("snap")
    message = str(err.value)
    assert "'snap'" in message and "damaged" in message
    assert f"rm -r {path}" in message and "lfb refresh --sources biorxiv --since 2024-09-01 --until 2024-10-31" in message


def test_a_split_with_other_row_counts_than_the_manifest_is_damaged(lfb_home):
    path = build()
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["counts"]["clients"]["train"] += 1
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SnapshotError, match="train has .* clients, the manifest says"):
        load_snapshot(path)


def test_a_damaged_manifest_names_the_snapshot_and_list_skips_it(lfb_home):
    path = build("broken")
    good = build("good")
    (path / "manifest.json").write_text("{")
    with pytest.raises(SnapshotError, match="broken.*damaged.*Delete"):
        load_snapshot(path)
    assert [m["name"] for m in list_snapshots()] == [good.name]


# -- item 13: manifests and names ------------------------------------------------------------------------------
def test_a_reversed_manifest_window_is_refused(lfb_home):
    path = build()
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["window"]["since"], manifest["window"]["until"] = manifest["window"]["until"], manifest["window"]["since"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SnapshotError, match="manifest.json is edited or damaged.*starts .* after it ends"):
        load_snapshot(path)


@pytest.mark.parametrize("name", ["../../x", "/tmp/lfb-abs-name", "a/b", ".hidden", "..", "x/../../y", ""])
def test_a_snapshot_name_cannot_leave_the_snapshots_folder(lfb_home, tmp_path, name):
    with pytest.raises(InputError, match="not a snapshot name"):
        build_snapshot(records(), spec(name), progress=False)
    assert not (lfb_home / "x").exists() and not Path("/tmp/lfb-abs-name").exists()
    assert not (lfb_home / "snapshots").exists() or not any((lfb_home / "snapshots").iterdir())


# -- item 12: full disk, read-only folders, stale temporary folders ----------------------------------------------
def test_a_full_disk_is_a_message_and_leaves_no_temporary_folder(lfb_home, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(lfb_home / "snapshots" / "x"))

    monkeypatch.setattr(snap, "atomic_write_json", full)
    with pytest.raises(SnapshotError, match="disk is full.*run the same command again"):
        build()
    assert list((lfb_home / "snapshots").iterdir()) == []


def test_a_permission_error_while_writing_is_a_message(lfb_home, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(lfb_home / "snapshots"))

    monkeypatch.setattr(snap, "atomic_write_text", denied)
    with pytest.raises(SnapshotError, match="permission denied"):
        build()
    assert list((lfb_home / "snapshots").iterdir()) == []


def test_a_read_only_home_is_refused_before_any_work(lfb_home, monkeypatch):
    lfb_home.chmod(0o500)
    try:
        if os.access(lfb_home, os.W_OK):  # root ignores the mode bits: simulate what access(2) says for others
            real = os.access
            monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == lfb_home else real(p, mode, **k))
        monkeypatch.setattr(snap, "get_span_tokenizer", lambda *a: pytest.fail("spans were cut before the check"))
        with pytest.raises(InputError, match="cannot write into .*read-only or permission denied"):
            build()
    finally:
        lfb_home.chmod(0o700)


def test_stale_temporary_folders_are_removed_on_the_next_build(lfb_home):
    folder = lfb_home / "snapshots"
    dead = folder / ".tmp-old-2147483646"  # no process has this pid
    live = folder / f".tmp-busy-{os.getpid()}"  # a build still running in a live process
    for d in (dead, live):
        (d / "data").mkdir(parents=True)
    build()
    assert not dead.exists() and live.exists()
