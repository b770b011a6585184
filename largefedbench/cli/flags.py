"""Flags several commands share, how their values are read, and the old spellings of ``--home``.

The old spellings (``--out`` on ``refresh`` and ``data``, ``--root`` on ``eval``, ``audit``, ``smoke`` and
``leaderboard reproduce``) are hidden aliases that still work in this release (README): each sets ``--home`` and says
so on stderr, and both spellings with different folders are a usage error rather than a silent choice.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class _DeprecatedFlag(argparse.Action):
    """An old spelling kept for one release (hidden from --help): sets the new flag's value and says so on stderr."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"lfb: {option_string} is now {self.new} (same meaning); {option_string} goes away in the next release",
              file=sys.stderr)
        _store_once(parser, namespace, self.dest, values, option_string, keep=self.new)


class _NewFlag(argparse.Action):
    """The new spelling of a flag that has a deprecated alias: giving both with different values is an error."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        _store_once(parser, namespace, self.dest, values, option_string, keep=option_string)


def _store_once(parser, namespace, dest: str, value, option: str, *, keep: str) -> None:
    """Set ``dest``; if another spelling already set it to something else, stop with a usage error that says to
    give ``keep`` (the new spelling) only, rather than silently keeping whichever came last."""
    given = namespace.__dict__.setdefault("_spelling_of", {})
    earlier = given.get(dest)
    if earlier and earlier[0] != option and earlier[1] != value:
        parser.error(f"{earlier[0]} {earlier[1]} and {option} {value} are two spellings of one flag with different "
                     f"folders; give {keep} only")
    given[dest] = (option, value)
    setattr(namespace, dest, value)


def _add_home(p: argparse.ArgumentParser, *, old: str | None = None) -> None:
    """``--home DIR`` (and the ``old`` spelling this command used for it, hidden and deprecated)."""
    p.add_argument("--home", type=Path, default=None, metavar="DIR", action=_NewFlag if old else "store",
                   help="the LargeFedBench home instead of $LFB_HOME: snapshots, raw downloads, model and reference caches")
    if old:
        p.add_argument(old, dest="home", type=Path, action=_DeprecatedFlag, new="--home", default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)


def _add_output_flags(p: argparse.ArgumentParser, *, json_help: str = "print the result as one JSON document",
                      quiet_help: str | None = "no progress") -> None:
    """``--json`` (print JSON instead of text) and, unless ``quiet_help`` is None, ``--quiet``."""
    p.add_argument("--json", action="store_true", help=json_help)
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def _add_common(p: argparse.ArgumentParser) -> None:
    """``refresh``'s and the ``data`` commands' flags: ``--home`` (old spelling ``--out``), ``--json``, ``--quiet``."""
    _add_home(p, old="--out")
    _add_output_flags(p, json_help="print one JSON document", quiet_help="no progress bars")


def _add_executor_flags(p: argparse.ArgumentParser, default: str = "process") -> None:
    """``--executor`` and ``--ray-address``: where client functions run."""
    p.add_argument("--executor", choices=["process", "local", "ray"], default=default,
                   help=f"where client computations run (default {default}): process (worker processes, so a client "
                   "function cannot change what the method reads), local (in this process; built-in methods only) or "
                   "ray (pip install 'largefedbench[ray]')")
    p.add_argument("--ray-address", help="join this Ray cluster (e.g. auto or ray://head:10001) instead of starting a "
                   "local one")


def _seeds(text: str) -> tuple[int, ...]:
    """The value of ``--seeds``: comma-separated integers."""
    from largefedbench.errors import InputError

    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--seeds {text!r}: give comma-separated integers, e.g. 0,1,2") from None


def _set_pairs(pairs: list[str]) -> dict[str, str]:
    """The values of repeated ``--set KEY=VALUE``: key -> value, both strings (``config_overrides`` converts each
    to its Config field's type)."""
    from largefedbench.errors import InputError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {pair!r} must look like KEY=VALUE, e.g. --set rounds=5")
        out[key.strip()] = value.strip()
    return out
