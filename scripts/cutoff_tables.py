"""Render the measured-cutoff tables of docs/data.md from their JSON (``lfb cutoffs measure --out``), so the numbers
in the page are the measurement's, never typed by hand.

    .venv/bin/python scripts/cutoff_tables.py            # rewrite the block between the markers in docs/data.md
    .venv/bin/python scripts/cutoff_tables.py --check    # exit 1 if the block differs from the JSON
    .venv/bin/python scripts/cutoff_tables.py --refit    # first fit the stored curves again (after a change to the
                                                         # fit) and draw their plots again: no model run
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from largefedbench.evaluation.cutoff_curve import fit_curve, markdown_summary, plot_cutoff_curve, write_result
from largefedbench.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "data.md"
#: (result file under docs/cutoffs/, its label in the page)
CURVES = [("smollm2-congress-2024.json", "US Congressional Record, 2024"),
          ("smollm2-arxiv-qbio.json", "arXiv q-bio abstracts (a stand-in in the genre of bioRxiv, not bioRxiv)")]
BEGIN = "<!-- cutoff tables: rendered by scripts/cutoff_tables.py from docs/cutoffs/*.json; do not edit by hand -->"
END = "<!-- end of cutoff tables -->"


def render() -> str:
    parts = [markdown_summary(json.loads((ROOT / "docs" / "cutoffs" / name).read_text()), label=label)
             for name, label in CURVES]
    return "\n\n".join([BEGIN, *parts, END])


def refit() -> None:
    """Fit each stored curve again with this version's fit (its months are kept), and draw its plot again."""
    import datetime as dt

    for name, _ in CURVES:
        path = ROOT / "docs" / "cutoffs" / name
        result = json.loads(path.read_text())
        result.update(fit_curve(result))
        result["refitted"] = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "by": "scripts/cutoff_tables.py --refit: the stored monthly curves fitted again, the "
                                    "model's scores unchanged"}
        write_result(result, path)
        plot_cutoff_curve(result, path.with_suffix(".png"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check that the block is up to date")
    ap.add_argument("--refit", action="store_true", help="first fit the stored curves again and redraw their plots")
    args = ap.parse_args()
    if args.refit:
        refit()
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC} has no block between {BEGIN!r} and {END!r}", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    new = head + render() + rest.split(END, 1)[1]
    if args.check:
        if new != text:
            print(f"{DOC}: the cutoff tables differ from docs/cutoffs/*.json; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if new != text:
        atomic_write_text(DOC, new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
