"""Watchers used by `lfb smoke`: private data reachable only through the federation, the test split never.

The Federation's public API enforces the rest: nothing public returns per-client rows (client data leaves only as
``private_sum``'s noised sums), so the one thing left to watch is a method reaching around it through the
federation's private attributes (``fed._clients``, ``fed._embeddings``, ``fed._store`` and the client store's
attributes, e.g. ``fed._store.spans``); the snapshot is out of reach (``PublicResources`` holds public data only).
Reads by the federation, its client views and executors
(``private_sum``'s chunks, locally or on Ray workers) are the legitimate ones; client functions see their own
clients through the views they are given.

They catch the accidental leak (a method that reads ``fed._clients`` directly), not a determined adversary: entries are also reviewed and can be re-run with
`lfb leaderboard reproduce`.
"""

from __future__ import annotations

import sys
from typing import Any

from largefedbench.errors import MethodError

#: the federation module, which reads the private train clients …
FEDERATION_MODULE = "largefedbench.federation"
#: … and the modules allowed to: the federation, its client views and executors (``Federation.private_sum``'s chunks)
PRIVATE_READERS = (FEDERATION_MODULE, "largefedbench.client_views", "largefedbench.executors",
                   "largefedbench.process_executor")
#: the federation's attributes that hold the private clients
PRIVATE_ATTRIBUTES = ("_clients", "_embeddings", "_store")


class _Watched:
    """A proxy that records (and refuses) every access from outside :data:`PRIVATE_READERS`."""

    def __init__(self, target: Any, what: str, violations: list[str]) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_violations", violations)

    def _guard(self, name: str, depth: int = 2) -> None:
        _refuse_outside_readers(f"{self._what}.{name}", self._violations, depth + 1)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocol lookups (pickle, copy), not data
            raise AttributeError(name)
        self._guard(name)
        return getattr(self._target, name)

    def __reduce__(self) -> tuple:
        # shipped to a Ray worker still watched; what the worker records stays there (it runs library code only)
        return _Watched, (self._target, self._what, [])

    def __len__(self) -> int:
        self._guard("__len__")
        return len(self._target)

    def __iter__(self):
        self._guard("__iter__")
        return iter(self._target)

    def __getitem__(self, key: Any) -> Any:
        self._guard("__getitem__")
        return self._target[key]


def _refuse_outside_readers(what: str, violations: list[str], depth: int) -> None:
    """Record and refuse a read of ``what`` by the code ``depth`` frames up unless it is one of PRIVATE_READERS."""
    caller = sys._getframe(depth).f_globals.get("__name__", "?")
    if caller not in PRIVATE_READERS:
        message = (f"{caller} read {what} directly; private client data must be reached only through the "
                   f"Federation's one door (fed.private_sum: client functions get each client's own view)")
        violations.append(message)
        raise MethodError(message)


def watched_private(target: Any, what: str, violations: list[str]) -> Any:
    """``target`` (a client split, span embeddings or the client store) readable by PRIVATE_READERS only."""
    return _Watched(target, what, violations)


class _WatchedFederation:
    """Put in front of a federation's class by :func:`watch_federation`: its PRIVATE_ATTRIBUTES are readable by
    PRIVATE_READERS only."""

    def __getattribute__(self, name: str) -> Any:
        if name in PRIVATE_ATTRIBUTES:
            _refuse_outside_readers(f"fed.{name}", object.__getattribute__(self, "_watch_violations"), 2)
        return super().__getattribute__(name)


def watch_federation(fed: Any, violations: list[str]) -> Any:
    """``fed`` (built on watched clients and embeddings) with its client store watched too and its private
    attributes readable by PRIVATE_READERS only; every refused read is appended to ``violations``."""
    fed._store = watched_private(fed._store, "fed._store", violations)
    fed._watch_violations = violations
    fed.__class__ = type(f"Watched{type(fed).__name__}", (_WatchedFederation, type(fed)), {})
    return fed
