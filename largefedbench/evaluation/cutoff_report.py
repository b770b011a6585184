"""A knowledge-cutoff curve's result as ``lfb cutoffs measure`` shows and stores it: the printed summary, the
Markdown tables of docs/data.md, the plot and the JSON file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.evaluation.cutoff_scoring import MIN_RECORDS
from largefedbench.io import atomic_write_bytes


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
