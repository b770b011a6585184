"""One HTTP layer for every scraper: polite, patient, resumable and secret-safe.

- a ``requests.Session`` with timeouts and a descriptive User-Agent;
- retries with exponential backoff on connection errors, timeouts, 429 (honouring ``Retry-After``), 5xx and
  HTTP 200 with an empty body (which some sources send under load: it is never read as "no results");
- a rate limit (default one request per second, ``LFB_RATE_LIMIT`` requests/second or a CLI flag);
- bounds on one response: an overall deadline (``LFB_RESPONSE_DEADLINE``, headers included, not only per-read
  timeouts: :mod:`.deadline`), a size cap on the body (``LFB_MAX_RESPONSE_MB``, enforced while streaming) and a
  cap on one ``Retry-After`` wait (``LFB_MAX_RETRY_AFTER``: a server asking for longer stops the refresh at once,
  to be resumed later);
- a body cut short mid-transfer, or labelled gzip but not decoding (a flaky proxy may garble one response), is
  retried like a dropped connection and reported after the last attempt; a redirect loop and a body over the cap
  are reported, not retried;
- every response stored raw on disk (:class:`RawCache`) *before* it is parsed; a response that fails to parse
  is quarantined and fetched again, and only then reported;
- secrets (API keys) are sent as query parameters or headers but never appear in cache keys, logs or errors,
  are redacted from stored bodies, and are never sent to another host: a redirect off the configured host is
  refused for a request that carries one (followed, without secrets, for one that does not).
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus, urlencode, urljoin, urlsplit

import requests
import urllib3.exceptions

from largefedbench import __version__
from largefedbench.errors import InputError, SourceError

from .cache import RawCache, cache_key
from .deadline import Deadline, watched_session

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
READ_CHUNK = 64 * 1024  # bytes per read of a body (decoded): the deadline and the cap are checked between reads
_DEFAULT_PORTS = {"http": 80, "https": 443}


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
        rate = math.nan
    if not (math.isfinite(rate) and rate > 0):  # nan and inf parse as floats but are no rate
        raise InputError(f"LFB_RATE_LIMIT={value!r}: give requests per second as a finite number > 0, e.g. 1 "
                         "(or unset it for the default of 1)")
    return rate


def env_limit(name: str, default: float, what: str) -> float:
    """A positive, finite number from ``$name`` (``default`` when unset); a clear error otherwise."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{name}={value!r} is not a number; set it to {what}") from None
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"{name}={value!r} must be a positive, finite number ({what})")
    return number


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
    # A server asking to wait longer than this (Retry-After) stops the refresh instead; run it again later.
    max_retry_after: float = field(
        default_factory=lambda: env_limit("LFB_MAX_RETRY_AFTER", 120.0, "the longest Retry-After to wait, in seconds"))
    # Overall time for one response (connection, headers, body): a timer cuts the connection when it passes, so a
    # server dripping its headers or body a byte at a time (each read within read_timeout) is stopped too.
    response_deadline: float = field(
        default_factory=lambda: env_limit("LFB_RESPONSE_DEADLINE", 300.0, "seconds allowed for one whole response"))
    max_body_bytes: int = field(  # a larger body is refused (streamed, never read whole first)
        default_factory=lambda: int(env_limit("LFB_MAX_RESPONSE_MB", 64.0, "the largest response body in MiB")
                                    * 1024 * 1024))


