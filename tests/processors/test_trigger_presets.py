"""Trigger marks with a reserve, Cline's formula, and the default pipeline's presets, with their figures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import historykit
from historykit.processors import (
    TRIGGER_PRESETS,
    ClearToolResults,
    DedupeFileReads,
    PairwiseTruncate,
    StripThinking,
    Summarize,
    Trigger,
    TriggerPreset,
)


def test_clines_formula_at_the_usual_windows() -> None:
    cline = Trigger.cline()
    assert cline.mark(128_000) == 102_400  # max(88,000, 102,400)
    assert cline.mark(200_000) == 160_000  # both terms agree
    assert cline.mark(1_000_000) == 960_000  # the reserve wins on a large window
    assert cline.mark(64_000) == 51_200  # the floor wins where 40k would leave 24k
    # The tighter of the two, as combining max_tokens and max_fraction does, is what Cline avoids.
    assert Trigger(reserve=40_000, max_fraction=0.8).mark(128_000) == 88_000
    assert cline.low_water == 0.5


@given(st.integers(min_value=1, max_value=10_000_000), st.integers(min_value=1, max_value=200_000))
def test_a_reserve_with_a_floor_is_clines_max(window: int, reserve: int) -> None:
    trigger = Trigger(reserve=reserve, floor_fraction=0.8)
    assert trigger.mark(window) == max(window - reserve, int(0.8 * window))
    assert Trigger(reserve=reserve).mark(window) == max(0, window - reserve)


def test_the_tighter_mark_wins_without_a_floor() -> None:
    assert Trigger(reserve=16_000).mark(128_000) == 112_000
    assert Trigger(max_tokens=100_000, reserve=16_000).mark(128_000) == 100_000
    assert Trigger(max_fraction=0.9, reserve=40_000, floor_fraction=0.5).mark(100_000) == 60_000
    assert Trigger(max_messages=10).mark(128_000) is None


def test_a_trigger_fixed_for_a_window_keeps_its_mark_in_tokens() -> None:
    fixed = Trigger.cline().fixed(128_000)
    assert (fixed.max_tokens, fixed.reserve, fixed.floor_fraction, fixed.low_water) == (
        102_400,
        None,
        None,
        0.5,
    )
    assert fixed.mark(32_000) == 102_400  # no longer follows the window


def test_bad_reserves_and_floors_are_refused() -> None:
    with pytest.raises(ValueError, match="reserve must be a positive int"):
        Trigger(reserve=0)
    with pytest.raises(ValueError, match="floor_fraction must be in"):
        Trigger(reserve=1_000, floor_fraction=1.5)
    with pytest.raises(ValueError, match="floor_fraction raises a token mark"):
        Trigger(max_messages=10, floor_fraction=0.8)
    with pytest.raises(ValueError, match="needs max_tokens, max_fraction, reserve or max_messages"):
        Trigger()
    with pytest.raises(ValueError, match="preset must be a TriggerPreset or one of 'default', 'cline'"):
        historykit.default_pipeline(preset="aider")
    with pytest.raises(TypeError, match="summarize must be a historykit Trigger"):
        TriggerPreset(edit=Trigger(max_fraction=0.5), summarize=0.8, truncate=Trigger(max_fraction=0.9))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="warn_at must be a fraction"):
        TriggerPreset(Trigger(max_fraction=0.5), Trigger(max_fraction=0.8), Trigger(max_fraction=0.9), 1.2)


def _marks(pipeline: historykit.Pipeline, window: int) -> dict[str, tuple[int | None, float]]:
    """Each compacting step's token mark at `window`, and its low-water mark."""
    out = {}
    for step in pipeline.processors:
        if isinstance(step, (DedupeFileReads, ClearToolResults, StripThinking, Summarize, PairwiseTruncate)):
            assert step.trigger is not None
            trigger = step.trigger
        else:
            continue
        out[step.name] = (trigger.mark(window), trigger.low_water)
    return out


def test_the_presets_put_each_stage_where_they_say() -> None:
    window = 100_000
    assert _marks(historykit.default_pipeline(), window) == {
        "DedupeFileReads": (10_000, 1.0),
        "ClearToolResults": (10_000, 0.3),
        "StripThinking": (10_000, 0.6),
        "Summarize": (40_000, 0.4),
        "PairwiseTruncate": (90_000, 0.6),
    }
    assert _marks(historykit.default_pipeline(preset="chainreview"), window) == {
        "DedupeFileReads": (60_000, 1.0),
        "ClearToolResults": (60_000, 0.3),
        "StripThinking": (60_000, 0.6),
        "Summarize": (80_000, 0.6),
        "PairwiseTruncate": (95_000, 0.6),
    }
    cline = _marks(historykit.default_pipeline(preset="cline"), 128_000)
    assert {mark for mark, _ in cline.values()} == {102_400}
    assert cline["Summarize"] == (102_400, 0.5)
    assert historykit.default_pipeline().usage.warn_at == TRIGGER_PRESETS["default"].warn_at == 0.9
    assert historykit.default_pipeline(preset="chainreview").usage.warn_at == 0.9
    assert historykit.default_pipeline(preset="cline").usage.warn_at is None


def test_a_fixed_window_fixes_a_presets_marks_in_tokens() -> None:
    pipeline = historykit.default_pipeline(context_window=128_000, preset="cline")
    # Fixed for 128k: the same marks whatever window a run reports.
    assert {mark for mark, _ in _marks(pipeline, 32_000).values()} == {102_400}
    custom = TriggerPreset(
        edit=Trigger(reserve=60_000),
        summarize=Trigger(reserve=30_000, low_water=0.5),
        truncate=Trigger(reserve=10_000),
        warn_at=0.85,
    )
    marks = _marks(historykit.default_pipeline(preset=custom), 200_000)
    assert marks["ClearToolResults"] == (140_000, 0.6)
    assert marks["Summarize"] == (170_000, 0.5)
    assert marks["PairwiseTruncate"] == (190_000, 0.6)


def _summarize(pipeline: historykit.Pipeline) -> Summarize:
    [step] = [s for s in pipeline.processors if isinstance(s, Summarize)]
    return step


@pytest.mark.parametrize(
    ("preset", "window", "limit"),
    [
        ("default", 100_000, 90_000),  # the backstop's mark, which is also the warn mark
        ("chainreview", 100_000, 90_000),  # the warn mark, under the backstop's 95%
        ("cline", 128_000, 102_400),  # no warn mark: the backstop's, which is the summary's own
        (
            TriggerPreset(
                edit=Trigger(reserve=60_000),
                summarize=Trigger(reserve=30_000),
                truncate=Trigger(reserve=10_000),
                warn_at=0.85,
            ),
            200_000,
            170_000,  # the lower of the backstop's reserve (190,000) and the warn mark
        ),
    ],
)
def test_a_summary_that_does_not_pay_waits_until_the_backstop_or_the_warn_mark(
    preset: str | TriggerPreset, window: int, limit: int
) -> None:
    for pipeline in (
        historykit.default_pipeline(preset=preset),
        historykit.default_pipeline(preset=preset, context_window=window),
    ):
        summarize = _summarize(pipeline)
        assert summarize.rewrite_ratio == 1.0
        assert summarize.wait_limit is not None and summarize.wait_limit.mark(window) == limit
