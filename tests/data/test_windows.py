"""Windows, public/private periods and the knowledge-cutoff registry."""

from __future__ import annotations

import datetime as dt

import pytest
from largefedbench.scrapers.refresh import window_for

from largefedbench.data.splits import SplitRatios, assign_split
from largefedbench.data.windows import Window, get_cutoff, list_cutoffs, month_ranges, parse_date
from largefedbench.errors import InputError

D = dt.date


def test_parse_months_and_days():
    assert parse_date("2024-09") == D(2024, 9, 1)
    assert parse_date("2024-02", end_of_month=True) == D(2024, 2, 29)
    assert parse_date("2024-09-15") == D(2024, 9, 15)
    for bad in ("2024/09", "Sept 2024", "2024-13", "2024-02-30", ""):
        with pytest.raises(InputError, match="YYYY-MM|calendar"):
            parse_date(bad)


def test_window_classifies_public_and_private():
    w = Window.parse("2024-09", "2024-10", public_months=2)
    assert w.public_since == D(2024, 7, 1) and w.until == D(2024, 10, 31)
    assert w.classify(D(2024, 6, 30)) is None
    assert w.classify(D(2024, 7, 1)) == "public"
    assert w.classify(D(2024, 8, 31)) == "public"
    assert w.classify(D(2024, 9, 1)) == "private"
    assert w.classify(D(2024, 11, 1)) is None
    with pytest.raises(InputError, match="swap"):
        Window.parse("2024-10", "2024-09")


def test_month_ranges_cover_exactly():
    ranges = month_ranges(D(2024, 1, 15), D(2024, 3, 2))
    assert ranges == [(D(2024, 1, 15), D(2024, 1, 31)), (D(2024, 2, 1), D(2024, 2, 29)), (D(2024, 3, 1), D(2024, 3, 2))]


def test_registry_has_the_required_models_with_sources():
    names = {c.model for c in list_cutoffs()}
    for required in ("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-3.1-8B",
                     "meta-llama/Llama-3.2-1B", "gpt2", "distilgpt2", "Qwen/Qwen2.5-7B", "google/gemma-2-9b",
                     "mistralai/Mistral-7B-v0.1", "microsoft/Phi-3-mini-4k-instruct"):
        assert required in names
    assert all(c.source for c in list_cutoffs())
    llama3 = get_cutoff("meta-llama/Meta-Llama-3-8B")
    assert llama3.cutoff == "2023-03" and llama3.window_start() == D(2023, 4, 1)  # POPri paper: March 2023


def test_after_cutoff_of_starts_the_window():
    w = window_for(None, "2024-08", "meta-llama/Meta-Llama-3-8B", public_months=1)
    assert w.since == D(2023, 4, 1) and w.public_since == D(2023, 3, 1)
    with pytest.raises(InputError, match="before the knowledge cutoff"):
        window_for("2023-01", None, "meta-llama/Meta-Llama-3-8B", public_months=1)
    with pytest.raises(InputError, match="Did you mean"):
        window_for(None, None, "meta-llama/Meta-Llama-3-8", public_months=1)
    with pytest.raises(InputError, match="--since"):
        window_for(None, None, None, public_months=1)


def test_splits_are_stable_by_client_and_near_the_ratios():
    ratios = SplitRatios()
    ids = [f"biorxiv:10.1101/{i:06d}" for i in range(20000)]
    first = [assign_split(i, ratios) for i in ids]
    assert first == [assign_split(i, ratios) for i in ids]
    share = {s: first.count(s) / len(ids) for s in ("train", "validation", "test")}
    assert abs(share["train"] - 0.8) < 0.02 and abs(share["validation"] - 0.1) < 0.01
    with pytest.raises(InputError, match="sum to 1"):
        SplitRatios.parse("0.8,0.3,0.1")
    with pytest.raises(InputError):
        SplitRatios.parse("0.8,0.2")
