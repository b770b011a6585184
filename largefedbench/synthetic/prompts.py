"""Few-shot prompts built from public examples: the "Original Text Sample" template (POPri App. B.2, Fig. 5).

The POPri reference (``generation_prompt.txt``, popri-reference.md §1.3 and spec item 4) fills three public
examples into::

    List of 6 diverse original text samples:
    Original Text Sample 1
    {0}
    Original Text Sample 2
    {1}
    Original Text Sample 3
    {2}
    Original Text Sample 4\\n

where the last line ends with the two literal characters backslash and ``n`` (no newline) — kept byte for byte in
:data:`PROMPT_TEMPLATE`. PrE-Text's expansion prompt is the same text ending in a real newline
(:data:`PRE_TEXT_PROMPT_TEMPLATE`). For ``k`` examples other than 3 (POPri used 2 on PubMed, App. B.2) the
template is generalised as "List of {2k} diverse original text samples:" with samples 1..k and the request for
sample k+1; for ``k = 3`` this is exactly the reference text.

Examples are drawn without replacement per prompt (the reference's ``random.sample``) from a seeded numpy
generator, and their newlines and tabs become spaces. The model's answer is cut where it starts the next
"Original Text Sample" (:data:`STOP`, the reference's ``re.split("Orig")``).

A second prompt format, ``"continuation"``, asks the generator to continue the first ``prefix_words`` words of one
public example; the sample is that prefix plus the continuation. It is for small instruction-tuned generators that do
not imitate a few-shot list: on demo-prose, SmolLM2-135M's few-shot samples were generic web prose (FID to the public
split 0.349) where its continuations read like the split itself (0.235 at temperature 0.8; docs/profiles.md).

A third, ``"instruction"``, is one open request in the generator's chat template (:func:`chat_prompt`; default
:data:`DEFAULT_INSTRUCTION`), the same for every prompt; the sample is the answer. It leaves the topic to the
generator, so the clients' preference can steer it: on demo-prose with the cpu profile, 91 % of the variance of the
samples' similarity to the private centroid lies between answers to one prompt, against 38 % between continuations of
one 12-word prefix, whose topic the prefix already fixes (docs/profiles.md; the measurement: docs/notes/history.md,
"The prompt format on the paper's protocol").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.synthetic.generation_settings import GenerationSettings

__all__ = ["DEFAULT_INSTRUCTION", "PRE_TEXT_PROMPT_TEMPLATE", "PROMPT_TEMPLATE", "PROMPT_FORMATS", "STOP", "SamplingSettings",
           "build_prompts",
           "chat_prompt", "check_prompt_format", "clean_example", "prompt_stop", "prompt_template", "public_examples"]

#: ``"few-shot"``: the reference's list template; ``"continuation"``: the start of one public example, continued;
#: ``"instruction"``: one open request in the generator's chat template.
PROMPT_FORMATS = ("few-shot", "continuation", "instruction")

#: The request of the ``"instruction"`` format: no topic, no genre.
DEFAULT_INSTRUCTION = "Write a short original text."

#: Where a completion is cut: the start of the next "Original Text Sample" header (reference post-processing).
STOP: tuple[str, ...] = ("Orig",)


def prompt_template(examples_per_prompt: int = 3, *, literal_newline: bool = True) -> str:
    """The template for ``examples_per_prompt`` examples with ``{0}``, ``{1}``, … placeholders.

    ``literal_newline=True`` ends with the characters ``\\`` ``n`` as the POPri reference does; ``False`` ends with
    a real newline as PrE-Text does.
    """
    k = int(examples_per_prompt)
    if k < 1:
        raise InputError(f"examples_per_prompt={examples_per_prompt} must be at least 1")
    lines = [f"List of {2 * k} diverse original text samples:"]
    for i in range(k):
        lines += [f"Original Text Sample {i + 1}", "{" + str(i) + "}"]
    lines.append(f"Original Text Sample {k + 1}")
    return "\n".join(lines) + ("\\n" if literal_newline else "\n")


#: The POPri reference template (3 examples), byte for byte.
PROMPT_TEMPLATE = prompt_template(3)
#: PrE-Text's expansion template (3 examples, ends in a real newline).
PRE_TEXT_PROMPT_TEMPLATE = prompt_template(3, literal_newline=False)


def chat_prompt(tokenizer, message: str) -> str:
    """``message`` as the user's turn in the tokenizer's chat template, ready for the assistant's answer."""
    try:
        return tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                             add_generation_prompt=True)
    except (ValueError, AttributeError) as err:  # transformers: ValueError when the tokenizer has no chat template
        raise InputError("prompt_format='instruction' needs an instruction-tuned generator whose tokenizer has a chat "
                         "template, and this one has none; use prompt_format='continuation' (or 'few-shot')") from err


