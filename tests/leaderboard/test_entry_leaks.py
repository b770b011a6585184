"""`lfb leaderboard validate` searches an entry for private text when the entry's snapshot is on this machine."""

from __future__ import annotations

from largefedbench.leaderboard.files import EntryFile, board_of
from largefedbench.leaderboard.validate import validate_entry_file

from .entry_variants import relabel, save


def _leak_findings(board, data):
    path = save(board, data)
    return [f for f in validate_entry_file(EntryFile(path, board_of(path))).findings if f.check == "leaks"]


def test_private_text_in_an_entry_is_an_error_where_the_snapshot_is(entry, tiny, tmp_path, monkeypatch):
    fd, _bundle, root = tiny
    monkeypatch.setenv("LFB_HOME", str(root))  # the home holding the entry's demo snapshot
    assert _leak_findings(tmp_path / "clean", entry) == []
    private = max(fd.train.all_spans(), key=len)
    leaky = relabel(entry, entry_id="example--leaky")
    leaky["history"][0][0]["note"] = f"best client said: {private}"
    found = _leak_findings(tmp_path / "leaky", leaky)
    assert found and found[0].field.startswith("history[0][0].note"), found
    assert "consecutive words of a private client" in found[0].message


def test_without_the_snapshot_the_search_is_skipped(entry, tiny, tmp_path):
    fd, _bundle, _root = tiny
    leaky = relabel(entry, entry_id="example--leaky")
    leaky["history"][0][0]["note"] = max(fd.train.all_spans(), key=len)
    assert _leak_findings(tmp_path, leaky) == []  # this test's own home has no snapshot
