"""What a result was computed with: package versions, git commit, hardware (recorded in every entry)."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from largefedbench import __version__

PACKAGES = ("torch", "transformers", "trl", "peft", "sentence-transformers", "datasets", "opacus", "dp-accounting",
            "tiktoken", "tokenizers", "numpy", "scipy", "scikit-learn")


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    """The commit of the LargeFedBench checkout in use (with ``+dirty`` if it has local changes), else None."""
    repo = Path(__file__).resolve().parents[1]
    if not (repo / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_bf16() -> str | None:
    """The CPU's native bf16 matrix instructions: ``"amx_bf16"``, ``"avx512_bf16"`` or None."""
    flags = cpu_flags()
    return next((f for f in ("amx_bf16", "avx512_bf16") if f in flags), None)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"cpu": _cpu_name(), "n_cpus": os.cpu_count(), "cpu_bf16": cpu_bf16(), "gpu": None}
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["ram_gb"] = round(pages * page_size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        info["ram_gb"] = None
    import torch

    # CPU results depend on it: a float reduction split over other threads rounds otherwise (docs/evaluation.md)
    info["torch_threads"] = torch.get_num_threads()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["n_gpus"] = torch.cuda.device_count()
    return info


def peak_memory_mb() -> float:
    """Peak resident memory of this process (and peak CUDA memory when a GPU is used), in MB."""
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = rss_kb / 1024 if sys.platform != "darwin" else rss_kb / 2**20
    import torch

    if torch.cuda.is_available():
        peak += torch.cuda.max_memory_allocated() / 2**20
    return float(peak)


def environment() -> dict[str, Any]:
    return {"lfb_version": __version__, "python": platform.python_version(), "platform": platform.platform(),
            "packages": package_versions(), "git_commit": git_commit(), "hardware": hardware()}
