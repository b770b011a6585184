"""Dated releases: a named set of snapshots (``lfb release 2026q4``) that can be rebuilt and loaded by name.

A release records, for each snapshot, what makes it that snapshot — dataset, window, content hash, sources with
their scraper settings, the cleaning version, span and split settings, the cutoff it was placed after — and a
changelog against the previous release. ``load_snapshot("biorxiv@2026q4")`` loads the release's snapshot and
refuses one whose content does not hash to the release; ``lfb refresh --release 2026q4`` rebuilds it from the
sources. Releases follow a quarterly cadence (``YYYYqN``); any safe name is accepted.

Release files are JSON under ``$LFB_HOME/releases/`` (written there by default) and, for the ones LargeFedBench
publishes, in the package (``largefedbench/data/releases/``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

from largefedbench.errors import InputError, SnapshotError
from largefedbench.io import atomic_write_json
from largefedbench.paths import home_root

__all__ = ["RELEASE_FORMAT", "changelog", "find_release", "list_releases", "load_release_snapshot",
           "release_record", "releases_dir", "split_release_ref", "write_release"]

RELEASE_FORMAT = 1
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")
QUARTERLY = re.compile(r"^\d{4}q[1-4]\Z")
SHIPPED = Path(__file__).resolve().parent / "releases"


def releases_dir(home: Path | str | None = None) -> Path:
    return home_root(home) / "releases"


def check_release_name(name: str) -> None:
    if not NAME.match(name or ""):
        raise InputError(f"release name {name!r}: use lower-case letters, digits, '.', '_' or '-' (the quarterly "
                         "cadence names them YYYYqN, e.g. 2026q4)")


def release_record(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a release keeps of one snapshot's manifest: enough to rebuild it and to check it."""
    window = manifest.get("window") or {}
    cutoff = window.get("after_cutoff_of") or {}
    span = {k: v for k, v in (manifest.get("span") or {}).items() if k in ("tokenizer", "span_tokens", "last_span_min_tokens")}
    return {
        "dataset": manifest["dataset"], "snapshot": manifest["name"], "content_sha256": manifest["content_sha256"],
        "window": {k: window.get(k) for k in ("since", "until", "public_since")},
        "after_cutoff_of": cutoff.get("model") if isinstance(cutoff, dict) else None,
        # each source's scraper version and API (not the request count, which a cached rebuild changes)
        "sources": {name: {k: v for k, v in (info or {}).items() if k in ("scraper_version", "base_url", "generator_version")}
                    for name, info in (manifest.get("sources") or {}).items()},
        "cleaning_version": manifest.get("cleaning_version"),
        "lfb_version": manifest.get("lfb_version"), "span": span,
        "split_ratios": (manifest.get("splits") or {}).get("ratios"), "synthetic": bool(manifest.get("synthetic")),
        "clients": (manifest.get("counts") or {}).get("clients"), "spans": (manifest.get("counts") or {}).get("spans"),
    }


def _release_files(home: Path | str | None) -> list[Path]:
    files = {}
    for folder in (SHIPPED, releases_dir(home)):  # the home's own releases win over shipped ones of the same name
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            files[path.stem] = path
    return [files[name] for name in sorted(files)]


def list_releases(home: Path | str | None = None) -> list[dict[str, Any]]:
    """Every release known here, oldest name first."""
    return [_read(path) for path in _release_files(home)]


def _read(path: Path) -> dict[str, Any]:
    try:
        release = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"release file {path} is not readable JSON ({exc}); remove it or write it again with "
                            "`lfb release`") from None
    if not isinstance(release, dict) or release.get("format") != RELEASE_FORMAT or not isinstance(release.get("snapshots"), list):
        raise SnapshotError(f"release file {path} is not a LargeFedBench release (format {RELEASE_FORMAT}); write it "
                            "again with `lfb release`")
    return release


def find_release(name: str, home: Path | str | None = None) -> dict[str, Any]:
    check_release_name(name)
    for path in _release_files(home):
        if path.stem == name:
            return _read(path)
    known = ", ".join(p.stem for p in _release_files(home)) or "none yet"
    raise SnapshotError(f"no release {name!r} (known: {known}). Write one with `lfb release {name} --snapshots …`, "
                        f"or copy its file into {releases_dir(home)}")


