"""The rounds every method runs in: the loop (resume, checkpoints, history, best state), the checkpoints it writes,
and what a round records (its cohort, un-noised diagnostics kept out of the entry, server time)."""

from largefedbench.rounds.loop import Best, RoundsLoop, selection_of
from largefedbench.rounds.records import (
    UNRELEASED_FILE,
    cohort_fields,
    draw_cohort,
    record_unreleased,
    releases_of,
    unreleased_path,
)

__all__ = ["UNRELEASED_FILE", "Best", "RoundsLoop", "cohort_fields", "draw_cohort", "record_unreleased",
           "releases_of", "selection_of", "unreleased_path"]
