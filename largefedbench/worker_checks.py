"""Checks of what a client worker returns, made before anything of it is released.

A client function runs in a worker that also holds the code that clips and sums, and (in a worker process) the data
of every client of its chunk. Two checks keep a hostile one from turning that into more than one client's clipped
vector per client:

- :func:`check_bounded`: a chunk's sum of clipped vectors has norm at most its clients × ``clip`` (clipping undone in
  the worker is caught);
- :func:`probe_sensitivity` (a sandboxed plug-in's releases): one client's vector must be computed from that client's
  data alone. Per release, a client ``a`` of a chunk ``S`` is drawn with this process's secret randomness after the
  chunks are assigned; ``S`` without ``a``, and ``a`` alone, are run again, each in a fresh confined worker that holds
  only those clients in memory (:meth:`~largefedbench.process_executor.ProcessExecutor.isolated_sums`). An honest function
  gives ``sum(S) - sum(S - a) = vector(a)``; one that mixes clients (every client sends its chunk's consensus, or a
  copy of one client's data, or data read from other clients' files or kept from earlier chunks) does not, for most
  ``a``, and the release is refused. A worker cannot tell a probe from a chunk in time to matter: the probed chunk's
  sum is already back. What it does not catch: mixing that no single removal changes (a threshold over several
  clients), and a cheat confined to the chunks the probes happen to miss (one probe per release).

A probe needs a client function that is deterministic given its clients: randomness from ``client.rng()`` (a
confined worker seeds the global generators from each client's seed before a per-client call, see
:func:`~largefedbench.client_views.seed_global_rngs`). It costs about one chunk's client time and two worker starts
per release, and runs only where the workers are confined; nothing it computes is released or recorded.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from largefedbench.errors import PrivacyError

#: the probe's tolerance, in units of clip: a flat part, and per client of the chunk a multiple of the sum's rounding
PROBE_SLACK, PROBE_ROUNDING = 0.01, 4.0


def _float64(values: Any) -> tuple[np.ndarray, float]:
    """A numpy array or torch tensor as float64 numpy, and the machine epsilon of its own dtype."""
    if hasattr(values, "detach"):
        import torch

        eps = float(torch.finfo(values.dtype).eps) if values.dtype.is_floating_point else 0.0
        return values.detach().cpu().double().numpy(), eps
    array = np.asarray(values)
    eps = float(np.finfo(array.dtype).eps) if np.issubdtype(array.dtype, np.floating) else 0.0
    return array.astype(np.float64), eps


def check_bounded(part: Any, clip: float) -> None:
    """A chunk's sum of clipped vectors has norm at most its clients × ``clip``: a worker whose clipping was undone
    (a client function patching it in its process) is caught here, before any noise is added to its sum."""
    if part.total is None:
        return
    total, _ = _float64(part.total)
    norm = float(np.linalg.norm(total))
    if not np.isfinite(norm):  # finite rows (else zeroed) and clipped: the chunk's sum overflowed its dtype
        raise PrivacyError(f"a chunk of {part.n_clients} clients summed to a non-finite vector: the clipped sum (each "
                           f"entry at most {part.n_clients} × clip = {part.n_clients * clip:g}) overflowed "
                           f"{getattr(part.total, 'dtype', '?')}; have the client function return float32 or float64 "
                           "vectors, or lower the clip; nothing of it is released")
    if not norm <= part.n_clients * clip * (1 + 1e-2) + 1e-6:  # slack: rows clipped in bf16 round up to 2^-8
        raise PrivacyError(f"a chunk of {part.n_clients} clients returned a sum of norm {norm:.6g}, more than "
                           f"{part.n_clients} x clip ({clip:g}): its clipping was undone in the worker; nothing of it "
                           "is released")


def pick_probe(chunks: Sequence[np.ndarray]) -> tuple[int, int] | None:
    """(chunk, position in it) of the client to probe, drawn with secret randomness; None if no chunk has a client."""
    filled = [i for i, chunk in enumerate(chunks) if len(chunk)]
    if not filled:
        return None
    chunk = filled[secrets.randbelow(len(filled))]
    return chunk, secrets.randbelow(len(chunks[chunk]))


def probe_sensitivity(executor: Any, store: Any, indices: np.ndarray, position: int, total: Any, task: dict[str, Any],
                      clip: float) -> None:
    """Refuse the release unless client ``indices[position]``'s share of its chunk's ``total`` is its own vector (see
    the module docstring)."""
    indices = np.asarray(indices)
    rest, alone = np.delete(indices, position), indices[position : position + 1]
    runs = executor.isolated_sums(store, [alone, rest] if len(rest) else [alone], **task)
    for part in runs:
        check_bounded(part, clip)
    own, _ = _float64(runs[0].total)
    full, eps = _float64(total)
    without = _float64(runs[1].total)[0] if len(runs) > 1 and runs[1].total is not None else np.zeros_like(full)
    if own.shape != full.shape or without.shape != full.shape:
        raise PrivacyError(f"the client function gave a sum of shape {own.shape} for a client alone and "
                           f"{full.shape} in its chunk: its vector's shape must not depend on the other clients")
    gap = float(np.linalg.norm(full - without - own))
    tolerance = clip * (PROBE_SLACK + PROBE_ROUNDING * len(indices) * max(eps, 1e-6))
    if not gap <= tolerance:
        raise PrivacyError(
            f"the sensitivity probe refused this release: removing one client from a chunk of {len(indices)} changed "
            f"the chunk's sum by a vector {gap / clip:.3g} × clip away from that client's own vector computed alone "
            f"(allowed: {tolerance / clip:.3g} × clip). Each client's vector must be computed from that client's data "
            "alone, never from other clients of its chunk, data kept from earlier clients or files; if the function "
            "is random, draw from client.rng() (or chunk.rng(i)) so that a client gets the same vector wherever it "
            "runs. Nothing of this release left the federation")
