"""`lfb smoke --attacks`: the attack kit (:mod:`largefedbench.testing.attacks`) run as a method under `lfb eval` on
the demo snapshot with the tiny profile, each attack reported as blocked or not, and whether the patched scorer
reached the score. It checks this machine's sandbox, not a method: run it once where the board's runs are made."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from largefedbench.testing.attacks import ATTACKS, PATCHED_TOP1

__all__ = ["AttackReport", "check_attacks"]

KIT = "largefedbench.testing.attacks:AttackKit"


@dataclass
class AttackReport:
    sandbox: str  # how the kit's train() ran: namespaces | process | none
    breaches: dict[str, str]  # attack -> what it got ("" = blocked)
    top1: float

    @property
    def ok(self) -> bool:
        return not any(self.breaches.values())

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "sandbox": self.sandbox, "top1": self.top1, "attacks": self.breaches}

    def format(self) -> str:
        lines = [f"attack kit under lfb eval (sandbox: {self.sandbox}):"]
        lines += [f"  {'BREACHED' if got else 'blocked '}  {name}{f': {got}' if got else ''}"
                  for name, got in self.breaches.items()]
        lines.append("all blocked" if self.ok else "some attacks got through: this machine's runs are not guarded")
        return "\n".join(lines)


def check_attacks(*, home: Path | None = None, sandbox: str = "auto", log: Callable[[str], None] = print) -> AttackReport:
    from largefedbench.run.eval import EvalRequest, run_eval

    with tempfile.TemporaryDirectory(prefix="lfb-attacks-") as tmp:
        out = Path(tmp)
        result = run_eval(EvalRequest(method=KIT, seeds=(0,), epsilon=100.0, out=out, home=home, progress=False,
                                      sandbox=sandbox), log=log)
        (seed,) = out.glob(".runs/*/seed-0/result.json")
        stored = json.loads(seed.read_text())
    breaches = dict(stored["info"]["breaches"])
    top1 = result.entry.metrics.next_token_accuracy.top1.mean
    breaches["patch the scorer"] = f"the score reads top-1 {top1:.2f}" if abs(top1 - PATCHED_TOP1) < 1e-9 else ""
    return AttackReport(stored.get("sandbox") or "none", {k: breaches.get(k, "") for k in ATTACKS}, top1)
