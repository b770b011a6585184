"""``lfb cutoffs``: the registry of LLM knowledge cutoffs, and ``measure``, an LLM's loss by month."""

from __future__ import annotations

import argparse
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_home, _add_output_flags
from largefedbench.cli.output import _show


def cmd_cutoffs(args) -> int:
    from largefedbench.data.windows import list_cutoffs

    rows = [c.to_dict() for c in list_cutoffs()]
    return _show(args, rows, lambda: "\n".join(
        [f"{'model':<38}{'cutoff':<9}{'kind':<24}{'window from':<12}  source"]
        + [f"{r['model']:<38}{r['cutoff'] or '-':<9}{r['kind']:<24}{r['window_start'] or '-':<12}  {r['source']}"
           for r in rows]))


def cmd_cutoffs_measure(args) -> int:
    from largefedbench.evaluation.cutoff_curve import (
        CurveSettings,
        measure_cutoff,
        plot_cutoff_curve,
        summary_text,
        write_result,
    )

    settings = CurveSettings(tokens=args.tokens, windows_per_month=args.windows, windows_per_record=args.per_record,
                             topics=args.topics, bootstrap=args.bootstrap, seed=args.seed, batch_size=args.batch_size,
                             allow_gaps=args.allow_gaps)
    result = measure_cutoff(args.model, dataset=args.dataset, mirror=args.mirror, source=args.source, since=args.since,
                            until=args.until, settings=settings, home=args.home, progress=not args.quiet)
    if args.out:
        write_result(result, args.out)
    if args.plot:
        plot_cutoff_curve(result, args.plot)
    return _show(args, result, lambda: summary_text(result) + "".join(
        f"\n{what} written to {path}" for what, path in (("result", args.out), ("plot", args.plot)) if path))


def add_cutoffs_parser(sub) -> None:
    """``lfb cutoffs`` and ``lfb cutoffs measure``."""
    p = _add_command(sub, "cutoffs", cmd_cutoffs,
                     help="the registry of LLM knowledge cutoffs; `measure`: an LLM's loss by month")
    _add_output_flags(p, quiet_help=None)
    csub = p.add_subparsers(dest="cutoffs_command", metavar="COMMAND")
    p = _add_command(csub, "measure", cmd_cutoffs_measure,
                     help="an LLM's per-token loss by month over dated records, and its effective cutoff",
                     description="Score a seeded sample of windows of each month's records with MODEL (mean "
                     "next-token loss, nats), with a 95% interval by a bootstrap over records, beside a "
                     "topic-standardised mean (MiniLM embeddings, k-means topics), and fit a change point (a step, "
                     "or flat then rising) to the curve: a rise that a straight line and month-to-month noise do "
                     "not explain marks the effective cutoff (Cheng et al. 2024, 'Dated Data'). MODEL: a name or alias of `lfb cutoffs` (smollm2-135m loads the cpu "
                     "profile's packaged SmolLM2) or a local Hugging Face model folder.")
    p.add_argument("model", metavar="MODEL", help="registry name or alias (e.g. smollm2-135m), or a model folder")
    p.add_argument("--dataset", help="a snapshot (name, prefix, dataset name or folder): every split's records")
    p.add_argument("--mirror", type=Path, metavar="DIR", help="a mirror folder of a source's files instead (needs "
                   "--source, --since and --until)")
    p.add_argument("--source", help="the mirror's source: us (Congressional Record) or arxiv (arXiv listings)")
    p.add_argument("--since", help="first month, YYYY-MM (default: the snapshot's first record)")
    p.add_argument("--until", help="last month, YYYY-MM (default: the snapshot's last record)")
    p.add_argument("--windows", type=int, default=200, metavar="N", help="windows scored per month (default 200)")
    p.add_argument("--tokens", type=int, default=128, metavar="T", help="tokens per window, the model's tokenizer "
                   "(default 128)")
    p.add_argument("--per-record", type=int, default=2, metavar="K", help="at most K windows from one record "
                   "(default 2)")
    p.add_argument("--topics", type=int, default=8, metavar="K", help="topics for the standardised curve (default 8)")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the topics and the bootstraps (default 0)")
    p.add_argument("--batch-size", type=int, default=16, help="windows per forward pass (default 16)")
    p.add_argument("--allow-gaps", action="store_true", help="leave out months with too few records instead of stopping")
    p.add_argument("--out", type=Path, metavar="FILE", help="write the full result as JSON")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write the curve as a PNG")
    _add_home(p)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
