"""The board as data: valid entries grouped by dataset, window, snapshot, profile and public resources (entries
with different public resources have different references, so they are never ranked together), then ranked within
matched privacy budgets (ε buckets) as far as their seeds support (ranks.py: rows the seeds cannot order share a
range of ranks). Unranked (fewer than three seeds) and possibly contaminated entries are kept in their own sections;
invalid entries are left out and only counted."""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from largefedbench.leaderboard.findings import MIN_RANKED_SEEDS, EntryReport
from largefedbench.leaderboard.ranks import FLOOR, rank_ranges
from largefedbench.leaderboard.schema import Entry, epsilon_value

#: ε buckets: (label, upper bound); an entry goes to the first bucket whose bound is ≥ its ε
EPSILON_BUCKETS: tuple[tuple[str, float], ...] = (("ε ≤ 1", 1.0), ("1 < ε ≤ 4", 4.0), ("4 < ε ≤ 8", 8.0),
                                                  ("ε > 8", math.inf))
_UNSAFE = re.compile(r"[^a-z0-9._-]|\.\.")
REFERENCES = "references (ε = 0: public model, generator-only; ε = ∞: non-private, real text at the synthetic budget)"
SECTIONS = ("ranked", "unranked", "contaminated", "diagnostic", "declared")
SECTION_TITLES = {"ranked": "Ranked", "unranked": f"Unranked: fewer than {MIN_RANKED_SEEDS} seeds",
                  "contaminated": "Possibly contaminated: the window does not start after the model's knowledge cutoff",
                  "diagnostic": "Diagnostics, never ranked: noise-free runs (calibrated for the target ε, released "
                                "with σ = 0, so ε = ∞) show what the noise costs; shuffled runs (every release "
                                "permuted before the method saw it) what a method gets without information from "
                                "the clients",
                  "declared": "Declared privacy, never ranked with computed claims: synthetic text made by other tools "
                              "(`lfb eval --synthetic`), scored here; its (ε, δ) is the submitter's statement"}


def bucket_of(epsilon: float) -> str:
    if epsilon == 0 or math.isinf(epsilon):
        return REFERENCES
    return next(label for label, bound in EPSILON_BUCKETS if epsilon <= bound)


@dataclass
class Row:
    entry: Entry
    status: str  # ranked | unranked | contaminated | diagnostic | declared
    href: str  # the entry file, relative to the board folder
    notes: list[str]
    bucket: str = ""
    rank: int | None = None  # the first rank the seeds allow (ranks.py); rank_to the last
    rank_to: int | None = None
    reproduction: Any = None  # the entry's valid reproduction record (reproduced.py), if it was re-run
    other_generator_only: bool = False  # its generator-only numbers disagree with the group's majority (marked with †)
    control: Row | None = None  # its matched no-signal control: the same method and settings, --shuffled-releases
    variant: str = ""  # the method settings that tell it from the group's other rows of its method ("k=v, …")

    @property
    def label(self) -> str:
        """The method's name, with the settings that tell this row apart where its group runs the method in more
        than one configuration (plots key their series by it)."""
        return self.entry.method.name + (f" [{self.variant}]" if self.variant else "")

    @property
    def record_href(self) -> str:
        """The reproduction record beside the entry, relative to the board folder."""
        return self.href.removesuffix(".json") + ".reproduced.json"

    @property
    def epsilon(self) -> float:
        return epsilon_value(self.entry.privacy.epsilon)

    @property
    def target_epsilon(self) -> float:
        """The ε the run was calibrated for (a noise-free diagnostic's ε is ∞ whatever its target)."""
        return epsilon_value(self.entry.privacy.target_epsilon)

    @property
    def top1(self) -> float:
        return self.entry.metrics.next_token_accuracy.top1.mean


