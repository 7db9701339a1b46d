"""`Summarize` and its summarizers: the structured summary, updates, markers, failures, loops,
the LLM adapters (Pydantic AI `FunctionModel`, LangChain fake chat models), the corpus, random
histories, and native histories of both frameworks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from itertools import pairwise
from typing import Any

import pytest
import tenacity
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit import check
from historykit._messages import Message, SummaryPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._pipeline import StepNotes
from historykit._tokens import TokenCounter
from historykit._validity import check_neutral
from historykit.plugins.langchain import LangChainSummarizer
from historykit.plugins.pydantic_ai import PydanticAISummarizer
from historykit.processors._summarize import SUMMARY_HEADER, Summarize
from historykit.processors._summarizers import (
    SECTIONS,
    SUMMARY_INSTRUCTIONS,
    ExtractiveSummarizer,
    ensure_constraints,
    extract_constraints,
    parse_sections,
    render_transcript,
    summarizer_for,
)
from historykit.processors._trigger import Trigger
from historykit.processors._turns import is_summary_message, notice_count

from ..strategies import examples, neutral_histories
from .support import (
    FAST,
    agent_session,
    assert_compaction_rules,
    assert_nothing_more_can_go,
    assert_replay_properties,
    carry_forward,
    context,
    exchange,
    replay_both_modes,
    request_points,
    tokens,
    view_only,
)

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
NO_WAIT = tenacity.wait_none()


def clock() -> datetime:
    return WHEN


def summaries(messages: list[Message]) -> list[SummaryPart]:
    return [p for m in messages for p in m.parts if isinstance(p, SummaryPart)]


def the_summary(messages: list[Message]) -> SummaryPart:
    [summary] = summaries(messages)
    return summary


class Recording:
    """A summarizer that records its inputs and delegates to the extractive one."""

    model_name = "recording-model"

    def __init__(self) -> None:
        self.calls: list[list[Message]] = []
        self.inner = ExtractiveSummarizer()

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls.append(list(messages))
        return self.inner(messages)


class Failing:
    """Raises `failures` times (forever by default), then answers."""

    def __init__(self, failures: int = 10**9, answer: str = "## Task\n- recovered") -> None:
        self.failures = failures
        self.calls = 0
        self.answer = answer

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"summarizer down (call {self.calls})")
        return self.answer


CONSTRAINED_TASK = "Fix the failing parser test. You must never modify files under tests/."
LATER_CONSTRAINTS = (
    "Don't add any new dependencies.",
    "Also, keep the public API stable; only change private helpers.",
    "Always run pytest -q before you finish.",
)


def constrained_session() -> list[Message]:
    """Constraints in the task and in two later turns, then a long last turn that gets cut."""
    history = [Message.system("You are a coding agent."), Message.user(CONSTRAINED_TASK)]
    history += exchange(0)
    history += [
        Message.assistant("I'll switch to the streaming parser instead. Fixed the off-by-one in parse().")
    ]
    history += [Message.user(f"Good. {LATER_CONSTRAINTS[0]} {LATER_CONSTRAINTS[1]}")]
    history += exchange(1)
    history += [Message.assistant("Updated src/f1_0.py.")]
    history += [Message.user(f"{LATER_CONSTRAINTS[2]} Now clean up the writer.")]
    for n in range(2, 14):
        history += exchange(n)
    return history


# --- the summary and its marker --------------------------------------------------------------------


def test_one_structured_summary_with_the_constraints_verbatim_and_a_marker() -> None:
    history = constrained_session()
    high = tokens(history) - 1  # crossed at the last call only
    summarize = Summarize(trigger=Trigger(max_tokens=high), keep_last=3, clock=clock)
    out, notes = summarize.process(history, context())
    assert_compaction_rules(history, out)
    summary = the_summary(out)
    text = summary.text
    assert text.startswith(SUMMARY_HEADER)
    assert [h for h in parse_sections(text)] == list(SECTIONS)
    sections = parse_sections(text)
    # The user's messages are kept whole, so their constraints are not written a second time.
    assert sections["User constraints (verbatim)"] == []
    said = sections["User messages (verbatim)"]
    assert said[0] == f"Good. {LATER_CONSTRAINTS[0]} {LATER_CONSTRAINTS[1]}"
    for sentence in LATER_CONSTRAINTS[:2]:
        assert any(sentence in m for m in said)
    assert sections["Task"] == [CONSTRAINED_TASK]
    assert "I'll switch to the streaming parser instead." in sections["Decisions"]
    assert "Fixed the off-by-one in parse()." in sections["Done"]
    assert any(item.startswith("src/f0_0.py (read)") for item in sections["Files touched"])
    # One summary message, in the user's voice, after the head; then the request of the turn the
    # cut falls in (the model reads the summary, then what it is working on), then the verbatim tail
    # of keep_last units.
    at = next(i for i, m in enumerate(out) if is_summary_message(m))
    assert out[at].role == "user" and len(out[at].parts) == 1
    assert out[:at] == history[:2]
    assert out[at + 1] is history[history.index(out[at + 1])]
    assert out[at + 1].text.startswith(LATER_CONSTRAINTS[2])
    assert out[at + 2 :] == history[len(history) - 6 :]  # 3 exchanges of 2 messages
    marker = summary.marker
    assert marker is not None
    assert (marker.covered_from, marker.covered_to, marker.kept_after) == (2, len(history) - 6, 1)
    assert (marker.tokens_before, marker.tokens_after) == (tokens(history), tokens(out))
    assert (marker.strategy, marker.model, marker.created_at, marker.automatic) == (
        "summarize",
        None,
        WHEN,
        True,
    )
    assert notes.markers == [marker]
    assert tokens(out) <= high * 0.6


def test_an_earlier_summary_is_updated_not_summarized() -> None:
    history = constrained_session()
    for n in range(14, 30):
        history += exchange(n)
    recording = Recording()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) // 3), keep_last=2, summarizer=recording, clock=clock
    )
    ctx = context()
    # Persistent mode: the first compaction's output is the next call's input.
    carried: list[Message] = []
    markers = []
    for carried, notes in carry_forward(summarize, history, ctx):
        markers += notes.markers
        assert len(summaries(carried)) <= 1, "summaries are never nested or stacked"
    assert len(markers) >= 2 and len(recording.calls) == len(markers)
    first, second = markers[0], markers[1]
    assert second.covered_from == first.covered_from
    assert second.covered_to > first.covered_to
    # The second call got the first summary and only what came after it, not what it covered.
    second_input = recording.calls[1]
    previous_summaries = [m for m in second_input if is_summary_message(m)]
    assert len(previous_summaries) == 1 and the_summary(previous_summaries).marker == first
    covered_first = history[2 : first.covered_to]
    assert not any(any(m is c for c in covered_first if c.role != "user") for m in second_input)
    # Sections carried forward: a constraint only the first span had is still there.
    assert LATER_CONSTRAINTS[0] in the_summary(carried).text
    assert "src/f0_0.py (read)" in the_summary(carried).text
    assert carried == view_only(summarize, ctx)(history)  # view-only gives the same


def test_pinned_content_stays_verbatim_outside_the_summary() -> None:
    history = [Message.system("sys"), Message.user("Find the bug.")]
    history += exchange(0)
    rule = Message("user", (TextPart("Security rule: never print the API key."),), pinned=True)
    history += [rule, *exchange(1, pinned=True), *exchange(2)]
    for n in range(3, 15):
        history += exchange(n)
    out, _ = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), keep_last=2, clock=clock).process(
        history, context()
    )
    assert_compaction_rules(history, out)
    assert rule in out and out[out.index(rule) + 1] is history[history.index(rule) + 1]
    pinned_result = history[history.index(rule) + 2]
    assert any(m is pinned_result for m in out)
    assert "Security rule: never print the API key." in the_summary(out).text


def test_deterministic_and_cached_in_view_only_use() -> None:
    history = agent_session(40)
    high = tokens(history) // 3
    recording = Recording()
    summarize = Summarize(trigger=Trigger(max_tokens=high), summarizer=recording)  # the real clock
    derive = view_only(summarize, context())
    views = [derive(history[:t]) for t in request_points(history)]
    compactions = sum(
        1 for a, b in pairwise(views) if summaries(a) != summaries(b) and summaries(b) and summaries(a)
    )
    # Each summary is written once, however often the raw history is replayed.
    assert len(recording.calls) == len({the_summary(v).text for v in views if summaries(v)})
    assert compactions + 1 == len({id(the_summary(v)) for v in views if summaries(v)})
    # The conversation rewound and replayed (a retried turn): its summaries come from its cache.
    calls = len(recording.calls)
    assert derive(history[: request_points(history)[-2]]) == views[-2] and len(recording.calls) == calls
    # Another pipeline (another process) keeps its own conversations: it summarizes again, the same
    # text (the real clock stamps each marker with its own time).
    again = view_only(summarize, context())(history)
    assert len(recording.calls) > calls
    assert [m.text for m in summaries(again)] == [m.text for m in summaries(views[-1])]
    # Another instance with the same clock writes the same history.
    a = view_only(Summarize(trigger=Trigger(max_tokens=high), clock=clock), context())(history)
    b = view_only(Summarize(trigger=Trigger(max_tokens=high), clock=clock), context())(history)
    assert a == b


def test_keep_last_tokens_bounds_the_verbatim_tail() -> None:
    history = agent_session(30)
    per_exchange = tokens(exchange(0))
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        keep_last=10,
        keep_last_tokens=per_exchange * 3,
        clock=clock,
    )
    out, _ = summarize.process(history, context())
    at = next(i for i, m in enumerate(out) if is_summary_message(m))
    assert len(out) - at - 1 == 6  # three exchanges of two messages fit, the fourth does not
    assert tokens(out[at + 1 :]) <= per_exchange * 3 + 10


def test_a_summary_someone_else_wrote_is_updated_too() -> None:
    foreign = Message(
        "user", (SummaryPart("## Task\n- migrate the database\n\n## Done\n- Wrote the schema."),)
    )
    history = [Message.system("sys"), Message.user("task"), foreign, *agent_session(20)[2:]]
    recording = Recording()
    summarize = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=recording, clock=clock)
    out, _ = summarize.process(history, context())
    assert_compaction_rules(history, out)
    assert foreign not in out and len(summaries(out)) == 1
    assert recording.calls[0][1] is foreign  # given as the summary to update, right after the task
    assert "Wrote the schema." in the_summary(out).text
    marker = the_summary(out).marker
    assert marker is not None and marker.covered_from == 2


async def test_in_an_async_pipeline() -> None:
    from historykit import Pipeline

    history = agent_session(30)

    async def summarizer(messages: Sequence[Message]) -> str:
        return "## Task\n- async pipeline"

    pipeline = Pipeline([Summarize(trigger=Trigger(max_fraction=0.5), summarizer=summarizer)])
    result = await pipeline.arun(history, context_window=tokens(history) * 2 - 2)
    assert "- async pipeline" in the_summary(result.messages).text
    assert (
        result.report.markers and result.report.steps[0].tokens_after < result.report.steps[0].tokens_before
    )


# --- failures -------------------------------------------------------------------------------------


def test_retries_with_backoff_then_falls_back_to_truncation() -> None:
    history = constrained_session()
    failing = Failing()
    waits: list[int] = []

    def wait(state: tenacity.RetryCallState) -> float:
        waits.append(state.attempt_number)
        return 0.0

    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=failing, attempts=4, retry_wait=wait
    )
    ctx = context()
    out, notes = summarize.process(history, ctx)
    # tenacity asks for the wait after every failed attempt, then sleeps only if another follows.
    assert failing.calls == 4 and waits[:3] == [1, 2, 3]
    assert_compaction_rules(history, out)
    assert summaries(out) == []
    assert any(notice_count(m) for m in out)
    assert any(
        "summarizer failed (RuntimeError: summarizer down (call 4) after 4 attempts)" in d
        for d in notes.details
    )
    assert tokens(out) <= (tokens(history) - 1) * 0.6
    # The failed span is not retried when the same raw history of the same conversation comes
    # again (view-only use): a conversation's state remembers it.
    assert summarize.process(history, ctx)[0] == out and failing.calls == 4


def test_default_backoff_is_exponential() -> None:
    wait = Summarize()._wait()
    assert isinstance(wait, tenacity.wait_exponential)


async def test_async_path_retries_then_succeeds() -> None:
    history = constrained_session()
    failing = Failing(failures=1)

    async def summarizer(messages: Sequence[Message]) -> str:
        await asyncio.sleep(0)
        return failing(messages)

    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        summarizer=summarizer,
        retry_wait=NO_WAIT,
        clock=clock,
    )
    out, notes = await summarize.aprocess(history, context())
    assert failing.calls == 2
    text = the_summary(out).text
    assert "- recovered" in text
    # Whatever the summarizer wrote, the user's constraints are there verbatim.
    for sentence in LATER_CONSTRAINTS:
        assert sentence in text
    assert notes.markers and notes.markers[0].model is None


@pytest.mark.parametrize("bad", [None, "", 42])
def test_a_summarizer_returning_no_text_counts_as_a_failure(bad: Any) -> None:
    history = constrained_session()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=lambda m: bad, retry_wait=NO_WAIT
    )
    out, notes = summarize.process(history, context())
    assert summaries(out) == [] and any("summarizer failed" in d for d in notes.details)


def test_an_async_summarizer_from_sync_code() -> None:
    history = constrained_session()

    async def summarizer(messages: Sequence[Message]) -> str:
        await asyncio.sleep(0)
        return "## Task\n- async"

    out, _ = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=summarizer).process(
        history, context()
    )
    assert "- async" in the_summary(out).text


async def test_sync_process_inside_a_running_event_loop() -> None:
    history = constrained_session()
    threads: list[str] = []

    async def summarizer(messages: Sequence[Message]) -> str:
        threads.append(threading.current_thread().name)
        return "## Task\n- from a worker thread"

    # A sync caller (a framework's sync history processor) on a thread whose loop is running.
    out, _ = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=summarizer).process(
        history, context()
    )
    assert "- from a worker thread" in the_summary(out).text
    assert threads and threads[0] != threading.current_thread().name


# --- no compaction loops ----------------------------------------------------------------------------


@pytest.mark.parametrize("truncate_instead", [True, False])
def test_no_resummarizing_after_a_compaction_that_left_the_history_over_budget(
    truncate_instead: bool,
) -> None:
    high = 8_000
    # Pinned content bigger than the budget: every call is over the high-water mark.
    rules = Message("user", (TextPart(file_text_block(int(high * 1.3))),), pinned=True)
    history = [Message.system("sys"), Message.user("task"), rules]
    for n in range(30):
        history += exchange(n, lines=80)
    recording = Recording()
    summarize = Summarize(
        trigger=Trigger(max_tokens=high),
        min_gain=500,
        summary_tokens=100,
        summarizer=recording,
        clock=clock,
        truncate_instead=truncate_instead,
    )
    carried: list[Message] = []
    details: list[str] = []
    markers = []
    for out, notes in carry_forward(summarize, history, context()):
        carried = out
        details += notes.details
        markers += notes.markers
    marker = the_summary(carried).marker
    assert marker is not None and marker.tokens_after > high  # the summary could not bring it under
    # Each new exchange would free more than min_gain, but after a compaction that left the history
    # over the high-water mark the next must free a whole high-to-low swing: no summarizer call per
    # model call...
    swing = high - int(high * 0.6)
    assert any(f"(< {swing:,})" in d for d in details)
    assert rules in carried
    if truncate_instead:
        # ...truncation instead, so the one summary stays the only one.
        assert len(recording.calls) == 1
        return
    # ...or, leaving the history as it is, the next summary waits until it frees that swing: a
    # summary every few calls (30 calls here), none that frees less, nothing truncated (the history
    # never nears the window).
    summaries_made = [m for m in markers if m.strategy == "summarize"]
    assert len(recording.calls) == len(summaries_made) < 30 // 2
    assert all(m.tokens_before - m.tokens_after >= swing for m in summaries_made[1:])
    assert not any(m.strategy == "truncate" for m in markers)
    assert any("left as it is (truncate_instead=False)" in d for d in details)


def test_a_summary_longer_than_what_it_frees_is_not_used() -> None:
    history = agent_session(40)
    high = tokens(history) - 1
    bloated = "## Task\n- " + " ".join(f"detail{k}" for k in range(high))
    summarize = Summarize(trigger=Trigger(max_tokens=high), summarizer=lambda messages: bloated, clock=clock)
    out, notes = summarize.process(history, context())
    assert summaries(out) == [] and any(notice_count(m) for m in out)
    assert any("the summary would free only" in d for d in notes.details)
    assert_compaction_rules(history, out)


def file_text_block(approx_tokens: int) -> str:
    return "\n".join(f"Rule {k}: keep value_{k} within bounds." for k in range(approx_tokens // 10))


def test_min_gain_refuses_small_compactions() -> None:
    history = constrained_session()
    recording = Recording()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        summarizer=recording,
        min_gain=10**9,
        truncate_instead=True,
    )
    out, notes = summarize.process(history, context())
    assert recording.calls == [] and summaries(out) == []
    assert any(notice_count(m) for m in out)
    assert any("< 1,000,000,000" in d for d in notes.details)
    # By default the history under the window is left as it is (a backstop truncates later)...
    left, notes = replace(summarize, truncate_instead=False).process(history, context())
    assert left is history and recording.calls == []
    assert any("< 1,000,000,000" in d and "left as it is" in d for d in notes.details)
    # ...and truncated when it is over the window: the call could not go out as it is.
    over, _ = replace(summarize, truncate_instead=False).process(history, context(tokens(history) - 1))
    assert recording.calls == [] and any(notice_count(m) for m in over)


def big_result_session() -> tuple[list[Message], int]:
    """Small exchanges, then one whose result is most of the history, then 30 more small ones; and
    the request point of the call that sees the big result."""
    history = agent_session(12, lines=20)
    history += exchange(12, lines=600)
    crossing = len(history)
    for n in range(13, 43):
        history += exchange(n, lines=20)
    return history, crossing


def test_a_summary_waits_until_it_pays_for_its_cache_rewrite() -> None:
    history, crossing = big_result_session()
    high = tokens(history[:crossing]) - 1  # the big result's call is the first over the mark
    calls: dict[float, list[tuple[int, StepNotes]]] = {}
    for ratio in (0.0, 1.0):
        summarize = Summarize(
            trigger=Trigger(max_tokens=high, low_water=0.3),
            min_gain=100,
            summary_tokens=100,
            clock=clock,
            rewrite_ratio=ratio,
        )
        steps = list(carry_forward(summarize, history, context()))
        calls[ratio] = [(call, notes) for call, (_, notes) in enumerate(steps) if notes.details]
        assert_compaction_rules(history, steps[-1][0])
    made = {
        ratio: [(call, notes.markers[0]) for call, notes in found if notes.markers]
        for ratio, found in calls.items()
    }
    # Without the rule, the call that sees the big result summarizes what came before it and keeps
    # the big result (the final request) verbatim: most of the history is written to the cache
    # again for a small gain, and the history soon crosses the mark again: a second summary.
    [(first, eager), (_, again)] = made[0.0]
    assert eager.tokens_after > high // 2 and again.tokens_after < high * 0.3
    # With it, that call leaves the history as it is (and says why), and the next one writes the
    # one summary, which covers the big result too.
    [(call, notes), *_] = calls[1.0]
    assert call == first and not notes.markers
    assert any("less than the" in d and "left as it is" in d for d in notes.details)
    [(second, marker)] = made[1.0]
    assert second == first + 1 and marker.tokens_after < high * 0.3


def test_a_summary_that_does_not_pay_for_another_reason_is_written_at_once() -> None:
    # A long verbatim tail (keep_last) makes the rewrite larger than the gain, but the final request
    # is small: waiting would not make the summary pay sooner, so it is written now.
    history = agent_session(30, lines=20)
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1, low_water=0.99),
        keep_last=20,
        min_gain=100,
        summary_tokens=100,
        clock=clock,
        rewrite_ratio=1.0,
    )
    out, notes = summarize.process(history, context())
    [marker] = notes.markers
    freed = marker.tokens_before - marker.tokens_after
    assert freed < marker.tokens_after - tokens(history[:2])  # it does not pay for its rewrite
    assert summaries(out)


def test_a_summary_does_not_wait_past_its_wait_limit() -> None:
    history, crossing = big_result_session()
    high = tokens(history[:crossing]) - 1
    for limit, window, summarized in (
        (None, 100_000, False),  # the window is far: it waits
        (Trigger(max_tokens=high), 100_000, True),  # past the wait limit: it summarizes
        (None, high, True),  # over the window: it summarizes
    ):
        summarize = Summarize(
            trigger=Trigger(max_tokens=high, low_water=0.3),
            min_gain=100,
            summary_tokens=100,
            clock=clock,
            rewrite_ratio=1.0,
            wait_limit=limit,
        )
        out, notes = summarize.process(history[:crossing], context(window))
        assert bool(notes.markers) is summarized, (limit, window)
        assert bool(summaries(out)) is summarized


@pytest.mark.parametrize(
    ("field", "value"), [("rewrite_ratio", -1), ("rewrite_ratio", "1"), ("wait_limit", 0.9)]
)
def test_rewrite_ratio_and_wait_limit_are_checked(field: str, value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=field):
        Summarize(**{field: value})


@pytest.mark.parametrize("value", ["no", 1, None])
def test_truncate_instead_must_be_a_bool(value: Any) -> None:
    with pytest.raises(ValueError, match=r"truncate_instead must be True or False, got "):
        Summarize(truncate_instead=value)


# --- LLM summarizers ----------------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_pydantic_ai_function_model_as_the_summarizer() -> None:
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
    from pydantic_ai.messages import TextPart as AITextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[list[ModelMessage]] = []

    def summarize_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(
            parts=[AITextPart("## Task\n- fix the parser\n\n## User constraints (verbatim)\n- (none)")]
        )

    history = constrained_session()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        model=FunctionModel(summarize_fn, model_name="summary-fn"),
        clock=clock,
    )
    out, _ = summarize.process(history, context())
    assert_compaction_rules(history, out)
    summary = the_summary(out)
    assert summary.marker is not None and summary.marker.model == "summary-fn"
    assert "- fix the parser" in summary.text
    said = parse_sections(summary.text)["User messages (verbatim)"]
    # Added: the model left out the user's messages, and with them their constraints.
    assert f"Good. {LATER_CONSTRAINTS[0]} {LATER_CONSTRAINTS[1]}" in said
    assert all(sentence in summary.text for sentence in LATER_CONSTRAINTS)
    [request] = [m for m in seen[0] if isinstance(m, ModelRequest)]
    assert "User constraints (verbatim)" in (request.instructions or "")
    prompt = str(request.parts[0].content)  # type: ignore[union-attr]
    assert LATER_CONSTRAINTS[0] in prompt and "[assistant calls Read]" in prompt


@pytest.mark.pydantic_ai
def test_pydantic_ai_agent_and_failure_fallback() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.messages import TextPart as AITextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[AITextPart("## Done\n- by the agent")])

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("provider unreachable")

    history = constrained_session()
    agent = Agent(FunctionModel(answer, model_name="agent-model"))
    out, _ = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), model=agent).process(
        history, context()
    )
    assert "- by the agent" in the_summary(out).text
    assert the_summary(out).marker.model == "agent-model"  # type: ignore[union-attr]
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), model=FunctionModel(broken), retry_wait=NO_WAIT
    )
    out, notes = summarize.process(history, context())
    assert summaries(out) == [] and any("ConnectionError: provider unreachable" in d for d in notes.details)
    assert_compaction_rules(history, out)


async def test_langchain_chat_models_as_the_summarizer() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
    from langchain_core.messages import AIMessage

    history = constrained_session()
    generic = GenericFakeChatModel(messages=iter([AIMessage(content="## Pending\n- generic summary")]))
    summarize = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), model=generic, clock=clock)
    out, _ = await summarize.aprocess(history, context())
    assert "- generic summary" in the_summary(out).text
    assert the_summary(out).marker.model == "GenericFakeChatModel"  # type: ignore[union-attr]
    fake_list = FakeListChatModel(responses=["## Pending\n- listed summary"])
    out, _ = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), model=fake_list).process(
        history, context()
    )
    text = the_summary(out).text
    assert "- listed summary" in text and LATER_CONSTRAINTS[2] in text
    # An exhausted fake model raises: the run goes on with truncation.
    empty = GenericFakeChatModel(messages=iter([]))
    summarize = Summarize(trigger=Trigger(max_tokens=tokens(history) - 1), model=empty, retry_wait=NO_WAIT)
    out, _ = await summarize.aprocess(history, context())
    assert summaries(out) == [] and any(notice_count(m) for m in out)


@pytest.mark.pydantic_ai
def test_summarizer_for_picks_the_pydantic_ai_adapter() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    assert isinstance(summarizer_for("openai:gpt-4o-mini"), PydanticAISummarizer)
    assert isinstance(summarizer_for(TestModel()), PydanticAISummarizer)
    assert isinstance(summarizer_for(Agent(TestModel())), PydanticAISummarizer)
    assert summarizer_for("openai:gpt-4o-mini").model_name == "openai:gpt-4o-mini"  # type: ignore[attr-defined]
    assert summarizer_for(Agent(TestModel())).model_name == "test"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="builtins.int"):
        summarizer_for(42)


def test_summarizer_for_picks_the_langchain_adapter() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    summarizer = summarizer_for(FakeListChatModel(responses=["x"]))
    assert isinstance(summarizer, LangChainSummarizer) and summarizer.model_name == "FakeListChatModel"


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="not both"):
        Summarize(summarizer=ExtractiveSummarizer(), model="openai:gpt-4o")
    with pytest.raises(TypeError, match="callable"):
        Summarize(summarizer=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LangChain chat model"):
        Summarize(model=object())
    with pytest.raises(ValueError, match="attempts"):
        Summarize(attempts=0)
    with pytest.raises(ValueError, match="keep_last"):
        Summarize(keep_last=-1)
    with pytest.raises(ValueError, match="max_tokens"):
        Summarize(trigger=Trigger(max_tokens=0))
    assert Summarize().trigger.max_fraction == 0.8


# --- the extractive summarizer ---------------------------------------------------------------------


def call(cid: str, name: str, arguments: dict[str, Any] | str) -> ToolCallPart:
    return ToolCallPart(cid, name, arguments)


def test_extractive_files_touched_from_the_common_tool_shapes() -> None:
    calls = [
        call("1", "Read", {"file_path": "src/a.py"}),
        call("2", "Edit", {"file_path": "src/a.py", "old_string": "x", "new_string": "y"}),
        call("3", "Write", {"file_path": "src/new.py", "content": "print()"}),
        call("4", "str_replace_editor", {"command": "view", "path": "/w/b.py"}),
        call("5", "str_replace_editor", {"command": "create", "path": "/w/c.py", "file_text": ""}),
        call("6", "bash", {"command": "cat setup.cfg && sed -n '1,20p' src/d.py | head -5"}),
        call("7", "bash", {"command": "sed -i 's/a/b/' src/e.py"}),
        call("8", "shell", {"command": ["bash", "-lc", "nl -ba src/f.ts && echo done > out.txt"]}),
        call("9", "shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/g.py\n@@\n"]}),
        call("10", "execute_ipython_cell", {"code": "open_file('/workspace/h.css')"}),
        call("11", "bash", {"command": "ls -la && grep -rn foo ."}),
    ]
    history = [Message.user("task"), Message("assistant", tuple(calls))]
    files = parse_sections(ExtractiveSummarizer()(history))["Files touched"]
    assert files == [
        "src/a.py (read, edited)",
        "src/new.py (written)",
        "/w/b.py (read)",
        "/w/c.py (written)",
        "setup.cfg (read)",
        "src/d.py (read)",
        "src/e.py (edited): added `sed -i 's/a/b/' src/e.py`",
        "src/f.ts (read)",
        "out.txt (written): added `nl -ba src/f.ts && echo done > out.txt`",
        "src/g.py (edited)",
        "/workspace/h.css (read)",
    ]


def test_extractive_files_keep_the_latest_change_of_each_file_across_summaries() -> None:
    def edit(n: str, new: str) -> ToolCallPart:
        return call(n, "Edit", {"file_path": "src/a.py", "old_string": "pass", "new_string": f"pass\n{new}"})

    first = [Message.user("task"), Message("assistant", (edit("1", "return compute_total(items)"),))]
    summary = ExtractiveSummarizer()(first)
    assert parse_sections(summary)["Files touched"] == [
        "src/a.py (edited): added `return compute_total(items)`"
    ]
    # A later summary merges the earlier one: a new change replaces the record, a read keeps it.
    later = [
        Message("user", (SummaryPart(summary),)),
        Message("assistant", (call("2", "Read", {"file_path": "src/a.py"}),)),
    ]
    assert parse_sections(ExtractiveSummarizer()(later))["Files touched"] == [
        "src/a.py (read, edited): added `return compute_total(items)`"
    ]
    later.append(Message("assistant", (edit("3", "raise ValueError(`no items`)"),)))
    assert parse_sections(ExtractiveSummarizer()(later))["Files touched"] == [
        "src/a.py (read, edited): added `raise ValueError('no items')`"
    ]


def test_extractive_open_errors() -> None:
    pytest_call = call("1", "bash", {"command": "pytest -q"})
    read_call = call("2", "Read", {"file_path": "src/errors.py"})
    build = call("3", "bash", {"command": "make build"})
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\n    boom()\nValueError: bad value'
    history = [
        Message.user("task"),
        Message("assistant", (pytest_call, read_call, build)),
        Message("tool", (ToolResultPart("1", "bash", traceback),)),
        Message("tool", (ToolResultPart("2", "Read", "class ParseError(Exception): ...\nValueError: x"),)),
        Message("tool", (ToolResultPart("3", "bash", "compiling", is_error=True),)),
    ]
    errors = parse_sections(ExtractiveSummarizer()(history))["Open errors"]
    assert errors == ["[bash: pytest -q] ValueError: bad value", "[bash: make build] compiling"]
    # The shapes agents report failures in; a search that matches nothing is no failure.
    shapes = [
        (
            call("5", "Bash", {"command": "mix compile"}),
            "Exit code 1\n** (CompileError) lib/a.ex:3: undefined",
        ),
        (
            call("6", "bash", {"command": "python x.py"}),
            "<returncode>2</returncode>\n<output>\nusage: x\n</output>",
        ),
        (
            call("7", "Read", {"file_path": "big.log"}),
            "<tool_use_error>File content exceeds 256KB</tool_use_error>",
        ),
        (
            call("8", "bash", {"command": "grep -rn Mapping src"}),
            "<returncode>1</returncode>\n<output>\n</output>",
        ),
        (call("9", "Grep", {"pattern": "error:"}), "src/a.py:3: error: boom"),
    ]
    more = [Message("assistant", tuple(c for c, _ in shapes))]
    more += [Message("tool", (ToolResultPart(c.id, c.name, text),)) for c, text in shapes]
    assert parse_sections(ExtractiveSummarizer()([Message.user("task"), *more]))["Open errors"] == [
        "[Bash: mix compile] ** (CompileError) lib/a.ex:3: undefined",
        "[bash: python x.py] usage: x",
        "[Read: big.log] File content exceeds 256KB",
    ]
    # A later successful run of the same command settles its error.
    rerun = call("4", "bash", {"command": "pytest -q"})
    history += [Message("assistant", (rerun,)), Message("tool", (ToolResultPart("4", "bash", "3 passed"),))]
    assert parse_sections(ExtractiveSummarizer()(history))["Open errors"] == ["[bash: make build] compiling"]


def test_extractive_progress_and_plans() -> None:
    todo = call(
        "1",
        "TodoWrite",
        {
            "todos": [
                {"content": "Write the parser", "status": "completed"},
                {"content": "Document the parser", "status": "in_progress"},
                {"content": "Release", "status": "pending"},
            ]
        },
    )
    history = [
        Message.user("task"),
        Message.assistant("Let me read the file. I'll use a state machine instead of regexes."),
        Message.assistant("Fixed the tokenizer bug. Next, I still need to update the docs.", [todo]),
        Message("tool", (ToolResultPart("1", "TodoWrite", "ok"),)),
    ]
    sections = parse_sections(ExtractiveSummarizer()(history))
    assert sections["Decisions"] == ["I'll use a state machine instead of regexes."]
    assert sections["Done"] == ["Fixed the tokenizer bug.", "Write the parser"]
    assert sections["Pending"] == ["Document the parser (plan: in_progress)", "Release (plan: pending)"]
    assert sections["Task"] == ["task"]


def test_an_update_keeps_the_open_plan_items_when_no_new_plan_came() -> None:
    """A plan written before the previous summary still stands after sentences with pending cues
    (found by the quality benchmark's generated sessions: the update replaced the plan by them)."""
    todo = call("1", "TodoWrite", {"todos": [{"content": "Add a regression test", "status": "in_progress"}]})
    first = ExtractiveSummarizer()(
        [
            Message.user("task"),
            Message.assistant("", [todo]),
            Message("tool", (ToolResultPart("1", "TodoWrite", "ok"),)),
        ]
    )
    later = [Message.assistant(f"Next I still need to change file {n}.") for n in range(10)]
    sections = parse_sections(
        ExtractiveSummarizer()([Message.user("task"), Message("user", (SummaryPart(first),)), *later])
    )
    pending = sections["Pending"]
    assert pending[0] == "Add a regression test (plan: in_progress)"
    assert len(pending) == 6 and pending[-1] == "Next I still need to change file 9."
    # A new plan call replaces the old plan.
    done = call("2", "TodoWrite", {"todos": [{"content": "Add a regression test", "status": "completed"}]})
    sections = parse_sections(
        ExtractiveSummarizer()(
            [Message.user("task"), Message("user", (SummaryPart(first),)), Message.assistant("", [done])]
        )
    )
    assert sections["Pending"] == [] or all("(plan:" not in item for item in sections["Pending"])
    assert "Add a regression test" in sections["Done"]


def test_extractive_update_merges_the_previous_sections() -> None:
    previous = (
        f"{SUMMARY_HEADER}\n\n## Task\n- the original task\n\n"
        "## User constraints (verbatim)\n- Never push.\n\n## Decisions\n- Use sqlite.\n\n"
        "## Files touched\n- src/a.py (read)\n\n## Done\n- Wrote the schema.\n\n"
        "## Pending\n- Write the migration.\n\n## Open errors\n- [bash: make] error: missing target"
    )
    history = [
        Message.user("the original task, verbatim"),
        Message("user", (SummaryPart(previous),)),
        Message.user("Only use the standard library."),
        Message.assistant("Edited it.", [call("1", "Edit", {"file_path": "src/a.py", "old_string": "a"})]),
        Message("tool", (ToolResultPart("1", "Edit", "ok"),)),
        Message.assistant("", [call("2", "bash", {"command": "make"})]),
        Message("tool", (ToolResultPart("2", "bash", "built"),)),
    ]
    sections = parse_sections(ExtractiveSummarizer()(history))
    assert sections["Task"] == ["the original task"]
    assert sections["User constraints (verbatim)"] == ["Never push."]
    assert sections["User messages (verbatim)"] == ["Only use the standard library."]
    assert sections["Decisions"] == ["Use sqlite."]
    assert sections["Files touched"] == ["src/a.py (read, edited)"]
    assert sections["Done"] == ["Wrote the schema."]
    assert sections["Pending"] == ["Write the migration."]
    assert sections["Open errors"] == []  # `make` ran again and succeeded


def test_constraints_extraction_and_ensuring() -> None:
    task = Message.user("Fix it. You must keep Python 3.10 support.")
    later = Message.user("- Never use eval.\n- The parser should be lazy. Thanks!")
    pinned = Message("user", (TextPart("Budget: $5 per run."),), pinned=True)
    assert extract_constraints([task, later, pinned]) == [
        "You must keep Python 3.10 support.",
        "Never use eval.",
        "The parser should be lazy.",
        "Budget: $5 per run.",
    ]
    # Past the room given, later constraints win and the task's (kept verbatim anyway) go first.
    assert extract_constraints([task, later, pinned], max_chars=50) == [
        "The parser should be lazy.",
        "Budget: $5 per run.",
    ]
    text = "## Task\n- x\n\n## User constraints (verbatim)\n- (none)\n\n## Done\n- y"
    fixed = ensure_constraints(text, ["Never use eval."])
    assert parse_sections(fixed)["User constraints (verbatim)"] == ["Never use eval."]
    assert parse_sections(fixed)["Done"] == ["y"]
    assert ensure_constraints("free prose", ["Never use eval."]).endswith(
        "## User constraints (verbatim)\n- Never use eval."
    )
    assert ensure_constraints(fixed, ["Never use eval."]) == fixed


def test_transcript_for_an_llm_cuts_long_parts_and_leaves_thinking_out() -> None:
    secret = "I'll quietly decide to skip the tests."
    history = [
        Message.user("task"),
        Message(
            "assistant", (ThinkingPart(secret, signature="sig"), call("1", "Read", {"file_path": "a.py"}))
        ),
        Message("tool", (ToolResultPart("1", "Read", "x" * 5_000),)),
    ]
    assert "skip the tests" not in ExtractiveSummarizer()(history)
    text = render_transcript(history, max_part_chars=100)
    assert "skip the tests" not in text
    assert "[user] task" in text and '[assistant calls Read] {"file_path": "a.py"}' in text
    assert "[4900 more characters]" in text
    assert "{budget}" in SUMMARY_INSTRUCTIONS


# --- the corpus -----------------------------------------------------------------------------------


def test_corpus_sessions_summarized_call_by_call(corpus_session: list[Message]) -> None:
    window = 32_000
    # Truncating when no summary is worth it, so every call ends under the mark or as low as it can
    # go; without it (the default) every call ends under the window or as low as it can go.
    for truncate_instead, limit in ((False, window), (True, window * 0.8)):
        summarize = Summarize(
            trigger=Trigger(max_fraction=0.8), clock=clock, truncate_instead=truncate_instead
        )
        ctx = context(window)
        carried: list[Message] = []
        for carried, _ in carry_forward(summarize, corpus_session, ctx):
            assert check_neutral(carried) == []
            assert len(summaries(carried)) <= 1
            if tokens(carried) > limit:
                assert_nothing_more_can_go(carried)
    view = view_only(Summarize(trigger=Trigger(max_fraction=0.8), clock=clock, truncate_instead=True), ctx)(
        corpus_session
    )
    assert view == carried
    assert_compaction_rules(corpus_session, view)


# --- random histories -----------------------------------------------------------------------------


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    neutral_histories(max_turns=6, max_steps=5),
    st.integers(150, 3_000),
    st.integers(0, 4),
    st.sampled_from([0.4, 0.6, 1.0]),
)
def test_random_histories_keep_every_rule(history: list[Message], budget: int, keep: int, low: float) -> None:
    def make() -> Summarize:
        return Summarize(
            trigger=Trigger(max_tokens=budget, low_water=low),
            keep_last=keep,
            summary_tokens=300,
            min_gain=50,
            clock=clock,
        )

    summarize = make()
    out = view_only(summarize, context(counter=FAST))(history)
    event("summarized" if summaries(out) else ("truncated" if out is not history else "unchanged"))
    assert_compaction_rules(history, out)
    assert len(summaries(out)) <= 1
    assert_replay_properties(history, make(), make, budget, context(counter=FAST))
    if summaries(out):
        marker = the_summary(out).marker
        assert marker is not None and marker.covered_from == next(
            i + 1 for i, m in enumerate(history) if m.role == "user"
        )


