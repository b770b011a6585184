"""What every scraper shares: identity, configuration of its base URL, and its HTTP client."""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path
from typing import ClassVar

from largefedbench.data.records import Record
from largefedbench.data.windows import Window
from largefedbench.paths import raw_cache_dir

from .cache import Checkpoint, RawCache
from .http import HttpClient, HttpSettings

log = logging.getLogger(__name__)


def unencodable_field(record: Record) -> str | None:
    """The first text field of ``record`` that UTF-8 cannot encode, or None.

    A JSON escape such as ``"\\ud800"`` decodes to a lone surrogate: a Python string, but one that no tokenizer,
    Parquet or JSON file can store.
    """
    for name, value in record.to_dict().items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return name
    return None


def keep_encodable(records: list[Record], rejected: Counter) -> list[Record]:
    """``records`` without those holding unencodable text, which are counted as ``unencodable_text``."""
    kept = []
    for record in records:
        name = unencodable_field(record)
        if name is None:
            kept.append(record)
            continue
        log.warning("dropping record %a (%s): its %s is not valid Unicode (a lone surrogate such as \\ud800)",
                    record.id, record.url, name)
        rejected["unencodable_text"] += 1
    return kept


class Scraper:
    """Base class of one source's scraper.

    A subclass sets the class attributes and implements :meth:`fetch_records`, which returns the records of the
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
        rate_limit: float | None = None,
        refresh: bool = False,
        **options,
    ) -> Scraper:
        """The scraper with its HTTP client: ``root`` is the LargeFedBench home (raw cache), ``rate_limit`` the
        requests per second when no ``settings`` are given (default ``$LFB_RATE_LIMIT`` or 1)."""
        if settings is None and rate_limit is not None:
            settings = HttpSettings(rate_limit=rate_limit)
        cache = RawCache(raw_cache_dir(root), cls.source)
        client = HttpClient(cls.source, cls.base_url(base_url), cache, settings, secrets=cls.secrets(),
                            url_env=cls.url_env)
        return cls(client, refresh=refresh, **options)

    def checkpoint(self, name: str) -> Checkpoint:
        self.client.cache.open()  # checkpoints live in the cache: its lock protects their temp files too
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
        """The records of the window's fetch range and the rejected ones by reason.

        Records whose text cannot be stored are rejected here, for every source: one bad record must not fail
        the snapshot (its response stays in the raw cache, so it would fail every later run too).
        """
        records, rejected = self.fetch_records(window, progress=progress)
        return keep_encodable(records, rejected), rejected

    def fetch_records(self, window: Window, *, progress: bool = True) -> tuple[list[Record], Counter]:
        """What a subclass implements: the records as parsed and cleaned, and the rejected ones by reason."""
        raise NotImplementedError
