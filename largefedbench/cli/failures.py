"""How a command's failure reaches the user: a one-line message and an exit code instead of a traceback."""

from __future__ import annotations

import os
import sys


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error on its write end)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no file descriptor: not known to be gone
        return False


#: commands that write only the LargeFedBench home (a failed write there is moved with --home, never --out)
HOME_ONLY_COMMANDS = ("refresh", "data", "release", "cutoffs")


def _write_places(args) -> str:
    """The flags that move what a command writes, for the message of a failed write."""
    from largefedbench.paths import HOME_FLAG, HOME_OR_BOARD

    sub = getattr(args, "leaderboard_command", None) or getattr(args, "data_command", None)
    if args.command == "leaderboard" and sub == "submit":
        return f"--board DIR (the board folder of your clone) or {HOME_FLAG}"
    if args.command == "data" and sub == "export":
        return "--out DIR (the export's new folder)"
    if args.command in ("release", "cutoffs") and getattr(args, "out", None):
        return f"--out (the file's place) or {HOME_FLAG}"
    return HOME_FLAG if args.command in HOME_ONLY_COMMANDS else HOME_OR_BOARD


def run_command(args) -> int:
    """Run the command's handler; an input error, a failed write, a reader that left or Ctrl-C become a message and an
    exit code."""
    from largefedbench.errors import LfbError

    try:
        return int(args.func(args) or 0)
    except LfbError as exc:
        print(f"lfb: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `lfb methods | head`: the reader left; say nothing more (Python's documented recipe)
        if not _stdout_gone():
            raise  # a broken pipe elsewhere (a worker, a socket) is not a reader leaving
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # disk full, read-only or forbidden folder: say so instead of a traceback
        from largefedbench.paths import WRITE_ERRNOS, write_error_message

        if exc.errno not in WRITE_ERRNOS:
            raise
        print(f"lfb: error: {write_error_message(exc, f'lfb {args.command}', _write_places(args))}", file=sys.stderr)
        return 2  # like every refused run: the user changes where it writes, then runs it again
    except KeyboardInterrupt:
        print("lfb: interrupted; what was fetched is kept, run the same command again to resume", file=sys.stderr)
        return 130
