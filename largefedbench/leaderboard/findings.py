"""What validation says about an entry: findings (errors and notes) and the entry's resulting status."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Severity = Literal["error", "note"]
Status = Literal["ranked", "unranked", "contaminated", "diagnostic", "declared", "invalid"]

#: an entry needs at least this many seeds to be ranked (fewer: valid, shown apart as unranked)
MIN_RANKED_SEEDS = 3


@dataclass(frozen=True)
class Finding:
    """One result of one check: which check, which field, what is wrong and what to do about it."""

    check: str
    field: str
    message: str
    fix: str
    severity: Severity = "error"

    def format(self) -> str:
        tag = "error" if self.severity == "error" else "note"
        return f"{tag} [{self.check}] {self.field}: {self.message}. {self.fix}"

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "field": self.field, "message": self.message, "fix": self.fix,
                "severity": self.severity}


def error(check: str, field: str, message: str, fix: str) -> Finding:
    return Finding(check, field, message, fix, "error")


def note(check: str, field: str, message: str, fix: str) -> Finding:
    return Finding(check, field, message, fix, "note")


@dataclass
class EntryReport:
    """Validation of one entry file. ``entry`` is the parsed :class:`~.schema.Entry` when the schema passed."""

    path: Path
    board: Path | None
    entry: Any = None
    findings: list[Finding] = field(default_factory=list)
    reproduction: Any = None  # the valid :class:`~.reproduced.ReproductionRecord` beside the entry, if any

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def notes(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "note"]

    @property
    def valid(self) -> bool:
        return self.entry is not None and not self.errors

    @property
    def contaminated(self) -> bool:
        return any(f.check == "contamination" for f in self.notes)

    @property
    def status(self) -> Status:
        if not self.valid:
            return "invalid"
        if self.entry.diagnostic is not None:
            return "diagnostic"
        if self.entry.declared is not None:
            return "declared"
        if self.contaminated:
            return "contaminated"
        if len(self.entry.seeds) < MIN_RANKED_SEEDS:
            return "unranked"
        return "ranked"

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "status": self.status,
                "entry_id": getattr(self.entry, "entry_id", None),
                "findings": [f.to_dict() for f in self.findings],
                "reproduced": None if self.reproduction is None else {
                    "ok": self.reproduction.ok, "at": self.reproduction.reproduced_at,
                    "tolerances": self.reproduction.tolerances}}
