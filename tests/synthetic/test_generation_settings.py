"""The sampling settings a generating method's config inherits: their checks and the keywords they hand the samplers."""

import inspect

import pytest

from largefedbench.errors import InputError
from largefedbench.synthetic.generation import generate_ids
from largefedbench.synthetic.generation_settings import GenerationSettings
from largefedbench.synthetic.prompts import SamplingSettings


def test_generation_kwargs_are_keywords_of_the_samplers():
    kwargs = GenerationSettings(max_new_tokens=7, temperature=0.5, top_p=0.9, generation_batch_size=3).generation_kwargs()
    assert kwargs == {"max_new_tokens": 7, "temperature": 0.5, "top_p": 0.9, "batch_size": 3}
    assert set(kwargs) <= set(inspect.signature(generate_ids).parameters)  # generate and generate_flat pass them on


@pytest.mark.parametrize("bad", [{"max_new_tokens": 0}, {"generation_batch_size": 0}, {"temperature": -0.1},
                                 {"top_p": 0.0}, {"top_p": 1.5}])
def test_bad_settings_are_refused_with_the_values(bad):
    with pytest.raises(InputError) as err:
        GenerationSettings(**bad)
    assert str(next(iter(bad.values()))) in str(err.value)


def test_prompted_settings_check_both_parents_fields():
    assert SamplingSettings(temperature=0).temperature == 0  # greedy is allowed
    with pytest.raises(InputError, match="top_p"):
        SamplingSettings(top_p=2.0)
    with pytest.raises(InputError, match="prompt_format"):
        SamplingSettings(prompt_format="haiku")


@pytest.mark.parametrize("bad, named", [({"rounds": 0}, "rounds=0:"), ({"n_final": 0}, "n_final=0:"),
                                        ({"rounds": 0, "n_final": -1}, "rounds=0 and n_final=-1:")])
def test_the_generator_rounds_template_refuses_no_rounds_or_no_final_samples_naming_only_what_is_wrong(bad, named):
    """POPri and PE+SFT read these through the template's settings; the message names the failing fields only."""
    from largefedbench.methods.pe import PESFTConfig
    from largefedbench.methods.popri import POPriConfig

    from largefedbench.synthetic.generator_rounds import GeneratorRoundsSettings

    for config in (GeneratorRoundsSettings, POPriConfig, PESFTConfig):
        with pytest.raises(InputError) as err:
            config(**bad)
        assert str(err.value).startswith(named), err.value
    assert "n_final" not in str(pytest.raises(InputError, GeneratorRoundsSettings, rounds=0).value)
