"""Snapshot statistics: the columns of the POPri paper's Table 5 plus dates, sources and licences."""

from __future__ import annotations

import statistics
from typing import Any

from largefedbench.data.federated import FederatedDataset
from largefedbench.data.splits import PRIVATE_SPLITS


def snapshot_info(fd: FederatedDataset) -> dict[str, Any]:
    """Counts recomputed from the stored clients (not copied from the manifest)."""
    splits = {name: len(split) for name, split in fd.splits.items()}
    span_counts = {name: split.span_counts() for name, split in fd.splits.items()}
    private = [int(n) for s in PRIVATE_SPLITS for n in span_counts[s]]
    dates = [d for split in fd.splits.values() for d in split.column("date")]
    licenses: dict[str, int] = {}
    sources: dict[str, int] = {}
    for split in fd.splits.values():
        for lic in split.column("license"):
            licenses[lic] = licenses.get(lic, 0) + 1
        for src in split.column("source"):
            sources[src] = sources.get(src, 0) + 1
    m = fd.manifest
    return {
        "name": fd.name,
        "path": str(fd.path),
        "dataset": m["dataset"],
        "synthetic": fd.synthetic,
        "n_clients": sum(splits.values()),
        "n_private_clients": sum(splits[s] for s in PRIVATE_SPLITS),
        "splits": splits,
        "n_spans": int(sum(c.sum() for c in span_counts.values())),
        "split_spans": {name: int(c.sum()) for name, c in span_counts.items()},
        "spans_per_client": {
            "mean": statistics.fmean(private) if private else 0.0,
            "sd": statistics.pstdev(private) if private else 0.0,
        },
        "span_tokens": m["span"]["span_tokens"],
        "span_tokenizer": m["span"]["tokenizer"],
        "date_min": min(dates) if dates else None,
        "date_max": max(dates) if dates else None,
        "window": m["window"],
        "sources": sources,
        "licenses": licenses,
        "rejected": m.get("rejected", {}),
        "content_sha256": m["content_sha256"],
    }


def format_info(info: dict[str, Any]) -> str:
    """Human-readable table (Table 5 columns first)."""
    s = info["splits"]
    sp = info["split_spans"]
    spc = info["spans_per_client"]
    w = info["window"]
    lines = [
        f"snapshot   {info['name']}" + ("   [SYNTHETIC demo data]" if info["synthetic"] else ""),
        f"path       {info['path']}",
        "",
        f"{'split':<12}{'clients':>10}{'spans':>10}",
    ]
    for name in ("train", "validation", "test", "public"):
        lines.append(f"{name:<12}{s.get(name, 0):>10}{sp.get(name, 0):>10}")
    lines += [
        f"{'total':<12}{info['n_clients']:>10}{info['n_spans']:>10}",
        "",
        f"spans per private client   {spc['mean']:.1f} ± {spc['sd']:.1f}   ({info['span_tokens']}-token spans, {info['span_tokenizer']})",
        f"dates                      {info['date_min']} .. {info['date_max']}",
        f"private window             {w['since']} .. {w['until']} (public from {w['public_since'] or '-'})",
        "sources                    " + ", ".join(f"{k} ({v})" for k, v in sorted(info["sources"].items())),
        "licences                   " + ", ".join(f"{k} ({v})" for k, v in sorted(info["licenses"].items())),
        "rejected                   " + (", ".join(f"{k} ({v})" for k, v in info["rejected"].items()) or "none"),
    ]
    cutoff = w.get("after_cutoff_of")
    if cutoff:
        lines.append(f"after cutoff of            {cutoff['model']}: {cutoff['window_after_cutoff']}")
    return "\n".join(lines)
