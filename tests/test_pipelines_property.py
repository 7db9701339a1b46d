"""Random pipelines of the six processors on random valid histories of every framework (neutral,
Pydantic AI, LangChain), with tight budgets: the output is always valid (`check()`), keeps the system
prompt, the final request and the user's latest request, and leaves the thinking of its current
tool-use cycle unmodified."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, check
from historykit._frameworks import adapter_for
from historykit._messages import Message, TextPart, ThinkingPart, ToolResultPart
from historykit._pipeline import HistoryProcessor
from historykit._validity import current_cycle_start, final_request_start
from historykit.processors import (
    ClearMedia,
    ClearToolResults,
    DedupeFileReads,
    OffloadToolOutputs,
    PairwiseTruncate,
    Repair,
    StripThinking,
    Summarize,
)
from historykit.processors._offload_tool_outputs import is_offloaded
from historykit.processors._trigger import Trigger
from historykit.processors._turns import is_user_request
from tests.strategies import examples, neutral_histories

EXAMPLES = settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))

fractions = st.floats(0.05, 0.9)
low_waters = st.floats(0.2, 1.0)
gains = st.one_of(st.none(), st.integers(0, 400))
recall_tools = st.sampled_from((None, "recall"))
"""Placeholders as they read with the recall tool installed, or without it."""


def _trigger(draw: st.DrawFn) -> Trigger:
    return Trigger(max_fraction=draw(fractions), low_water=draw(low_waters))


def _maybe_trigger(draw: st.DrawFn) -> Trigger | None:
    return _trigger(draw) if draw(st.booleans()) else None


@st.composite
def processors(draw: st.DrawFn) -> list[HistoryProcessor]:
    """A random order of a random non-empty subset of the six, each with a tight random budget."""
    made: dict[str, Callable[[], HistoryProcessor]] = {
        "media": lambda: ClearMedia(
            keep=draw(st.integers(0, 3)),
            max_bytes=draw(st.one_of(st.none(), st.integers(0, 100))),
            batch=draw(st.integers(1, 3)),
        ),
        "dedupe": lambda: DedupeFileReads(
            min_gain=draw(st.integers(0, 400)), trigger=_maybe_trigger(draw), recall_tool=draw(recall_tools)
        ),
        "clear": lambda: ClearToolResults(
            keep=draw(st.integers(0, 3)),
            min_tokens=draw(st.integers(1, 100)),
            min_gain=draw(gains),
            clear_tool_inputs=draw(st.booleans()),
            trigger=_trigger(draw),
            recall_tool=draw(recall_tools),
        ),
        "offload": lambda: OffloadToolOutputs(
            max_tokens=(limit := draw(st.integers(2, 300))),
            keep_tokens=draw(st.integers(1, limit - 1)),
            recall_tool=draw(recall_tools),
        ),
        "strip": lambda: StripThinking(
            keep_turns=draw(st.integers(0, 2)),
            trigger=_maybe_trigger(draw),
            min_gain=draw(gains),
        ),
        "truncate": lambda: PairwiseTruncate(
            trigger=Trigger(max_fraction=draw(fractions), low_water=draw(low_waters))
        ),
        "summarize": lambda: Summarize(
            trigger=Trigger(max_fraction=draw(fractions), low_water=draw(low_waters)),
            keep_last=draw(st.integers(0, 6)),
            summary_tokens=draw(st.integers(20, 400)),
            min_gain=draw(st.integers(0, 400)),
        ),
    }
    names = draw(st.lists(st.sampled_from(sorted(made)), min_size=1, max_size=6, unique=True))
    steps = [made[name]() for name in names]
    if draw(st.booleans()):
        steps.append(Repair())
    return steps


windows = st.integers(300, 6_000)


def _system_texts(messages: list[Message]) -> set[str]:
    return {
        p.text
        for m in messages
        if m.role == "system"
        for p in m.parts
        if isinstance(p, TextPart) and type(p.native).__name__ != "RequestInstructions"
    }


def _thinking(msg: Message) -> list[tuple[Any, ...]]:
    return [(p.text, p.signature, p.id, p.redacted) for p in msg.parts if isinstance(p, ThinkingPart)]


def _key(msg: Message) -> tuple[Any, ...]:
    calls = tuple(c.id for c in msg.tool_calls)
    return ("calls", calls) if calls else ("text", msg.text)


def assert_kept_what_matters(
    before_native: Sequence[Any], after_native: Sequence[Any], same: Callable[[Any, Any], bool]
) -> None:
    """The rules every output keeps, read on the neutral views of both histories.

    `same(a, b)` says whether two neutral messages are the same message (native identity for a
    framework, equality for neutral histories)."""
    adapter = adapter_for(before_native)
    before = adapter.to_neutral(before_native)
    after = adapter.to_neutral(after_native) if after_native else []
    assert after, "a processed history is never empty"
    if not check(before_native):
        assert check(after_native) == []
    # The system prompt: every system text is still there (Pydantic AI's per-request instructions
    # are the request's: a provider only ever gets the latest request's, which is kept).
    assert _system_texts(before) <= _system_texts(after)
    # The final request is kept, message for message, at the end; only when it alone is over the
    # window may `PairwiseTruncate(fit_final_request=True)` cut the middle out of its tool results.
    final = final_request_start(before)
    tail = before[final:]
    if tail:
        assert len(after) >= len(tail)
        for a, b in zip(after[len(after) - len(tail) :], tail):
            assert same(a, b) or _shortened(a, b), "the final request was changed"
    # The user's latest request is kept.
    requests = [m for m in before if is_user_request(m)]
    if requests:
        assert any(same(m, requests[-1]) for m in after)
    # The thinking of the output's current tool-use cycle is the input's, unmodified.
    originals: dict[tuple[Any, ...], list[list[tuple[Any, ...]]]] = {}
    for msg in before:
        if msg.role == "assistant":
            originals.setdefault(_key(msg), []).append(_thinking(msg))
    for msg in after[current_cycle_start(after) :]:
        if msg.role == "assistant":
            assert _thinking(msg) in originals.get(_key(msg), []), "thinking in the current cycle was changed"
    event("compacted" if len(after) < len(before) else "same length")


@EXAMPLES
@given(neutral_histories(max_turns=5, max_steps=4), processors(), windows)
def test_neutral_histories(history: list[Message], steps: list[HistoryProcessor], window: int) -> None:
    out = Pipeline(steps).run(history, context_window=window).messages
    assert_kept_what_matters(history, out, _same_content)


CUT_NOTE_START = "\n\n[historykit: about "
"""How the line `fit_final_request` puts where it cut a tool result begins."""


def _shortened(after: Any, before: Any) -> bool:
    """`after` is `before` with the middle cut out of tool results (`fit_final_request`): the same
    parts, each result's head and tail kept around the note that says what was cut."""
    adapter = adapter_for([before])
    a, b = adapter.to_neutral([after])[0], adapter.to_neutral([before])[0]
    if a.role != b.role or len(a.parts) != len(b.parts):
        return False
    for x, y in zip(a.parts, b.parts):
        if x == y:
            continue
        if not (isinstance(x, ToolResultPart) and isinstance(y, ToolResultPart)):
            return False
        if is_offloaded(x.content):  # `OffloadToolOutputs`: head, a gap line, tail, the note
            body = x.content.rsplit("\n", 1)[0]
            head, gap, rest = body.partition("[… ")
            tail = rest.partition(" …]")[2]
            if not gap or replace(x, content=y.content) != y:
                return False
            if not (y.content.startswith(head[:-1]) and y.content.endswith(tail[1:])):
                return False
            continue
        head, note, tail = x.content.partition(CUT_NOTE_START)
        if not note or replace(x, content=y.content) != y:
            return False
        if not (y.content.startswith(head) and y.content.endswith(tail.partition("]\n\n")[2])):
            return False
    return True


