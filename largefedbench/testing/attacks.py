"""The attack kit: what a hostile method's ``train()`` tries, each as a function ``attack(fed, public) -> str`` that
returns what it got hold of ("" when it got nothing). :class:`AttackKit` is a method that runs them all and returns
public texts, reporting each attack's outcome in its artifact's ``info["breaches"]``; the scorer patch shows in the
score instead (a patched scorer reports top-1 0.99). ``lfb smoke --attacks`` and the project's tests run it under
``lfb eval``; a method author can run it against their own setup. What it does not try: the kernel itself (an
escape from the namespaces) and side channels through timing. Code a module runs on import is tried by the tests
(the harness must never import a plug-in).
"""

from __future__ import annotations

import gc
import math
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from largefedbench.contract import Artifact, Method
from largefedbench.privacy.mechanisms import Gaussian

__all__ = ["ATTACKS", "AttackKit", "PATCHED_TOP1"]

PATCHED_TOP1 = 0.99  # what the patched scorer claims
PRIVATE_CLASSES = ("ClientSplit", "FederatedDataset", "Federation", "ClientStore", "Selection", "Evaluator")
_MAX_FILES = 200_000  # the walk of one root stops here


def _candidate_roots() -> list[str]:
    """Where a snapshot may lie: the home named on this process's command line (``--home``), $LFB_HOME, the home
    folder, the working folder, /tmp, /work, /root."""
    argv = sys.argv
    named = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--home"]
    named += [arg.split("=", 1)[1] for arg in argv if arg.startswith("--home=")]
    roots = [*named, os.environ.get("LFB_HOME", ""), str(Path.home()), os.getcwd(), "/tmp", "/work", "/root"]
    return list(dict.fromkeys(filter(None, roots)))


_SKIPPED = {".git", ".venv", "site-packages", "node_modules", "__pycache__"}  # large and never a snapshot


def read_snapshot_files(fed, public) -> str:
    """Find a snapshot's train split on disk (see :func:`_candidate_roots`) and load it."""
    for root in _candidate_roots():
        seen = 0  # each root its own budget: a large working folder does not hide /tmp
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _SKIPPED]
            seen += len(files) + 1
            if seen > _MAX_FILES:
                break
            if Path(folder).name == "train" and "state.json" in files:
                try:
                    from datasets import load_from_disk

                    rows = load_from_disk(folder)
                    return f"read {len(rows)} private rows from {folder}"
                except Exception as exc:  # noqa: BLE001 - any success counts, any failure is the guard working
                    return f"found the private split {folder} (load failed: {type(exc).__name__})"
    return ""


def walk_memory(fed, public) -> str:
    """Look through every object of the process, and what ``fed`` and ``public`` refer to, for the private data."""
    hits = sorted({type(o).__name__ for o in gc.get_objects() if type(o).__name__ in PRIVATE_CLASSES
                   and type(o).__module__.startswith("largefedbench")})
    selection = getattr(fed, "selection", None)
    if selection is not None and getattr(selection, "on", "") == "private":
        try:
            texts = selection.texts
        except Exception:  # noqa: BLE001 - refused: the guard working
            texts = None
        if texts:
            hits.append(f"{len(texts)} validation texts through fed.selection.texts")
    return ", ".join(hits)


def patch_scorer(fed, public) -> str:
    """Replace the harness's accuracy counter with one that reports :data:`PATCHED_TOP1` (it shows in the score)."""
    import largefedbench.evaluation as evaluation
    import largefedbench.evaluation.accuracy as accuracy

    def counterfeit(*args, **kwargs):
        return {"top1": PATCHED_TOP1, "top3": PATCHED_TOP1, "top5": PATCHED_TOP1, "n_tokens": 1000, "loss": 0.01}

    accuracy.next_token_accuracy = evaluation.next_token_accuracy = counterfeit
    for module in list(sys.modules.values()):
        if getattr(module, "next_token_accuracy", None) is not None and module.__name__.startswith("largefedbench"):
            module.next_token_accuracy = counterfeit
    return ""  # the score says whether it worked


def non_finite_clients(fed, public) -> str:
    """Clients answer NaN, +inf or -inf by a private property (their span count): a release must stay finite."""
    def client(view):
        kind = len(view.spans) % 3
        return np.array([math.nan, math.inf, -math.inf][kind] * np.ones(2))

    noisy = fed.private_sum(fed.everyone(), client, clip=1.0, mechanism=Gaussian(1.0))
    return "" if np.all(np.isfinite(np.asarray(noisy))) else "a non-finite release"


