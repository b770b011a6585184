"""Snapshots the leaderboard knows by content hash, so validation can tell a known snapshot from an edited or
unknown hash without the data. A snapshot is added when it is published (e.g. to the hub); the demos are built
deterministically by `lfb data demo [--prose]`, and tests check that their hashes here are the ones the builds give."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownSnapshot:
    name: str  # the snapshot id entries record as dataset.snapshot
    dataset: str
    content_sha256: str
    source: str  # where to get it


KNOWN_SNAPSHOTS: tuple[KnownSnapshot, ...] = (
    KnownSnapshot("demo", "demo", "d29d205f244a630b795978214bb79df6679051bf9ff705eae2edc8a1a27e7471",
                  "`lfb data demo` (synthetic, built offline and deterministically; demo version 2: window from 2025-01)"),
    KnownSnapshot("demo", "demo", "819a9ec8e51eaef0c7caca79d72db68d670b6a5a8eeda55078e82fe0859a4c2d",
                  "demo version 1 (window from 2024-09; lfb 0.1.0 before the demo moved 4 months later)"),
    KnownSnapshot("demo-prose", "demo", "376f5873e94e735d0feac9234744c1419b05e59119b7f57274bacd2cab76cd2b",
                  "`lfb data demo --prose` (synthetic: demo version 2's records with text SmolLM2-135M wrote, shipped "
                  "as largefedbench/data/demo_prose.jsonl.gz)"),
)


def known_snapshot(content_sha256: str) -> KnownSnapshot | None:
    """The known snapshot with this content hash, or None."""
    return next((s for s in KNOWN_SNAPSHOTS if s.content_sha256 == content_sha256), None)


def known_hashes(name: str, dataset: str) -> list[str]:
    """Content hashes of the known snapshots called ``name`` of ``dataset`` (empty if the name is not known)."""
    return [s.content_sha256 for s in KNOWN_SNAPSHOTS if s.name == name and s.dataset == dataset]
