"""Immutable, dated snapshots: client splits on disk (HF ``datasets``) plus ``manifest.json`` and a card.

A snapshot folder holds ``data/`` (a ``DatasetDict`` with splits ``train``, ``validation``, ``test`` — the
private clients of the window — and ``public``, the clients dated before it), ``manifest.json`` (what was
built, from what, how: DESIGN.md §3) and ``README.md`` (the dataset card). One row is one client: the record's
fields plus ``spans`` (the span texts), ``n_spans`` and ``n_tokens``. Snapshots are written to a temporary
folder and renamed into place, and never modified afterwards.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from largefedbench import __version__
from largefedbench.data.records import RECORD_FIELDS, Record
from largefedbench.data.spans import SpanSettings, cut_spans, get_span_tokenizer
from largefedbench.data.splits import PRIVATE_SPLITS, PUBLIC_SPLIT, SPLIT_SALT, SplitRatios, assign_split
from largefedbench.data.windows import Window, after_cutoff
from largefedbench.errors import SnapshotError
from largefedbench.io import atomic_write_json, atomic_write_text, publish_dir
from largefedbench.paths import snapshots_dir

MANIFEST_SCHEMA_VERSION = 1
ALL_SPLITS = (*PRIVATE_SPLITS, PUBLIC_SPLIT)
_INT_FIELDS = {"version"}


@dataclass
class BuildSpec:
    """Everything that decides a snapshot besides its records."""

    dataset: str
    window: Window
    span: SpanSettings = field(default_factory=SpanSettings)
    splits: SplitRatios = field(default_factory=SplitRatios)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    cleaning_version: str | None = None
    synthetic: bool = False
    after_cutoff_of: str | None = None
    name: str | None = None
    scraped_at: str | None = None
    card_notes: str = ""


@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]
    created: bool  # False when an identical snapshot already existed


def _features():
    from datasets import Features, Sequence, Value

    cols = {name: Value("int64" if name in _INT_FIELDS else "string") for name in RECORD_FIELDS}
    cols.update(spans=Sequence(Value("string")), n_spans=Value("int64"), n_tokens=Value("int64"))
    return Features(cols)


def content_hash(splits: dict[str, list[dict[str, Any]]]) -> str:
    """sha256 over every row of every split in canonical JSON: equal hashes mean equal data."""
    h = hashlib.sha256()
    for split in ALL_SPLITS:
        for row in splits[split]:
            h.update(json.dumps([split, row], sort_keys=True, ensure_ascii=False).encode())
            h.update(b"\n")
    return h.hexdigest()


def build_snapshot(
    records: Iterable[Record],
    spec: BuildSpec,
    rejected: Counter | None = None,
    *,
    root: Path | None = None,
    batch_size: int = 4096,
    progress: bool = True,
) -> BuildResult:
    """Cut records into spans, split clients, and write an immutable snapshot (atomically)."""
    from tqdm.auto import tqdm

    rejected = Counter(rejected or {})
    by_id: dict[str, Record] = {}
    n_in = 0
    for rec in records:
        n_in += 1
        old = by_id.get(rec.id)
        if old is not None:
            rejected["duplicate_id"] += 1
            if (rec.date, rec.version or 0) < (old.date, old.version or 0):
                continue
        by_id[rec.id] = rec

    kept: list[tuple[str, Record]] = []
    for rec in by_id.values():
        period = spec.window.classify(rec.day)
        if period is None:
            rejected["outside_window"] += 1
        else:
            kept.append((period, rec))

    tokenizer = get_span_tokenizer(spec.span.tokenizer)
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in ALL_SPLITS}
    bar = tqdm(total=len(kept), desc=f"spans ({spec.span.tokenizer})", unit="client", disable=not progress)
    for start in range(0, len(kept), batch_size):
        batch = kept[start : start + batch_size]
        for (period, rec), (spans, n_tokens) in zip(batch, cut_spans([r.text for _, r in batch], spec.span, tokenizer)):
            if not spans:
                rejected["too_short_for_a_span"] += 1
                continue
            split = PUBLIC_SPLIT if period == "public" else assign_split(rec.id, spec.splits)
            splits[split].append({**rec.to_dict(), "spans": spans, "n_spans": len(spans), "n_tokens": n_tokens})
        bar.update(len(batch))
    bar.close()
    for rows in splits.values():
        rows.sort(key=lambda r: (r["date"], r["id"]))

    digest = content_hash(splits)
    name = spec.name or f"{spec.dataset}-{spec.window.since}-{spec.window.until}-{digest[:8]}"
    root_dir = snapshots_dir(root)
    final = root_dir / name
    if final.exists():
        existing = read_manifest(final)
        if existing.get("content_sha256") == digest:
            return BuildResult(final, existing, created=False)
        raise SnapshotError(
            f"a different snapshot named {name!r} already exists at {final} (snapshots are immutable). "
            "Pass another --name, or delete that folder if you no longer need it."
        )

    manifest = _manifest(spec, name, splits, rejected, digest, n_in, tokenizer.describe())
    from datasets import Dataset, DatasetDict

    tmp = root_dir / f".tmp-{name}-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    features = _features()
    # from_dict keeps the columns of an empty split (from_list([]) would write a table without them).
    dd = DatasetDict({
        s: Dataset.from_dict({c: [row[c] for row in splits[s]] for c in features}, features=features) for s in ALL_SPLITS
    })
    # An empty split needs one explicit (empty) shard, or load_from_disk cannot read it back.
    dd.save_to_disk(str(tmp / "data"), num_shards={s: 1 for s in ALL_SPLITS if not splits[s]})
    atomic_write_json(tmp / "manifest.json", manifest)
    atomic_write_text(tmp / "README.md", dataset_card(manifest, spec.card_notes))
    try:
        publish_dir(tmp, final)
    except FileExistsError:  # another process published the same name meanwhile
        return BuildResult(final, read_manifest(final), created=False)
    return BuildResult(final, manifest, created=True)


def _mean_sd(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "sd": 0.0}
    return {"mean": statistics.fmean(values), "sd": statistics.pstdev(values)}


def _manifest(spec, name, splits, rejected, digest, n_in, tokenizer_info) -> dict[str, Any]:
    private = [r for s in PRIVATE_SPLITS for r in splits[s]]
    everything = [r for s in ALL_SPLITS for r in splits[s]]
    dates = [r["date"] for r in everything]
    cutoff = None
    if spec.after_cutoff_of:
        cutoff = {"model": spec.after_cutoff_of, "window_after_cutoff": after_cutoff(spec.window.since, spec.after_cutoff_of)}
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "name": name,
        "dataset": spec.dataset,
        "synthetic": spec.synthetic,
        "sources": spec.sources,
        "window": {**spec.window.to_dict(), "after_cutoff_of": cutoff},
        "scraped_at": spec.scraped_at,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "lfb_version": __version__,
        "cleaning_version": spec.cleaning_version,
        "span": {**spec.span.to_dict(), "tokenizer_info": tokenizer_info},
        "splits": {"ratios": spec.splits.to_dict(), "salt": SPLIT_SALT, "by": "sha256 of the client id"},
        "counts": {
            "records_in": n_in,
            "clients": {s: len(splits[s]) for s in ALL_SPLITS},
            "spans": {s: sum(r["n_spans"] for r in splits[s]) for s in ALL_SPLITS},
            "tokens": sum(r["n_tokens"] for r in everything),
            "spans_per_private_client": _mean_sd([r["n_spans"] for r in private]),
            "date_min": min(dates) if dates else None,
            "date_max": max(dates) if dates else None,
        },
        "rejected": dict(sorted(rejected.items())),
        "licenses": dict(sorted(Counter(r["license"] for r in everything).items())),
        "content_sha256": digest,
    }


def read_manifest(path: Path) -> dict[str, Any]:
    file = Path(path) / "manifest.json"
    try:
        return json.loads(file.read_text())
    except FileNotFoundError:
        raise SnapshotError(f"{path} is not a snapshot: it has no manifest.json (an interrupted build?)") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{file} is not valid JSON ({exc}); rebuild the snapshot") from None


def dataset_card(manifest: dict[str, Any], notes: str = "") -> str:
    """The snapshot's README.md: what it is, from where, under which licences, and how it was cleaned."""
    c = manifest["counts"]
    w = manifest["window"]
    lines = [
        "---",
        f"pretty_name: LargeFedBench {manifest['dataset']} ({w['since']} to {w['until']})",
        "tags: [federated-learning, differential-privacy, largefedbench]",
        "---",
        f"# LargeFedBench snapshot `{manifest['name']}`",
        "",
    ]
    if manifest["synthetic"]:
        lines += ["**Synthetic data.** Every record was generated by LargeFedBench's own code (`lfb data demo`); "
                  "numbers computed from it say nothing about real text.", ""]
    lines += [
        f"- Dataset: {manifest['dataset']}; one record (abstract or speech) = one client.",
        f"- Private window: {w['since']} to {w['until']}; public records from {w['public_since'] or '-'} to the window start.",
        "- Clients: " + ", ".join(f"{s} {n}" for s, n in c["clients"].items()) + ".",
        "- Spans (samples): " + ", ".join(f"{s} {n}" for s, n in c["spans"].items())
        + f"; {manifest['span']['span_tokens']}-token spans cut with `{manifest['span']['tokenizer']}`, "
        + manifest["span"]["last_span_rule"] + ".",
        f"- Dates: {c['date_min']} to {c['date_max']}; scraped at {manifest['scraped_at']}.",
        f"- Cleaning version {manifest['cleaning_version']}: procedural boilerplate removed, sentences with more "
        "than 30% non-letter characters dropped, written notation that was not spoken removed.",
        f"- Rejected records by reason: {json.dumps(manifest['rejected'])}.",
        f"- Content sha256: `{manifest['content_sha256']}`.",
        "",
        "## Sources and licences",
        "",
    ]
    for source, info in manifest["sources"].items():
        lines.append(f"- **{source}**: {info.get('license_note', '')} ({info.get('base_url', '')}, scraper {info.get('scraper_version')})")
    lines += ["", "Licences of the records: " + ", ".join(f"{k} ({v})" for k, v in manifest["licenses"].items()), ""]
    if notes:
        lines += [notes, ""]
    lines += [
        "## How to cite",
        "",
        "Hou, Wang, Zhou, et al., *Private Federated Learning using Preference-Optimized Synthetic Data* "
        "(POPri and LargeFedBench), ICML 2025, arXiv:2504.16438.",
        "",
    ]
    return "\n".join(lines)


def list_snapshots(root: Path | None = None) -> list[dict[str, Any]]:
    """Manifests of every complete snapshot under the snapshots folder, newest first."""
    folder = snapshots_dir(root)
    out = []
    if folder.is_dir():
        for child in folder.iterdir():
            if child.is_dir() and not child.name.startswith(".") and (child / "manifest.json").is_file():
                manifest = read_manifest(child)
                out.append({**manifest, "path": str(child)})
    out.sort(key=lambda m: m.get("created_at") or "", reverse=True)
    return out
