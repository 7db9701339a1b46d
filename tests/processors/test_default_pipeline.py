"""`default_pipeline()`: its composition and overrides, every corpus session replayed call by call at
a 32,000-token window (persistent and view-only), and random histories with tight windows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import historykit
import historykit.processors
from historykit._digests import message_digest
from historykit._messages import Message, SummaryPart, ThinkingPart, ToolResultPart
from historykit._pipeline import Pipeline, Report
from historykit._validity import check_neutral, current_cycle_start, final_request_start
from historykit.formats import read_chat_jsonl
from historykit.processors._clear_tool_results import RESULT_PLACEHOLDER
from historykit.processors._default_pipeline import default_pipeline
from historykit.processors._summarize import SUMMARY_HEADER

from ..conftest import corpus_paths
from ..strategies import examples, neutral_histories
from .support import (
    FAST,
    agent_session,
    assert_nothing_more_can_go,
    context,
    kept_or_shortened,
    request_points,
    tokens,
    view_only,
)

WINDOW = 32_000
LARGE = ("claudecode__spotter-8463c716", "claudecode__spotter-258c7280", "claudecode__spotter-fa812bfe")
"""The three longest sessions: their view-only replays are the slow part of this module."""


def _timeless(messages: Sequence[Message]) -> list[Message]:
    """`messages` with the summaries' markers dated alike (two pipelines write them at two times)."""
    epoch = datetime(2000, 1, 1, tzinfo=timezone.utc)

    def part(p: Any) -> Any:
        if isinstance(p, SummaryPart) and p.marker is not None:
            return replace(p, marker=replace(p.marker, created_at=epoch))
        return p

    return [replace(m, parts=tuple(part(p) for p in m.parts)) for m in messages]


def summaries(messages: Sequence[Message]) -> list[SummaryPart]:
    return [p for m in messages for p in m.parts if isinstance(p, SummaryPart)]


# --- composition and overrides ---------------------------------------------------------------------


def test_the_six_cheapest_first_then_repair_and_the_public_names() -> None:
    pipeline = default_pipeline()
    assert isinstance(pipeline, Pipeline)
    assert [p.name for p in pipeline.processors] == [
        "ClearMedia",
        "DedupeFileReads",
        "ClearToolResults",
        "StripThinking",
        "Summarize",
        "PairwiseTruncate",
        "Repair",
    ]
    assert historykit.default_pipeline is default_pipeline
    assert vars(historykit.processors)["default_pipeline"] is default_pipeline  # the function, not its module
    # Each call builds new processors: their caches are never shared between two pipelines.
    other = default_pipeline()
    assert all(a is not b for a, b in zip(pipeline.processors, other.processors))


@pytest.mark.parametrize("window", [0, -5, 1.5, True, "32k"])
def test_a_bad_context_window_is_a_clear_error(window: Any) -> None:
    with pytest.raises(ValueError, match="context_window must be a positive int"):
        default_pipeline(context_window=window)


def test_summarizer_and_model_together_are_refused() -> None:
    with pytest.raises(ValueError, match="either summarizer= or model="):
        default_pipeline(summarizer=lambda messages: "## Task\n- x", model="openai:gpt-4o-mini")


def test_exclude_tools_must_be_tool_names() -> None:
    with pytest.raises(TypeError, match="exclude_tools"):
        default_pipeline(exclude_tools="Read")


def test_a_fixed_window_gives_the_budgets_of_that_window_whatever_the_run_says(
    largest_corpus_session: list[Message],
) -> None:
    history = largest_corpus_session
    by_fraction, _ = default_pipeline().process(history, context(WINDOW))
    fixed, _ = default_pipeline(context_window=WINDOW).process(history, context(200_000))
    assert _timeless(fixed) == _timeless(by_fraction)
    assert tokens(fixed) <= WINDOW
    # The run's own window decides when none is fixed: 200k leaves far more of the history.
    roomy, _ = default_pipeline().process(history, context(200_000))
    assert tokens(roomy) > 2 * tokens(by_fraction)


def test_under_the_cheap_edits_mark_nothing_changes() -> None:
    history = agent_session(4)
    out, notes = default_pipeline().process(history, context(10 * tokens(history)))
    assert len(out) == len(history) and all(a is b for a, b in zip(out, history))
    assert notes.details == []


