"""``lfb``: the command line. It parses and prints only; every command calls one library function.

Nothing heavy is imported at module level, so ``lfb --help`` is instant and never imports torch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _progress(command: str, quiet: bool = False) -> Callable[[str], None]:
    """A command's progress log: ``lfb COMMAND: message`` lines on stderr, or nothing when ``quiet``."""
    if quiet:
        return lambda msg: None
    return lambda msg: print(f"lfb {command}: {msg}", file=sys.stderr)


# --- data ----------------------------------------------------------------------------------------------
def cmd_data_demo(args) -> int:
    from largefedbench.data.demo import build_demo
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.info import format_info, snapshot_info
    from largefedbench.paths import check_writable_dir, lfb_home, snapshots_dir

    label = f"--home {args.home}" if args.home is not None else f"LFB_HOME={lfb_home()}"
    check_writable_dir(snapshots_dir(args.home), label)  # before generating the records
    if args.prose:
        from largefedbench.data.demo_prose import build_prose_demo

        result = build_prose_demo(root=args.home, progress=not args.quiet)
    else:
        result = build_demo(root=args.home, progress=not args.quiet)
    info = snapshot_info(load_snapshot(result.path))
    state = "built" if result.created else "already built (identical content)"
    return _show(args, info, lambda: f"demo snapshot {state}: {result.path}\n\n{format_info(info)}")


def cmd_data_list(args) -> int:
    from largefedbench.data.snapshot import list_snapshots

    rows = list_snapshots(args.home)

    def line(m: dict) -> str:
        w, c, tag = m["window"], m["counts"], " (synthetic)" if m.get("synthetic") else ""
        return (f"{m['name']:<48}{m['dataset']:<10}{w['since'] + '..' + w['until']:<25}"
                f"{sum(c['clients'].values()):>9}{sum(c['spans'].values()):>9}{tag}")

    header = f"{'name':<48}{'dataset':<10}{'window':<25}{'clients':>9}{'spans':>9}"
    return _show(args, [{k: m[k] for k in ("name", "dataset", "synthetic", "window", "counts", "path", "created_at")}
                        for m in rows],
                 lambda: "\n".join([header, *map(line, rows)]) if rows else
                 "no snapshots yet: `lfb data demo` builds the offline demo, `lfb refresh` scrapes real data")


def cmd_data_info(args) -> int:
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.info import format_info, snapshot_info
    from largefedbench.data.snapshot import verify_snapshot

    fd = load_snapshot(args.snapshot, home=args.home)
    verify_snapshot(fd, args.home)  # a manifest whose content hash does not match is refused, not printed
    info = snapshot_info(fd)
    return _show(args, info, lambda: format_info(info))


def cmd_data_verify(args) -> int:
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.snapshot import verify_snapshot

    start = time.perf_counter()
    fd = load_snapshot(args.snapshot, home=args.home)
    verify_snapshot(fd, args.home, full=True)
    print(f"{fd.manifest.get('name')}: its data hashes to the manifest's content_sha256 "
          f"{fd.manifest.get('content_sha256', '')[:16]}… (hashed in full, {time.perf_counter() - start:.1f} s)")
    return 0


def cmd_data_export(args) -> int:
    from largefedbench.data.export import export_snapshot
    from largefedbench.data.federated import load_snapshot

    fd = load_snapshot(args.snapshot, home=args.home)
    splits = export_snapshot(fd, args.format, args.out)
    counts = ", ".join(f"{name} {len(fd[name])} clients / {int(fd[name].span_counts().sum())} samples" for name in splits)
    print(f"{fd.manifest.get('name')} written as {args.format} to {args.out} ({counts})")
    return 0


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


# --- privacy -------------------------------------------------------------------------------------------
def _privacy_inputs(args) -> dict[str, Any]:
    return dict(
        delta=args.delta, sample_rate=args.sample_rate, steps=args.steps, mechanism=args.mechanism,
        clients=args.clients, per_round=args.per_round, accountant=args.accountant,
    )