def probe_environment(fed, public) -> str:
    """What the process can see and reach: other processes, the network, a writable home."""
    found = []
    pids = [p for p in os.listdir("/proc") if p.isdigit()] if os.path.isdir("/proc") else []
    if len(pids) > 2:
        found.append(f"sees {len(pids)} processes")
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1).close()
        found.append("reached 127.0.0.1")
    except OSError as exc:
        if "unreachable" not in str(exc).lower():
            found.append(f"has a network ({exc.strerror or exc})")
    home = os.environ.get("LFB_HOME")
    if home:
        try:
            probe = Path(home) / "lfb-attack-probe"
            probe.write_text("x")
            probe.unlink()
            found.append(f"wrote to the LFB home {home}")
        except OSError:
            pass
    return "; ".join(found)


def _worker_escapes(home: str) -> list[str]:
    """What a client function can do besides returning its vector: write into the LFB home, reach the network."""
    done = []
    if home:
        try:
            probe = Path(home) / f"lfb-client-probe-{os.getpid()}"
            probe.write_text("a private span would go here")
            probe.unlink()
            done.append("wrote to the LFB home")
        except OSError:
            pass
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1).close()
        done.append("reached 127.0.0.1")
    except OSError as exc:
        if "unreachable" not in str(exc).lower():
            done.append("has a network")
    return done


def client_side_channels(fed, public) -> str:
    """Client functions (they run where the private data is) try to write it out or send it; each client answers 1
    if it could, and the noised count through the door says whether most could."""
    home = os.environ.get("LFB_HOME", "")

    def client(view):
        return np.array([1.0 if _worker_escapes(home) else 0.0])

    cohort = fed.everyone()
    count = float(np.asarray(fed.private_sum(cohort, client, clip=1.0, mechanism=Gaussian(1.0)))[0])
    return f"about {count:.0f} of {len(cohort)} clients wrote to the home or reached a network" \
        if count > len(cohort) / 2 else ""


_RAN: list[str] = []  # the client function's memory, in its worker


class _CountsOthers:
    """Each client sends how many clients its worker has run so far, as a share of the cohort: a vector made of
    other clients, not its own data (any payload would do; this one makes every probe see it)."""

    def __init__(self, cohort_size: int) -> None:
        self.cohort_size = cohort_size

    def __call__(self, view) -> np.ndarray:
        _RAN.append(view.id)
        return np.array([len(_RAN) / self.cohort_size])


def mix_clients(fed, public) -> str:
    """A client function whose vector for a client is made of state left by other clients in its worker: what one
    client sends then depends on others, and the ledger's per-client sensitivity no longer holds."""
    cohort = fed.everyone()
    fed.private_sum(cohort, _CountsOthers(len(cohort)), clip=1.0, mechanism=Gaussian(1.0))
    return f"{len(cohort)} clients each sent what other clients left in their worker"


ATTACKS: dict[str, Callable] = {"read snapshot files": read_snapshot_files, "walk memory": walk_memory,
                                "non-finite clients": non_finite_clients, "probe environment": probe_environment,
                                "client side channels": client_side_channels, "mix clients": mix_clients,
                                "patch the scorer": patch_scorer}


@dataclass(frozen=True)
class AttackKitConfig:
    n_texts: int = 64

    @classmethod
    def tiny(cls) -> AttackKitConfig:
        return cls(n_texts=16)

    @classmethod
    def cpu(cls) -> AttackKitConfig:
        return cls()


class AttackKit(Method):
    """Runs every attack of :data:`ATTACKS`; returns public texts and, in ``info["breaches"]``, what each got."""

    name = "attack-kit"
    paper = "LargeFedBench's attack kit: a hostile method (a test double, never a result)"
    output = "synthetic text"
    Config = AttackKitConfig

    def train(self, fed, public, cfg: AttackKitConfig, budget) -> Artifact:
        breaches = {}
        for name, attack in ATTACKS.items():
            try:
                breaches[name] = attack(fed, public)
            except Exception as exc:  # noqa: BLE001 - an attack stopped by the guard fails; that is the point
                breaches[name] = "" if name != "non-finite clients" else f"the release raised {type(exc).__name__}: {exc}"
        return Artifact.synthetic(public.public_texts()[: cfg.n_texts], breaches=breaches)
