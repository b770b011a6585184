"""Echo, a dummy method (a test double): imported by the contract tests, and its source written as a plug-in
module by the registry tests (so it must stay self-contained: only the standard library and largefedbench)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from largefedbench.contract import Artifact, Method


@dataclass(frozen=True)
class EchoConfig:
    n: int = 100
    lr: float = 0.5
    clip: float = math.inf
    scoring: Literal["cosine", "l2"] = "cosine"
    shuffle: bool = False
    sizes: tuple[int, ...] = (1, 2)
    label: str | None = None

    @classmethod
    def tiny(cls) -> EchoConfig:
        return cls(n=2)


class Echo(Method):
    """Returns the first n public texts as its synthetic text (a test double, not a private method)."""

    name = "echo"
    paper = "none (test double)"
    output = "synthetic text"
    Config = EchoConfig

    def train(self, fed, public, cfg, budget):
        return Artifact.synthetic(public.public_texts()[: cfg.n], n=cfg.n)
