"""Reading a snapshot back as a federated dataset: clients, each with its span texts and metadata."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.data.snapshot import ALL_SPLITS, list_snapshots, read_snapshot_data
from largefedbench.errors import SnapshotError
from largefedbench.paths import snapshots_dir

log = logging.getLogger(__name__)
HUB_PREFIX = "hf://"


@dataclass(frozen=True)
class Client:
    id: str
    spans: list[str]
    meta: dict[str, Any]


class ClientSplit:
    """The clients of one split, backed by a memory-mapped Arrow table."""

    def __init__(self, name: str, table) -> None:
        self.name = name
        self.table = table
        self.ids: list[str] = table["id"]
        self._row = {cid: i for i, cid in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, client_id: str) -> bool:
        return client_id in self._row

    def _index(self, client_id: str) -> int:
        try:
            return self._row[client_id]
        except KeyError:
            raise SnapshotError(f"client {client_id!r} is not in the {self.name} split") from None

    def spans(self, client_id: str) -> list[str]:
        return self.table[self._index(client_id)]["spans"]

    def client(self, client_id: str) -> Client:
        row = dict(self.table[self._index(client_id)])
        return Client(row.pop("id"), row.pop("spans"), row)

    def __iter__(self) -> Iterator[Client]:
        for row in self.table:
            row = dict(row)
            yield Client(row.pop("id"), row.pop("spans"), row)

    def span_counts(self) -> np.ndarray:
        return np.asarray(self.table["n_spans"], dtype=np.int64)

    def all_spans(self) -> list[str]:
        """Every span of every client of the split, in client order."""
        return [s for spans in self.table["spans"] for s in spans]

    def column(self, name: str) -> list[Any]:
        return self.table[name]


class FederatedDataset:
    """A loaded snapshot: ``fd["train"]``, ``fd.validation``, ``fd.public`` … and its manifest."""

    def __init__(self, path: Path, manifest: dict[str, Any], splits: dict[str, ClientSplit]) -> None:
        self.path = path
        self.manifest = manifest
        self.splits = splits

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def synthetic(self) -> bool:
        return bool(self.manifest.get("synthetic"))

    def __getitem__(self, split: str) -> ClientSplit:
        try:
            return self.splits[split]
        except KeyError:
            raise SnapshotError(f"snapshot {self.name} has no split {split!r}; it has {', '.join(self.splits)}") from None

    train = property(lambda self: self["train"])
    validation = property(lambda self: self["validation"])
    test = property(lambda self: self["test"])
    public = property(lambda self: self["public"])

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        return f"FederatedDataset({self.name!r}, {sizes})"


def resolve_snapshot(ref: str | Path, root: Path | None = None) -> Path:
    """Find a snapshot folder from a path, a name, a unique name prefix or a dataset name (newest wins)."""
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "manifest.json").is_file():
            raise SnapshotError(f"{path} is a folder but not a snapshot (no manifest.json)")
        return path
    name = str(ref)
    exact = snapshots_dir(root) / name
    if (exact / "manifest.json").is_file():
        return exact
    known = list_snapshots(root)
    matches = [m for m in known if m["name"].startswith(name) or m["dataset"] == name]
    if matches:
        if len(matches) > 1:
            log.info("%r matches %d snapshots; using the newest, %s", name, len(matches), matches[0]["name"])
        return Path(matches[0]["path"])
    names = ", ".join(m["name"] for m in known[:10]) or "none yet"
    raise SnapshotError(
        f"no snapshot {name!r} under {snapshots_dir(root)} (known: {names}). Build one with `lfb refresh`, "
        "or `lfb data demo` for the offline demo; or give a snapshot folder's path."
    )


def load_snapshot(ref: str | Path = "demo", *, home: Path | None = None) -> FederatedDataset:
    """Load a snapshot by name, folder, ``DATASET@RELEASE`` (a dated release, e.g. ``biorxiv@2026q4``: refused unless
    its content hashes to the release) or ``hf://owner/repo[@revision]`` (a published LargeFedBench dataset) from the
    LargeFedBench ``home`` (default ``$LFB_HOME``).

    The demo snapshot is built on first use (deterministic, a few seconds).
    """
    from largefedbench.data.releases import load_release_snapshot, split_release_ref

    # a published tag's folder REPO@TAG, given as a path (a separator in it): a bare DATASET@RELEASE is the release,
    # checked against it, even where a folder of that name sits in the working directory
    folder_ref = isinstance(ref, str) and ("/" in ref or os.sep in ref) and (Path(ref).expanduser() / "manifest.json").is_file()
    if isinstance(ref, str) and not ref.startswith(HUB_PREFIX) and split_release_ref(ref) and not folder_ref:
        return load_release_snapshot(ref, home, _load_folder)  # DATASET@RELEASE, checked against the release
    if isinstance(ref, str) and ref.startswith(HUB_PREFIX):
        from largefedbench.data.hub import download_snapshot

        repo, _, revision = ref[len(HUB_PREFIX):].partition("@")
        path = download_snapshot(repo, revision=revision or None)
    elif str(ref) == "demo" and not (snapshots_dir(home) / "demo" / "manifest.json").is_file():
        from largefedbench.data.demo import build_demo

        log.info("the demo snapshot is not built yet; building it now")
        path = build_demo(root=home, progress=False).path
    elif str(ref) == "demo-prose" and not (snapshots_dir(home) / "demo-prose" / "manifest.json").is_file():
        from largefedbench.data.demo import build_prose_demo

        log.info("the demo-prose snapshot is not built yet; building it now")
        path = build_prose_demo(root=home, progress=False).path
    else:
        path = resolve_snapshot(ref, home)
        if str(ref) == "demo":
            from largefedbench.data.demo import check_demo_version

            check_demo_version(path)
    return _load_folder(path)


def _load_folder(path: Path) -> FederatedDataset:
    manifest, dd = read_snapshot_data(path)  # a damaged snapshot raises SnapshotError saying how to rebuild it
    return FederatedDataset(path, manifest, {s: ClientSplit(s, dd[s]) for s in ALL_SPLITS})