@dataclass
class Group:
    dataset: str
    snapshot: str
    content_sha256: str
    window: tuple[str, str]
    profile: str
    synthetic: bool
    public: str = "split"  # the entries' public resources (largefedbench.data.public_corpus)
    rows: list[Row] = field(default_factory=list)
    #: the ε = 0 model's weights hash where LargeFedBench built it: every reference of the group starts from it, so
    #: entries on another checkpoint (pretrained on another CPU or thread count) form their own group
    public_model: str = ""
    #: where another group has the same data, profile and public resources on another ε = 0 model with newer entries:
    #: that model's hash (this group is kept for the record, listed after it)
    superseded_by: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        base = (self.dataset, self.window[0], self.content_sha256, self.profile)
        base = base if self.public == "split" else (*base, self.public)
        return (*base, self.public_model) if self.public_model else base

    @property
    def slug(self) -> str:
        """A file-name-safe id of the group (its parts are safe ids; the hash disambiguates)."""
        digest = hashlib.sha256("|".join(self.key).encode()).hexdigest()[:8]
        return _UNSAFE.sub("-", f"{self.dataset}--{self.snapshot}--{self.profile}--{digest}".lower())

    @property
    def title(self) -> str:
        tag = " (synthetic demo data: checks the pipeline, not a result)" if self.synthetic else ""
        return (f"{dataset_label(self.dataset)} · window {self.window[0]} – {self.window[1]} · snapshot {self.snapshot} "
                f"({self.content_sha256[:12]}) · profile {self.profile} · public {self.public}"
                f"{f' · ε = 0 model {self.public_model}' if self.public_model else ''}{tag}"
                f"{f' · superseded by ε = 0 model {self.superseded_by}' if self.superseded_by else ''}")

    @property
    def superseded_note(self) -> str:
        """What a reader of a superseded group should know, or ""."""
        if not self.superseded_by:
            return ""
        return (f"Superseded: these entries ran on another ε = 0 model ({self.public_model}: another pretraining of "
                f"the profile's downstream on the same public corpus, on another machine or code version). The group on "
                f"ε = 0 model {self.superseded_by} covers the most methods and is the current one; numbers compare only "
                "within a group.")

    @property
    def hardware_note(self) -> str:
        """Where the group's rows ran on more than one CPU or thread count: which, and what that means; else ""."""
        cpus = Counter(cpu_text(r.entry) for r in self.rows)
        threads = Counter(threads_text(r.entry) for r in self.rows)
        if len(cpus) < 2 and len(threads) < 2:
            return ""
        mixed = [f"{what} ({'; '.join(f'{k}: {n} row' + 's' * (n > 1) for k, n in sorted(counts.items()))})"
                 for what, counts in (("CPUs", cpus), ("thread counts", threads)) if len(counts) > 1]
        return (f"Mixed hardware: this group's rows record several {' and several '.join(mixed)}. Minutes compare "
                f"only between rows on the same CPU and threads, and another CPU or thread count alone moves a seed's top-1 "
                f"by about {100 * FLOOR:.1f} points (the floor of the ranks).")

    @property
    def newest(self) -> str:
        """When its newest entry was made."""
        return max((r.entry.created_at for r in self.rows), default="")

    def section(self, status: str) -> list[Row]:
        return [r for r in self.rows if r.status == status]

    def tables(self, status: str) -> list[tuple[str, list[Row]]]:
        """(bucket label, rows) in bucket order for one section."""
        rows = self.section(status)
        order = [REFERENCES] + [label for label, _ in EPSILON_BUCKETS]
        return [(b, [r for r in rows if r.bucket == b]) for b in order if any(r.bucket == b for r in rows)]


def dataset_label(dataset: str) -> str:
    """The dataset's name with what a reader must be told about it (arxiv-qbio is not bioRxiv)."""
    from largefedbench.scrapers.refresh import DATASET_NOTES

    note = DATASET_NOTES.get(dataset)
    return f"{dataset} [{note}]" if note else dataset


DEMO_HEADING = "Demo data: these groups check the pipeline, they are not results"


@dataclass
class Board:
    groups: list[Group]
    n_invalid: int

    def data_statement(self) -> str:
        """The board's first line: what data its results are on."""
        real = [g for g in self.groups if not g.synthetic and not g.superseded_by]
        if not real:
            return ("No results on real records yet: every group below is on LLM-written demo text, which checks the "
                    "pipeline and is not a result.")
        named = sorted({f"{dataset_label(g.dataset)} ({g.window[0]} – {g.window[1]})" for g in real})
        demo = " Groups on LLM-written demo text follow, under their own heading: they check the pipeline." \
            if any(g.synthetic for g in self.groups) else ""
        return f"Results on real dated records: {'; '.join(named)}.{demo}"

    @property
    def rows(self) -> list[Row]:
        return [r for g in self.groups for r in g.rows]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    @staticmethod
    def buckets_text() -> str:
        """The ε buckets as the pages list them: ``"ε ≤ 1, 1 < ε ≤ 4, 4 < ε ≤ 8, ε > 8"``."""
        return ", ".join(label for label, _ in EPSILON_BUCKETS)

    def counts_text(self) -> str:
        """``"3 ranked, 1 unranked, 0 possibly contaminated"`` (+ diagnostics when there are any)."""
        text = (f"{self.count('ranked')} ranked, {self.count('unranked')} unranked, "
                f"{self.count('contaminated')} possibly contaminated")
        return text + "".join(f", {self.count(s)} {s}" for s in ("diagnostic", "declared") if self.count(s))


