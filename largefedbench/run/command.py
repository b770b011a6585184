"""The command an entry records: the ``lfb eval`` line that reruns it, naming no folder of this machine."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from largefedbench.run.request import Prepared

__all__ = ["command_for"]


def _names_a_folder(value: str) -> bool:
    """Is a command-line value a local path with a folder part (not a name, module or hf:// address)?"""
    return "://" not in value and ("/" in value or "\\" in value or Path(value).is_absolute())


def command_for(prep: Prepared) -> str:
    r = prep.request
    if prep.declared:  # the file by its name; the entry's declared section holds its hash
        dataset = prep.fd.manifest["name"] if _names_a_folder(r.dataset) else r.dataset
        return shlex.join(["lfb", "eval", "--synthetic", Path(r.synthetic).name, "--name", prep.method.name,
                           "--made-with", r.made_with, "--dataset", dataset, "--profile", prep.profile.name,
                           "--seeds", ",".join(map(str, r.seeds)), "--epsilon", f"{prep.budget.epsilon:g}",
                           "--delta", f"{prep.budget.delta:g}"]
                          + (["--public", prep.public_spec.partition(":")[0]] if prep.public_spec != prep.profile.public else [])
                          + (["--select-on", r.select_on] if r.select_on != "private" else []))
    # a published command names no folder of this machine: a file method by its file name, a snapshot by its name
    file, _, cls = r.method.rpartition(":")
    method = f"{Path(file).name}:{cls}" if file and _names_a_folder(file) else r.method
    dataset = prep.fd.manifest["name"] if _names_a_folder(r.dataset) else r.dataset
    parts = ["lfb", "eval", "--method", method, "--dataset", dataset, "--profile", prep.profile.name,
             "--seeds", ",".join(map(str, r.seeds)), "--preset", prep.preset]
    if prep.method_cls.fixed_epsilon is None:
        parts += ["--epsilon", f"{prep.budget.epsilon:g}", "--delta", f"{prep.budget.delta:g}"]
    if r.noise_free:
        parts.append("--noise-free")
    if r.shuffled_releases:
        parts.append("--shuffled-releases")
    if prep.public_spec != prep.profile.public:  # a local C4 path is this machine's: the command names the kind
        parts += ["--public", prep.public_spec.partition(":")[0]]
    if r.select_on != "private":
        parts += ["--select-on", r.select_on]
    for k, v in sorted(r.overrides.items()):
        parts += ["--set", f"{k}={v}"]
    return shlex.join(parts)


