"""Atomic writes keep the permissions an ordinary write would give (a shared home stays readable)."""

import os
import stat

from largefedbench.io import atomic_write_json, atomic_write_text


def test_atomic_writes_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.md", "hello")
        atomic_write_json(tmp_path / "b.json", {"x": 1})
        os.umask(0o077)
        atomic_write_text(tmp_path / "c.md", "private")
    finally:
        os.umask(old)
    mode = lambda name: stat.S_IMODE((tmp_path / name).stat().st_mode)  # noqa: E731
    assert mode("a.md") == mode("b.json") == 0o644
    assert mode("c.md") == 0o600
    assert (tmp_path / "a.md").read_text() == "hello"
