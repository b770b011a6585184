"""How a command and a command group are set up, the flags several commands share and how their values are read."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def _add_command(sub, name: str, handler: Callable[[argparse.Namespace], int], **kwargs) -> argparse.ArgumentParser:
    """The command ``NAME`` under ``sub`` (``kwargs``: its help, description, …), run by ``handler(args)``, which
    returns the exit code; returns the command's parser, for its flags."""
    p = sub.add_parser(name, **kwargs)
    p.set_defaults(func=handler)
    return p


def _add_group(sub, name: str, *, metavar: str = "COMMAND", **kwargs) -> argparse._SubParsersAction:
    """The command group ``lfb NAME COMMAND`` (``kwargs``: its help, epilog, …): without a command it prints its help
    and fails (exit 2). Returns what its commands are added to; the chosen one is ``args.NAME_command``."""
    group = _add_command(sub, name, lambda args: (group.print_help(), 2)[1], **kwargs)
    return group.add_subparsers(dest=f"{name}_command", metavar=metavar)


def _add_home(p: argparse.ArgumentParser) -> None:
    """``--home DIR``: the LargeFedBench home instead of ``$LFB_HOME``."""
    p.add_argument("--home", type=Path, default=None, metavar="DIR",
                   help="the LargeFedBench home instead of $LFB_HOME: snapshots, raw downloads, model and reference caches")


def _add_output_flags(p: argparse.ArgumentParser, *, json_help: str = "print the result as one JSON document",
                      quiet_help: str | None = "no progress") -> None:
    """``--json`` (print JSON instead of text) and, unless ``quiet_help`` is None, ``--quiet``."""
    p.add_argument("--json", action="store_true", help=json_help)
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def _add_common(p: argparse.ArgumentParser) -> None:
    """``refresh``'s and the ``data`` commands' flags: ``--home``, ``--json``, ``--quiet``."""
    _add_home(p)
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