def _same_content(a: Message, b: Message) -> bool:
    # Neutral equality ignores the native objects: the same role and the same parts.
    return a.role == b.role and a.parts == b.parts


@pytest.mark.pydantic_ai
@EXAMPLES
@given(st.data(), processors(), windows)
def test_pydantic_ai_histories(data: st.DataObject, steps: list[HistoryProcessor], window: int) -> None:
    from tests.plugins.pydantic_ai_histories import pydantic_ai_histories

    history = data.draw(pydantic_ai_histories(min_turns=1, max_turns=6))
    out = Pipeline(steps).run(history, context_window=window).messages
    assert_kept_what_matters(history, out, _same_content)
    # The request the model is about to answer is the very same object (or, with its tool outputs
    # shortened when they arrived, the same request).
    assert out[-1] is history[-1] or _shortened_request(steps, out[-1], history[-1])


@EXAMPLES
@given(st.data(), processors(), windows)
def test_langchain_histories(data: st.DataObject, steps: list[HistoryProcessor], window: int) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, SystemMessage

    from tests.plugins.langchain_histories import langchain_histories

    history = data.draw(langchain_histories(min_turns=1, max_turns=4))
    out = Pipeline(steps).run(history, context_window=window).messages
    assert_kept_what_matters(history, out, _same_content)
    # The final request (the trailing tool results or user message) is the very same objects.
    final = len(history)
    while final > 0 and not isinstance(history[final - 1], (AIMessage, SystemMessage)):
        final -= 1
    assert all(
        a is b or _shortened_request(steps, a, b)
        for a, b in zip(out[len(out) - (len(history) - final) :], history[final:])
    )


def _shortened_request(steps: list[HistoryProcessor], after: Any, before: Any) -> bool:
    """`after` is `before` with tool outputs shortened by an `OffloadToolOutputs` of the pipeline."""
    return any(isinstance(step, OffloadToolOutputs) for step in steps) and _shortened(after, before)
