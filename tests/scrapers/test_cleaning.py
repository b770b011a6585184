"""The shared cleaning rules (versioned in scrapers/cleaning.py)."""

from __future__ import annotations

import re

from largefedbench.scrapers.cleaning import clean_text, drop_noisy_sentences, non_letter_fraction, split_sentences


def test_sentences_split_on_ends_but_not_on_abbreviations():
    text = 'Mr. SMITH of Texas. I rise today. We used e.g. mice. See Fig. 2 now. He said "protect the belt." Then (he left.) Done'
    assert split_sentences(text) == [
        "Mr. SMITH of Texas.", "I rise today.", "We used e.g. mice.", "See Fig. 2 now.",
        'He said "protect the belt."', "Then (he left.)", "Done",
    ]


def test_thirty_percent_non_letter_rule():
    assert non_letter_fraction("abc def") == 0.0
    assert abs(non_letter_fraction("ab12") - 0.5) < 1e-12
    text = "The vote was close today. 12,345 (67.8%) 9/10 [x]. Members agreed to adjourn."
    kept, dropped = drop_noisy_sentences(text)
    assert dropped == 1 and kept == "The vote was close today. Members agreed to adjourn."
    # exactly 30% non-letters is kept (the rule drops *more than* 30%)
    assert non_letter_fraction("abcdefg123") == 0.3 and drop_noisy_sentences("abcdefg123")[1] == 0


def test_clean_text_applies_patterns_entities_and_whitespace():
    patterns = [re.compile(r"\{time\}\s+\d+"), re.compile(r"\[\[Page [A-Z]?\d+\]\]")]
    raw = "Mr. Speaker, I rise &amp; speak.\n  {time}  1015\n[[Page H123]] We  must act now."
    assert clean_text(raw, patterns) == ("Mr. Speaker, I rise & speak. We must act now.", 0)
