"""``lfb eval`` (run a method, or score a synthetic-text file, into an entry) and ``lfb audit`` (the same run with
canary clients, and an empirical epsilon lower bound beside the claimed one)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_executor_flags, _add_home, _add_output_flags, _seeds, _set_pairs
from largefedbench.cli.output import _print_json, _progress


def _request(args, **fields):
    """The :class:`EvalRequest` of ``lfb eval`` or ``lfb audit``: what the flags of :func:`_add_run_flags` say, and
    the command's own ``fields``."""
    from largefedbench.run.eval import EvalRequest

    return EvalRequest(dataset=args.dataset, delta=args.delta, profile=args.profile or "tiny", seeds=_seeds(args.seeds),
                       overrides=_set_pairs(args.set or []), preset=args.preset, out=args.out, home=args.home,
                       device=args.device, public=args.public, progress=not args.quiet, **fields)


def cmd_eval(args) -> int:
    from largefedbench.errors import InputError
    from largefedbench.run.eval import run_eval

    defaults = args.dataset is None and args.profile is None
    if defaults:
        print("lfb eval: no --dataset or --profile given: running on the offline demo snapshot with the tiny profile "
              "(CPU-sized models; the numbers check the pipeline, they are not paper numbers)", file=sys.stderr)
    if args.synthetic is None and (args.made_with or args.name):
        raise InputError("--made-with and --name describe a --synthetic file; with --method drop them")
    request = _request(
        args, method=args.name if args.synthetic is not None else args.method, synthetic=args.synthetic,
        made_with=args.made_with, epsilon=args.epsilon, executor=args.executor, ray_address=args.ray_address,
        noise_free=args.noise_free, shuffled_releases=args.shuffled_releases, select_on=args.select_on,
        sandbox=args.sandbox,
    )
    result = run_eval(request)
    entry = result.entry
    if args.json:
        _print_json(entry.to_json())
        return 0
    m, privacy = entry.metrics, entry.privacy
    acc = m.next_token_accuracy.top1
    print(f"method {entry.method.name}: test top-1 {acc.mean:.4f} ± {acc.std:.4f} over seeds {entry.seeds}; "
          f"ε = {privacy.epsilon} (δ = {privacy.delta:g}, {privacy.accountant} accountant)")
    print(f"references: ε=0 top-1 {m.reference_public.top1.mean:.4f}, ε=∞ top-1 "
          f"{m.reference_non_private.top1.mean:.4f}; gap closed {m.gap_closed.mean:.3f}")
    if m.reference_generator_only is not None:
        print(f"generator-only (no private signal) top-1 {m.reference_generator_only.top1.mean:.4f}; gain over it "
              f"{m.gain_over_generator_only.mean:+.4f} ± {m.gain_over_generator_only.std:.4f}")
    if m.window_novel is not None:
        w = m.window_novel
        ci = f" ± {w.ci95:.4f} (95 % over the positions)" if w.ci95 is not None else ""
        print(f"window-novel tokens ({w.n_tokens} ids, k = {w.k:g}, against {w.reference}; {w.n_test_positions} test "
              f"positions): top-1 {w.top1.mean:.4f}{ci} (ε=0 {w.reference_public:.4f}, ε=∞ {w.reference_non_private.mean:.4f})")
    print(f"public resources: {entry.public_kind}")
    print(f"entry written to {result.path}")
    for name, path in result.plots.items():
        print(f"plot {name}: {path}")
    return 0


def cmd_audit(args) -> int:
    from largefedbench.run.audit import Audit
    from largefedbench.run.eval import run_eval

    audit = Audit(canaries=args.canaries, confidence=args.confidence, inclusion_seed=args.inclusion_seed,
                  progress=not args.quiet, leak_canaries=args.leak_canaries)
    results = []
    for eps in args.epsilon or [None]:
        results.append(run_eval(_request(args, method=args.method, epsilon=eps), log=_progress("audit"), audit=audit))
    if args.json:
        entries = [r.entry.to_json() for r in results]
        _print_json(entries if len(entries) > 1 else entries[0])
        return 0
    for result in results:
        e, a = result.entry, result.entry.audit
        claimed = e.privacy.epsilon
        flag = "  ** EXCEEDS THE CLAIMED EPSILON **" if claimed != "inf" and a.epsilon_lower_bound > claimed else ""
        shot = a.one_shot_epsilon
        shot_text = "" if shot is None else f"; one-shot estimate {shot if shot == 'inf' else f'{shot:.3g}'}"
        print(f"method {e.method.name}: claimed ε = {claimed if claimed == 'inf' else f'{claimed:.4g}'} "
              f"(δ = {e.privacy.delta:g}); audited ε ≥ {a.epsilon_lower_bound:.3g} at "
              f"{a.confidence:g} confidence{shot_text}{flag}")
        for s in a.per_seed:
            print(f"  seed {s.seed}: {s.inserted}/{a.canaries} canaries inserted, {s.correct} of "
                  f"{s.guesses} guesses right, ε ≥ {s.epsilon_lower_bound:.3g}")
        print(f"entry written to {result.path}")
    return 0


