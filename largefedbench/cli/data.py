"""``lfb data``: the demo snapshot, and listing, inspecting, verifying and exporting snapshots."""

from __future__ import annotations

import time
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_common, _add_group, _add_home
from largefedbench.cli.output import _show


def cmd_data_demo(args) -> int:
    from largefedbench.data.demo import build_demo
    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.info import format_info, snapshot_info
    from largefedbench.paths import check_writable_dir, lfb_home, snapshots_dir

    label = f"--home {args.home}" if args.home is not None else f"LFB_HOME={lfb_home()}"
    check_writable_dir(snapshots_dir(args.home), label)  # before generating the records
    if args.prose:
        from largefedbench.data.demo import build_prose_demo

        result = build_prose_demo(root=args.home, progress=not args.quiet)
    else:
        result = build_demo(root=args.home, progress=not args.quiet)
    info = snapshot_info(load_snapshot(result.path))
    state = "built" if result.created else "already built (identical content)"
    return _show(args, info, lambda: f"demo snapshot {state}: {result.path}\n\n{format_info(info)}")


def cmd_data_list(args) -> int:
    from largefedbench.data.snapshot import list_snapshots

    rows = list_snapshots(args.home)

    # columns as wide as their longest value and two spaces (a dataset name like arxiv-qbio ran into its window)
    wn = max([48, *(len(m["name"]) + 2 for m in rows)])
    wd = max([10, *(len(m["dataset"]) + 2 for m in rows)])

    def line(m: dict) -> str:
        w, c, tag = m["window"], m["counts"], " (synthetic)" if m.get("synthetic") else ""
        return (f"{m['name']:<{wn}}{m['dataset']:<{wd}}{w['since'] + '..' + w['until']:<25}"
                f"{sum(c['clients'].values()):>9}{sum(c['spans'].values()):>9}{tag}")

    header = f"{'name':<{wn}}{'dataset':<{wd}}{'window':<25}{'clients':>9}{'spans':>9}"
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


def add_data_parser(sub) -> None:
    """``lfb data`` and its commands."""
    dsub = _add_group(sub, "data", help="snapshots: the demo, list, info, verify, export")
    p = _add_command(dsub, "demo", cmd_data_demo,
                     help="build (deterministically, offline) and show the synthetic demo snapshot")
    _add_common(p)
    p.add_argument("--prose", action="store_true", help="the demo-prose snapshot instead: the demo's records with "
                   "text a real LLM wrote (shipped; the cpu profile's default dataset)")
    p = _add_command(dsub, "list", cmd_data_list, help="list the snapshots under $LFB_HOME")
    _add_common(p)
    p = _add_command(dsub, "info", cmd_data_info,
                     help="a snapshot's statistics (POPri Table 5 columns, dates, sources, licences)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    _add_common(p)
    p = _add_command(dsub, "verify", cmd_data_verify,
                     help="hash a snapshot's data in full against its manifest (loading only checks "
                     "file sizes and times once it has hashed)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    _add_common(p)
    p = _add_command(dsub, "export", cmd_data_export,
                     help="write a snapshot for other tools: flower (an HF dataset, one row per sample "
                     "with client_id) or dpsda (private.csv and public.csv with the text column Private Evolution "
                     "reads)")
    p.add_argument("snapshot", help="snapshot name, unique prefix, dataset name (newest) or folder")
    p.add_argument("--format", required=True, choices=["flower", "dpsda"], help="what to write")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new folder to write it into")
    _add_home(p)