def changelog(previous: dict[str, Any] | None, snapshots: list[dict[str, Any]]) -> list[str]:
    """What changed against ``previous``, one line each: datasets added or dropped, windows, content, versions."""
    if previous is None:
        return ["first release"]
    before = {s["dataset"]: s for s in previous["snapshots"]}
    after = {s["dataset"]: s for s in snapshots}
    lines = [f"{d}: added (window {after[d]['window']['since']} to {after[d]['window']['until']})"
             for d in sorted(set(after) - set(before))]
    lines += [f"{d}: dropped" for d in sorted(set(before) - set(after))]
    for d in sorted(set(before) & set(after)):
        old, new = before[d], after[d]
        if old["window"] != new["window"]:
            lines.append(f"{d}: window {old['window']['since']}..{old['window']['until']} -> "
                         f"{new['window']['since']}..{new['window']['until']}")
        if old["content_sha256"] != new["content_sha256"]:
            diff = {s: (new.get("clients") or {}).get(s, 0) - (old.get("clients") or {}).get(s, 0)
                    for s in ("train", "validation", "test", "public")}
            lines.append(f"{d}: new content {new['content_sha256'][:12]} (was {old['content_sha256'][:12]}; clients "
                         + ", ".join(f"{s} {v:+d}" for s, v in diff.items()) + ")")
        for key in ("cleaning_version", "span", "split_ratios", "after_cutoff_of"):
            if old.get(key) != new.get(key):
                lines.append(f"{d}: {key} {old.get(key)} -> {new.get(key)}")
        versions = [{k: v.get("scraper_version") for k, v in r["sources"].items()} for r in (old, new)]
        if versions[0] != versions[1]:
            lines.append(f"{d}: scrapers {versions[0]} -> {versions[1]}")
    return lines or ["no change"]


def write_release(name: str, manifests: list[dict[str, Any]], *, home: Path | str | None = None,
                  out: Path | None = None, previous: str | None = None) -> tuple[Path, dict[str, Any]]:
    """:func:`new_release`, written."""
    path, release = new_release(name, manifests, home=home, out=out, previous=previous)
    atomic_write_json(path, release)
    return path, release


def new_release(name: str, manifests: list[dict[str, Any]], *, home: Path | str | None = None,
                out: Path | None = None, previous: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Release ``name`` of these snapshots' manifests (one per dataset) with its changelog against ``previous``
    (default: the newest release named before it), and the file it is to be written to; an existing release is
    never overwritten. Nothing is written (``lfb release --push-to-hub`` writes it once every push succeeded)."""
    check_release_name(name)
    if not manifests:
        raise InputError("a release names at least one snapshot: --snapshots biorxiv,congress")
    datasets = [m["dataset"] for m in manifests]
    if len(set(datasets)) != len(datasets):
        raise InputError(f"a release has one snapshot per dataset; these repeat one: {', '.join(datasets)}")
    folder = Path(out) if out is not None else releases_dir(home)
    path = folder / f"{name}.json"
    existing = path if path.exists() else next((p for p in _release_files(home) if p.stem == name), None)
    if existing is not None:
        where = "shipped with LargeFedBench" if existing.parent == SHIPPED else str(existing)
        raise InputError(f"release {name!r} exists already ({where}): a release is immutable; name the next one "
                         f"(e.g. the next quarter), or publish this one with `lfb release {name} --push-to-hub OWNER`")
    earlier = [r for r in list_releases(home) if r["name"] < name]
    prev = find_release(previous, home) if previous else (earlier[-1] if earlier else None)
    snapshots = [release_record(m) for m in sorted(manifests, key=lambda m: m["dataset"])]
    release = {"format": RELEASE_FORMAT, "name": name,
               "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "cadence": "quarterly" if QUARTERLY.match(name) else "unscheduled",
               "previous": prev["name"] if prev else None, "changes": changelog(prev, snapshots),
               "snapshots": snapshots}
    return path, release


def split_release_ref(ref: str) -> tuple[str, str] | None:
    """``"biorxiv@2026q4"`` -> ``("biorxiv", "2026q4")``; None for a reference without a release."""
    head, sep, name = ref.rpartition("@")
    return (head, name) if sep and head and NAME.match(name) and "://" not in ref else None


def release_snapshot(dataset_or_name: str, release: dict[str, Any]) -> dict[str, Any]:
    """The release's record for a dataset (or a snapshot name) it contains."""
    for record in release["snapshots"]:
        if dataset_or_name in (record["dataset"], record["snapshot"]):
            return record
    names = ", ".join(r["dataset"] for r in release["snapshots"])
    raise SnapshotError(f"release {release['name']!r} has no {dataset_or_name!r} snapshot (it has: {names})")


def load_release_snapshot(ref: str, home: Path | str | None, load_folder) -> Any:
    """Load ``DATASET@RELEASE`` with ``load_folder(path)``; refuse it unless its content hashes to the release."""
    from largefedbench.data.snapshot import verify_snapshot
    from largefedbench.paths import snapshots_dir

    dataset, name = split_release_ref(ref)
    release = find_release(name, home)
    record = release_snapshot(dataset, release)
    folder = snapshots_dir(home) / record["snapshot"]
    if not (folder / "manifest.json").is_file():
        raise SnapshotError(f"{ref}: the snapshot {record['snapshot']!r} of release {name} is not built here. "
                            f"Rebuild it from the sources with `lfb refresh --release {name}`, or load a published "
                            "copy with hf://OWNER/NAME@" + name)
    fd = load_folder(folder)
    claimed = fd.manifest.get("content_sha256")
    if claimed != record["content_sha256"]:
        raise SnapshotError(f"{ref}: the snapshot at {folder} holds content {str(claimed)[:12]}…, not the release's "
                            f"{record['content_sha256'][:12]}…; rebuild it with `lfb refresh --release {name}`")
    verify_snapshot(fd, root=home)  # its data must hash to what its manifest (= the release) says
    return fd
