"""What every scraper shares: identity, configuration of its base URL, and its HTTP client."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import ClassVar

from largefedbench.data.records import Record
from largefedbench.data.windows import Window
from largefedbench.paths import raw_cache_dir

from .cache import Checkpoint, RawCache
from .http import HttpClient, HttpSettings


class Scraper:
    """Base class of one source's scraper.

    A subclass sets the class attributes and implements :meth:`fetch`, which returns the records of the
    window's fetch range (public period + window) and the rejected records counted by reason. All network
    access goes through ``self.client`` (raw responses cached, retries, rate limit).
    """

    source: ClassVar[str]  # short name used on the CLI: biorxiv, us, uk, ca
    dataset: ClassVar[str]  # the snapshot it feeds: biorxiv or congress
    version: ClassVar[str]  # bump when parsing or source-specific cleaning changes
    default_url: ClassVar[str]
    url_env: ClassVar[str]
    license_note: ClassVar[str]

    def __init__(self, client: HttpClient, *, refresh: bool = False) -> None:
        self.client = client
        self.refresh = refresh  # re-download even what the raw cache holds

    @classmethod
    def base_url(cls, override: str | None = None) -> str:
        return (override or os.environ.get(cls.url_env) or cls.default_url).rstrip("/")

    @classmethod
    def secrets(cls) -> dict[str, str]:
        """Secret values (API keys) this source sends; never cached, logged or shown."""
        return {}

    @classmethod
    def create(
        cls,
        *,
        base_url: str | None = None,
        root: Path | None = None,
        settings: HttpSettings | None = None,
        refresh: bool = False,
        **options,
    ) -> "Scraper":
        cache = RawCache(raw_cache_dir(root), cls.source)
        client = HttpClient(cls.source, cls.base_url(base_url), cache, settings, secrets=cls.secrets())
        return cls(client, refresh=refresh, **options)

    def checkpoint(self, name: str) -> Checkpoint:
        return Checkpoint(self.client.cache.dir / "checkpoints" / f"{name}.json")

    def describe(self) -> dict:
        """What goes into the manifest's ``sources`` entry."""
        return {
            "scraper_version": self.version,
            "base_url": self.client.base_url,
            "license_note": self.license_note,
            "requests_made": self.client.requests_made,
        }

    def fetch(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        raise NotImplementedError
