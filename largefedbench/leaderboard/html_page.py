"""The board as one static HTML page (``leaderboard/index.html``): inline CSS and JS, plots linked relative, so
it works from ``file://`` without a server. Tables sort by clicking a header; a text box filters by dataset or
method. Every string taken from an entry is HTML-escaped."""

from __future__ import annotations

import math
from html import escape

from largefedbench.leaderboard.board import DEMO_HEADING, SECTION_TITLES, SECTIONS, Board, Group, Row
from largefedbench.leaderboard.columns import (
    OTHER_GENERATOR_ONLY_NOTE,
    REPRODUCTION_LEGEND,
    SIGMA_BY_RERUN_NOTE,
    UNSANDBOXED,
    Column,
    columns_for,
    noise_summary,
    sigma_by_rerun,
    unsandboxed,
)
from largefedbench.leaderboard.findings import MIN_RANKED_SEEDS
from largefedbench.leaderboard.ranks import RULE

CSS = """
:root { color-scheme: light dark; --fg: #1d232b; --muted: #5b6572; --bg: #ffffff; --line: #d9dee5;
  --head: #f2f4f7; --zebra: #fafbfc; --accent: #2457a6; --apart: #9a5b00; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ee; --muted: #a3acb8; --bg: #14181d; --line: #2e353e;
  --head: #1d232b; --zebra: #181d23; --accent: #7fa8e8; --apart: #e0a552; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1500px; padding: 1.5rem; font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
  Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { margin: 0 0 .25rem; font-size: 1.6rem; } h2 { margin: 2.2rem 0 .6rem; font-size: 1.15rem; }
h3 { margin: 1.2rem 0 .4rem; font-size: 1rem; } .muted, figcaption { color: var(--muted); }
.controls { position: sticky; top: 0; z-index: 2; display: flex; gap: 1rem; align-items: center; padding: .6rem 0;
  background: var(--bg); border-bottom: 1px solid var(--line); }
#filter { width: 22rem; max-width: 60vw; padding: .4rem .6rem; font: inherit; border: 1px solid var(--line);
  border-radius: 6px; background: var(--bg); color: var(--fg); }
.bucket { margin: .8rem 0 .3rem; font-weight: 600; }
.scroll { overflow-x: auto; }
table.board { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
table.board th, table.board td { padding: .3rem .5rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
table.board th { background: var(--head); text-align: left; vertical-align: bottom; white-space: normal;
  min-width: 3.2rem; }
table.board th button { all: unset; cursor: pointer; font-weight: 600; }
table.board th button::after { content: " \\2195"; color: var(--muted); font-weight: 400; }
table.board th[aria-sort="ascending"] button::after { content: " \\2191"; color: var(--accent); }
table.board th[aria-sort="descending"] button::after { content: " \\2193"; color: var(--accent); }
table.board td.num { text-align: right; } table.board tbody tr:nth-child(even) { background: var(--zebra); }
table.board td.why { white-space: normal; min-width: 18rem; color: var(--apart); }
a { color: var(--accent); } .apart h3 { color: var(--apart); }
.plots { display: flex; flex-wrap: wrap; gap: 1.2rem; } figure { margin: 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.notice { padding: .5rem .8rem; border-left: 4px solid var(--apart); background: var(--head); }
"""

JS = """
(function () {
  "use strict";
  function key(row, index, numeric) {
    var cell = row.cells[index];
    var v = cell ? cell.getAttribute("data-v") : null;
    if (numeric) { return (v === null || v === "") ? null : parseFloat(v); }
    return (v === null ? cell.textContent : v).toLowerCase();
  }
  function sortBy(th) {
    var table = th.closest("table"), numeric = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var body = table.tBodies[0], index = th.cellIndex;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, index, numeric), y = key(b, index, numeric);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return dir === "ascending" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.board th button").forEach(function (b) {
    b.addEventListener("click", function () { sortBy(b.closest("th")); });
  });
  var input = document.getElementById("filter"), status = document.getElementById("shown");
  function filter() {
    var terms = input.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0, total = 0;
    document.querySelectorAll("tr[data-search]").forEach(function (tr) {
      var text = tr.getAttribute("data-search");
      var ok = terms.every(function (t) { return text.indexOf(t) !== -1; });
      tr.hidden = !ok; total += 1; shown += ok ? 1 : 0;
    });
    document.querySelectorAll(".table-block, section.group, .section").forEach(function (block) {
      block.hidden = !block.querySelector("tr[data-search]:not([hidden])");
    });
    status.textContent = shown + " of " + total + " entries shown";
  }
  input.addEventListener("input", filter);
  filter();
})();
"""


