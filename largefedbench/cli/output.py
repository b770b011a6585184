"""What commands print: JSON documents, human-readable text, progress lines on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def _show(args, obj: Any, text: Callable[[], str]) -> int:
    """With --json print ``obj``, else the human-readable ``text()`` (nothing when it is empty); a command's normal
    exit."""
    if args.json:
        _print_json(obj)
    elif shown := text():
        print(shown)
    return 0


def _show_report(args, report: Any) -> int:
    """A check's report (``to_dict()``, ``format()``, ``ok``) shown as :func:`_show` does; exit 1 unless it is ok."""
    _show(args, report.to_dict(), report.format)
    return 0 if report.ok else 1


def _progress(command: str, quiet: bool = False) -> Callable[[str], None]:
    """A command's progress log: ``lfb COMMAND: message`` lines on stderr, or nothing when ``quiet``."""
    if quiet:
        return lambda msg: None
    return lambda msg: print(f"lfb {command}: {msg}", file=sys.stderr)
