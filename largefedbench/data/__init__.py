"""Records -> clients -> spans; snapshots; windows; the model-cutoff registry (DESIGN.md §3)."""

from __future__ import annotations

from largefedbench.data.federated import Client, ClientSplit, FederatedDataset, load_snapshot
from largefedbench.data.records import Record
from largefedbench.data.spans import SpanSettings
from largefedbench.data.splits import SplitRatios
from largefedbench.data.windows import Window, get_cutoff, list_cutoffs

__all__ = [
    "Client", "ClientSplit", "FederatedDataset", "Record", "SpanSettings", "SplitRatios", "Window",
    "get_cutoff", "list_cutoffs", "load_snapshot",
]
