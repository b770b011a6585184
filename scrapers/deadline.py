"""An overall deadline on one HTTP response, connection and headers included.

A read timeout bounds each socket read, not the response: a server that sends its headers or body a byte at a
time never trips it. :class:`Deadline` arms a timer around one request; when it fires, it shuts the request's socket
down, so the read blocked on it returns at once, and the caller sees :attr:`Deadline.expired`. The socket is found
through the connection pool: a session with :func:`watched_session`'s adapters records, per thread, the connection
each request takes from its pool.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["Deadline", "watched_session"]

_current = threading.local()  # the Deadline of this thread's request in flight, if any


class _Recording:
    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        deadline = getattr(_current, "deadline", None)
        if deadline is not None:
            deadline.connection = conn
        return conn


class _HTTPPool(_Recording, HTTPConnectionPool):
    pass


class _HTTPSPool(_Recording, HTTPSConnectionPool):
    pass


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def watched_session() -> requests.Session:
    """A ``requests.Session`` whose requests a :class:`Deadline` can cut."""
    session = requests.Session()
    session.mount("http://", _Adapter())
    session.mount("https://", _Adapter())
    return session


class Deadline:
    """``with Deadline(seconds): <one request and its body>``; afterwards :attr:`expired` says whether it was cut."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.connection: Any = None
        self.expired = False
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True  # a timer firing now finds the request over and leaves its pooled connection alone
        _current.deadline = None

    def _cut(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            sock = getattr(self.connection, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed
                    pass