def cpu_text(entry: Entry) -> str:
    """The machine an entry ran on as the board names it: the CPU model, its native bf16 kernels where recorded, and
    the GPU where there was one."""
    hw = entry.environment.hardware or {}
    text = str(hw.get("cpu") or "CPU not recorded")
    text += f" ({hw['cpu_bf16'] or 'no native bf16'})" if "cpu_bf16" in hw else " (bf16 kernels not recorded)"
    return text + (f" + {hw['gpu']}" if hw.get("gpu") else "")


def threads_text(entry: Entry) -> str:
    """The torch threads the entry's run used (``environment.hardware.torch_threads``), or "not recorded"."""
    threads = (entry.environment.hardware or {}).get("torch_threads")
    return str(threads) if threads is not None else "not recorded"


def _sort_key(row: Row) -> tuple:
    e = row.entry
    return (-row.top1, -e.metrics.gap_closed.mean, e.method.name, e.entry_id)


def _generator_only_numbers(row: Row) -> dict[int, float] | None:
    """Top-1 per seed of the generator-only row that ``row`` is (its own) or measured its gain over."""
    e = row.entry
    if e.method.name == "generator-only":
        return None if e.config.overrides else dict(zip(e.seeds, e.metrics.next_token_accuracy.top1.per_seed))
    ref = e.metrics.reference_generator_only
    return None if ref is None else dict(zip(e.seeds, ref.top1.per_seed))


def mark_other_generator_only_rows(group: Group) -> None:
    """Mark the rows whose generator-only numbers disagree, on some seed, with the value most rows of the group (same
    preset) have for that seed (ties go to the newer entries): another code version or environment wrote them, so
    their gains over generator-only and the others' do not compare."""
    for preset in {r.entry.config.preset for r in group.rows}:
        rows = [(r, n) for r in group.rows if r.entry.config.preset == preset
                and (n := _generator_only_numbers(r)) is not None]
        rows.sort(key=lambda rn: rn[0].entry.created_at, reverse=True)  # Counter keeps first-seen order on ties
        votes: dict[int, Counter] = {}
        for _, numbers in rows:
            for s, v in numbers.items():
                votes.setdefault(s, Counter())[round(v, 9)] += 1
        majority = {s: c.most_common(1)[0][0] for s, c in votes.items()}
        for row, numbers in rows:
            row.other_generator_only = any(round(v, 9) != majority[s] for s, v in numbers.items())


def is_control(row: Row) -> bool:
    """A matched no-signal control: a ``--shuffled-releases`` run (its method's pipeline, feedback without
    information about the clients)."""
    d = row.entry.diagnostic
    return d is not None and d.kind == "shuffled-releases"


def mark_controls(group: Group) -> None:
    """Give each row that competes its control: the newest shuffled-releases run of the same method with the same
    settings (preset and resolved config) calibrated for the same ε."""
    controls = sorted((r for r in group.rows if is_control(r)), key=lambda r: r.entry.created_at, reverse=True)
    for row in group.rows:
        if row.status == "diagnostic":
            continue
        e = row.entry
        row.control = next((c for c in controls if c.entry.method.name == e.method.name
                            and c.entry.config.preset == e.config.preset and c.entry.config.method == e.config.method
                            and math.isclose(c.target_epsilon, row.target_epsilon, rel_tol=1e-6)), None)