def _print_privacy(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(report)
        return
    print(f"sigma      {report['sigma']:.6g}")
    print(f"epsilon    {report['epsilon']:.6g}" + (f"  (achieved {report['epsilon_achieved']:.6g})" if "epsilon_achieved" in report else ""))
    print(f"delta      {report['delta']:.3g}")
    print(f"accountant {report['accountant']}: {report.get('accountant_detail', '')}")


def cmd_privacy_noise(args) -> int:
    from largefedbench.privacy import noise_report

    _print_privacy(noise_report(args.epsilon, **_privacy_inputs(args)), args.json)
    return 0


def cmd_privacy_epsilon(args) -> int:
    from largefedbench.privacy import epsilon_report

    _print_privacy(epsilon_report(args.sigma, **_privacy_inputs(args)), args.json)
    return 0


# --- refresh -------------------------------------------------------------------------------------------
def _key_values(pairs: list[str], flag: str) -> dict[str, str]:
    from largefedbench.errors import InputError

    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise InputError(f"{flag} {pair!r} must look like SOURCE=URL, e.g. {flag} biorxiv=http://127.0.0.1:8000")
        out[key.strip().lower()] = value.strip()
    return out


def _span_settings(args):
    from largefedbench.data.spans import SpanSettings

    return SpanSettings(
        tokenizer=args.span_tokenizer, span_tokens=args.span_tokens, last_span_min_tokens=args.last_span_min_tokens
    )


def cmd_refresh(args) -> int:
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.info import format_info, snapshot_info
    from largefedbench.data.splits import SplitRatios
    from largefedbench.scrapers.refresh import RefreshPlan, parse_mirrors, parse_sources, refresh, window_for

    if args.release:
        return _refresh_release(args)
    sources = parse_sources(args.sources)
    plan = RefreshPlan(
        window=window_for(args.since, args.until, args.after_cutoff_of, args.public_months),
        sources=sources,
        mirrors=parse_mirrors(args.mirror, sources),
        span=_span_settings(args),
        splits=SplitRatios.parse(args.splits),
        after_cutoff_of=args.after_cutoff_of,
        name=args.name,
        base_urls=_key_values(args.base_url, "--base-url"),
        scraper_options={"biorxiv": {"server": args.biorxiv_server}},
        refresh_cache=args.refresh_cache,
        rate_limit=args.rate_limit,
    )
    results = refresh(plan, home=args.home, progress=not args.quiet)
    infos = [snapshot_info(load_snapshot(r.path)) for r in results]
    if args.push_to_hub:
        from largefedbench.data.hub import push_snapshot

        if len(results) != 1:
            from largefedbench.errors import InputError

            raise InputError("--push-to-hub takes one snapshot; pass --sources of one dataset (biorxiv, or us,uk,ca)")
        url = push_snapshot(results[0].path, args.push_to_hub)
        print(f"published {results[0].path.name} to {url}", file=sys.stderr)
    return _show(args, infos, lambda: "\n".join(f"snapshot {'written' if r.created else 'unchanged'}: {r.path}\n\n"
                                                f"{format_info(info)}\n" for r, info in zip(results, infos)))


def _refresh_release(args) -> int:
    from largefedbench.errors import InputError
    from largefedbench.scrapers.release_rebuild import rebuild_release

    window_flags = [f for f, v in (("--since", args.since), ("--until", args.until), ("--after-cutoff-of", args.after_cutoff_of),
                                   ("--sources", args.sources), ("--name", args.name), ("--push-to-hub", args.push_to_hub)) if v]
    if window_flags:
        raise InputError(f"--release rebuilds what the release records; drop {', '.join(window_flags)}")
    results = rebuild_release(args.release, home=args.home, progress=not args.quiet,
                              base_urls=_key_values(args.base_url, "--base-url"), rate_limit=args.rate_limit,
                              refresh_cache=args.refresh_cache)
    for r in results:
        print(f"{r.path.name}: {'rebuilt' if r.created else 'already here'}, content {r.manifest['content_sha256'][:12]}… "
              f"= release {args.release}")
    return 0


def cmd_release(args) -> int:
    from largefedbench.data.federated import resolve_snapshot
    from largefedbench.data.releases import check_release_name, list_releases, write_release
    from largefedbench.data.snapshot import read_manifest
    from largefedbench.errors import InputError

    if args.list:
        releases = list_releases(args.home)
        return _show(args, releases, lambda: "\n".join(
            f"{r['name']}  {r['created_at'][:10]}  " + ", ".join(f"{s['dataset']}@{s['content_sha256'][:12]}"
                                                               for s in r["snapshots"]) for r in releases))
    if not args.name or not args.snapshots:
        raise InputError("lfb release NAME --snapshots SNAP[,SNAP]: name the release (e.g. 2026q4) and its snapshots "
                         "(names, prefixes or dataset names: the newest of each); `lfb release --list` lists releases")
    check_release_name(args.name)  # before reading any snapshot
    manifests = [read_manifest(resolve_snapshot(ref.strip(), args.home)) for ref in args.snapshots.split(",") if ref.strip()]
    path, release = write_release(args.name, manifests, home=args.home, out=args.out, previous=args.previous)
    if args.push_to_hub:
        from largefedbench.data.hub import push_release

        for url in push_release(release, args.push_to_hub, home=args.home):
            print(f"published {url} (tag {args.name})", file=sys.stderr)
    return _show(args, release, lambda: "\n".join(
        [f"release {args.name} written to {path} (previous: {release['previous'] or 'none'})"]
        + [f"  {rec['dataset']}@{args.name}: {rec['snapshot']}, {rec['window']['since']}..{rec['window']['until']}, "
           f"content {rec['content_sha256'][:12]}…" for rec in release["snapshots"]]
        + ["changes:", *(f"  - {c}" for c in release["changes"])]))


# --- methods and eval ----------------------------------------------------------------------------------------
def cmd_methods(args) -> int:
    from largefedbench.registry import list_methods

    if args.name:
        return _method_settings(args)
    rows = [m.to_dict() for m in list_methods()]

    def line(r: dict) -> str:
        detail = r["paper"] if r["status"] != "broken" else f"cannot load: {r['error']}"
        src = "" if r["source"] == "built-in" else f" [{r['source']}]"
        return f"{r['name']:<20}{r['output'] or '-':<16}{r['status']:<10}{detail}{src}"

    return _show(args, rows, lambda: "\n".join([f"{'name':<20}{'output':<16}{'status':<10}paper", *map(line, rows)]))


def _method_settings(args) -> int:
    """``lfb methods NAME``: the method's paper, output and every setting with its value in each preset."""
    import inspect

    from largefedbench.registry import resolve_method
    from largefedbench.run.presets import PRESETS, settings_table

    method = resolve_method(args.name)
    cls = method.cls
    doc = inspect.getdoc(cls.Config) or ""
    info = {"name": cls.name, "paper": cls.paper, "output": cls.output, "source": method.source,
            "version": method.version, "config": cls.Config.__name__, "config_doc": doc,
            "settings": settings_table(cls)}

    def text() -> str:
        def cell(v) -> str:
            return json.dumps(v) if isinstance(v, (str, list)) else str(v)

        rows = [[r["setting"], *(cell(r[p]) for p in PRESETS)] for r in info["settings"]]
        widths = [max(len(x) for x in col) for col in zip(["setting", *PRESETS], *rows)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [f"{cls.name} ({cls.output}; {method.source} {method.version}): {cls.paper}", "",
                 *(f"  {line}" for line in doc.split("\n\n")[0].splitlines()), "",
                 f"{cls.Config.__name__}: change one with `lfb eval --set KEY=VALUE`; `--preset` picks the column "
                 "(default: the profile's, cpu for the cpu profile)",
                 *([fmt.format("setting", *PRESETS), *(fmt.format(*r) for r in rows)] if rows else ["(no settings)"])]
        return "\n".join(line.rstrip() for line in lines)

    return _show(args, info, text)


def _seeds(text: str) -> tuple[int, ...]:
    from largefedbench.errors import InputError

    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--seeds {text!r}: give comma-separated integers, e.g. 0,1,2") from None


def _set_pairs(pairs: list[str]) -> dict[str, str]:
    from largefedbench.errors import InputError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {pair!r} must look like KEY=VALUE, e.g. --set rounds=5")
        out[key.strip()] = value.strip()
    return out


def cmd_eval(args) -> int:
    from largefedbench.errors import InputError
    from largefedbench.run.eval import EvalRequest, run_eval

    defaults = args.dataset is None and args.profile is None
    if defaults:
        print("lfb eval: no --dataset or --profile given: running on the offline demo snapshot with the tiny profile "
              "(CPU-sized models; the numbers check the pipeline, they are not paper numbers)", file=sys.stderr)
    if args.synthetic is None and (args.made_with or args.name):
        raise InputError("--made-with and --name describe a --synthetic file; with --method drop them")
    request = EvalRequest(
        method=args.name if args.synthetic is not None else args.method, synthetic=args.synthetic,
        made_with=args.made_with, dataset=args.dataset, epsilon=args.epsilon, delta=args.delta,
        profile=args.profile or "tiny", seeds=_seeds(args.seeds), overrides=_set_pairs(args.set or []),
        preset=args.preset, out=args.out, home=args.home, device=args.device, progress=not args.quiet,
        executor=args.executor, ray_address=args.ray_address, noise_free=args.noise_free,
        shuffled_releases=args.shuffled_releases, public=args.public, select_on=args.select_on,
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


def cmd_bench_scale(args) -> int:
    from largefedbench.bench.scale import format_report, run_scale

    log = _progress("bench", args.quiet or args.json)
    report = run_scale(args.clients, args.samples, dim=args.dim, executor=args.executor, ray_address=args.ray_address,
                       seed=args.seed, path=args.path, progress=not args.quiet, log=log)
    return _show(args, report.to_dict(), lambda: format_report(report))


def cmd_bench_llm(args) -> int:
    from largefedbench.bench.llm import format_table, run_llm_bench
    from largefedbench.errors import InputError

    log = _progress("bench", args.quiet or args.json)
    for name in ("prompts", "new_tokens", "fid_samples", "dpo_pairs"):
        if getattr(args, name) < (1 if name in ("prompts", "new_tokens") else 0):
            raise InputError(f"--{name.replace('_', '-')}={getattr(args, name)} is too small")
    report = run_llm_bench(prompts=args.prompts, new_tokens=args.new_tokens, batch_sizes=_batch_sizes(args.batch_sizes),
                           fid_samples=args.fid_samples, dpo_pairs=args.dpo_pairs, root=args.home, log=log)
    return _show(args, report, lambda: format_table(report))


def _batch_sizes(text: str) -> list[int]:
    from largefedbench.errors import InputError

    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--batch-sizes={text!r}: give comma-separated integers, e.g. 8,32,64") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"--batch-sizes={text!r}: give at least one batch size >= 1")
    return sizes


# --- audit (issue 12: canary clients, an empirical epsilon lower bound beside the claimed one) ------------------
def cmd_audit(args) -> int:
    from largefedbench.run.audit import Audit
    from largefedbench.run.eval import EvalRequest, run_eval

    audit = Audit(canaries=args.canaries, confidence=args.confidence, inclusion_seed=args.inclusion_seed,
                  progress=not args.quiet, leak_canaries=args.leak_canaries)
    results = []
    for eps in args.epsilon or [None]:
        request = EvalRequest(
            method=args.method, dataset=args.dataset, epsilon=eps, delta=args.delta,
            profile=args.profile or "tiny", seeds=_seeds(args.seeds), overrides=_set_pairs(args.set or []),
            preset=args.preset, out=args.out, home=args.home, device=args.device, progress=not args.quiet,
            public=args.public,
        )
        result = run_eval(request, log=_progress("audit"), audit=audit)
        results.append(result)
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


# --- leaderboard and smoke (issue 5: entries, validation, the board, the submission path) ------------------
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
    _show(args, result.to_dict(), result.format)
    return 0 if result.ok else 1


def cmd_leaderboard_submit(args) -> int:
    from largefedbench.run.submit import submit

    log = _progress("submit", args.quiet)
    result = submit(args.entry, board=args.board, smoke_plugins=not args.no_smoke, home=args.home,
                    allow_demo=args.allow_demo, log=log)
    _show(args, result.to_dict(), result.format)
    return 0 if result.ok else 1


def cmd_smoke(args) -> int:
    from largefedbench.errors import InputError
    from largefedbench.run.smoke import smoke

    log = _progress("smoke", args.quiet)
    if args.attacks:
        from largefedbench.run.attack_check import check_attacks

        if args.method:
            raise InputError("--attacks runs LargeFedBench's attack kit, not a method: drop METHOD")
        report = check_attacks(home=args.home, log=log)
        _show(args, report.to_dict(), report.format)
        return 0 if report.ok else 1
    if not args.method:
        raise InputError("give METHOD (a name from `lfb methods`, module:Class or path/to/file.py:Class), or --attacks")
    report = smoke(args.method, epsilon=args.epsilon, delta=args.delta, overrides=_set_pairs(args.set or []),
                   seed=args.seed, home=args.home, log=log, sandbox=args.sandbox)
    _show(args, report.to_dict(), report.format)
    return 0 if report.ok else 1


def _add_leaderboard_parsers(sub) -> None:
    board = sub.add_parser("leaderboard", help="validate, render and reproduce leaderboard entries",
                           epilog="examples:\n  lfb leaderboard validate\n  lfb leaderboard render --out leaderboard\n"
                           "  lfb leaderboard reproduce leaderboard/entries/demo/public/ENTRY.json\n"
                           "  lfb leaderboard submit leaderboard/entries/demo/my-method/ENTRY.json --board ../board/leaderboard",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    bsub = board.add_subparsers(dest="leaderboard_command", metavar="COMMAND")
    p = bsub.add_parser("validate", help="check entries: schema, ε from the ledgers, δ, seeds, consistency, paths",
                        description="Check every entry (default: ./leaderboard/entries). Exit 1 if any is invalid. "
                        "Entries are read as data only: nothing in them is imported or executed.")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="entry files or folders")
    p.add_argument("--all", dest="verbose_entries", action="store_true", help="list every entry, not only those with findings")
    _add_output_flags(p, quiet_help=None)
    p.set_defaults(func=cmd_leaderboard_validate)
    p = bsub.add_parser("render", help="write README.md, index.html and plots/ from the entries",
                        description="Render the board from OUT/entries into OUT/README.md, OUT/index.html and OUT/plots/. "
                        "Invalid entries are not shown; --check writes nothing and exits 1 if the pages are stale.")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="the board folder (default ./leaderboard)")
    p.add_argument("--check", action="store_true", help="only check that README.md and index.html are up to date")
    p.set_defaults(func=cmd_leaderboard_render)
    p = bsub.add_parser("reproduce", help="re-run an entry's resolved config and compare the numbers",
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
    _add_home(p, old="--root")
    p.add_argument("--out", type=Path, default=None, help="keep the re-run's entry under this board folder")
    p.add_argument("--accuracy-tolerance", type=float, default=None, help="one fixed absolute tolerance on accuracies "
                   "(default: 2 sample SDs of the entry's own per-seed values, at least 0.002; leaderboard/ranks.py)")
    _add_output_flags(p)
    p.set_defaults(func=cmd_leaderboard_reproduce)
    p = bsub.add_parser("submit", help="check an entry as the board's CI will and lay out its pull request",
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
    p.set_defaults(func=cmd_leaderboard_submit)
    board.set_defaults(func=lambda a: (board.print_help(), 2)[1])

    p = sub.add_parser("smoke", help="seconds-long check of a method before `lfb eval` (contract, ledger, determinism)",
                       description="Run METHOD twice with one seed on the demo snapshot with the tiny profile and check "
                       "the contract, that private data is reached only through the federation, that every DP release "
                       "is in the ledger (non-empty for a private method, ε within the target) and that the runs agree.")
    p.add_argument("method", nargs="?", help="a name from `lfb methods`, or module:Class / path/to/file.py:Class")
    p.add_argument("--attacks", action="store_true", help="instead of a method, run LargeFedBench's attack kit "
                   "(snapshot reads, memory walks, a scorer patch, non-finite clients, environment probes) under "
                   "lfb eval and report which got through this machine's sandbox")
    p.add_argument("--epsilon", type=float, help="target ε (default 1)")
    p.add_argument("--delta", type=float, help="δ (default 3e-6)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a Config.tiny() key (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sandbox", choices=["auto", "off"], default="auto", help="as lfb eval runs the method: auto "
                   "(default: a plug-in's train() in its sandbox, the two runs compared; a built-in in this process, "
                   "with a third run whose client functions share it), off (every method in this process)")
    _add_home(p, old="--root")
    _add_output_flags(p)
    p.set_defaults(func=cmd_smoke)
def cmd_new_method(args) -> int:
    import shlex

    from largefedbench.run.scaffold import new_method

    folder = new_method(args.name, args.dir)
    shown = shlex.quote(str(folder))
    print(f"wrote the plug-in package {folder} (method {args.name!r}, the DP unigram template). Next:\n"
          f"  cd {shown} && pip install -e .     # registers {args.name} (README.md: largefedbench comes from its checkout)\n"
          f"  pytest tests/                      # the contract and the presets\n"
          f"  lfb smoke {args.name}               # the demo, tiny profile: about a minute the first time\n"
          f"  lfb eval --method {args.name} --seeds 0,1,2")
    return 0


def _add_new_parser(sub) -> None:
    new = sub.add_parser("new", help="start a plug-in package: `lfb new method NAME`")
    nsub = new.add_subparsers(dest="new_command", metavar="WHAT")
    p = nsub.add_parser("method", help="write a plug-in package that installs and passes `lfb smoke`",
                        description="Write a method package (the DP unigram template under NAME): pyproject.toml with "
                        "the largefedbench.methods entry point, the module with its paper(), cpu() and tiny() presets, "
                        "tests/test_method.py and a README with the install and smoke commands.")
    p.add_argument("name", help="the method's registry name, a safe id (e.g. my-method)")
    p.add_argument("--dir", type=Path, default=None, help="the package folder to create (default ./lfb-NAME)")
    p.set_defaults(func=cmd_new_method)
    new.set_defaults(func=lambda a: (new.print_help(), 2)[1])


# --- end of leaderboard and smoke ------------------------------------------------------------------------------


# --- parser --------------------------------------------------------------------------------------------
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


def _add_output_flags(p: argparse.ArgumentParser, *, json_help: str | None = None,
                      quiet_help: str | None = "no progress") -> None:
    """``--json`` (print JSON instead of text) and, unless ``quiet_help`` is None, ``--quiet``."""
    p.add_argument("--json", action="store_true", help=json_help)
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def _add_common(p: argparse.ArgumentParser) -> None:
    _add_home(p, old="--out")
    _add_output_flags(p, json_help="print one JSON document", quiet_help="no progress bars")


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

    p = sub.add_parser("refresh", help="scrape sources for a date window and write dated snapshots",
                       description="Scrape the sources of a window, clean, cut into spans and write one snapshot per dataset. "
                       "Interrupted refreshes resume from the raw responses stored under $LFB_HOME/raw.")
    p.add_argument("--sources", help="comma-separated: biorxiv, us, uk, ca, arxiv (default: all live ones; biorxiv builds the biorxiv snapshot, us/uk/ca the congress one, arxiv (--mirror only) arxiv-qbio)")
    p.add_argument("--since", help="window start, YYYY-MM or YYYY-MM-DD")
    p.add_argument("--until", help="window end, YYYY-MM (end of month) or YYYY-MM-DD (default: today)")
    p.add_argument("--after-cutoff-of", metavar="MODEL", help="start the window after this LLM's knowledge cutoff (see `lfb cutoffs`)")
    p.add_argument("--public-months", type=int, default=1, help="months before the window fetched as public records (default 1)")
    p.add_argument("--span-tokenizer", default=os.environ.get("LFB_SPAN_TOKENIZER", "gpt2"),
                   help="gpt2 (tiktoken; default), minilm-wordpiece (offline) or a .tiktoken file; env LFB_SPAN_TOKENIZER")
    p.add_argument("--span-tokens", type=int, default=64, help="tokens per span (default 64)")
    p.add_argument("--last-span-min-tokens", type=int, default=16, help="keep a partial last span with at least this many tokens (default 16)")
    p.add_argument("--splits", default="0.8,0.1,0.1", help="train,validation,test fractions of private clients")
    p.add_argument("--name", help="snapshot name (default: DATASET-SINCE-UNTIL-HASH)")
    p.add_argument("--base-url", action="append", metavar="SOURCE=URL", help="override a source's base URL (also LFB_<SOURCE>_URL)")
    p.add_argument("--mirror", action="append", metavar="[SOURCE=]DIR",
                   help="read a source from a folder of its real records copied offline instead of the live API: "
                   "us (Congressional Record issue files) or arxiv (arXiv q-bio listing files; a stand-in for "
                   "bioRxiv, mirror only); the snapshot is marked mirror-derived")
    p.add_argument("--rate-limit", type=float, help="requests per second per source (default 1; env LFB_RATE_LIMIT)")
    p.add_argument("--refresh-cache", action="store_true", help="download again even what the raw cache holds")
    p.add_argument("--push-to-hub", metavar="OWNER/NAME", help="publish the snapshot with its card to a Hugging Face dataset repo")
    p.add_argument("--release", metavar="NAME", help="rebuild release NAME's snapshots from their sources and check "
                   "each against the release's content hash (`lfb release --list`)")
    p.add_argument("--biorxiv-server", default="biorxiv", choices=["biorxiv", "medrxiv"], help=argparse.SUPPRESS)
    _add_common(p)
    p.set_defaults(func=cmd_refresh)

    p = sub.add_parser("release", help="name a set of snapshots as a dated release (quarterly: YYYYqN)",
                       description="Write release NAME: for each snapshot its dataset, window, content hash, sources "
                       "and scraper versions, cleaning, span and split settings, with a changelog against the previous "
                       "release. `lfb refresh --release NAME` rebuilds it, `--dataset DATASET@NAME` (and "
                       "load_snapshot) loads it, refusing content that does not hash to it.")
    p.add_argument("name", nargs="?", help="the release's name, e.g. 2026q4")
    p.add_argument("--snapshots", help="comma-separated snapshot names, prefixes or dataset names (the newest of each)")
    p.add_argument("--previous", help="the release to write the changelog against (default: the newest named before it)")
    p.add_argument("--out", type=Path, metavar="DIR", help="write the release file here (default $LFB_HOME/releases; "
                   "the project's own releases ship in largefedbench/data/releases)")
    p.add_argument("--push-to-hub", metavar="OWNER", help="publish each snapshot to OWNER/largefedbench-DATASET as a "
                   "revision tagged NAME, with the release in its card")
    p.add_argument("--list", action="store_true", help="list the releases known here")
    _add_home(p)
    _add_output_flags(p, quiet_help=None)
    p.set_defaults(func=cmd_release)

    data = sub.add_parser("data", help="snapshots: the demo, list, info, verify, export")
    dsub = data.add_subparsers(dest="data_command", metavar="COMMAND")
    p = dsub.add_parser("demo", help="build (deterministically, offline) and show the synthetic demo snapshot")
    _add_common(p)
    p.add_argument("--prose", action="store_true", help="the demo-prose snapshot instead: the demo's records with "
                   "text a real LLM wrote (shipped; the cpu profile's default dataset)")
    p.set_defaults(func=cmd_data_demo)
    p = dsub.add_parser("list", help="list the snapshots under $LFB_HOME")
    _add_common(p)
    p.set_defaults(func=cmd_data_list)
    p = dsub.add_parser("info", help="a snapshot's statistics (POPri Table 5 columns, dates, sources, licences)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    _add_common(p)
    p.set_defaults(func=cmd_data_info)
    p = dsub.add_parser("verify", help="hash a snapshot's data in full against its manifest (loading only checks "
                        "file sizes and times once it has hashed)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    _add_common(p)
    p.set_defaults(func=cmd_data_verify)
    p = dsub.add_parser("export", help="write a snapshot for other tools: flower (an HF dataset, one row per sample "
                        "with client_id) or dpsda (private.csv and public.csv with the text column Private Evolution "
                        "reads)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    p.add_argument("--format", required=True, choices=["flower", "dpsda"], help="what to write")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new folder to write it into")
    _add_home(p)
    p.set_defaults(func=cmd_data_export)
    data.set_defaults(func=lambda a: (data.print_help(), 2)[1])

    privacy = sub.add_parser("privacy", help="calibrate noise (sigma) for a budget, or the epsilon of a noise level")
    psub = privacy.add_subparsers(dest="privacy_command", metavar="COMMAND")
    for name, target, func, help_ in (
        ("noise", "--epsilon", cmd_privacy_noise, "sigma that meets (epsilon, delta) over the planned rounds"),
        ("epsilon", "--sigma", cmd_privacy_epsilon, "epsilon spent at delta by rounds with noise multiplier sigma"),
    ):
        p = psub.add_parser(name, help=help_, description=help_ + ". POPri Table 3: lfb privacy noise --epsilon 1 "
                            "--delta 3e-6 --clients 10000 --per-round 1000 --steps 20 [--mechanism tree]")
        p.add_argument(target, dest=target.strip("-"), type=float, required=True)
        p.add_argument("--delta", type=float, required=True)
        p.add_argument("--sample-rate", type=float, help="Poisson sampling rate q (or give --clients and --per-round)")
        p.add_argument("--steps", type=int, required=True, help="rounds T (tree: epochs, as POPri Table 3 accounts)")
        p.add_argument("--mechanism", choices=["gaussian", "tree"], default="gaussian",
                       help="gaussian: Poisson-subsampled Gaussian (DP-FedAvg, POPri); tree: DP-FTRL tree aggregation")
        p.add_argument("--clients", type=int, help="number of clients N")
        p.add_argument("--per-round", type=int, help="clients per round B (q = B/N)")
        p.add_argument("--accountant", default="auto", help="auto, rdp, pld, prv (default auto)")
        _add_output_flags(p, quiet_help=None)
        p.set_defaults(func=func)
    privacy.set_defaults(func=lambda a: (privacy.print_help(), 2)[1])

    p = sub.add_parser("methods", help="the registered methods: name, paper, output kind, status; or one method's "
                       "settings", description="List the registered methods, or with NAME show one method's settings: "
                       "each `--set` key with its value in the paper, cpu and tiny presets.")
    p.add_argument("name", nargs="?", metavar="NAME", help="a method name (or module:Class): show its settings")
    _add_output_flags(p, quiet_help=None)
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("eval", help="run a method under an (epsilon, delta) budget and write a leaderboard entry",
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
    p.set_defaults(func=cmd_eval)

    bench = sub.add_parser("bench", help="benchmarks: scale, llm")
    bsub = bench.add_subparsers(dest="bench_command", metavar="COMMAND")
    p = bsub.add_parser("scale", help="POPri's client side through the federation at paper scale (synthetic)",
                        description="Release POPri's noised score sum once on a synthetic federation (random unit "
                        "embeddings, ~6.6 spans per client): per-stage times, peak RSS, this machine's fp32 GEMM rate, "
                        "the naive matrix-product limit (clients x samples x dim MACs at that rate) and the ratio.")
    p.add_argument("--clients", type=int, default=133_000, help="clients (default 133000, Congressional Speeches)")
    p.add_argument("--samples", type=int, default=18_000, help="synthetic samples (default 18000)")
    p.add_argument("--dim", type=int, default=384, help="embedding width (default 384)")
    p.add_argument("--path", choices=["shortcut", "general"], default="shortcut",
                   help="shortcut: POPri's exact algebraic clipped sum (default); general: streamed score rows")
    p.add_argument("--seed", type=int, default=0)
    _add_executor_flags(p, default="local")  # library client functions only: nothing to isolate
    _add_output_flags(p, json_help="print one JSON document (with a checksum of the noised sum)",
                      quiet_help="no progress bar")
    p.set_defaults(func=cmd_bench_scale)
    p = bsub.add_parser("llm", help="the cpu profile's LLM: sampling tokens/s and a DPO step against this machine's limit",
                        description="SmolLM2-135M (the cpu profile's generator): new tokens/s by batch size for continuation, "
                        "few-shot and instruction prompts in float32 and bf16 (and HF generate, the naive reference), a DPO "
                        "step's seconds, each against 2 x params FLOPs/token (6 x for DPO) at the GEMM rate measured in the "
                        "same run; and the bf16-vs-float32 quality check (teacher-forced agreement, KL, FID shift).")
    p.add_argument("--prompts", type=int, default=64, help="samples per case (default 64)")
    p.add_argument("--new-tokens", type=int, default=48, help="new tokens per sample (default 48, the cpu presets')")
    p.add_argument("--batch-sizes", default="16,64", help="comma-separated batch sizes (default 16,64)")
    p.add_argument("--fid-samples", type=int, default=256, help="samples per FID of the quality check (0: skip it)")
    p.add_argument("--dpo-pairs", type=int, default=8, help="preference pairs of the DPO timing (0: skip it)")
    p.add_argument("--home", default=None, help="where the converted GGUF is cached (default $LFB_HOME)")
    _add_output_flags(p, json_help="print one JSON document", quiet_help="no progress lines")
    p.set_defaults(func=cmd_bench_llm)
    bench.set_defaults(func=lambda a: (bench.print_help(), 2)[1])

    p = sub.add_parser("audit", help="audit a method's privacy: canary clients in the run, an empirical epsilon lower bound",
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
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("cutoffs", help="the registry of LLM knowledge cutoffs; `measure`: an LLM's loss by month")
    _add_output_flags(p, quiet_help=None)
    p.set_defaults(func=cmd_cutoffs)
    csub = p.add_subparsers(dest="cutoffs_command", metavar="COMMAND")
    p = csub.add_parser("measure", help="an LLM's per-token loss by month over dated records, and its effective cutoff",
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
    p.set_defaults(func=cmd_cutoffs_measure)
    _add_leaderboard_parsers(sub)  # leaderboard and smoke
    _add_new_parser(sub)
    return parser


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags `lfb eval` and `lfb audit` share: where the run reads, what it runs with, where it writes."""
    p.add_argument("--dataset", help="snapshot name, prefix, dataset name, folder or hf://owner/name (default: the offline demo; demo-prose with --profile cpu)")
    p.add_argument("--delta", type=float, help="delta, below 1/number of train clients (default 3e-6 as POPri)")
    p.add_argument("--profile", help="tiny (offline, CPU tests), cpu (offline, a real LLM on the CPU), cpu-wide (cpu "
                   "with a 12M-parameter on-device model), small (one GPU) or paper (default: tiny)")
    p.add_argument("--preset", choices=["paper", "cpu", "tiny"], help="method defaults: paper, cpu or tiny (default: "
                   "the profile's own: cpu for cpu and cpu-wide, tiny for tiny, else paper)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2; the board ranks entries "
                   "with >= 3)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a method config key (repeatable)")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="the board folder to write the entry under "
                   "(default ./leaderboard)")
    _add_home(p, old="--root")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--public", help="the public resources (prompts, public replay, the ε = 0 model): generic (the "
                   "offline stand-in for C4; cpu's default), c4 (the paper's, from the Hub; paper and small), c4:PATH "
                   "(local C4 shards) or split (the snapshot's pre-window records; tiny's default)")


def _add_executor_flags(p: argparse.ArgumentParser, default: str = "process") -> None:
    p.add_argument("--executor", choices=["process", "local", "ray"], default=default,
                   help=f"where client computations run (default {default}): process (worker processes, so a client "
                   "function cannot change what the method reads), local (in this process; built-in methods only) or "
                   "ray (pip install 'largefedbench[ray]')")
    p.add_argument("--ray-address", help="join this Ray cluster (e.g. auto or ray://head:10001) instead of starting a "
                   "local one")


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


if __name__ == "__main__":
    sys.exit(main())
