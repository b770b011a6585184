"""``lfb``: the command line. It parses and prints only; every command calls one library function.

One module per command group holds its parsers next to its handlers (``data``, ``refresh``, ``cutoffs``, ``privacy``,
``methods``, ``eval``, ``bench``, ``leaderboard``, ``smoke``); ``flags``, ``output`` and ``failures`` are what they
share. This module builds the top parser from them and runs the chosen command. Nothing heavy is imported at module
level, so ``lfb --help`` is instant and never imports torch.
"""

from __future__ import annotations

import argparse
import logging
import os

from largefedbench.cli.bench import add_bench_parser
from largefedbench.cli.cutoffs import add_cutoffs_parser
from largefedbench.cli.data import add_data_parser
from largefedbench.cli.eval import add_audit_parser, add_eval_parser
from largefedbench.cli.failures import _write_places, run_command
from largefedbench.cli.leaderboard import add_leaderboard_parser
from largefedbench.cli.methods import add_methods_parser, add_new_parser
from largefedbench.cli.privacy import add_privacy_parser
from largefedbench.cli.refresh import add_refresh_parser, add_release_parser
from largefedbench.cli.smoke import add_smoke_parser

__all__ = ["EPILOG", "build_parser", "main", "_write_places"]

EPILOG = """examples (--home DIR: the LargeFedBench home instead of $LFB_HOME; --out DIR: the board folder):
  lfb data demo                                   build the offline demo snapshot and show it
  lfb data list                                   the snapshots under $LFB_HOME
  lfb data info demo --json                       a snapshot's statistics
  lfb data verify demo                            hash a snapshot in full against its manifest
  lfb data export demo --format flower --out fl   an HF dataset with a client_id per sample (Flower)
  lfb refresh --sources biorxiv --since 2024-09   scrape bioRxiv from September 2024 to today
  lfb refresh --after-cutoff-of meta-llama/Meta-Llama-3-8B --until 2024-08 --home /data/lfb
  lfb cutoffs                                     the LLM knowledge cutoffs a window can start after
  lfb cutoffs measure smollm2-135m --dataset demo --plot curve.png   an LLM's loss by month: its effective cutoff
  lfb methods                                     the registered methods
  lfb smoke dp-fedavg                             seconds-long check of a method before lfb eval
  lfb new method my-method                        a plug-in package (template, presets, test) to start from
  lfb release 2026q4 --snapshots biorxiv,congress name this quarter's snapshots (lfb refresh --release 2026q4 rebuilds)
  lfb eval --method dp-fedavg                     offline: the demo snapshot, tiny profile, seeds 0,1,2
  lfb eval --method popri --dataset biorxiv --profile paper --epsilon 7 --out leaderboard
  lfb eval --synthetic pe.csv --epsilon 4 --delta 3e-6 --made-with 'DPSDA PE'   score another tool's texts
  lfb audit --method dp-fedavg --epsilon 1 8      the claimed ε beside an empirical lower bound
  lfb leaderboard validate                        check every entry under ./leaderboard/entries
  lfb leaderboard render --out leaderboard        write the board's README.md and index.html
  lfb leaderboard reproduce leaderboard/entries/demo/public/ENTRY.json   re-run an entry, compare
  lfb leaderboard submit mine/entries/biorxiv/my-method/ENTRY.json --board board/leaderboard   check, lay out the PR
  lfb bench scale --clients 133000 --samples 18000   POPri's client side at paper scale
  lfb bench llm --json                                the LLM's sampling and DPO step against this machine's limit
  lfb privacy noise --epsilon 1 --delta 3e-6 --clients 10000 --per-round 1000 --steps 20
  lfb privacy epsilon --sigma 1.1 --delta 3e-6 --sample-rate 0.01 --steps 200
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lfb",
        description="LargeFedBench: uncontaminated federated text datasets and private federated learning methods.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    from largefedbench import __version__

    parser.add_argument("--version", action="version", version=f"lfb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # the order of `lfb --help`'s command list
    for add_parser in (add_refresh_parser, add_release_parser, add_data_parser, add_privacy_parser, add_methods_parser,
                       add_eval_parser, add_bench_parser, add_audit_parser, add_cutoffs_parser, add_leaderboard_parser,
                       add_smoke_parser, add_new_parser):
        add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # OpenMP threads (torch, BLAS) sleep instead of spinning while they wait: on a shared machine spinning made a
    # warm `lfb eval --method popri` ~4x slower. Set before anything imports torch; the user's environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "quiet", False):
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    return run_command(args)

