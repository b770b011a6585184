"""Provenance checks: ids, dataset snapshot and window, environment, and contamination re-checked against the
cutoff registry (the entry's own ``after_cutoff`` flag is never trusted on its own)."""

from __future__ import annotations

import datetime as dt

from largefedbench.leaderboard.findings import Finding, error, note
from largefedbench.leaderboard.schema import Entry, is_safe_id
from largefedbench.leaderboard.snapshots import known_hashes, known_snapshot

#: ``contamination.cutoff_kind`` of the tiny profile's models, pretrained by LargeFedBench on the public split
PRETRAINED_ON_PUBLIC_SPLIT = "pretrained on the snapshot's public split"
#: the same for models pretrained on the run's ``generic`` or ``c4`` public corpus (the entry's ``public`` section)
PRETRAINED_ON_PUBLIC_CORPUS = "pretrained on the run's public corpus"
_RERUN = "Re-run `lfb eval`, which records this section"


def _day(value: str) -> dt.date | None:
    from largefedbench.data.windows import parse_date
    from largefedbench.errors import InputError

    try:
        return parse_date(value)
    except InputError:
        return None


def _month_after(month: str) -> dt.date | None:
    from largefedbench.data.windows import parse_date
    from largefedbench.errors import InputError

    try:
        return parse_date(month, end_of_month=True) + dt.timedelta(days=1)
    except InputError:
        return None


def check_ids(entry: Entry) -> list[Finding]:
    out = []
    for where, value in (("entry_id", entry.entry_id), ("dataset.name", entry.dataset.name),
                         ("dataset.snapshot", entry.dataset.snapshot), ("method.name", entry.method.name),
                         ("config.profile", entry.config.profile)):
        if not is_safe_id(value):
            out.append(error("ids", where, f"{value!r} is not a safe id (lower-case letters, digits, '.', '_', '-'; "
                             "no '..')", "Ids become folder and file names on the board; use the ids `lfb eval` writes"))
    return out


def check_dataset(entry: Entry) -> list[Finding]:
    d, out = entry.dataset, []
    w = d.window
    since, until = _day(w.since), _day(w.until)
    if since is None or until is None:
        out.append(error("dataset", "dataset.window", f"window {w.since!r}..{w.until!r} is not two ISO dates", _RERUN))
    elif since > until:
        out.append(error("dataset", "dataset.window", f"starts ({w.since}) after it ends ({w.until})", _RERUN))
    if w.public_since is not None and (_day(w.public_since) is None or since is None or _day(w.public_since) > since):
        out.append(error("dataset", "dataset.window.public_since", f"{w.public_since!r} is not a date before the "
                         "window", _RERUN))
    for section, counts in (("clients", d.clients), ("spans", d.spans)):
        missing = {"train", "validation", "test"} - set(counts)
        if missing or any(v < 0 for v in counts.values()):
            out.append(error("dataset", f"dataset.{section}", f"needs non-negative train/validation/test counts, got "
                             f"{counts}", _RERUN))
    return out + check_snapshot(entry)


def _pretrained_on(entry: Entry) -> set[str]:
    """Snapshot hashes the profile's models record being pretrained on (the models LargeFedBench trains)."""
    return {v["snapshot_sha256"] for v in entry.profile.values()
            if isinstance(v, dict) and isinstance(v.get("snapshot_sha256"), str)}


