"""``lfb leaderboard``: validate entries, render the board, reproduce an entry (or a sample of the board), submit an
entry."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_group, _add_home, _add_output_flags, _seeds
from largefedbench.cli.output import _print_json, _progress, _show_report


def cmd_leaderboard_validate(args) -> int:
    from largefedbench.leaderboard.validate import (
        format_reports,
        reports_json,
        validate_paths,
    )

    reports = validate_paths(args.paths or [Path("leaderboard") / "entries"])
    print(reports_json(reports) if args.json else format_reports(reports, verbose=args.verbose_entries))
    return 1 if any(not r.valid for r in reports) else 0


def cmd_leaderboard_render(args) -> int:
    from largefedbench.leaderboard.render import render_board
    from largefedbench.leaderboard.validate import format_reports

    result = render_board(args.out, check=args.check)
    if result.invalid:
        print(f"lfb leaderboard render: {len(result.invalid)} invalid entries are not shown:\n"
              + format_reports(result.invalid), file=sys.stderr)
    if args.check:
        for path in result.stale:
            print(f"{path} is out of date: run `lfb leaderboard render --out {args.out}`", file=sys.stderr)
        return 1 if result.stale else 0
    board = result.board
    print(f"rendered {len(board.rows)} entries ({board.counts_text()}; {len(result.invalid)} invalid not shown) in "
          f"{result.seconds:.1f} s: {args.out / 'README.md'}, {args.out / 'index.html'}")
    return 0


def cmd_leaderboard_reproduce(args) -> int:
    import time

    from largefedbench.errors import InputError
    from largefedbench.run.reproduce import Tolerances, reproduce

    tol = Tolerances(accuracy=args.accuracy_tolerance)
    log = _progress("reproduce", args.quiet)
    if args.sample is not None:
        from largefedbench.run.sample import reproduce_sample

        board = args.entry or Path("leaderboard")
        if board.is_file():
            raise InputError(f"--sample draws from a board folder, not one entry: pass the folder (e.g. leaderboard), "
                             f"not {board}")
        if args.seeds is not None:
            raise InputError(f"--seeds {args.seeds} names seeds of one entry; with --sample give how many of each drawn "
                             "entry's seeds to re-run: --seeds-per-entry N")
        sampled = reproduce_sample(board, args.sample, seed=args.seed, home=args.home, tolerances=tol,
                                   max_seconds=args.max_seconds, seeds_per_entry=args.seeds_per_entry,
                                   progress=not args.quiet, log=log)
        if args.json:
            _print_json({"seed": sampled.seed, "among": sampled.among, "runs": [
                {"entry_id": r.entry_id, "ok": r.result.ok if r.result else None, "skipped": r.skipped, "seeds": r.seeds,
                 "record": str(r.record) if r.record else None} for r in sampled.runs]})
        else:
            print(sampled.format())
        return 0 if sampled.ok else 1
    if args.entry is None:
        raise InputError("give an entry file to reproduce, or --sample K to re-run K random ranked entries of a board")
    if args.seeds_per_entry is not None:
        raise InputError("--seeds-per-entry goes with --sample; to spot-check one entry name its seeds: --seeds 1")
    start = time.perf_counter()
    seeds = None if args.seeds is None else _seeds(args.seeds)
    result = reproduce(args.entry, home=args.home, tolerances=tol, out=args.out, progress=not args.quiet,
                       seeds=seeds, log=log)
    if args.record:
        from largefedbench.run.sample import record_reproduction

        log(f"record: {record_reproduction(result, args.entry, tolerances=tol, seconds=time.perf_counter() - start)}")
    return _show_report(args, result)


def cmd_leaderboard_submit(args) -> int:
    from largefedbench.run.submit import submit

    log = _progress("submit", args.quiet)
    result = submit(args.entry, board=args.board, smoke_plugins=not args.no_smoke, home=args.home,
                    allow_demo=args.allow_demo, log=log)
    return _show_report(args, result)


def add_leaderboard_parser(sub) -> None:
    """``lfb leaderboard`` and its commands."""
    bsub = _add_group(sub, "leaderboard", help="validate, render and reproduce leaderboard entries",
                      epilog="examples:\n  lfb leaderboard validate\n  lfb leaderboard render --out leaderboard\n"
                      "  lfb leaderboard reproduce leaderboard/entries/demo/public/ENTRY.json\n"
                      "  lfb leaderboard submit leaderboard/entries/demo/my-method/ENTRY.json --board ../board/leaderboard",
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p = _add_command(bsub, "validate", cmd_leaderboard_validate,
                     help="check entries: schema, ε from the ledgers, δ, seeds, consistency, paths",
                     description="Check every entry (default: ./leaderboard/entries). Exit 1 if any is invalid. "
                     "Entries are read as data only: nothing in them is imported or executed.")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="entry files or folders")
    p.add_argument("--all", dest="verbose_entries", action="store_true", help="list every entry, not only those with findings")
    _add_output_flags(p, quiet_help=None)
    p = _add_command(bsub, "render", cmd_leaderboard_render,
                     help="write README.md, index.html and plots/ from the entries",
                     description="Render the board from OUT/entries into OUT/README.md, OUT/index.html and OUT/plots/. "
                     "Invalid entries are not shown; --check writes nothing and exits 1 if the pages are stale.")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="the board folder (default ./leaderboard)")
    p.add_argument("--check", action="store_true", help="only check that README.md and index.html are up to date")
    p = _add_command(bsub, "reproduce", cmd_leaderboard_reproduce,
                     help="re-run an entry's resolved config and compare the numbers",
                     description="Re-run ENTRY (same method name, snapshot, seeds, budget, profile and config) in a "
                     "temporary folder and compare every number with its tolerance; exit 1 if any is outside. With "
                     "--sample K, re-run K randomly drawn ranked entries of the board folder (cheapest first), store "
                     "ENTRY-ID.reproduced.json beside each and render the board with the marks.")
    p.add_argument("entry", type=Path, nargs="?", help="an entry file under leaderboard/entries/ (with --sample: the "
                   "board folder, default ./leaderboard)")
    p.add_argument("--sample", type=int, metavar="K", help="re-run K random ranked entries of the board and mark it")
    p.add_argument("--seed", type=int, default=None, help="with --sample: the random draw's seed (default: random, "
                   "printed and recorded)")
    p.add_argument("--max-seconds", type=float, default=None, help="with --sample: skip entries whose recorded time "
                   "(wall time, or the seeds' method and downstream seconds where more) would pass this many seconds "
                   "in total")
    p.add_argument("--seeds", default=None, help="re-run only these of the entry's seeds (comma-separated): a spot "
                   "check compared seed for seed")
    p.add_argument("--seeds-per-entry", type=int, default=None, metavar="N", help="with --sample: re-run N seeds of "
                   "each drawn entry, drawn from the same random seed (default: all; audit entries always whole)")
    p.add_argument("--record", action="store_true", help="store ENTRY-ID.reproduced.json beside the entry (--sample "
                   "always does); `lfb leaderboard render` then marks it on the board")
    _add_home(p)
    p.add_argument("--out", type=Path, default=None, help="keep the re-run's entry under this board folder")
    p.add_argument("--accuracy-tolerance", type=float, default=None, help="one fixed absolute tolerance on accuracies "
                   "(default: 2 sample SDs of the entry's own per-seed values, at least 0.002; leaderboard/ranks.py)")
    _add_output_flags(p)
    p = _add_command(bsub, "submit", cmd_leaderboard_submit,
                     help="check an entry as the board's CI will and lay out its pull request",
                     description="Validate ENTRY (with fix hints), check its plots, that it is not demo data "
                     "(unless --allow-demo) and that its method can be found again (built-in, declared, a package "
                     "version installed from an index, or a pushed commit of its repository), run `lfb smoke` on a "
                     "plug-in method, then copy the entry into the board folder, render the board and, inside a git "
                     "checkout, commit the files on a branch submit/ENTRY-ID (else print the steps).")
    p.add_argument("entry", type=Path, help="the entry file `lfb eval` wrote")
    p.add_argument("--board", type=Path, default=Path("leaderboard"), help="the board folder of your clone of the "
                   "board's repository (default ./leaderboard)")
    p.add_argument("--no-smoke", action="store_true", help="skip `lfb smoke` of a plug-in method (CI still runs it)")
    p.add_argument("--allow-demo", action="store_true", help="submit an entry on the synthetic demo snapshot (refused "
                   "by default: the board would rank it in its demo group)")
    _add_home(p)
    _add_output_flags(p)
