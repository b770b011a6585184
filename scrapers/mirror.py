"""Mirror sources: build a snapshot from a folder of a source's real records copied offline (``lfb refresh
--mirror DIR``), through the same parsing and cleaning as the live scraper.

A mirror is a folder of files copied byte for byte from a public repository (``shared/real/``): its parent's
README.md names, per folder, the repository and commit it came from. A mirror source reads the files whose dates
fall in the window's fetch range and records, in the manifest's ``sources`` entry, that the snapshot is
mirror-derived: the folder, the sha256 of every file it read, and the upstream repository and commit.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import re
from collections import Counter
from pathlib import Path
from typing import ClassVar

from largefedbench.data.records import Record
from largefedbench.data.windows import Window
from largefedbench.errors import InputError

from .base import keep_encodable

log = logging.getLogger(__name__)

#: CLI source name -> mirror class, imported only when used.
MIRRORS: dict[str, str] = {
    "us": "largefedbench.scrapers.us_congress_mirror:UsCongressMirror",
    "arxiv": "largefedbench.scrapers.arxiv_mirror:ArxivMirror",
}
#: a mirror source's ``base_url`` in the manifest: this prefix, then the folder
MIRROR_SCHEME = "mirror:"
#: ``owner/name @ <40 hex>`` in a README table row
_UPSTREAM = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+) @ (?P<commit>[0-9a-f]{40})")


def open_mirror(source: str, folder: Path | str) -> MirrorSource:
    """The mirror source ``source`` reading ``folder``; :class:`InputError` for an unknown source or folder."""
    if source not in MIRRORS:
        raise InputError(f"no mirror reader for source {source!r}; --mirror works with --sources "
                         f"{' or '.join(MIRRORS)}")
    module, _, attr = MIRRORS[source].partition(":")
    return getattr(importlib.import_module(module), attr)(Path(folder))


def read_upstream(folder: Path) -> dict[str, str] | None:
    """The repository and commit the mirror was copied from, from the README.md beside the folder (the row that
    names the folder), or None when no README names it."""
    readme = folder.parent / "README.md"
    if not readme.is_file():
        return None
    for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
        if f"`{folder.name}/`" in line or f"`{folder.name}`" in line:
            if m := _UPSTREAM.search(line):
                return {"repository": m["repo"], "commit": m["commit"], "readme": str(readme)}
    return None


class MirrorSource:
    """Base of a mirror reader: a subclass lists its files with dates and turns the files of the fetch range
    into records (and rejected counts by reason), as a live scraper's ``fetch_records`` does."""

    source: ClassVar[str]
    dataset: ClassVar[str]
    version: ClassVar[str]  # bump when reading the mirror's files changes
    license_note: ClassVar[str]
    what: ClassVar[str]  # the files a folder of this mirror holds, for error messages

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise InputError(f"--mirror {self.folder}: no such folder; give the folder that holds {self.what}")
        self.read: dict[str, str] = {}  # file name -> sha256 of every file read
        self.notes: list[str] = []  # what the mirror lacks or had to repair, for the manifest

    def fetch(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        records, rejected = self.fetch_records(window, progress=progress)
        return keep_encodable(records, rejected), rejected

    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        raise NotImplementedError

    def read_bytes(self, path: Path) -> bytes:
        """A file's bytes, its hash recorded for the manifest."""
        data = path.read_bytes()
        self.read[path.name] = hashlib.sha256(data).hexdigest()
        return data

    def describe(self) -> dict:
        """What goes into the manifest's ``sources`` entry: mirror-derived, from which folder, files and commit."""
        upstream = read_upstream(self.folder)
        if upstream is None:
            log.warning("%s: no README.md beside the folder names its upstream repository and commit; the manifest "
                        "records the files' hashes only", self.folder)
        digest = hashlib.sha256("".join(f"{n}\t{h}\n" for n, h in sorted(self.read.items())).encode()).hexdigest()
        return {
            "scraper_version": self.version,
            "base_url": f"{MIRROR_SCHEME}{self.folder.resolve()}",
            "license_note": self.license_note,
            "requests_made": 0,
            "mirror": {
                "derived": "mirror-derived: records read from a folder of files copied from the source, not "
                           "scraped live",
                "folder": str(self.folder.resolve()),
                "upstream": upstream,
                "files_sha256": dict(sorted(self.read.items())),
                "files_digest": digest,
                "notes": self.notes,
            },
        }
