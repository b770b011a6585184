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
"""

from __future__ import annotations

import datetime as dt
import io
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.data.windows import Window, get_cutoff, parse_date
from largefedbench.errors import InputError
from largefedbench.io import atomic_write_bytes

__all__ = ["CurveSettings", "DatedText", "cluster_topics", "find_step", "linear_trend", "load_scoring_model",
           "markdown_summary", "measure_cutoff", "month_bootstrap", "plot_cutoff_curve", "records_from_mirror",
           "records_from_snapshot", "score_months", "standardise", "summary_text", "write_result"]

MIN_RECORDS = 3  # a month needs this many scored records for an interval
FIT_VERSION = 2  # 2: change points tested against a straight line, step and hinge shapes; 1: steps against a flat line
MAX_CHARS = 50_000  # a record's text is cut here before tokenizing (windows are drawn from this part)


@dataclass(frozen=True)
class DatedText:
    """One record as the curve needs it: its id, ISO day and cleaned text."""

    id: str
    date: str
    text: str

    @property
    def month(self) -> str:
        return self.date[:7]


@dataclass(frozen=True)
class CurveSettings:
    tokens: int = 128  # tokens per window (the model's tokenizer)
    windows_per_month: int = 200
    windows_per_record: int = 2
    topics: int = 8
    bootstrap: int = 2000
    seed: int = 0
    batch_size: int = 16
    allow_gaps: bool = False  # skip months with too few records instead of stopping

    def __post_init__(self) -> None:
        checks = {"--tokens": (self.tokens, 2), "--windows": (self.windows_per_month, 1),
                  "--per-record": (self.windows_per_record, 1), "--topics": (self.topics, 1),
                  "--bootstrap": (self.bootstrap, 100), "--batch-size": (self.batch_size, 1)}
        for flag, (value, least) in checks.items():
            if not isinstance(value, int) or value < least:
                raise InputError(f"{flag} {value} must be an integer >= {least}")


# --- records -------------------------------------------------------------------------------------------------
def _month_range(since: str | None, until: str | None) -> tuple[dt.date | None, dt.date | None]:
    start = parse_date(since, flag="--since") if since else None
    end = parse_date(until, end_of_month=True, flag="--until") if until else None
    if start and end and start > end:
        raise InputError(f"--since {since} is after --until {until}; swap them")
    return start, end


def records_from_snapshot(name: str, *, since: str | None = None, until: str | None = None,
                          home: Path | None = None) -> tuple[list[DatedText], dict[str, Any]]:
    """Every record of every split of snapshot ``name`` dated in ``[since, until]`` (both optional)."""
    from largefedbench.data.federated import load_snapshot

    fd = load_snapshot(name, home=home)  # an unknown name is a SnapshotError that lists the known ones
    start, end = _month_range(since, until)
    out = []
    for split in fd.splits.values():
        for rid, day, text in zip(split.column("id"), split.column("date"), split.column("text")):
            d = dt.date.fromisoformat(day)
            if (start is None or d >= start) and (end is None or d <= end):
                out.append(DatedText(rid, day, text or ""))
    info = {"kind": "snapshot", "snapshot": fd.name, "content_sha256": fd.manifest.get("content_sha256"),
            "synthetic": fd.synthetic, "since": since, "until": until}
    if not out:
        raise InputError(f"snapshot {fd.name} has no records dated in {since or 'its start'} .. {until or 'its end'}"
                         f" (it holds {fd.manifest.get('counts', {}).get('date_min')} .. "
                         f"{fd.manifest.get('counts', {}).get('date_max')}); change --since/--until")
    return out, info


def records_from_mirror(source: str, folder: Path, *, since: str | None, until: str | None,
                        progress: bool = True) -> tuple[list[DatedText], dict[str, Any]]:
    """The records of mirror ``folder`` (source ``us`` or ``arxiv``) dated in ``[since, until]``, read through the
    source's own parser and cleaning (:mod:`largefedbench.scrapers.mirror`)."""
    from largefedbench.scrapers.mirror import open_mirror

    if not since or not until:
        raise InputError("--mirror needs --since and --until (YYYY-MM): the months to read from the mirror")
    window = Window.parse(since, until, public_months=0)
    mirror = open_mirror(source, folder)
    records, rejected = mirror.fetch(window, progress=progress)
    out = [DatedText(r.id, r.date, r.text) for r in records if window.classify(r.day) == "private"]
    if not out:
        raise InputError(f"the {source} mirror {folder} has no records dated {window.since} .. {window.until} "
                         f"(rejected: {dict(rejected) or 'none'}); check the folder and --since/--until")
    described = mirror.describe()
    info = {"kind": "mirror", "source": source, "folder": str(Path(folder).resolve()), "since": since, "until": until,
            "rejected": dict(rejected), "upstream": described["mirror"]["upstream"],
            "files_digest": described["mirror"]["files_digest"], "files": len(described["mirror"]["files_sha256"]),
            "reader_version": described["scraper_version"]}
    return out, info


