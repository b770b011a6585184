"""The no-signal reference: the synthetic-data pipeline with no client consulted.

``generator-only`` samples the untouched generator from the same public prompts, with the same generation settings
and number of final samples as POPri's final set (same prompt streams and seeds, so its texts are POPri's final
samples had DPO never moved the generator), and the harness trains the downstream model on them exactly as for any
synthetic method. It reads no private client: its ledger is empty and its ε is 0. Every synthetic method's entry
reports its gain over this row: a synthetic method that does not clear it has learned nothing from its clients
that the generator did not already write (ContinuousBench's "no training" row; an lr = 0 control).
"""

from __future__ import annotations

from dataclasses import dataclass

from largefedbench.methods.popri import POPriConfig

from largefedbench.contract import Artifact, Method, PublicResources
from largefedbench.synthetic.generator_rounds import final_set
from largefedbench.synthetic.prompts import SamplingSettings, public_examples

DEVIATIONS = ("not a method of the papers: the untouched generator's samples from POPri's final prompts, the no-signal "
              "reference every synthetic method is read against",)


@dataclass(frozen=True)
class GeneratorOnlyConfig(SamplingSettings):
    """POPri's prompt and generation settings for its final set (defaults: the paper's; ``cpu()``/``tiny()``: POPri's
    presets), so the row is what POPri would release without private feedback."""

    n_final: int = 1_000_000

    @classmethod
    def from_popri(cls, cfg: POPriConfig) -> GeneratorOnlyConfig:
        return cls(**{k: getattr(cfg, k) for k in cls.__dataclass_fields__})

    @classmethod
    def tiny(cls) -> GeneratorOnlyConfig:
        return cls.from_popri(POPriConfig.tiny())

    @classmethod
    def cpu(cls) -> GeneratorOnlyConfig:
        return cls.from_popri(POPriConfig.cpu())


class GeneratorOnly(Method):
    name = "generator-only"
    paper = ("LargeFedBench's no-signal reference: the untouched generator's samples from POPri's final "
             "prompts, no client consulted")
    output = "synthetic text"
    Config = GeneratorOnlyConfig
    fixed_epsilon = 0.0

    def train(self, fed, public: PublicResources, cfg: GeneratorOnlyConfig, budget) -> Artifact:
        model, tok = public.models.new_generator(), public.models.generator_tokenizer
        examples = public_examples(public, minimum=cfg.examples_per_prompt)
        texts, _ = final_set(model, tok, examples, cfg, public, cfg.n_final)  # POPri's final-set streams and seeds
        return Artifact.synthetic(texts, method=self.name, note="no private client consulted; ε = 0")