def test_exclude_tools_and_the_report_callback_reach_the_steps() -> None:
    history = agent_session(40, lines=60)
    reports: list[Report] = []
    window = tokens(history) // 2
    result = default_pipeline(exclude_tools=("Read",), on_report=reports.append).run(history, window)
    assert [r.tokens_after for r in reports] == [result.report.tokens_after]
    kept = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert kept and not any(c.startswith("[cleared: ") for c in kept)
    # Without the exclusion the old Read results are cleared.
    cleared = default_pipeline().run(history, window).messages
    assert any(
        p.content.startswith("[cleared: output of Read(")
        for m in cleared
        for p in m.parts
        if p.kind == "tool_result"
    )
    assert RESULT_PLACEHOLDER.startswith("[cleared: output of ")


def test_a_custom_summarizer_writes_the_summaries(largest_corpus_session: list[Message]) -> None:
    seen: list[int] = []

    def summarizer(messages: Sequence[Message]) -> str:
        seen.append(len(messages))
        return "## Task\n- keep the spotter transcript readable\n\n## Pending\n- (none)"

    out, notes = default_pipeline(summarizer=summarizer).process(largest_corpus_session, context(WINDOW))
    assert seen, "the summarizer was never called"
    [summary] = summaries(out)
    assert summary.text.startswith(SUMMARY_HEADER)
    assert "- keep the spotter transcript readable" in summary.text
    assert summary.marker is not None and summary.marker.strategy == "summarize"
    assert notes.markers and check_neutral(out) == []


@pytest.mark.pydantic_ai
async def test_a_pydantic_ai_model_writes_the_summaries_of_a_native_history(
    largest_corpus_session: list[Message],
) -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.messages import TextPart as AITextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    calls: list[int] = []

    def summarize_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(len(messages))
        return ModelResponse(
            parts=[AITextPart("## Task\n- make the transcript readable\n\n## Done\n- (none)")]
        )

    adapter = PydanticAIAdapter()
    native = adapter.to_native(largest_corpus_session)
    pipeline = default_pipeline(model=FunctionModel(summarize_fn, model_name="summary-fn"))
    result = await pipeline.arun(native, context_window=WINDOW)
    assert calls
    neutral = adapter.to_neutral(result.messages)
    [summary] = summaries(neutral)
    assert "- make the transcript readable" in summary.text
    assert summary.marker is not None and summary.marker.model == "summary-fn"
    assert historykit.check(result.messages) == []
    assert result.report.tokens_after <= WINDOW


# --- the corpus, call by call ------------------------------------------------------------------------


def _replay(session: list[Message], mode: str) -> int:
    """Every call under the window (or as small as the rules allow), valid, with the newest message.

    Returns how many calls were over the window because what may never go was itself over it.
    """
    pipeline = default_pipeline()
    ctx = context(WINDOW)
    system = [m for m in session if m.role == "system"]
    carried: list[Message] = []
    previous = shortened = 0
    for t in request_points(session):
        history = carried + session[previous:t] if mode == "persistent" else session[:t]
        out, _ = pipeline.process(history, ctx)
        assert check_neutral(out) == [], (t, check_neutral(out))
        assert out and kept_or_shortened(out[-1], session[t - 1]), f"call {t} lost the newest message"
        assert [m for m in out if m.role == "system"] == system, f"call {t} changed the system prompt"
        # Even where the final request alone is over the window (one corpus call answers six
        # parallel `Read`s of 35,472 tokens in all): its tool results are shortened to fit.
        assert tokens(out) <= WINDOW, f"call {t} is over the window: {tokens(out):,} tokens"
        shortened += out[-1] is not session[t - 1] and out[-1] != session[t - 1]
        carried, previous = out, t
    return shortened


def _cases() -> list[Any]:
    cases = []
    for path in corpus_paths():
        for mode in ("persistent", "view"):
            slow = mode == "view" and path.stem in LARGE
            cases.append(
                pytest.param(path, mode, id=f"{path.stem}-{mode}", marks=[pytest.mark.slow] if slow else [])
            )
    return cases


