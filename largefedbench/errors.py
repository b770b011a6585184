"""The one small exception hierarchy of LargeFedBench.

Every message says what was wrong and what to do about it; the CLI prints it without a traceback.
"""

from __future__ import annotations


class LfbError(Exception):
    """Base class: an error the user can act on."""


class InputError(LfbError, ValueError):
    """A flag, argument, config value or file given by the user is invalid."""


class SourceError(LfbError):
    """A data source answered with something unusable (after retries)."""


class SnapshotError(LfbError):
    """A snapshot is missing, incomplete or inconsistent."""


class PrivacyError(LfbError, ValueError):
    """A privacy budget, mechanism or ledger is invalid or cannot be met."""


class MethodError(LfbError):
    """A method is unknown, misconfigured or broke the method contract."""
