"""One trigger configuration: every compacting processor takes `trigger=Trigger(...)`, and nothing
else: the flat keywords of unreleased versions (`max_fraction=` on the processor) are a `TypeError`."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from historykit.errors import ArgumentTypeError
from historykit.processors._clear_tool_results import ClearToolResults
from historykit.processors._dedupe_file_reads import DedupeFileReads
from historykit.processors._pairwise_truncate import PairwiseTruncate
from historykit.processors._strip_thinking import StripThinking
from historykit.processors._summarize import Summarize
from historykit.processors._trigger import DEFAULT_TRIGGER, Trigger

COMPACTING = (Summarize, PairwiseTruncate, ClearToolResults, DedupeFileReads, StripThinking)


@pytest.mark.parametrize("cls", COMPACTING)
def test_every_compacting_processor_takes_a_trigger(cls: Any) -> None:
    trigger = Trigger(max_tokens=12_345, low_water=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cls(trigger=trigger).trigger == trigger


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
@pytest.mark.parametrize(
    "flat", ["max_tokens", "max_fraction", "max_messages", "low_water", "reserve", "floor_fraction"]
)
def test_flat_trigger_keywords_are_a_plain_type_error_with_no_warning(cls: Any, flat: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation path left
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{flat}'"):
            cls(**{flat: 0.5})


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
def test_the_default_trigger_and_no_warning_without_flat_keywords(cls: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cls().trigger == DEFAULT_TRIGGER == Trigger(max_fraction=0.8, low_water=0.6)


@pytest.mark.parametrize("cls", [Summarize, PairwiseTruncate])
def test_a_trigger_that_is_no_trigger_is_an_error(cls: Any) -> None:
    with pytest.raises(ArgumentTypeError, match="trigger must be a historykit Trigger"):
        cls(trigger=0.8)