class _Transient(Exception):
    """A fault worth another attempt: the body was cut short or did not decode, or the response outlived its deadline."""


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
        url_env: str | None = None,
    ) -> None:
        self.source = source
        self.url_env = url_env or "its LFB_*_URL variable"  # where users set the base URL, for messages
        self.base_url = base_url.rstrip("/")
        self.cache = cache
        self.settings = settings or HttpSettings()
        self.secrets = {k: v for k, v in (secrets or {}).items() if v}
        self.session = session or watched_session()
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
                secret = bool(headers) or any(name in self.secrets for name in secret_params)
                body = self._download(path, query, headers, shown, missing_ok=missing_ok, secret=secret)
                if body is None:
                    return None
                body = self.redact_bytes(body)  # a source may echo the key (e.g. in nextPage URLs)
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

    def _secret_forms(self) -> list[str]:
        """Every secret as sent and as it appears inside URLs, longest first."""
        forms = {f for v in self.secrets.values() for f in (v, quote(v, safe=""), quote_plus(v))}
        return sorted(forms, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for value in self._secret_forms():
            text = text.replace(value, "***")
        return text

    def redact_bytes(self, body: bytes) -> bytes:
        for value in self._secret_forms():
            body = body.replace(value.encode(), b"***")
        return body

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

    def _asked_wait(self, value: str | None) -> float | None:
        """Seconds a ``Retry-After`` value asks for (a number or an HTTP date), or None if absent or unreadable."""
        value = (value or "").strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value) if value else None
        except (TypeError, ValueError):  # an unreadable Retry-After: fall back to our own backoff
            when = None
        return None if when is None else max(0.0, when.timestamp() - time.time())

    def _retry_delay(self, status: int, retry_after: str | None, attempt: int, shown: str) -> float:
        """The wait before the next attempt: the server's ``Retry-After`` up to the cap, else our backoff."""
        asked = self._asked_wait(retry_after)
        if asked is None:
            return self._backoff(attempt)
        if asked > self.settings.max_retry_after:
            raise SourceError(
                f"{shown}: HTTP {status}; the server asks to wait {asked:.0f} s before the next request "
                f"(Retry-After), longer than this client waits ({self.settings.max_retry_after:g} s, "
                "LFB_MAX_RETRY_AFTER). Records fetched so far are kept; run the same refresh again after that time "
                "to resume, or raise LFB_MAX_RETRY_AFTER."
            )
        return asked

    def _download(
        self, path: str, query: dict[str, Any], headers: dict[str, str], shown: str, *, missing_ok: bool,
        secret: bool = False,
    ) -> bytes | None:
        url = f"{self.base_url}/{path.lstrip('/')}"
        problem = "no attempt was made"
        for attempt in range(self.settings.max_attempts):
            try:
                status, reason, retry_after, body = self._attempt(url, query, headers, shown, secret)
            except (requests.ConnectionError, requests.Timeout, _Transient) as exc:
                problem = str(exc) if isinstance(exc, _Transient) else f"{type(exc).__name__}: {self.redact(str(exc))}"
                delay = self._backoff(attempt)
            else:
                if status == 200 and body.strip():
                    return body
                if status == 404 and missing_ok:
                    return None
                if status == 200:
                    problem = "HTTP 200 with an empty body"
                    delay = self._backoff(attempt)
                elif status in RETRY_STATUSES or status >= 500:
                    problem = "HTTP 429 Too Many Requests" if status == 429 else f"HTTP {status}"
                    delay = self._retry_delay(status, retry_after, attempt, shown)
                else:
                    raise SourceError(
                        f"{shown}: HTTP {status} ({reason}). Check the base URL and the dates "
                        f"(the {self.source} base URL can be set with {self.url_env})."
                    )
            if attempt + 1 < self.settings.max_attempts:
                log.warning("%s: %s; retrying in %.1f s (attempt %d/%d)", shown, problem, delay, attempt + 1, self.settings.max_attempts)
                self.sleep(delay)
        raise SourceError(
            f"{shown}: {problem} after {self.settings.max_attempts} attempts. Records fetched so far are kept; "
            f"run the same refresh again to resume, lower the rate (--rate-limit or LFB_RATE_LIMIT) or check the network."
        )

    def _attempt(
        self, url: str, query: dict[str, Any], headers: dict[str, str], shown: str, secret: bool
    ) -> tuple[int, str, str | None, bytes]:
        """One GET, redirects included: ``(status, redacted reason, Retry-After, body)``; the body only for 200.
        The whole of it runs under the response deadline, which cuts the connection when it passes."""
        deadline = Deadline(self.settings.response_deadline)
        try:
            with deadline:
                started = time.monotonic()
                response = self._get_following_redirects(url, query, headers, shown, secret)
                try:
                    body = self._read_body(response, shown, started) if response.status_code == 200 else b""
                    reason = self.redact(str(response.reason or ""))
                    result = response.status_code, reason, response.headers.get("Retry-After"), body
                finally:
                    response.close()
        except (requests.ConnectionError, requests.Timeout, _Transient):
            if deadline.expired:  # the cut connection, not the network
                raise self._late() from None
            raise
        if deadline.expired:  # cut while the body was read: what came may look whole, and is not
            raise self._late()
        return result

    def _late(self) -> _Transient:
        return _Transient(f"no complete response within the {self.settings.response_deadline:g} s deadline on one "
                          "response (LFB_RESPONSE_DEADLINE)")

    def _get_following_redirects(
        self, url: str, query: dict[str, Any], headers: dict[str, str], shown: str, secret: bool
    ) -> requests.Response:
        """GET ``url``, following up to :data:`MAX_REDIRECTS` redirects; secrets never leave the first host."""
        params: dict[str, Any] | None = query or None
        for _ in range(MAX_REDIRECTS + 1):
            self._wait_for_rate_limit()
            self.requests_made += 1
            response = self.session.get(
                url, params=params, headers=headers or None, stream=True, allow_redirects=False,
                timeout=(self.settings.connect_timeout, self.settings.read_timeout),
            )
            location = response.headers.get("Location")
            if response.status_code not in REDIRECT_STATUSES or not location:
                return response
            response.close()
            target = urljoin(response.url, location)
            if urlsplit(target).scheme not in _DEFAULT_PORTS or not urlsplit(target).hostname:
                raise SourceError(f"{shown}: redirected to {self.redact(target)!r}, which is not an http(s) URL; "
                                  f"check the {self.source} base URL ({self.url_env}).")
            if secret and not same_host(response.url, target):
                raise SourceError(
                    f"{shown}: the server redirects to another host ({_origin(target)}); the {self.source} API key is "
                    f"only sent to {_origin(self.base_url)}, so the redirect is not followed. If the API has moved, "
                    f"set its address with {self.url_env}."
                )
            url, params = target, None  # the Location carries its own query
        raise SourceError(
            f"{shown}: more than {MAX_REDIRECTS} redirects (a redirect loop; the last one to {self.redact(url)}). "
            f"Check the {self.source} base URL ({self.url_env}) or try again later."
        )

    def _read_body(self, response: requests.Response, shown: str, started: float) -> bytes:
        """The decoded body, read piece by piece within the response deadline and the size cap."""
        cap, deadline = self.settings.max_body_bytes, self.settings.response_deadline
        declared = response.headers.get("Content-Length", "").strip()
        if declared.isdigit() and int(declared) > cap:
            raise self._too_large(shown, f"{int(declared)} bytes announced")
        raw = response.raw
        read = getattr(raw, "read1", raw.read)  # read1 returns what one socket read brings (urllib3 >= 2.2)
        pieces, size = [], 0
        try:
            while True:
                if time.monotonic() - started > deadline:
                    raise self._late()
                piece = read(READ_CHUNK, decode_content=True)
                if not piece:
                    return b"".join(pieces)
                size += len(piece)
                if size > cap:
                    raise self._too_large(shown, f"more than {cap} bytes received")
                pieces.append(piece)
        except (urllib3.exceptions.DecodeError, requests.exceptions.ContentDecodingError) as exc:
            encoding = response.headers.get("Content-Encoding", "?")
            raise _Transient(
                f"{shown}: the response is labelled Content-Encoding: {encoding} but its body does not decode "
                f"({self.redact(str(exc))}). Something between us and {self.source} (a proxy, or a wrong base URL) "
                f"is altering responses: check the {self.source} base URL ({self.url_env}) and the network."
            ) from None
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise _Transient(f"the body stalled ({self.redact(str(exc))})") from None
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.SSLError,
                requests.exceptions.ChunkedEncodingError) as exc:
            raise _Transient(f"the body was cut short mid-transfer ({self.redact(str(exc))})") from None

    def _too_large(self, shown: str, seen: str) -> SourceError:
        cap = self.settings.max_body_bytes
        return SourceError(
            f"{shown}: the response is larger than the cap on one body ({cap} bytes = {cap / 2**20:g} MiB; "
            f"{seen}). Check that the {self.source} base URL points at its API; if responses really are this "
            "large, raise the cap with LFB_MAX_RESPONSE_MB."
        )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def same_host(a: str, b: str) -> bool:
    """Whether a redirect from ``a`` to ``b`` stays on the same host and port, never downgrading https to http."""
    pa, pb = urlsplit(a), urlsplit(b)
    if (pa.hostname or "").lower() != (pb.hostname or "").lower():
        return False
    if pa.scheme == pb.scheme:
        return (pa.port or _DEFAULT_PORTS.get(pa.scheme)) == (pb.port or _DEFAULT_PORTS.get(pb.scheme))
    return pa.scheme == "http" and pb.scheme == "https" and pa.port in (None, 80) and pb.port in (None, 443)
