"""The "Original Text Sample" prompt: the reference template byte for byte, seeded draws of distinct examples."""

from __future__ import annotations

import numpy as np
import pytest

from largefedbench.errors import InputError
from largefedbench.synthetic.generation import as_samples, clean_completion
from largefedbench.synthetic.prompts import (
    DEFAULT_INSTRUCTION,
    PRE_TEXT_PROMPT_TEMPLATE,
    PROMPT_TEMPLATE,
    build_prompts,
    prompt_stop,
    prompt_template,
)

# generation_prompt.txt of meiyuw/POPri (popri-reference.md §1.3): ends with a backslash and an "n", no newline
REFERENCE = ("List of 6 diverse original text samples:\nOriginal Text Sample 1\n{0}\nOriginal Text Sample 2\n{1}\n"
             "Original Text Sample 3\n{2}\nOriginal Text Sample 4\\n")


def test_template_is_the_reference_file_byte_for_byte():
    assert PROMPT_TEMPLATE == REFERENCE
    assert len(PROMPT_TEMPLATE.encode()) == 146 and PROMPT_TEMPLATE.encode()[-2:] == b"\\n"  # the file's size
    assert PRE_TEXT_PROMPT_TEMPLATE == REFERENCE[:-2] + "\n"


def test_other_example_counts_generalise_the_template():
    two = prompt_template(2)
    assert two.startswith("List of 4 diverse original text samples:\n") and two.endswith("Original Text Sample 3\\n")
    assert two.format("A", "B") == "List of 4 diverse original text samples:\nOriginal Text Sample 1\nA\nOriginal Text Sample 2\nB\nOriginal Text Sample 3\\n"


def test_prompts_hold_distinct_cleaned_examples_and_are_seeded():
    examples = [f"example {i}\twith\nbreaks" for i in range(5)]
    prompts = build_prompts(examples, 50, examples_per_prompt=3, rng=np.random.default_rng(1))
    assert len(prompts) == 50
    for p in prompts:
        used = [i for i in range(5) if f"example {i} with breaks" in p]
        assert len(used) == 3  # drawn without replacement, newlines and tabs become spaces
        assert "\t" not in p and p.count("\n") == 7
    assert prompts == build_prompts(examples, 50, examples_per_prompt=3, rng=np.random.default_rng(1))
    assert prompts != build_prompts(examples, 50, examples_per_prompt=3, rng=np.random.default_rng(2))
    assert len({p for p in prompts}) > 5


def test_too_few_examples_is_an_error():
    with pytest.raises(InputError, match="3 distinct examples"):
        build_prompts(["a", "b"], 1, examples_per_prompt=3, rng=np.random.default_rng(0))


def test_completions_are_cut_at_the_next_sample_header_and_flattened():
    raw = " The cell divides.\n\nIt grows.\nOriginal Text Sample 5\nmore"
    assert clean_completion(raw) == "The cell divides. It grows."
    assert clean_completion("Originally, yes") == ""  # the reference splits on "Orig" too
    assert clean_completion(" keep Orig text ", stop=()) == "keep Orig text"


def test_continuation_prompts_are_the_first_words_of_one_seeded_example():
    examples = [f"w{i} " + " ".join(f"t{j}" for j in range(20)) + "\tend" for i in range(6)] + ["short one"]
    prompts = build_prompts(examples, 40, rng=np.random.default_rng(3), prompt_format="continuation", prefix_words=5)
    assert len(prompts) == 40 and {p.split()[0] for p in prompts} <= {f"w{i}" for i in range(6)} | {"short"}
    assert all(p == "short one" or (len(p.split()) == 5 and p.endswith("t3")) for p in prompts)
    assert len(set(prompts)) > 3
    assert prompts == build_prompts(examples, 40, rng=np.random.default_rng(3), prompt_format="continuation", prefix_words=5)
    # one example is enough (no examples_per_prompt distinct draws); none is a clear error
    assert build_prompts(["only one here"], 2, examples_per_prompt=3, rng=np.random.default_rng(0),
                         prompt_format="continuation") == ["only one here"] * 2
    with pytest.raises(InputError, match="needs a public example"):
        build_prompts([], 1, rng=np.random.default_rng(0), prompt_format="continuation")


def test_unknown_format_or_empty_prefix_is_a_clear_error():
    with pytest.raises(InputError, match="prompt_format='chat'; choose one of few-shot, continuation, instruction"):
        build_prompts(["a b"], 1, rng=np.random.default_rng(0), prompt_format="chat")
    with pytest.raises(InputError, match="prefix_words=0"):
        build_prompts(["a b"], 1, rng=np.random.default_rng(0), prompt_format="continuation", prefix_words=0)


def test_samples_are_the_continuation_or_prompt_plus_continuation():
    # few-shot: cut at the next header, the continuation alone; continuation: never cut at "Orig", the prompt kept
    assert prompt_stop("few-shot") == ("Orig",) and prompt_stop("continuation") == ()
    assert as_samples(["P1"], [" The cell divides.\nIt grows."], "few-shot") == ["The cell divides. It grows."]
    raw = [" originally grew.\n", "'s cells divide"]
    assert as_samples(["The tissue"], raw, "continuation", n_per_prompt=2) == ["The tissue originally grew.",
                                                                              "The tissue's cells divide"]
    assert as_samples(["A", "B"], [" x", " y"], "continuation") == ["A x", "B y"]


def _chat_tokenizer(template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=raw, chat_template=template)


def test_instruction_prompts_are_one_request_in_the_chat_template():
    tok = _chat_tokenizer("{% for m in messages %}<user>{{ m['content'] }}</user>{% endfor %}"
                          "{% if add_generation_prompt %}<assistant>{% endif %}")
    prompts = build_prompts([], 3, rng=np.random.default_rng(0), prompt_format="instruction", tokenizer=tok)
    assert prompts == [f"<user>{DEFAULT_INSTRUCTION}</user><assistant>"] * 3
    own = build_prompts([], 1, rng=np.random.default_rng(0), prompt_format="instruction", tokenizer=tok, instruction="Say hi.")
    assert own == ["<user>Say hi.</user><assistant>"]
    # the sample is the answer alone, never cut at "Orig"
    assert prompt_stop("instruction") == ()
    assert as_samples(prompts[:1], [" Originally,\nit rained."], "instruction") == ["Originally, it rained."]


def test_instruction_prompts_need_a_chat_template():
    with pytest.raises(InputError, match="pass its tokenizer"):
        build_prompts([], 1, rng=np.random.default_rng(0), prompt_format="instruction")
    with pytest.raises(InputError, match="has none; use prompt_format='continuation'"):
        build_prompts([], 1, rng=np.random.default_rng(0), prompt_format="instruction", tokenizer=_chat_tokenizer(None))
