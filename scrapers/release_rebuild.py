"""``lfb refresh --release NAME``: rebuild a release's snapshots from their sources and check them against it."""

from __future__ import annotations

import shutil
from pathlib import Path

from largefedbench.scrapers.mirror import MIRROR_SCHEME
from largefedbench.scrapers.refresh import DATASET_OF, RefreshPlan, refresh

from largefedbench.data.releases import find_release
from largefedbench.data.snapshot import BuildResult
from largefedbench.data.spans import SpanSettings
from largefedbench.data.splits import SplitRatios
from largefedbench.data.windows import Window
from largefedbench.errors import InputError, SnapshotError

__all__ = ["rebuild_release"]


def plan_for(record: dict, **options) -> RefreshPlan:
    """The refresh that made a release's snapshot (``options``: base_urls, rate_limit, refresh_cache)."""
    sources = list(record["sources"])
    unknown = [s for s in sources if s not in DATASET_OF]
    if record.get("synthetic") or unknown:
        raise InputError(f"release snapshot {record['snapshot']!r} was not scraped (sources {', '.join(sources)}): "
                         "build the demos with `lfb data demo` (they are deterministic)")
    mirrors = {source: Path(info["base_url"][len(MIRROR_SCHEME):]) for source, info in record["sources"].items()
               if str((info or {}).get("base_url") or "").startswith(MIRROR_SCHEME)}
    return RefreshPlan(window=Window.from_dict(record["window"]), sources=sources, span=SpanSettings(**record["span"]),
                       splits=SplitRatios(**record["split_ratios"]), after_cutoff_of=record.get("after_cutoff_of"),
                       name=record["snapshot"], mirrors=mirrors, **options)


def rebuild_release(name: str, *, home: Path | None = None, progress: bool = True, **options) -> list[BuildResult]:
    """Rebuild every snapshot of release ``name``; a rebuild whose content differs from the release is removed
    and reported (the sources changed since), never kept under the release's snapshot name."""
    release = find_release(name, home)
    results = []
    for record in release["snapshots"]:
        (built,) = refresh(plan_for(record, **options), home=home, progress=progress)
        digest = built.manifest["content_sha256"]
        if digest != record["content_sha256"]:
            if built.created:
                shutil.rmtree(built.path, ignore_errors=True)
            raise SnapshotError(
                f"release {name}: {record['dataset']} rebuilt from its sources hashes to {digest[:12]}…, not the "
                f"release's {record['content_sha256'][:12]}…: the sources return other records now (edits, "
                "withdrawals, a changed API). Nothing was kept; load the published copy (hf://OWNER/NAME@"
                f"{name}) to get the release's exact data")
        results.append(built)
    return results
