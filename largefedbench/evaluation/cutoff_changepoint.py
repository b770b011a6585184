"""The change point of a knowledge-cutoff curve: a step or hinge fitted to the monthly means and tested against a
straight line, the linear trend, and the effective cutoff the fit supports, checked against the cutoff registry."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

FIT_VERSION = 2  # 2: change points tested against a straight line, step and hinge shapes; 1: steps against a flat line
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
