"""``lfb refresh`` (scrape a window into snapshots, or rebuild a release) and ``lfb release`` (name snapshots as a
release)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_common, _add_home, _add_output_flags
from largefedbench.cli.output import _show


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
    from largefedbench.data.releases import check_release_name, find_release, list_releases, new_release
    from largefedbench.data.snapshot import read_manifest
    from largefedbench.errors import InputError
    from largefedbench.io import atomic_write_json

    if args.list:
        releases = list_releases(args.home)
        return _show(args, releases, lambda: "\n".join(
            f"{r['name']}  {r['created_at'][:10]}  " + ", ".join(f"{s['dataset']}@{s['content_sha256'][:12]}"
                                                               for s in r["snapshots"]) for r in releases))
    if args.name and args.push_to_hub and not args.snapshots:  # publish a release written earlier (a push failed)
        check_release_name(args.name)
        release = find_release(args.name, args.home)
        _push(release, args)
        return _show(args, release, lambda: f"release {args.name} published to {args.push_to_hub}")
    if not args.name or not args.snapshots:
        raise InputError("lfb release NAME --snapshots SNAP[,SNAP]: name the release (e.g. 2026q4) and its snapshots "
                         "(names, prefixes or dataset names: the newest of each); `lfb release --list` lists releases; "
                         "`lfb release NAME --push-to-hub OWNER` publishes a release written earlier")
    check_release_name(args.name)  # before reading any snapshot
    manifests = [read_manifest(resolve_snapshot(ref.strip(), args.home)) for ref in args.snapshots.split(",") if ref.strip()]
    path, release = new_release(args.name, manifests, home=args.home, out=args.out, previous=args.previous)
    if args.push_to_hub:  # the record is written once every push succeeded: a failed push leaves nothing to undo
        _push(release, args)
    atomic_write_json(path, release)
    return _show(args, release, lambda: "\n".join(
        [f"release {args.name} written to {path} (previous: {release['previous'] or 'none'})"]
        + [f"  {rec['dataset']}@{args.name}: {rec['snapshot']}, {rec['window']['since']}..{rec['window']['until']}, "
           f"content {rec['content_sha256'][:12]}…" for rec in release["snapshots"]]
        + ["changes:", *(f"  - {c}" for c in release["changes"])]))


def _push(release: dict, args) -> None:
    from largefedbench.data.hub import push_release

    for url in push_release(release, args.push_to_hub, home=args.home):
        print(f"published {url} (tag {release['name']})", file=sys.stderr)


def add_refresh_parser(sub) -> None:
    """``lfb refresh``."""
    p = _add_command(sub, "refresh", cmd_refresh, help="scrape sources for a date window and write dated snapshots",
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
    p.add_argument("--push-to-hub", metavar="OWNER/NAME", help="publish the snapshot with its card to a Hugging Face dataset repo "
                   "(file://DIR: into the folder DIR, the hub's layout)")
    p.add_argument("--release", metavar="NAME", help="rebuild release NAME's snapshots from their sources and check "
                   "each against the release's content hash (`lfb release --list`)")
    p.add_argument("--biorxiv-server", default="biorxiv", choices=["biorxiv", "medrxiv"], help=argparse.SUPPRESS)
    _add_common(p)


def add_release_parser(sub) -> None:
    """``lfb release``."""
    p = _add_command(sub, "release", cmd_release, help="name a set of snapshots as a dated release (quarterly: YYYYqN)",
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
                   "revision tagged NAME, with the release in its card; the release is written once every push "
                   "succeeded. Without --snapshots: publish release NAME, written earlier. file://DIR: the same "
                   "layout in the folder DIR (DIR/largefedbench-DATASET, the tag as DIR/largefedbench-DATASET@NAME)")
    p.add_argument("--list", action="store_true", help="list the releases known here")
    _add_home(p)
    _add_output_flags(p, quiet_help=None)