def months_between(first: str, last: str) -> list[str]:
    """``YYYY-MM`` labels from ``first`` to ``last`` inclusive."""
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


# --- the model -----------------------------------------------------------------------------------------------
def load_scoring_model(name: str, *, home: Path | None = None, device=None) -> tuple[Any, Any, dict[str, Any], Any]:
    """``(model, tokenizer, info, registry entry or None)`` for ``name``: a local Hugging Face folder, a model or alias
    of the cutoff registry (the ``cpu`` profile's SmolLM2 loads from its packaged GGUF, converted once), or another
    hub id the registry names (through ``from_pretrained``)."""
    from largefedbench.models.device import get_device
    from largefedbench.models.gguf import prepare_gguf_model
    from largefedbench.models.hub import hub_identity, load_hub_causal_lm, load_hub_tokenizer
    from largefedbench.models.identity import n_params
    from largefedbench.models.profiles import PROFILES, HubModel, PackagedGGUF

    dev = get_device(device)
    path = Path(name).expanduser()
    entry = None
    if path.is_dir():
        source, info = HubModel(str(path)), {"id": str(path.resolve())}
        marker = path / "lfb_conversion.json"  # a folder converted from a packaged GGUF names its model
        if marker.is_file():
            import json

            info["id"] = json.loads(marker.read_text()).get("model_id", info["id"])
            try:
                entry = get_cutoff(info["id"])
            except InputError:
                entry = None
    else:
        if name.startswith(("/", "./", "../", "~")):
            raise InputError(f"the model folder {path} does not exist; give a folder written by save_pretrained(), a "
                             "hub id or a name from `lfb cutoffs`")
        try:
            entry = get_cutoff(name)
        except InputError as exc:
            raise InputError(f"{exc} A local model folder also works as MODEL.") from None
        packaged = {p.generator.model_id.lower(): p.generator for p in PROFILES.values()
                    if isinstance(p.generator, PackagedGGUF)}
        # a short name of a namespaced model (smollm2-135m, llama-3-8b) means the registry's model; any other
        # name (a hub id: HuggingFaceTB/SmolLM2-360M-Instruct, gpt2-medium) means itself
        wanted = entry.model if "/" not in name and "/" in entry.model else name
        if wanted.lower() in packaged:
            gguf = packaged[wanted.lower()]
            folder, _, conv = prepare_gguf_model(gguf, root=home)
            source = HubModel(str(folder))
            info = {"id": gguf.model_id, "source": f"GGUF {conv['gguf_file']} ({conv['quantization']}) from the PyPI "
                    f"package {gguf.package} {conv['package_version']}, dequantized to float32", "sha256": conv["gguf_sha256"]}
        elif entry.kind == "trained-on-public-split":
            raise InputError(f"{entry.model} is trained per snapshot by LargeFedBench; give its model folder instead")
        else:
            source, info = HubModel(wanted), {"id": wanted}
    tokenizer = load_hub_tokenizer(source, role="tokenizer")
    model = load_hub_causal_lm(source, device=dev, role="model")
    if "sha256" not in info:
        info.update({k: v for k, v in hub_identity(source).items() if k not in ("id",)})
    info.update(n_params=n_params(model), architecture=type(model).__name__, device=str(dev))
    return model, tokenizer, info, entry


# --- sampling and scoring ------------------------------------------------------------------------------------
@dataclass
class MonthSample:
    month: str
    records: int  # records dated in the month
    examined: int = 0  # records tokenized
    too_short: int = 0  # of those, shorter than one window
    record_ids: list[str] = field(default_factory=list)  # the scored records, in sample order
    windows: list[tuple[int, list[int]]] = field(default_factory=list)  # (index into record_ids, token ids)