def clean_example(text: str) -> str:
    """An example as the reference puts it in a prompt: newlines and tabs replaced by spaces."""
    return text.replace("\n", " ").replace("\t", " ")


def build_prompts(
    examples: Sequence[str],
    n_prompts: int,
    *,
    examples_per_prompt: int = 3,
    rng: np.random.Generator,
    template: str | None = None,
    prompt_format: str = "few-shot",
    prefix_words: int = 12,
    tokenizer=None,
    instruction: str = DEFAULT_INSTRUCTION,
) -> list[str]:
    """``n_prompts`` prompts, each filling ``examples_per_prompt`` distinct examples drawn at random from ``examples``.

    ``template`` defaults to :func:`prompt_template` for ``examples_per_prompt`` (the reference template for 3).
    ``prompt_format="continuation"`` instead makes each prompt the first ``prefix_words`` words of one example drawn
    at random (``examples_per_prompt`` and ``template`` do not apply). ``prompt_format="instruction"`` makes every
    prompt ``instruction`` in ``tokenizer``'s chat template (no example and no random draw).
    """
    k = int(examples_per_prompt)
    if n_prompts < 0:
        raise InputError(f"n_prompts={n_prompts} must be >= 0")
    check_prompt_format(prompt_format, prefix_words)
    if prompt_format == "instruction":
        if tokenizer is None:
            raise InputError("an instruction prompt is written in the generator's chat template: pass its tokenizer")
        return [chat_prompt(tokenizer, instruction)] * int(n_prompts)
    if prompt_format == "continuation":
        if not examples:
            raise InputError("a continuation prompt needs a public example but none were given")
        return [" ".join(clean_example(examples[i]).split()[:prefix_words]) for i in rng.integers(0, len(examples), int(n_prompts))]
    if len(examples) < k:
        raise InputError(f"a prompt needs {k} distinct examples but only {len(examples)} public examples were given")
    fmt = template if template is not None else prompt_template(k)
    pool = [clean_example(e) for e in examples]
    prompts = []
    for _ in range(int(n_prompts)):
        picked = rng.choice(len(pool), size=k, replace=False)
        prompts.append(fmt.format(*(pool[i] for i in picked)))
    return prompts


def check_prompt_format(prompt_format: str, prefix_words: int = 12) -> None:
    """A clear error for an unknown format or a prefix of no words."""
    if prompt_format not in PROMPT_FORMATS:
        raise InputError(f"prompt_format={prompt_format!r}; choose one of {', '.join(PROMPT_FORMATS)}")
    if prompt_format == "continuation" and int(prefix_words) < 1:
        raise InputError(f"prefix_words={prefix_words} must be at least 1: a continuation prompt is the start of an example")


@dataclass(frozen=True)
class SamplingSettings(GenerationSettings):
    """How a generator is prompted and sampled, shared by POPri, PE+SFT and the generator-only row: prompts of
    ``examples_per_prompt`` public examples in ``prompt_format`` (few-shot: POPri App. B.2; ``continuation`` of
    the first ``prefix_words`` words; ``instruction``: one open request), sampled as :class:`GenerationSettings`."""

    examples_per_prompt: int = 3
    prompt_format: Literal["few-shot", "continuation", "instruction"] = "few-shot"
    prefix_words: int = 12
    instruction: str = DEFAULT_INSTRUCTION

    def __post_init__(self) -> None:
        super().__post_init__()
        check_prompt_format(self.prompt_format, self.prefix_words)


def prompt_stop(prompt_format: str) -> tuple[str, ...]:
    """Where a completion of a prompt of this format is cut: the next list header for few-shot, nowhere for a
    continuation (whose text may well contain "Orig…", as in "originally") or an answer (which ends at EOS)."""
    return STOP if prompt_format == "few-shot" else ()


def public_examples(public, *, min_words: int = 0, minimum: int = 1) -> list[str]:
    """Public spans with more than ``min_words`` words (PrE-Text's filter), or all of them when too few pass."""
    texts = [t for t in public.public_texts() if t.strip()]
    if len(texts) < minimum:
        raise MethodError(f"the snapshot has {len(texts)} public spans; the prompts need at least {minimum}. Build it "
                          "with --public-months >= 1 so that records before the window exist")
    kept = [t for t in texts if len(t.split()) > min_words]
    return kept if len(kept) >= minimum else texts
