"""What LargeFedBench relies on of the files of Microsoft's Private Evolution library (DPSDA, ``pe``).

- ``pe.constant.data`` names its internal columns ``PE.*``: ``PE.CLIENT_ID`` is the private data's client column
  that client-level voting reads, ``PE.TEXT`` holds the texts once loaded (``TextCSV`` renames its text column to
  it), ``PE.VARIATION_API_FOLD_ID`` is -1 for the samples the last histogram selected and 0, 1, … for their
  variations, ``PE.FROM_LAST_FLAG`` is 1 for those selected samples.
- ``SaveTextToCSV`` writes one CSV per iteration, named by the iteration (``000000010.csv``: its default format
  ``09d``), with the text column and the label columns only. The population it saves is the next iteration's: with
  ``keep_selected`` (the Aug-PE examples) the selected samples *and* their variations. DPSDA's own FID scores only
  the selected ones (``filter_criterion={PE.VARIATION_API_FOLD_ID: -1}``), which such a CSV cannot tell apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["CLIENT_ID", "FOLD_ID", "TEXT", "iteration_file_problem"]

CLIENT_ID = "PE.CLIENT_ID"
TEXT = "PE.TEXT"
FOLD_ID = "PE.VARIATION_API_FOLD_ID"
_ITERATION_CSV = re.compile(r"\d{9}\.csv")
_SELECTED = f"the rows whose {FOLD_ID} is -1 (the selected samples, what DPSDA's own FID scores)"


def iteration_file_problem(name: str, columns: Sequence[str]) -> str | None:
    """Why a CSV named ``name`` with these ``columns`` looks like a DPSDA population rather than a final synthetic
    set, with how to filter it; None when it does not."""
    internal = [c for c in columns if c.startswith("PE.")]
    if internal:
        shown = ", ".join(internal[:4]) + (", …" if len(internal) > 4 else "")
        return (f"it has DPSDA's internal columns ({shown}): a PE population, which mixes the selected samples and "
                f"their variations; keep {_SELECTED} and write their texts as a `text` column")
    if _ITERATION_CSV.fullmatch(name):
        return ("it is named like a file DPSDA's SaveTextToCSV writes each iteration: with keep_selected it holds the "
                "selected samples and their variations together, and the CSV cannot tell them apart; take the "
                f"iteration's checkpoint (data_frame.pkl), keep {_SELECTED} and write their {TEXT} as a `text` column")
    return None