def check_snapshot(entry: Entry) -> list[Finding]:
    """An unknown snapshot hash is reported as unknown: a known snapshot name with another hash, or a hash no
    known snapshot has that contradicts the snapshot the profile's models were pretrained on."""
    d = entry.dataset
    fix = ("Re-run `lfb eval` on the snapshot as published (the demo: `lfb data demo`); entries are never edited by "
           "hand. A newly published snapshot is added to largefedbench/leaderboard/snapshots.py")
    registered = known_hashes(d.snapshot, d.name)
    if registered and d.content_sha256 not in registered:
        hashes = ", ".join(h[:12] + "…" for h in registered)
        return [error("snapshot", "dataset.content_sha256", f"unknown snapshot: {d.content_sha256[:12]}… is not the "
                      f"content hash of the known snapshot {d.snapshot!r} ({hashes}) nor of any other known snapshot",
                      fix)]
    others = _pretrained_on(entry) - {d.content_sha256}
    if others and known_snapshot(d.content_sha256) is None:
        names = ", ".join(f"{h[:12]}… ({known_snapshot(h).name if known_snapshot(h) else 'unknown'})"
                          for h in sorted(others))
        return [error("snapshot", "dataset.content_sha256", f"unknown snapshot: no known snapshot has content hash "
                      f"{d.content_sha256[:12]}…, and the profile's models were pretrained on {names}", fix)]
    return []


def check_environment(entry: Entry) -> list[Finding]:
    e, out = entry.environment, []
    try:
        dt.datetime.fromisoformat(entry.created_at.replace("Z", "+00:00"))
    except ValueError:
        out.append(error("environment", "created_at", f"{entry.created_at!r} is not an ISO 8601 time", _RERUN))
    for name in ("lfb_version", "python", "platform"):
        if not getattr(e, name).strip():
            out.append(error("environment", f"environment.{name}", "is empty", _RERUN))
    if not e.packages:
        out.append(error("environment", "environment.packages", "records no package versions", _RERUN))
    if not e.hardware:
        out.append(error("environment", "environment.hardware", "records no hardware", _RERUN))
    # what models.precision.precision_record writes (not imported: validation reads entries without torch)
    allowed = {"generation": ("bfloat16", "float32", "as loaded"), "training": ("bfloat16", "float32")}
    if e.precision is not None and (set(e.precision) != set(allowed)
                                    or any(e.precision[k] not in v for k, v in allowed.items())):
        out.append(error("environment", "environment.precision", f"is {e.precision}; `lfb eval` writes "
                         f"{{'generation': one of {allowed['generation']}, 'training': one of {allowed['training']}}}",
                         _RERUN))
    return out


def check_contamination(entry: Entry) -> list[Finding]:
    """Errors for a self-contradicting claim; a ``contamination`` note when the window may be contaminated."""
    c, d = entry.contamination, entry.dataset
    since = _day(d.window.since)
    if c.window_start != d.window.since:
        return [error("contamination", "contamination.window_start", f"is {c.window_start!r} but the dataset's "
                      f"window starts {d.window.since!r}", _RERUN)]
    if since is None:
        return []  # reported by check_dataset
    if c.cutoff_kind == PRETRAINED_ON_PUBLIC_SPLIT:
        return _check_trained_by_profile(entry) or _check_own_model(entry, since)
    if c.cutoff_kind == PRETRAINED_ON_PUBLIC_CORPUS:
        if entry.public is None:
            return [error("contamination", "contamination.cutoff_kind", f"says {c.model} was {c.cutoff_kind}, but the "
                          "entry records no public corpus (its `public` section)", _RERUN)]
        return _check_trained_by_profile(entry)
    out: list[Finding] = []
    own = _month_after(c.model_cutoff) if c.model_cutoff else None
    if c.after_cutoff is True and (own is None or since < own):
        cutoff = c.model_cutoff or "no recorded cutoff"
        return [error("contamination", "contamination.after_cutoff",
                      f"claims the window (from {d.window.since}) starts after the knowledge cutoff of {c.model}, but "
                      f"the entry's own cutoff is {cutoff}",
                      "Pick a window after the cutoff (`lfb refresh --after-cutoff-of MODEL`) or record "
                      "after_cutoff=false; the entry is then shown as possibly contaminated")]
    from largefedbench.data.windows import get_cutoff
    from largefedbench.errors import InputError

    try:
        registered = get_cutoff(c.model)
    except InputError:
        return [note("contamination", "contamination.model", f"no knowledge cutoff is registered for {c.model!r}, so "
                     "the window may overlap its training data", "Add the model to the cutoff registry "
                     "(largefedbench/data/cutoffs.json, with a source); until then the entry is ranked apart")]
    start = registered.window_start()
    if start is None or since < start:
        binding = registered.binding or "unknown"
        claim = " (the entry claims after_cutoff=true)" if c.after_cutoff else ""
        out.append(note("contamination", "contamination.after_cutoff",
                        f"the registry's cutoff of {c.model} is {binding} ({registered.kind}); the window starts "
                        f"{d.window.since}, {'before the month after it' if start else 'and cannot be compared'}"
                        f"{claim}", "Use a window after the cutoff (`lfb refresh --after-cutoff-of MODEL`); "
                        "the entry is ranked apart as possibly contaminated"))
    return out