def sample_windows(docs: list[DatedText], tokenizer, settings: CurveSettings, month: str,
                   rng: np.random.Generator) -> MonthSample:
    """Up to ``windows_per_month`` windows of ``tokens`` ids from ``docs`` (one month's records), visiting records
    in a random order and taking at most ``windows_per_record`` non-overlapping windows from each, at random."""
    out = MonthSample(month, len(docs))
    order = rng.permutation(len(docs))
    T, want = settings.tokens, settings.windows_per_month
    for start in range(0, len(order), 64):
        chunk = [docs[i] for i in order[start:start + 64]]
        encoded = tokenizer([d.text[:MAX_CHARS] for d in chunk], add_special_tokens=False)["input_ids"]
        for doc, ids in zip(chunk, encoded):
            out.examined += 1
            n = len(ids) // T
            if n == 0:
                out.too_short += 1
                continue
            take = min(n, settings.windows_per_record, want - len(out.windows))
            out.record_ids.append(doc.id)
            for j in sorted(rng.choice(n, size=take, replace=False)):
                out.windows.append((len(out.record_ids) - 1, list(ids[j * T:(j + 1) * T])))
            if len(out.windows) >= want:
                return out
    return out


def window_losses(model, windows: list[list[int]], *, batch_size: int, dtype=None, progress: bool = True,
                  desc: str = "scoring windows") -> np.ndarray:
    """Each window's mean next-token cross-entropy (nats), in batches; ``dtype`` casts an inference copy."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from largefedbench.models.device import model_device
    from largefedbench.models.precision import inference_copy

    scorer = inference_copy(model, dtype)
    dev = model_device(scorer)
    out = np.empty(len(windows), dtype=np.float64)
    bar = tqdm(total=len(windows), desc=desc, unit="window", disable=not progress)
    with torch.inference_mode():
        for lo in range(0, len(windows), batch_size):
            x = torch.tensor(windows[lo:lo + batch_size], dtype=torch.long, device=dev)
            logits = scorer(input_ids=x).logits[:, :-1].float()
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
            out[lo:lo + len(x)] = ce.view(len(x), -1).mean(1).double().cpu().numpy()
            bar.update(len(x))
    bar.close()
    return out


# --- statistics ----------------------------------------------------------------------------------------------
def _multinomial_counts(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` bootstrap resamples of ``n`` units as counts per unit, shape ``(draws, n)``."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)


def month_bootstrap(loss: np.ndarray, record: np.ndarray, *, draws: int, rng: np.random.Generator) -> dict[str, Any]:
    """The mean of ``loss`` (one value per window) with a 95% percentile interval from resampling records
    (``record[i]``: window ``i``'s record, 0..R-1) with replacement: a record brings all its windows."""
    n_rec = int(record.max()) + 1
    sums = np.bincount(record, weights=loss, minlength=n_rec)
    counts = np.bincount(record, minlength=n_rec).astype(np.float64)
    c = _multinomial_counts(n_rec, draws, rng)
    reps = (c @ sums) / (c @ counts)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return {"mean": float(sums.sum() / counts.sum()), "ci": [float(lo), float(hi)], "se": float(reps.std(ddof=1)),
            "replicates": reps}


def standardise(month: np.ndarray, record: np.ndarray, topic: np.ndarray, loss: np.ndarray, *, n_months: int,
                n_topics: int, draws: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Topic-standardised monthly means with bootstrap intervals (records resampled within their month).

    ``month[i]``, ``record[i]`` and ``loss[i]`` describe window ``i``; ``topic[r]`` is record ``r``'s topic
    (records are numbered across months). With ``p_k`` the pooled share of windows in topic ``k`` and ``m_k`` the
    pooled mean of topic ``k``, a month's value is ``sum_k p_k m_k + delta``, where ``delta`` is the p-weighted mean
    of ``m_tk - m_k`` over the topics the month has. With every topic present this is ``sum_k p_k m_tk`` (direct
    standardisation); a topic with no window that month is filled with its pooled mean moved by the month's
    ``delta`` (an additive month + topic model), and ``coverage`` reports the share of the pooled mix it had.
    """
    wtopic = topic[record]
    p = np.bincount(wtopic, minlength=n_topics) / len(loss)
    m_k = np.bincount(wtopic, weights=loss, minlength=n_topics) / np.maximum(np.bincount(wtopic, minlength=n_topics), 1)
    grand = float(p @ m_k)

    def value(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:  # (..., K) topic sums and window counts
        present = counts > 0
        dev = np.where(present, sums / np.where(present, counts, 1) - m_k, 0.0)
        share = (present * p).sum(-1)
        return grand + (dev * p).sum(-1) / share

    out = []
    for t in range(n_months):
        sel = month == t
        recs, local = np.unique(record[sel], return_inverse=True)
        onehot = np.eye(n_topics)[topic[recs]]  # (R, K)
        rec_sums = np.bincount(local, weights=loss[sel], minlength=len(recs))[:, None] * onehot
        rec_counts = np.bincount(local, minlength=len(recs)).astype(np.float64)[:, None] * onehot
        sums, counts = rec_sums.sum(0), rec_counts.sum(0)
        c = _multinomial_counts(len(recs), draws, rng)
        reps = value(c @ rec_sums, c @ rec_counts)
        lo, hi = np.percentile(reps, [2.5, 97.5])
        present = counts > 0
        out.append({"mean": float(value(sums, counts)), "ci": [float(lo), float(hi)], "se": float(reps.std(ddof=1)),
                    "coverage": float(p[present].sum()), "topics_present": int(present.sum()), "replicates": reps})
    return out


def cluster_topics(vectors: np.ndarray, k: int, *, seed: int = 0) -> tuple[np.ndarray, str]:
    """K-means labels of ``vectors`` (rows) into ``min(k, rows)`` clusters: scikit-learn's KMeans when it is
    installed, else Lloyd's algorithm with k-means++ seeding in numpy. Returns ``(labels, method)``."""
    k = max(1, min(k, len(vectors)))
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        return _kmeans_numpy(vectors, k, seed=seed), "numpy k-means++ (scikit-learn is not installed)"
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(vectors)
    return np.asarray(labels, dtype=np.int64), f"scikit-learn KMeans (n_init=10, random_state={seed})"


def _kmeans_numpy(x: np.ndarray, k: int, *, seed: int = 0, iters: int = 100) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(len(x))]]
    for _ in range(1, k):  # k-means++: the next centre far from the chosen ones
        d2 = np.min(((x[:, None, :] - np.asarray(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(x[rng.choice(len(x), p=d2 / d2.sum())] if d2.sum() > 0 else x[rng.integers(len(x))])
    c = np.asarray(centres, dtype=np.float64)
    labels = np.zeros(len(x), dtype=np.int64)
    for _ in range(iters):
        new = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        if _ and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            if (labels == j).any():
                c[j] = x[labels == j].mean(0)
    return labels


# --- the change point ----------------------------------------------------------------------------------------
SHAPES = ("step", "hinge")


def _regressors(shape: str, M: int, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidate splits ``c`` (the first month after the change) and each one's regressor, shape (C, M):
    ``step`` 1[t >= c] (one level, then another); ``hinge`` max(0, t - c + 1) (flat, then a slope from ``c``);
    ``line`` t (one candidate: a straight line, the drift a change point must beat)."""
    t = np.arange(M, dtype=np.float64)
    if shape == "line":
        return np.zeros(1, dtype=np.int64), t[None]
    splits = np.arange(min_side, M - min_side + 1)
    if shape == "step":
        return splits, (t[None] >= splits[:, None]).astype(np.float64)
    if shape == "hinge":
        return splits, np.maximum(0.0, t[None] - splits[:, None] + 1)
    raise ValueError(f"unknown shape {shape!r}")


def _wls2(y: np.ndarray, w: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted least squares of curves ``y`` (S, M) on [1, x] for every regressor row ``x`` of ``X`` (C, M) with
    weights ``w`` (S, M): ``(sse, intercept, coefficient)``, each (S, C)."""
    sw, swy, swyy = (w.sum(-1, keepdims=True), (w * y).sum(-1, keepdims=True), (w * y * y).sum(-1, keepdims=True))
    swx, swxx, swxy = w @ X.T, w @ (X * X).T, (w * y) @ X.T
    b = (sw * swxy - swx * swy) / (sw * swxx - swx ** 2)
    a = (swy - b * swx) / sw
    return swyy - a * swy - b * swxy, a, b


def _extra_variance(resid: np.ndarray, v: np.ndarray, df: int) -> np.ndarray:
    """Paule–Mandel, per row of ``resid`` (S, M): the between-month variance ``tau2`` that makes
    ``sum r^2 / (v + tau2)`` equal ``df`` (0 where the sampling variances already explain the residuals)."""
    q = lambda tau2: (resid ** 2 / (v + tau2[..., None])).sum(-1)  # noqa: E731
    zero = np.zeros(resid.shape[:-1])
    if df <= 0:
        return zero
    lo, hi = zero, (resid ** 2).sum(-1) + 1e-12  # q(hi) < 1 <= df
    for _ in range(60):
        mid = (lo + hi) / 2
        above = q(mid) > df
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(q(zero) > df, (lo + hi) / 2, 0.0)


def _best_fits(y: np.ndarray, v: np.ndarray, shapes: tuple[str, ...], min_side: int) -> dict[str, np.ndarray]:
    """Per curve of ``y`` (S, M), the best fit over ``shapes`` and their splits, weighted by ``1 / (v + tau2)``;
    ``tau2`` (Paule–Mandel on the fit's residuals) and the fit depend on each other, so they are iterated."""
    S, M = y.shape
    candidates = [(i, *_regressors(shape, M, min_side)) for i, shape in enumerate(shapes)]
    n_params = 2 if shapes == ("line",) else 3  # the split counts as a parameter
    rows, tau2 = np.arange(S), np.zeros(S)
    for _ in range(30):
        w = 1.0 / (v + tau2[:, None])
        best: dict[str, np.ndarray] = {}
        for i, splits, X in candidates:
            sse, a, b = _wls2(y, w, X)
            j = sse.argmin(-1)
            fit = {"sse": sse[rows, j], "a": a[rows, j], "b": b[rows, j], "c": splits[j], "shape": np.full(S, i),
                   "fitted": a[rows, j][:, None] + b[rows, j][:, None] * X[j]}
            better = fit["sse"] < best["sse"] if best else np.ones(S, dtype=bool)
            best = {k: np.where(better.reshape(-1, *[1] * (val.ndim - 1)), val, best[k]) if best else val
                    for k, val in fit.items()}
        new = _extra_variance(y - best["fitted"], v, M - n_params)
        done = np.abs(new - tau2) <= 1e-12 + 1e-6 * tau2
        tau2 = new
        if done.all():
            break
    best["tau2"], best["w"] = tau2, 1.0 / (v + tau2[:, None])
    return best


def _gain_over_line(y: np.ndarray, fits: dict[str, np.ndarray]) -> np.ndarray:
    """How much better the change point fits than a straight line, in weighted SSE under the change point's weights."""
    return _wls2(y, fits["w"], _regressors("line", y.shape[-1], 1)[1])[0][:, 0] - fits["sse"]


def find_step(months: list[str], y, v, *, min_side: int = 2, sims: int = 2000, seed: int = 0, alpha: float = 0.05,
              shapes: tuple[str, ...] = SHAPES) -> dict[str, Any]:
    """The best change point of a monthly curve ``y`` with sampling variances ``v``, and whether it is real.

    Two shapes are fitted at every split leaving ``min_side`` months on each side: a ``step`` (one level, then
    another) and a ``hinge`` (flat, then a slope: the loss growing with the distance past a cutoff), by least squares
    weighted by ``1 / (v + tau2)``, where ``tau2`` is the month-to-month variance the sampling variances leave
    unexplained (Paule–Mandel), so ordinary noise is not taken for a change. The statistic is how much better the best
    change point fits than a straight line: steady drift is not a cutoff. Its p-value comes from ``sims`` curves drawn
    from the fitted line (with its own ``tau2``), each put through the same search. The break month's interval and
    the effect's (the step in nats, or the hinge's slope in nats a month) are percentiles over curves drawn from the
    fitted change point. It is ``significant`` when p < ``alpha`` and the effect's interval excludes 0, and a cutoff's
    signature only when the loss goes up after the break (the model did not see those months). Months are taken in
    the order given (a month left out with ``--allow-gaps`` is not a position).
    """
    y, v = np.asarray(y, dtype=np.float64), np.maximum(np.asarray(v, dtype=np.float64), 1e-8)
    M = len(y)
    if M < 2 * min_side + 1:
        return {"status": "too-few-months", "months": M, "significant": False, "effective_cutoff": None,
                "message": f"{M} months: a change point needs at least {2 * min_side + 1} (with {min_side} on each side)"}
    obs = {k: val[0] for k, val in _best_fits(y[None], v, shapes, min_side).items()}
    gain = float(_gain_over_line(y[None], {k: val[None] for k, val in obs.items()})[0])
    shape, c, effect, tau2 = shapes[int(obs["shape"])], int(obs["c"]), float(obs["b"]), float(obs["tau2"])
    rng = np.random.default_rng(seed)
    line = {k: val[0] for k, val in _best_fits(y[None], v, ("line",), min_side).items()}
    null = line["fitted"] + np.sqrt(v + line["tau2"]) * rng.standard_normal((sims, M))
    null_gain = _gain_over_line(null, _best_fits(null, v, shapes, min_side))
    p_value = float((1 + (null_gain >= gain).sum()) / (1 + sims))
    boot = _best_fits(obs["fitted"] + np.sqrt(v + tau2) * rng.standard_normal((sims, M)), v, (shape,), min_side)
    c_lo, c_hi = (int(round(q)) for q in np.percentile(boot["c"], [2.5, 97.5]))
    e_lo, e_hi = (float(q) for q in np.percentile(boot["b"], [2.5, 97.5]))
    significant = p_value < alpha and (e_lo > 0 or e_hi < 0)
    status = ("step" if effect > 0 else "downward") if significant else "none"
    unit = "nats" if shape == "step" else "nats a month"
    what = (f"a step of {effect:+.3f} nats (95% CI {e_lo:+.3f} to {e_hi:+.3f}) from {months[c]}" if shape == "step" else
            f"flat to {months[c - 1]}, then {effect:+.3f} nats a month (95% CI {e_lo:+.3f} to {e_hi:+.3f})")
    out = {
        "status": status, "significant": significant, "shape": shape, "p_value": p_value, "alpha": alpha,
        "null": "a straight line (drift)", "gain_over_line": gain,
        "break_month": months[c], "effective_cutoff": months[c - 1] if status == "step" else None,
        "break_interval": [months[c_lo], months[c_hi]], "cutoff_interval": [months[c_lo - 1], months[c_hi - 1]],
        "effect": effect, "effect_ci": [e_lo, e_hi], "effect_unit": unit, "before": float(obs["a"]),
        "fitted": [float(x) for x in obs["fitted"]], "tau2": tau2, "min_side": min_side, "sims": sims,
    }
    if status == "step":
        out["message"] = (f"{what}: the loss rises after the months the model saw; effective cutoff {months[c - 1]} "
                          f"(interval {months[c_lo - 1]} to {months[c_hi - 1]}; p = {p_value:.3g} against a straight line)")
    elif status == "downward":
        out["message"] = (f"{what} (p = {p_value:.3g}): the loss falls, which is not the signature of a cutoff (loss "
                          "rising after the months a model saw)")
    else:
        out["message"] = (f"no change point: the best one ({what}) fits no better than a straight line would by chance "
                          f"(p = {p_value:.3g})")
    return out


def judge_cutoff(fit: dict[str, Any], registry: dict[str, Any] | None, months: list[str]) -> dict[str, Any]:
    """The effective cutoff a fit supports, checked against the registry: a model whose cutoff is bounded by its
    release (``release-bound``) cannot have seen months after it, so a break there is drift, not a cutoff."""
    estimate, status, message = fit.get("effective_cutoff"), fit["status"], fit["message"]
    stated = (registry or {}).get("cutoff")
    if estimate and stated and registry.get("kind") == "release-bound" and estimate > stated:
        status, estimate = "after-release", None
        message = (f"the best change point (from {fit['break_month']}) lies after {registry['model']}'s release "
                   f"({stated}), which bounds what it can have seen: it is not a cutoff. {fit['message']}")
    out = {"estimate": estimate, "interval": fit.get("cutoff_interval") if estimate else None, "status": status,
           "curve": "standardised", "message": message, "registry_cutoff": stated}
    if stated and months and months[0] > stated:
        out["note"] = (f"every month measured is after the registry's cutoff ({stated}): the curve can show how the loss "
                       "grows past a cutoff, not where the cutoff is")
    return out


def linear_trend(y, v) -> dict[str, float]:
    """The weighted least-squares slope of the curve (nats a month) with a 95% interval, the weights including
    the between-month variance a line leaves unexplained (Paule–Mandel)."""
    y, v = np.asarray(y, dtype=np.float64), np.maximum(np.asarray(v, dtype=np.float64), 1e-8)
    fit = {k: val[0] for k, val in _best_fits(y[None], v, ("line",), 1).items()}
    w = fit["w"]
    t = np.arange(len(y), dtype=np.float64)
    se = math.sqrt(1.0 / (w * (t - (w * t).sum() / w.sum()) ** 2).sum())
    slope = float(fit["b"])
    return {"slope": slope, "ci": [slope - 1.96 * se, slope + 1.96 * se], "tau2": float(fit["tau2"])}


def fit_curve(result: dict[str, Any]) -> dict[str, Any]:
    """The change points, trends and effective cutoff of a result's monthly curves (``changepoint``, ``trend``,
    ``effective_cutoff``), from its months alone: a stored result can be fitted again without the model."""
    rows, seed = result["months"], result["settings"]["seed"]
    months = [r["month"] for r in rows]
    curves = {name: ([r[key]["mean"] for r in rows], [r[key]["se"] ** 2 for r in rows])
              for name, key in (("standardised", "standardised"), ("raw", "loss"))}
    changepoint = {name: find_step(months, y, v, seed=seed) for name, (y, v) in curves.items()}
    return {"fit_version": FIT_VERSION, "changepoint": changepoint,
            "trend": {name: linear_trend(y, v) if len(y) >= 3 else None for name, (y, v) in curves.items()},
            "effective_cutoff": judge_cutoff(changepoint["standardised"], result.get("registry"), months)}


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
                   settings: CurveSettings = CurveSettings(), home: Path | None = None,
                   progress: bool = True) -> dict[str, Any]:
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


# --- output --------------------------------------------------------------------------------------------------
def summary_text(result: dict[str, Any]) -> str:
    """The month table, the step fits and the registry's cutoff, as ``lfb cutoffs measure`` prints them."""
    m, d = result["model"], result["data"]
    where = (f"snapshot {d['snapshot']}" if d["kind"] == "snapshot" else f"{d['source']} mirror {d['folder']}")
    lines = [f"{m['requested']} ({m['id']}, {m['dtype']}) on {where}: {result['windows']} windows of "
             f"{result['settings']['tokens']} tokens from {result['records_scored']} records; "
             f"{result['topics']['k']} topics",
             f"{'month':<9}{'records':>8}{'windows':>8}  {'loss (95% CI)':<24}{'topic-standardised (95% CI)':<30}topics"]
    for r in result["months"]:
        lo, hi = r["loss"]["ci"]
        slo, shi = r["standardised"]["ci"]
        lines.append(f"{r['month']:<9}{r['records_scored']:>8}{r['windows']:>8}  "
                     f"{r['loss']['mean']:.3f} [{lo:.3f}, {hi:.3f}]{'':<4}"
                     f"{r['standardised']['mean']:.3f} [{slo:.3f}, {shi:.3f}]{'':<10}"
                     f"{r['standardised']['topics_present']}/{result['topics']['k']}")
    for s in result.get("skipped_months", []):
        lines.append(f"{s['month']:<9}{s['records_scored']:>8}  left out (--allow-gaps): too few records to score")
    for name in ("standardised", "raw"):
        lines.append(f"change point ({name}): {result['changepoint'][name]['message']}")
        if result["trend"].get(name):
            t = result["trend"][name]
            lines.append(f"trend ({name}): {t['slope']:+.3f} nats a month (95% CI {t['ci'][0]:+.3f} to {t['ci'][1]:+.3f})")
    reg, judged = result.get("registry"), result["effective_cutoff"]
    lines.append(f"registry: {reg['model']} cutoff {reg['cutoff'] or '-'} ({reg['kind']})" if reg else
                 "registry: the model is not in the cutoff registry")
    lines.append(f"effective cutoff: {judged['estimate'] or 'none found'}"
                 + (f" ({judged['status']})" if judged["status"] not in ("none", "step") else "")
                 + (f"; {judged['note']}" if judged.get("note") else ""))
    return "\n".join(lines)


def markdown_summary(result: dict[str, Any], *, label: str) -> str:
    """A result as Markdown: a line on what was measured, the month table and the fits (docs/data.md's tables are
    rendered from the JSON with this, by ``scripts/cutoff_tables.py``)."""
    s, d, m = result["settings"], result["data"], result["model"]
    where = (f"snapshot `{d['snapshot']}`" if d["kind"] == "snapshot"
             else f"the `{d['source']}` mirror `{Path(d['folder']).name}`")
    lines = [f"**{label}** — {m['id']} ({m['dtype']}) on {where}, {d['since'] or 'start'} to {d['until'] or 'end'}: "
             f"{result['windows']} windows of {s['tokens']} tokens (up to {s['windows_per_month']} a month, at most "
             f"{s['windows_per_record']} a record) from {result['records_scored']} of {d['records']} records, "
             f"{result['topics']['k']} topics, {s['bootstrap']} bootstrap resamples, seed {s['seed']}; "
             f"{result['cpu_seconds'] / 60:.0f} CPU minutes ({result['cpus']} cores).", "",
             "| month | records | windows | loss, nats (95% CI) | topic-standardised (95% CI) | topics |",
             "|---|---:|---:|---|---|---:|"]
    rows = {r["month"]: r for r in result["months"]}
    skipped = {r["month"]: r for r in result.get("skipped_months", [])}
    for month in sorted({*rows, *skipped}):
        if month in skipped:
            lines.append(f"| {month} | {skipped[month]['records_scored']} | 0 | left out: fewer than {MIN_RECORDS} records "
                         "to score | | |")
            continue
        r = rows[month]
        (lo, hi), (slo, shi) = r["loss"]["ci"], r["standardised"]["ci"]
        lines.append(f"| {month} | {r['records_scored']} | {r['windows']} | {r['loss']['mean']:.2f} ({lo:.2f}–{hi:.2f}) "
                     f"| {r['standardised']['mean']:.2f} ({slo:.2f}–{shi:.2f}) | "
                     f"{r['standardised']['topics_present']}/{result['topics']['k']} |")
    lines.append("")
    for name, title in (("standardised", "Change point, topic-standardised curve"), ("raw", "Change point, raw curve")):
        lines.append(f"- {title}: {result['changepoint'][name]['message']}.")
    for name, title in (("standardised", "topic-standardised"), ("raw", "raw")):
        t = result["trend"].get(name)
        if t:
            lines.append(f"- Linear trend, {title}: {t['slope']:+.3f} nats a month (95% CI {t['ci'][0]:+.3f} to "
                         f"{t['ci'][1]:+.3f}).")
    reg, judged = result.get("registry"), result["effective_cutoff"]
    if reg:
        lines.append(f"- Registry: cutoff {reg['cutoff'] or '-'} ({reg['kind']}); measured effective cutoff: "
                     f"{judged['estimate'] or 'none found'}"
                     + (f" ({judged['status']})" if judged["status"] not in ("none", "step") else "")
                     + (f"; {judged['note']}" if judged.get("note") else "") + ".")
    return "\n".join(lines)


def plot_cutoff_curve(result: dict[str, Any], path: Path) -> Path:
    """The raw and topic-standardised monthly loss with their intervals, the fitted step when there is one, and the
    registry's stated cutoff; a PNG written atomically."""
    from largefedbench.evaluation.plots import _figure, _save

    rows = result["months"]
    months = [r["month"] for r in rows]
    x = np.arange(len(months), dtype=float)
    plt = _figure()
    fig, ax = plt.subplots(figsize=(max(5.5, 0.45 * len(months) + 2), 3.6))
    for key, label, shift, colour in (("loss", "raw", -0.08, "tab:blue"),
                                      ("standardised", "topic-standardised", 0.08, "tab:orange")):
        y = np.array([r[key]["mean"] for r in rows])
        ci = np.array([r[key]["ci"] for r in rows])
        ax.errorbar(x + shift, y, yerr=[y - ci[:, 0], ci[:, 1] - y], fmt="o-", ms=3.5, lw=1, capsize=2,
                    color=colour, label=f"{label} (95% CI, bootstrap over records)")
    fit = result["changepoint"]["standardised"]
    if "fitted" in fit:  # the best change point of the standardised curve, dotted when it is not significant
        xs, ys = list(x), list(fit["fitted"])
        if fit["shape"] == "step":  # draw the jump between the months
            c = months.index(fit["break_month"])
            xs = [*x[:c], c - 0.5, c - 0.5, *x[c:]]
            ys = [*fit["fitted"][:c], fit["fitted"][c - 1], fit["fitted"][c], *fit["fitted"][c:]]
        ax.plot(xs, ys, "-" if fit["significant"] else ":", color="tab:red", lw=1.2,
                label=f"best change point: {fit['shape']} from {fit['break_month']} "
                f"({'significant' if fit['significant'] else 'not significant'}, p = {fit['p_value']:.2g} vs a line)")
    reg = result.get("registry")
    if reg and reg.get("cutoff"):
        if reg["cutoff"] in months:
            ax.axvline(months.index(reg["cutoff"]) + 0.5, color="grey", ls="--", lw=1,
                       label=f"registry cutoff {reg['cutoff']} ({reg['kind']})")
        else:
            side = "before" if reg["cutoff"] < months[0] else "after"
            ax.plot([], [], " ", label=f"registry cutoff {reg['cutoff']} ({reg['kind']}): {side} these months")
    skipped = [m["month"] for m in result.get("skipped_months", [])]
    if skipped:
        ax.plot([], [], " ", label=f"left out (too few records): {', '.join(skipped)}")
    ax.set_xticks(x)
    ax.set_xticklabels(months, rotation=60, fontsize=7)
    ax.set_ylabel("mean next-token loss (nats)")
    d = result["data"]
    where = d.get("snapshot") or f"{d['source']} mirror {Path(d['folder']).name}"
    ax.set_title(f"{result['model']['id']} on {where}: {result['settings']['tokens']}-token windows, "
                 f"{result['topics']['k']} topics", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6.5, loc="best")
    return _save(fig, Path(path))


def write_result(result: dict[str, Any], path: Path) -> Path:
    """The result as indented JSON, written atomically."""
    import json

    buf = io.StringIO()
    json.dump(result, buf, indent=2, sort_keys=True, ensure_ascii=False)
    atomic_write_bytes(Path(path), (buf.getvalue() + "\n").encode())
    return Path(path)

