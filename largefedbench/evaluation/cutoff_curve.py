"""Measured knowledge cutoffs (``lfb cutoffs measure``): an LLM's per-token loss by month over dated records.

The idea of "Dated Data" (Cheng et al., 2024, "Dated Data: Tracing Knowledge Cutoffs in Large Language Models"):
text from months a model was trained on is easier for it than text from months it never saw, so its loss by month
can show where its training data ends. Per month, a seeded sample of up to ``windows_per_month`` windows of
``tokens`` tokens of the model's own tokenizer (at most ``windows_per_record`` from one record) is scored: a
window's loss is the mean next-token cross-entropy (nats) over its tokens. The month's mean has a 95% interval by a
bootstrap over records (records, not windows, are the unit).

The raw curve also moves when topics drift. The sampled records are embedded (all-MiniLM-L6-v2) and clustered into
``topics`` topics; beside the raw mean each month gets a topic-standardised mean (its per-topic means weighted by
the pooled topic shares; see :func:`standardise`). A change point fitted to the standardised curve (a step, or flat
then rising: :func:`find_step`), tested against a straight line and month-to-month noise and with bootstrap intervals,
gives the effective cutoff where there is one (:func:`judge_cutoff` checks it against the registry).

This module runs the measurement; its parts live beside it: ``cutoff_records`` (the dated records),
``cutoff_scoring`` (the settings, the model, the windows and their losses), ``cutoff_statistics`` (bootstrap
intervals, topics, standardisation), ``cutoff_changepoint`` (the fits) and ``cutoff_report`` (summary, Markdown,
plot, JSON). Their public names are importable from here too.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.errors import InputError
from largefedbench.evaluation.cutoff_changepoint import (  # noqa: F401 - re-exported: callers import them from here
    FIT_VERSION,
    SHAPES,
    find_step,
    fit_curve,
    judge_cutoff,
    linear_trend,
)
from largefedbench.evaluation.cutoff_records import (  # noqa: F401 - re-exported: callers import them from here
    DatedText,
    months_between,
    records_from_mirror,
    records_from_snapshot,
)
from largefedbench.evaluation.cutoff_report import (  # noqa: F401 - re-exported: callers import them from here
    markdown_summary,
    plot_cutoff_curve,
    summary_text,
    write_result,
)
from largefedbench.evaluation.cutoff_scoring import (  # noqa: F401 - re-exported: callers import them from here
    MAX_CHARS,
    MIN_RECORDS,
    CurveSettings,
    MonthSample,
    load_scoring_model,
    sample_windows,
    window_losses,
)
from largefedbench.evaluation.cutoff_statistics import cluster_topics, month_bootstrap, standardise

__all__ = ["CurveSettings", "DatedText", "cluster_topics", "find_step", "linear_trend", "load_scoring_model",
           "markdown_summary", "measure_cutoff", "month_bootstrap", "plot_cutoff_curve", "records_from_mirror",
           "records_from_snapshot", "score_months", "standardise", "summary_text", "write_result"]


# --- the measurement -----------------------------------------------------------------------------------------
def score_months(docs: list[DatedText], model, tokenizer, embed_texts, settings: CurveSettings, *,
                 dtype=None, registry: dict[str, Any] | None = None, progress: bool = True) -> dict[str, Any]:
    """The curve over ``docs``: per month the raw and topic-standardised mean loss with intervals, the topics, and
    the fits (:func:`fit_curve`; ``registry`` is the model's row of the cutoff registry, if it has one).
    ``embed_texts(texts) -> unit rows`` embeds the windows for the topics."""
    by_month: dict[str, list[DatedText]] = {}
    for d in sorted(docs, key=lambda d: (d.date, d.id)):
        by_month.setdefault(d.month, []).append(d)
    if not by_month:
        raise InputError("no records to score")
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit and settings.tokens > limit:
        raise InputError(f"--tokens {settings.tokens} is longer than the model's context ({limit} positions)")
    calendar = months_between(min(by_month), max(by_month))
    rng = np.random.default_rng(settings.seed)
    samples: list[MonthSample] = []
    for month in calendar:  # one generator drawn in calendar order: the sample is fixed by the seed
        samples.append(sample_windows(by_month.get(month, []), tokenizer, settings, month, rng))
    thin = [s for s in samples if len(s.record_ids) < MIN_RECORDS]
    if thin and not settings.allow_gaps:
        listed = ", ".join(f"{s.month} ({len(s.record_ids)} of {s.records} records hold a {settings.tokens}-token "
                           "window)" for s in thin)
        raise InputError(f"{len(thin)} month(s) have fewer than {MIN_RECORDS} records to score: {listed}. Narrow "
                         "--since/--until, lower --tokens, or pass --allow-gaps to leave those months out")
    kept = [s for s in samples if len(s.record_ids) >= MIN_RECORDS]
    if len(kept) < 1:
        raise InputError(f"no month has {MIN_RECORDS} records long enough for a {settings.tokens}-token window")

    # every window of every kept month, numbered: month index, record index (global), ids
    month_idx, rec_idx, ids, rec_ids = [], [], [], []
    for t, s in enumerate(kept):
        base = len(rec_ids)
        rec_ids.extend(s.record_ids)
        for r, window in s.windows:
            month_idx.append(t)
            rec_idx.append(base + r)
            ids.append(window)
    month_idx, rec_idx = np.asarray(month_idx), np.asarray(rec_idx)
    loss = window_losses(model, ids, batch_size=settings.batch_size, dtype=dtype, progress=progress,
                         desc=f"loss of {len(ids)} windows")

    # topics: each record's sampled windows, embedded and averaged
    emb = np.asarray(embed_texts([tokenizer.decode(w) for w in ids]), dtype=np.float64)
    rec_emb = np.zeros((len(rec_ids), emb.shape[1]))
    np.add.at(rec_emb, rec_idx, emb)
    rec_emb /= np.maximum(np.linalg.norm(rec_emb, axis=1, keepdims=True), 1e-12)
    topic, method = cluster_topics(rec_emb, settings.topics, seed=settings.seed)
    n_topics = int(topic.max()) + 1

    boot_rng = np.random.default_rng([settings.seed, 1])
    rows, raw_reps = [], []
    std = standardise(month_idx, rec_idx, topic, loss, n_months=len(kept), n_topics=n_topics,
                      draws=settings.bootstrap, rng=boot_rng)
    for t, s in enumerate(kept):
        sel = month_idx == t
        local = np.unique(rec_idx[sel], return_inverse=True)[1]
        raw = month_bootstrap(loss[sel], local, draws=settings.bootstrap, rng=boot_rng)
        raw_reps.append(raw.pop("replicates"))
        st = dict(std[t])
        st.pop("replicates")
        rows.append({"month": s.month, "records": s.records, "records_examined": s.examined,
                     "records_too_short": s.too_short, "records_scored": len(s.record_ids), "windows": int(sel.sum()),
                     "loss": raw, "standardised": st})
    shares = np.bincount(topic[rec_idx], minlength=n_topics) / len(loss)
    result = {
        "months": rows,
        "skipped_months": [{"month": s.month, "records": s.records, "records_scored": len(s.record_ids)} for s in thin],
        "topics": {"k": n_topics, "method": method, "pooled_share": [float(x) for x in shares],
                   "pooled_mean": [float(loss[topic[rec_idx] == k].mean()) for k in range(n_topics)],
                   "by_month": [np.bincount(topic[np.unique(rec_idx[month_idx == t])], minlength=n_topics).tolist()
                                for t in range(len(kept))]},
        "windows": int(len(loss)), "records_scored": len(rec_ids),
    }
    result.update(fit_curve({**result, "settings": asdict(settings), "registry": registry}))
    return result


def measure_cutoff(model_name: str, *, dataset: str | None = None, mirror: Path | None = None,
                   source: str | None = None, since: str | None = None, until: str | None = None,
                   settings: CurveSettings = CurveSettings(),
                   home: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """``lfb cutoffs measure``: load the records and the model, score the months, fit the change points."""
    import torch

    from largefedbench import __version__
    from largefedbench.models.embedder import embed, load_embedder
    from largefedbench.models.precision import DTYPES, generation_dtype
    from largefedbench.models.profiles import PackagedEmbedder

    if (dataset is None) == (mirror is None):
        raise InputError("give the records with --dataset NAME (a snapshot) or --mirror DIR --source us|arxiv, not both")
    if mirror is not None and not source:
        raise InputError("--mirror needs --source (us or arxiv): which source's files the folder holds")
    t0, c0 = time.perf_counter(), time.process_time()
    if dataset is not None:
        docs, data = records_from_snapshot(dataset, since=since, until=until, home=home)
    else:
        docs, data = records_from_mirror(source, Path(mirror), since=since, until=until, progress=progress)
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()  # transformers' own bars (loading weights) follow --quiet too
    (hf_logging.enable_progress_bar if progress else hf_logging.disable_progress_bar)()
    try:
        model, tokenizer, info, entry = load_scoring_model(model_name, home=home)
        embedder, embedder_info = load_embedder(PackagedEmbedder(), device=next(model.parameters()).device)
    finally:
        (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()
    dtype = generation_dtype(next(model.parameters()).device)
    names = {v: k for k, v in DTYPES.items()}
    used = dtype or next(model.parameters()).dtype  # an inference copy's dtype, else the model's own
    info["dtype"] = names.get(used, str(used))

    def embed_texts(texts: list[str]) -> np.ndarray:
        return embed(texts, embedder, progress=progress)

    registry = entry.to_dict() if entry is not None else None
    curve = score_months(docs, model, tokenizer, embed_texts, settings, dtype=dtype, registry=registry,
                         progress=progress)
    result = {
        "schema_version": 1, "kind": "lfb cutoffs measure", "lfb_version": __version__,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "model": {"requested": model_name, **info}, "registry": registry,
        "embedder": {k: embedder_info[k] for k in ("id", "source", "sha256") if k in embedder_info},
        "data": {**data, "records": len(docs)}, "settings": asdict(settings),
        "loss": "mean next-token cross-entropy (nats) over a window's tokens after its first, no BOS added",
        **curve,
        "seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(time.process_time() - c0, 1),
        "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(),
    }
    return result
