"""One trigger configuration: every compacting processor takes `trigger=Trigger(...)`; the flat
keywords `Summarize` and `PairwiseTruncate` took before still work for one release, with a warning."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from historykit.errors import ArgumentTypeError, HistoryKitDeprecationWarning, InvalidArgumentError
from historykit.processors.clear_tool_results import ClearToolResults
from historykit.processors.dedupe_file_reads import DedupeFileReads
from historykit.processors.pairwise_truncate import PairwiseTruncate
from historykit.processors.strip_thinking import StripThinking
from historykit.processors.summarize import Summarize
from historykit.processors.trigger import DEFAULT_TRIGGER, Trigger

COMPACTING = (Summarize, PairwiseTruncate, ClearToolResults, DedupeFileReads, StripThinking)


@pytest.mark.parametrize("cls", COMPACTING)
def test_every_compacting_processor_takes_a_trigger(cls: Any) -> None:
    trigger = Trigger(max_tokens=12_345, low_water=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cls(trigger=trigger).trigger == trigger


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
@pytest.mark.parametrize(
    ("flat", "equivalent"),
    [
        ({"max_fraction": 0.7}, "Trigger(max_fraction=0.7)"),
        ({"max_tokens": 30_000, "low_water": 0.5}, "Trigger(max_tokens=30000, low_water=0.5)"),
        ({"low_water": 0.4}, "Trigger(max_fraction=0.8, low_water=0.4)"),  # the default mark stays
        ({"reserve": 40_000, "floor_fraction": 0.8}, "Trigger(reserve=40000, floor_fraction=0.8)"),
    ],
)
def test_flat_keywords_still_work_and_name_the_trigger_to_write(
    cls: Any, flat: dict[str, Any], equivalent: str
) -> None:
    with pytest.warns(HistoryKitDeprecationWarning, match="deprecated") as caught:
        processor = cls(**flat)
    message = str(caught[0].message)
    assert f"use {cls.__name__}(trigger={equivalent})" in message
    assert caught[0].filename == __file__  # points at the caller, not at historykit
    assert processor.trigger == eval(equivalent, {"Trigger": Trigger})


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
def test_the_default_trigger_and_no_warning_without_flat_keywords(cls: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cls().trigger == DEFAULT_TRIGGER == Trigger(max_fraction=0.8, low_water=0.6)


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
def test_a_trigger_and_flat_keywords_together_is_an_error(cls: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="either trigger= or the flat keywords"):
        cls(trigger=Trigger(max_tokens=1_000), max_fraction=0.5)
    with pytest.raises(ArgumentTypeError, match="trigger must be a historykit Trigger"):
        cls(trigger=0.8)