def gain_over_control(row: Row) -> tuple[float, float, int] | None:
    """Top-1 minus its control's: (mean, std, seeds). Paired by seed where both ran the same seeds (the std of the
    per-seed differences), else the difference of the means with std sqrt(s₁² + s₂²)."""
    if row.control is None:
        return None
    a = dict(zip(row.entry.seeds, row.entry.metrics.next_token_accuracy.top1.per_seed))
    b = dict(zip(row.control.entry.seeds, row.control.entry.metrics.next_token_accuracy.top1.per_seed))
    common = sorted(a.keys() & b.keys())
    if common:
        diffs = [a[s] - b[s] for s in common]
        std = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        return statistics.fmean(diffs), std, len(common)
    sa, sb = row.entry.metrics.next_token_accuracy.top1, row.control.entry.metrics.next_token_accuracy.top1
    return sa.mean - sb.mean, math.hypot(sa.std, sb.std), min(len(a), len(b))


#: at most this many differing settings are named in a row's variant
VARIANT_KEYS = 3


def mark_variants(group: Group) -> None:
    """Name, on each row of a method the group runs in more than one resolved configuration, the settings whose
    values differ among those rows (e.g. PE's ``prompt_format`` before and after its cpu preset changed), so two rows
    of one method are never shown as the same thing; a row run at POPri's compute (``--preset matched``) says so."""
    by_method: dict[str, list[Row]] = {}
    for row in group.rows:
        by_method.setdefault(row.entry.method.name, []).append(row)
    for rows in by_method.values():
        configs = [r.entry.config.method for r in rows]
        keys = sorted(k for k in set().union(*configs) if len({repr(c.get(k)) for c in configs}) > 1)
        for row, config in zip(rows, configs):
            shown = [f"{k}={config.get(k)}" for k in keys[:VARIANT_KEYS]]
            matched = ["matched compute"] if row.entry.config.preset == "matched" else []  # --preset matched
            row.variant = ", ".join(matched + shown + (["…"] if len(keys) > VARIANT_KEYS else []))


def mark_superseded(groups: list[Group]) -> None:
    """Of the groups that differ only in their ε = 0 model (a checkpoint pretrained on another machine or by another
    code version), the one that covers the most methods is current, the newest entry breaking ties (one new entry on
    a new model does not demote a committed group; re-running its methods does); the others are marked superseded
    by its model."""
    same: dict[tuple, list[Group]] = {}
    for g in groups:
        if g.public_model:
            same.setdefault((g.dataset, g.window, g.content_sha256, g.profile, g.public), []).append(g)
    for family in same.values():
        current = max(family, key=lambda g: (len({r.entry.method.name for r in g.rows}), g.newest, g.public_model))
        for g in family:
            g.superseded_by = "" if g is current else current.public_model


def build_board(reports: list[EntryReport]) -> Board:
    """Group and rank the valid entries of ``reports``."""
    groups: dict[tuple[str, ...], Group] = {}
    for report in reports:
        if not report.valid:
            continue
        e = report.entry
        href = f"entries/{e.dataset.name}/{e.method.name}/{e.entry_id}.json"
        notes = [f.message for f in report.notes if f.check == "contamination"]
        if e.declared is not None:
            notes.append(f"declared (ε, δ); made with {e.declared.made_with}")
        row = Row(e, report.status, href, notes, reproduction=report.reproduction)
        row.bucket = bucket_of(row.target_epsilon if row.status == "diagnostic" else row.epsilon)
        group = Group(e.dataset.name, e.dataset.snapshot, e.dataset.content_sha256,
                      (e.dataset.window.since, e.dataset.window.until), e.config.profile, e.dataset.synthetic,
                      e.public_kind, public_model=e.public_model)
        groups.setdefault(group.key, group).rows.append(row)
    for group in groups.values():
        group.rows.sort(key=_sort_key)
        mark_other_generator_only_rows(group)
        mark_controls(group)
        mark_variants(group)
        for status in SECTIONS:
            for bucket, rows in group.tables(status):
                if status == "ranked" and bucket != REFERENCES:
                    ranges = rank_ranges([r.entry.metrics.next_token_accuracy.top1.per_seed for r in rows])
                    for row, (first, last) in zip(rows, ranges):
                        row.rank, row.rank_to = first, last
    mark_superseded(list(groups.values()))
    ordered = sorted(groups.values(), key=lambda g: (g.synthetic, g.dataset, g.window, g.profile, g.public, g.content_sha256,
                                                     bool(g.superseded_by), g.public_model))
    return Board(ordered, sum(not r.valid for r in reports))