def _check_trained_by_profile(entry: Entry) -> list[Finding]:
    """The label "pretrained on the snapshot's public split" is only true of a model the entry's profile trains:
    the profile's model for the role (generator of a synthetic-text method, else downstream) is a TinyGPT2 and is
    the contamination model, under LargeFedBench's own ``lfb/`` ids."""
    from largefedbench.errors import InputError
    from largefedbench.models.profiles import TinyGPT2, get_profile

    c = entry.contamination
    role = "generator" if entry.method.output == "synthetic text" else "downstream"
    where, fix = "contamination.cutoff_kind", ("Record the model's real cutoff (re-run `lfb eval`, which takes it from "
                                               "the cutoff registry); only models LargeFedBench trains carry this label")
    try:
        source = getattr(get_profile(entry.config.profile), role)
    except InputError:
        return [error("contamination", where, f"says {c.model} was {c.cutoff_kind}, but profile "
                      f"{entry.config.profile!r} is not a known profile, so the claim cannot be checked", fix)]
    section = entry.profile.get(role)
    recorded = section.get("id") if isinstance(section, dict) else None
    if not isinstance(source, TinyGPT2):
        model = getattr(source, "id", type(source).__name__)
        return [error("contamination", where, f"says {c.model} was {c.cutoff_kind}, but profile "
                      f"{entry.config.profile!r} does not train its {role}: it is {model}, whose knowledge cutoff "
                      "is checked against the cutoff registry", fix)]
    if c.model != recorded or not c.model.startswith("lfb/"):
        return [error("contamination", "contamination.model", f"is {c.model!r}, but the model profile "
                      f"{entry.config.profile!r} trains as its {role} is recorded as {recorded!r} (LargeFedBench's "
                      "own models have lfb/ ids)", fix)]
    return []


def _check_own_model(entry: Entry, since: dt.date) -> list[Finding]:
    """The tiny profile's models: the profile must record that they were pretrained on this snapshot."""
    c, d = entry.contamination, entry.dataset
    sections = [v for v in entry.profile.values() if isinstance(v, dict) and v.get("id") == c.model]
    pretrained_on = sections[0].get("snapshot_sha256") if sections else None
    public_since = _day(d.window.public_since) if d.window.public_since else None
    if pretrained_on != d.content_sha256 and pretrained_on and known_snapshot(d.content_sha256) is None:
        return []  # an unknown snapshot, reported by check_snapshot
    if pretrained_on != d.content_sha256 or (public_since is not None and public_since >= since):
        return [note("contamination", "profile", f"{c.model} is said to be pretrained on this snapshot's public "
                     f"split, but the profile records it pretrained on {pretrained_on or 'nothing'}, not "
                     f"{d.content_sha256[:12]}", "Re-run `lfb eval` so the tiny models are pretrained on this "
                     "snapshot's public split; until then the entry is ranked apart")]
    if c.after_cutoff is not True:
        return [note("contamination", "contamination.after_cutoff", f"is {c.after_cutoff}: the entry does not claim "
                     "an uncontaminated window", "The entry is ranked apart as possibly contaminated")]
    return []