@pytest.mark.parametrize(("path", "mode"), _cases())
def test_corpus_sessions_replayed_call_by_call_stay_in_the_window(
    path: Path, mode: str, record_property: Any
) -> None:
    record_property("calls_whose_final_request_was_shortened_to_fit", _replay(read_chat_jsonl(path), mode))


# --- random histories --------------------------------------------------------------------------------


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(neutral_histories(max_turns=5, max_steps=5), st.integers(400, 4_000))
def test_random_histories_keep_every_rule_in_both_modes(history: list[Message], window: int) -> None:
    ctx = context(window, FAST)
    view = view_only(default_pipeline(), ctx)
    persistent = default_pipeline()
    carried: list[Message] = []
    previous = 0
    for t in [*request_points(history)]:
        seen = view(history[:t])
        carried, previous = persistent.process(carried + history[previous:t], ctx)[0], t
        assert seen == carried, "the two modes send different views"
        assert check_neutral(seen) == [], check_neutral(seen)
        assert all(m.parts for m in seen), "an empty message"
        assert kept_or_shortened(seen[-1], history[t - 1]), "the newest message went"
    out = view(history)
    event("compacted" if out is not history else "unchanged")
    # The system prompt, the final request and the current cycle's thinking reach the model as they were.
    assert [m for m in out if m.role == "system"] == [m for m in history if m.role == "system"]
    final = history[final_request_start(history) :]
    assert all(kept_or_shortened(a, b) for a, b in zip(out[len(out) - len(final) :], final, strict=True))

    # Older messages of the cycle may be summarized away with their thinking; those that stay keep
    # their thinking as it was (R7: clearing an old call's arguments in a long single-task cycle is
    # allowed, it is the thinking that must reach the provider unchanged), and no thinking turned
    # into text.
    def identity(msg: Message) -> tuple[str, ...]:
        return tuple(c.id for c in msg.tool_calls) or ("text", msg.text)

    originals = {identity(m): m for m in history if m.role == "assistant"}
    for msg in out[current_cycle_start(out) :]:
        if msg.role == "assistant":
            original = originals.get(identity(msg))
            assert original is not None, msg
            assert [p for p in msg.parts if isinstance(p, ThinkingPart)] == [
                p for p in original.parts if isinstance(p, ThinkingPart)
            ], msg
    thinking = {p.text for m in history for p in m.parts if isinstance(p, ThinkingPart) and p.text}
    given = {id(p) for m in history for p in m.parts}
    assert not [
        p for m in out for p in m.parts if p.kind == "text" and id(p) not in given and p.text in thinking
    ]
    if tokens(out, FAST) > window:
        assert_nothing_more_can_go(out, FAST)


# --- ClearMedia: nothing changes without images -------------------------------------------------------


def _without_media_step() -> Pipeline:
    steps = default_pipeline().processors
    assert steps[0].name == "ClearMedia"
    return Pipeline(steps[1:])


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(neutral_histories(max_turns=5, max_steps=5), st.integers(400, 4_000))
def test_without_images_clear_media_changes_nothing(history: list[Message], window: int) -> None:
    ctx = context(window, FAST)
    assert default_pipeline().processors[0].process(history, ctx)[0] is history
    with_media = default_pipeline().process(history, ctx)[0]
    without = _without_media_step().process(history, ctx)[0]
    assert [message_digest(m) for m in with_media] == [message_digest(m) for m in without]


@pytest.mark.parametrize("path", corpus_paths()[:3], ids=lambda p: p.stem)
def test_corpus_views_are_the_same_with_clear_media(path: Path) -> None:
    session = read_chat_jsonl(path)
    ctx = context(WINDOW)
    with_media, without = default_pipeline(), _without_media_step()
    carried_a: list[Message] = []
    carried_b: list[Message] = []
    previous = 0
    for t in request_points(session):
        carried_a = with_media.process(carried_a + session[previous:t], ctx)[0]
        carried_b = without.process(carried_b + session[previous:t], ctx)[0]
        previous = t
        # Summaries carry their own creation time: the content the model reads is what must agree.
        assert [message_digest(m) for m in carried_a] == [message_digest(m) for m in carried_b], t
