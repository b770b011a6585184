"""One HTTP layer for every scraper: polite, patient, resumable and secret-safe.

- a ``requests.Session`` with timeouts and a descriptive User-Agent;
- retries with exponential backoff on connection errors, timeouts, 429 (honouring ``Retry-After``), 5xx and
  HTTP 200 with an empty body (which some sources send under load: it is never read as "no results");
- a rate limit (default one request per second, ``LFB_RATE_LIMIT`` requests/second or a CLI flag);
- every response stored raw on disk (:class:`RawCache`) *before* it is parsed; a response that fails to parse
  is quarantined and fetched again, and only then reported;
- secrets (API keys) are sent as query parameters or headers but never appear in cache keys, logs or errors.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar
from urllib.parse import urlencode

import requests

from largefedbench import __version__
from largefedbench.errors import SourceError

from .cache import RawCache, cache_key

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class MalformedResponseError(SourceError):
    """The source answered, but every download of the response failed to parse (not a network failure).

    A scraper may skip that one file and keep going; a plain :class:`SourceError` (the network gave up) stops
    the refresh, which resumes from the stored responses.
    """


def default_rate_limit() -> float:
    """Requests per second: ``$LFB_RATE_LIMIT`` or 1.0."""
    value = os.environ.get("LFB_RATE_LIMIT", "1.0")
    try:
        rate = float(value)
    except ValueError:
        raise SourceError(f"LFB_RATE_LIMIT={value!r} is not a number; set it to requests per second, e.g. 1") from None
    if rate <= 0:
        raise SourceError(f"LFB_RATE_LIMIT={value!r} must be > 0 (requests per second)")
    return rate


def user_agent() -> str:
    contact = os.environ.get("LFB_CONTACT", "").strip()
    ua = f"LargeFedBench/{__version__} (research dataset builder; python-requests/{requests.__version__})"
    return f"{ua} contact: {contact}" if contact else ua


@dataclass
class HttpSettings:
    """How patient and how polite the client is. Defaults suit the public APIs LargeFedBench reads."""

    rate_limit: float = field(default_factory=default_rate_limit)  # requests per second
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_attempts: int = 6  # per request, network faults and retryable statuses
    parse_attempts: int = 3  # fresh downloads of a response that does not parse
    backoff_base: float = 1.0  # seconds; doubled each attempt
    backoff_max: float = 60.0
    max_retry_after: float = 600.0  # never wait longer than this on one Retry-After


class HttpClient:
    """Fetches ``base_url + path`` for one source through the raw cache."""

    def __init__(
        self,
        source: str,
        base_url: str,
        cache: RawCache,
        settings: HttpSettings | None = None,
        *,
        secrets: dict[str, str] | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source = source
        self.base_url = base_url.rstrip("/")
        self.cache = cache
        self.settings = settings or HttpSettings()
        self.secrets = {k: v for k, v in (secrets or {}).items() if v}
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = user_agent()
        self.sleep = sleep
        self._last_request = -float("inf")
        self.requests_made = 0

    # -- public -----------------------------------------------------------------------------------
    def fetch(
        self,
        path: str,
        parse: Callable[[bytes], T],
        *,
        params: dict[str, Any] | None = None,
        secret_params: tuple[str, ...] = (),
        secret_headers: dict[str, str] | None = None,
        key: str | None = None,
        refresh: bool = False,
        missing_ok: bool = False,
    ) -> T | None:
        """GET ``path`` (stored raw before parsing) and return ``parse(body)``.

        ``secret_params`` names entries of ``self.secrets`` sent as query parameters (never cached or
        logged). A stored response is used without the network unless ``refresh``. A body that ``parse``
        rejects (raises ``ValueError``) is quarantined and downloaded again up to ``parse_attempts`` times,
        then reported with its URL. With ``missing_ok`` a 404 returns ``None``.
        """
        key = key or cache_key(path, params)
        shown = self.display_url(path, params)
        error: Exception | None = None
        for attempt in range(self.settings.parse_attempts):
            body = None if (refresh or attempt > 0) else self.cache.get(key)
            if body is None:
                query = dict(params or {})
                query.update({name: self.secrets[name] for name in secret_params if name in self.secrets})
                headers = {h: self.secrets[s] for h, s in (secret_headers or {}).items() if s in self.secrets}
                body = self._download(path, query, headers, shown, missing_ok=missing_ok)
                if body is None:
                    return None
                self.cache.put(key, body)
            try:
                return parse(body)
            except ValueError as exc:  # json.JSONDecodeError, XML syntax errors and parser checks
                error = exc
                kept = self.cache.quarantine(key)
                log.warning("%s: response did not parse (%s); kept at %s, fetching again", shown, self.redact(str(exc)), kept)
        raise MalformedResponseError(
            f"{shown}: the response could not be parsed after {self.settings.parse_attempts} downloads "
            f"({self.redact(str(error))}). The last one is kept at {self.cache.path(key).with_suffix('.bad')}. "
            "Records fetched so far are kept; run the same refresh again later to resume, or report the "
            "file if the source changed its format."
        )

    def display_url(self, path: str, params: dict[str, Any] | None = None) -> str:
        """The URL as it may be shown to people: without secret parameters."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        return f"{url}?{urlencode(params)}" if params else url

    def redact(self, text: str) -> str:
        for value in self.secrets.values():
            text = text.replace(value, "***")
        return text

    # -- internals --------------------------------------------------------------------------------
    def _wait_for_rate_limit(self) -> None:
        interval = 1.0 / self.settings.rate_limit
        wait = self._last_request + interval - time.monotonic()
        if wait > 0:
            self.sleep(wait)
        self._last_request = time.monotonic()

    def _backoff(self, attempt: int) -> float:
        delay = min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt)
        return delay * (1.0 + 0.1 * random.random())

    def _retry_after(self, response: requests.Response, attempt: int) -> float:
        value = response.headers.get("Retry-After")
        if value:
            value = value.strip()
            if value.isdigit():
                return min(float(value), self.settings.max_retry_after)
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):  # an unreadable Retry-After: fall back to our own backoff
                when = None
            if when is not None:
                return min(max(0.0, when.timestamp() - time.time()), self.settings.max_retry_after)
        return self._backoff(attempt)

    def _download(
        self, path: str, query: dict[str, Any], headers: dict[str, str], shown: str, *, missing_ok: bool
    ) -> bytes | None:
        url = f"{self.base_url}/{path.lstrip('/')}"
        problem = "no attempt was made"
        for attempt in range(self.settings.max_attempts):
            self._wait_for_rate_limit()
            self.requests_made += 1
            try:
                response = self.session.get(
                    url,
                    params=query or None,
                    headers=headers or None,
                    timeout=(self.settings.connect_timeout, self.settings.read_timeout),
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                problem = f"{type(exc).__name__}: {self.redact(str(exc))}"
                delay = self._backoff(attempt)
            else:
                status = response.status_code
                if status == 200 and response.content.strip():
                    return response.content
                if status == 404 and missing_ok:
                    return None
                if status == 200:
                    problem = "HTTP 200 with an empty body"
                    delay = self._backoff(attempt)
                elif status == 429:
                    problem = "HTTP 429 Too Many Requests"
                    delay = self._retry_after(response, attempt)
                elif status in RETRY_STATUSES or status >= 500:
                    problem = f"HTTP {status}"
                    delay = self._retry_after(response, attempt) if "Retry-After" in response.headers else self._backoff(attempt)
                else:
                    raise SourceError(
                        f"{shown}: HTTP {status} ({response.reason}). Check the base URL and the dates "
                        f"(the {self.source} base URL can be set with its LFB_*_URL variable)."
                    )
            if attempt + 1 < self.settings.max_attempts:
                log.warning("%s: %s; retrying in %.1f s (attempt %d/%d)", shown, problem, delay, attempt + 1, self.settings.max_attempts)
                self.sleep(delay)
        raise SourceError(
            f"{shown}: {problem} after {self.settings.max_attempts} attempts. Records fetched so far are kept; "
            f"run the same refresh again to resume, lower the rate (LFB_RATE_LIMIT) or check the network."
        )