def _data_value(value: float | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return escape(str(value))


def _cell(column: Column, row: Row) -> str:
    value = _data_value(column.value(row))
    cls = "num" if column.numeric else ("why" if column.key == "why" else "")
    attrs = f' class="{cls}"' if cls else ""
    if column.key == "entry":
        folder = row.href.rsplit("/", 1)[0]
        plots = "".join(f' · <a href="{escape(folder)}/{escape(name)}">{escape(k)}</a>'
                        for k, name in sorted(row.entry.artifacts.items()))
        body = f'<a href="{escape(row.href)}" title="{escape(row.entry.entry_id)}">json</a>{plots}'
    elif column.key == "reproduced" and row.reproduction is not None:
        body = f'<a href="{escape(row.record_href)}">{escape(column.text(row))}</a>'
    elif column.key == "epsilon":
        body = f'<span title="{escape(noise_summary(row))}">{escape(column.text(row))}</span>'
    elif column.key == "method":
        body = (f'<span title="{escape(row.entry.method.paper)}">{escape(row.entry.method.name)}</span> '
                f'<span class="muted">{escape(row.entry.method.version)}</span>'
                + (f' <span class="muted">[{escape(row.variant)}]</span>' if row.variant else "")
                + (f' <span title="its train() did not run in the namespaces sandbox">{UNSANDBOXED}</span>'
                   if unsandboxed(row) else ""))
    else:
        body = escape(column.text(row))
    return f'<td{attrs} data-v="{value}">{body}</td>'


def _table(rows: list[Row], status: str, bucket: str, group: Group) -> str:
    cols = columns_for(status, rows)
    head = "".join(f'<th scope="col" data-key="{c.key}" data-type="{"num" if c.numeric else "text"}" '
                   f'title="{escape(c.help)}"><button type="button">{escape(c.header)}</button></th>' for c in cols)
    body = []
    for r in rows:
        e = r.entry
        search = f"{group.dataset} {group.snapshot} {e.method.name} {e.method.version} {e.entry_id}".lower()
        body.append(f'<tr data-search="{escape(search)}" data-status="{r.status}">'
                    + "".join(_cell(c, r) for c in cols) + "</tr>")
    return (f'<div class="table-block" data-bucket="{escape(bucket)}"><div class="bucket">{escape(bucket)}</div>'
            '<div class="scroll">'
            f'<table class="board" data-status="{status}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div></div>')


def _group(group: Group, plots: dict[str, str]) -> str:
    parts = [f'<section class="group" id="{escape(group.slug)}"><h2>{escape(group.title)}</h2>']
    if group.superseded_note:
        parts.append(f'<p class="notice">{escape(group.superseded_note)}</p>')
    if group.hardware_note:
        parts.append(f'<p class="notice">{escape(group.hardware_note)}</p>')
    figures = [f'<figure><img src="{escape(path)}" alt="{name} plot of {escape(group.dataset)}" loading="eager">'
               f'<figcaption>{"accuracy against ε per method" if name == "frontier" else "costs per client and round"}'
               "</figcaption></figure>" for name, path in sorted(plots.items(), key=lambda kv: kv[0] != "frontier")]
    if figures:
        parts.append(f'<div class="plots">{"".join(figures)}</div>')
    for status in SECTIONS:
        tables = group.tables(status)
        if tables:
            apart = " apart" if status != "ranked" else ""
            parts.append(f'<div class="section{apart}" data-section="{status}"><h3>{escape(SECTION_TITLES[status])}'
                         "</h3>" + "".join(_table(rows, status, b, group) for b, rows in tables) + "</div>")
    if any(r.other_generator_only for r in group.rows):
        parts.append(f'<p class="notice">{escape(OTHER_GENERATOR_ONLY_NOTE)}</p>')
    if any(sigma_by_rerun(r) for r in group.rows):
        parts.append(f'<p class="notice">{escape(SIGMA_BY_RERUN_NOTE)}</p>')
    parts.append("</section>")
    return "".join(parts)


def render_html(board: Board, plots: dict[str, dict[str, str]]) -> str:
    buckets = board.buckets_text()
    invalid = (f'<p class="notice">{board.n_invalid} invalid entries are not shown: run '
               "<code>lfb leaderboard validate</code> to see why.</p>") if board.n_invalid else ""
    real_first = any(not g.synthetic for g in board.groups)
    groups = "".join((f'<h1 class="demo">{escape(DEMO_HEADING)}</h1>' if real_first and g.synthetic and
                      (i == 0 or not board.groups[i - 1].synthetic) else "") + _group(g, plots.get(g.slug, {}))
                     for i, g in enumerate(board.groups)) or \
        '<p class="notice">No entries yet: see CONTRIBUTING.md, "Submitting an entry".</p>'
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="lfb leaderboard render">
<title>LargeFedBench leaderboard</title>
<style>{CSS}</style>
</head>
<body>
<!-- Generated by `lfb leaderboard render` from leaderboard/entries; do not edit by hand. -->
<h1>LargeFedBench leaderboard</h1>
<p><strong>{escape(board.data_statement())}</strong></p>
<p class="muted">{len(board.rows)} valid entries: {board.counts_text()}. Grouped by dataset, window, snapshot and profile; ranked by
top-1 next-token accuracy within ε buckets ({escape(buckets)}); ε = 0 / ε = ∞ references are listed, not ranked.
{escape(RULE)} In the # column, {escape(REPRODUCTION_LEGEND)}. Every row gives its minutes per seed, threads and CPU.
ε is the largest over the seeds, recomputed from each seed's privacy ledger. Ranking needs at least
{MIN_RANKED_SEEDS} seeds; entries whose window does not start after their model's knowledge cutoff are listed apart.
Click a column header to sort.</p>
{invalid}
<div class="controls"><input id="filter" type="search" placeholder="Filter by dataset or method" aria-label="Filter
 by dataset or method" autocomplete="off"><span id="shown" class="muted" aria-live="polite"></span></div>
{groups}
<script>{JS}</script>
</body>
</html>
"""