# --- native histories -------------------------------------------------------------------------------


REPLAY_TOKENS = 72_000
"""How much of a corpus session the call-by-call replay below takes: three 24,000-token windows,
five chained summaries on the largest sessions. Those three are twice that (145,000 to 171,000
tokens); replaying them whole was most of this file's time, for more of the same summaries."""


def replay_prefix(session: list[Message], tokens: int) -> list[Message]:
    """`session` up to its last assistant message that starts within `tokens`: a prefix an agent
    had sent, ending where a model call is made."""
    counter = TokenCounter()
    seen = 0
    for index, message in enumerate(session):
        if message.role == "assistant" and seen > tokens:
            return session[:index]
        seen += counter.count_message(message)
    return session


@pytest.mark.parametrize(
    "framework", [pytest.param("pydantic-ai", marks=pytest.mark.pydantic_ai), "langchain"]
)
def test_native_histories_persistent_and_view_only_agree(
    corpus_session: list[Message], framework: str
) -> None:
    if framework == "pydantic-ai":
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        adapter: Any = PydanticAIAdapter()
        is_response = "ModelResponse"
    else:
        from historykit.plugins.langchain import LangChainAdapter

        adapter = LangChainAdapter()
        is_response = "AIMessage"
    native = adapter.to_native(replay_prefix(corpus_session, REPLAY_TOKENS))
    points = [i for i, m in enumerate(native) if type(m).__name__ == is_response and i] + [len(native)]
    summarize = Summarize(trigger=Trigger(max_fraction=0.8), clock=clock)
    carried: list[Any] = []
    previous = 0
    for point in points:
        carried = summarize.run(carried + native[previous:point], context_window=24_000).messages
        previous = point
        assert check(carried) == []
    view = (
        Summarize(trigger=Trigger(max_fraction=0.8), clock=clock)
        .run(native, context_window=24_000, mode="view")
        .messages
    )
    assert adapter.to_neutral(view) == adapter.to_neutral(carried)
    if summaries(adapter.to_neutral(view)):
        assert the_summary(adapter.to_neutral(view)).marker is not None


