"""Private text in an entry: when the entry's snapshot is on this machine, every string of the entry (info, history,
deviations, notes) is searched for the snapshot's private word runs (:mod:`largefedbench.data.private_text`).

Only the entry's own snapshot, found by its content hash under the home's snapshots folder, is used; without it the
check is skipped (the board can be validated anywhere, the search only where the data is)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from largefedbench.data.private_text import LeakSearch, PrivateRuns
from largefedbench.leaderboard.findings import Finding, error


@lru_cache(maxsize=4)
def _private_runs(path: str, public_kind: str) -> PrivateRuns:
    """The private word runs of the snapshot at ``path``, less what its methods may read (public and validation
    splits, and the generic public corpus when the run used it)."""
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.public_corpus import load_public_corpus

    fd = load_snapshot(Path(path))
    readable = [t for split in ("public", "validation") for t in fd[split].all_spans()]
    if public_kind == "generic":
        readable += list(load_public_corpus("generic", fd).spans)
    return PrivateRuns(fd.train.all_spans(), readable)


def _snapshot_path(content_sha256: str) -> str | None:
    from largefedbench.data.snapshot import list_snapshots

    return next((m["path"] for m in list_snapshots() if m.get("content_sha256") == content_sha256), None)


def check_leaks(entry: Any, data: dict[str, Any]) -> list[Finding]:
    """Errors for private word runs in the entry's strings, if its snapshot is here."""
    path = _snapshot_path(entry.dataset.content_sha256)
    if path is None:
        return []
    public_kind = entry.public.kind if getattr(entry, "public", None) is not None else "split"
    search = LeakSearch(_private_runs(path, public_kind))
    search.value(data, "entry")
    return [error("leaks", leak.where.removeprefix("entry."), f"holds {search.runs.n} consecutive words of a private "
                  f"client that no public text has: {leak.what!r}", "An entry may only carry what the method released "
                  "through fed.private_sum and public facts; run `lfb smoke` on the method to find the channel")
            for leak in search.leaks[:5]]