def add_eval_parser(sub) -> None:
    """``lfb eval``."""
    p = _add_command(sub, "eval", cmd_eval,
                     help="run a method under an (epsilon, delta) budget and write a leaderboard entry",
                     description="Run METHOD for each seed, train/evaluate the downstream model, compute epsilon from "
                     "the privacy ledger and write leaderboard/entries/DATASET/METHOD/ENTRY.json. With only --method "
                     "it runs offline on the demo snapshot with the tiny profile. A killed run resumes when the same "
                     "command is run again. With --synthetic FILE instead of --method it scores synthetic text made "
                     "by another tool (e.g. DPSDA's Private Evolution) and writes a declared-privacy entry, shown "
                     "apart on the board.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--method", help="a name from `lfb methods`, or module:Class / path/to/file.py:Class")
    what.add_argument("--synthetic", type=Path, metavar="FILE", help="score these synthetic texts instead of running a "
                      "method: a .csv with a `text` column (as DPSDA writes) or a .jsonl of {\"text\": ...}; needs "
                      "--epsilon, --delta (as the tool that made them claims) and --made-with")
    p.add_argument("--made-with", metavar="TEXT", help="with --synthetic: the tool, its version and how it was run "
                   "(the entry states it beside the declared ε and δ)")
    p.add_argument("--name", help="with --synthetic: the entry's name on the board (default: the file's stem)")
    p.add_argument("--epsilon", type=float, help="user-level epsilon (default 1, POPri's strict regime)")
    p.add_argument("--noise-free", action="store_true", help="diagnostic: calibrate for --epsilon but release every "
                   "sum without noise (σ = 0, ε = ∞ recorded); the entry shows what the noise costs and is never ranked")
    p.add_argument("--shuffled-releases", action="store_true", help="control: run at --epsilon as usual but permute "
                   "every noised sum at random before the method sees it; the entry shows what the method gets from "
                   "feedback without information about the clients and is never ranked")
    p.add_argument("--select-on", choices=["private", "public"], default="private", help="what model selection (the "
                   "downstream epoch, a method's best round) runs on: private (default: the validation clients, read "
                   "without noise; the entry records every choice) or public (a held-out tenth of the public corpus's "
                   "documents, drawn by the corpus hash, that no method or downstream training sees)")
    p.add_argument("--sandbox", choices=["auto", "on", "off"], default="auto", help="where the method's train() runs: "
                   "auto (default: a plug-in in its own process behind Linux namespaces, without the snapshot, the "
                   "home's caches, the board or the network; a built-in in the harness's process), on (every method "
                   "so), off (in the harness's process); the entry records which")
    _add_run_flags(p)
    _add_executor_flags(p)
    _add_output_flags(p, json_help="print the entry", quiet_help="no progress bars")


def add_audit_parser(sub) -> None:
    """``lfb audit``."""
    p = _add_command(sub, "audit", cmd_audit,
                     help="audit a method's privacy: canary clients in the run, an empirical epsilon lower bound",
                     description="Run METHOD like `lfb eval` with M canary clients, each added to the train split by a "
                     "seeded coin flip; score every canary from what the run released (the model's delta for "
                     "model-training methods, the synthetic set for synthetic-data methods) and write an entry whose "
                     "audit section has the one-run epsilon lower bound (Steinke, Nasr & Jagielski 2023) beside the "
                     "claimed epsilon, plus Andrew et al.'s one-shot estimate for model updates.")
    p.add_argument("--method", required=True, help="a name from `lfb methods`")
    p.add_argument("--canaries", type=int, default=100, metavar="M", help="number of canaries, about half inserted (default 100)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the lower bound (default 0.95)")
    p.add_argument("--inclusion-seed", type=int, default=0, help="seed of the canaries and their coin flips (default 0)")
    p.add_argument("--leak-canaries", type=int, default=3, metavar="K", help="extra clients of random words, searched "
                   "for in every output of each seed; a hit stops the audit (default 3; 0 turns the search off)")
    p.add_argument("--epsilon", type=float, nargs="+", help="one or more claimed epsilons to run at (default 1)")
    _add_run_flags(p)
    _add_output_flags(p, json_help="print the entry (a list with several --epsilon)", quiet_help="no progress bars")


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags `lfb eval` and `lfb audit` share: where the run reads, what it runs with, where it writes."""
    p.add_argument("--dataset", help="snapshot name, prefix, dataset name, folder or hf://owner/name (default: the offline demo; demo-prose with --profile cpu)")
    p.add_argument("--delta", type=float, help="delta, below 1/number of train clients (default 3e-6 as POPri)")
    p.add_argument("--profile", help="tiny (offline, CPU tests), cpu (offline, a real LLM on the CPU), cpu-wide (cpu "
                   "with a 12M-parameter on-device model), small (one GPU) or paper (default: tiny)")
    p.add_argument("--preset", choices=["paper", "cpu", "tiny", "matched"], help="method defaults: paper, cpu or tiny "
                   "(default: the profile's own: cpu for cpu and cpu-wide, tiny for tiny, else paper), or matched (the "
                   "cpu profile at POPri's compute: dp-resample, ctcl, weak-client-voting)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2; the board ranks entries "
                   "with >= 3)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a method config key (repeatable)")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="the board folder to write the entry under "
                   "(default ./leaderboard)")
    _add_home(p)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--public", help="the public resources (prompts, public replay, the ε = 0 model): generic (the "
                   "offline stand-in for C4; cpu's default), c4 (the paper's, from the Hub; paper and small), c4:PATH "
                   "(local C4 shards) or split (the snapshot's pre-window records; tiny's default)")