def test_a_summary_in_the_middle_of_a_turn_comes_before_the_turns_request() -> None:
    """When a summary fires inside a tool loop, the model is sent [task, summary, the turn's request,
    the rest of the turn]: the last thing in the user's voice is still what they asked for (as
    Claude Code and LangChain place their summaries), in both modes, and later calls parse it."""
    history = [Message.user("Find the bug in src/."), Message.assistant("On it.")]
    history.append(Message.user("Now fix the failing test in tests/test_io.py."))
    for n in range(30):
        history += exchange(n)
    summarize = Summarize(trigger=Trigger(max_tokens=tokens(history[:40])), keep_last=3, clock=clock)
    views = []
    for step in replay_both_modes(summarize, summarize, history, context()):
        views.append(step.output)
    compacted = [v for v in views if summaries(v)]
    assert compacted, "the summary must fire inside the turn"
    for view in compacted:
        at = next(i for i, m in enumerate(view) if any(isinstance(p, SummaryPart) for p in m.parts))
        requests = [i for i, m in enumerate(view) if m.role == "user" and m.text.startswith("Now fix")]
        assert requests == [at + 1], [m.role for m in view]
        assert the_summary(view).marker.kept_after == 1  # type: ignore[union-attr]
        # The rest of the turn follows it: the exchanges kept verbatim.
        assert view[at + 2].role == "assistant"
    assert check_neutral(compacted[-1]) == []
