"""`before_compaction` / `after_compaction` on the pipeline (`historykit._hooks`).

Checked on direct pipeline calls (the integrations: tests/plugins/test_compaction_hooks_agents.py):
the before-hook is asked once per compaction, before the summarizer is called, with the call's
conversation, sizes, reason and focus; `False` vetoes it (the history stays as given, no summarizer
call, and a vetoed history over the window raises `CompactionVetoedError`); `AdjustCompaction`
gives the summarizer another focus; the after-hook gets the sizes, the markers and the summary; a
step with no summarizer (`ClearToolResults`) is asked about once it changed the history; manual
compactions are `automatic=False`; async hooks are awaited by the async calls and refused by the
sync ones; a hook's exception propagates; view-only mode fires once per compaction, never for one
derived again; one pipeline serving concurrent conversations gives each hook call its own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import (
    AdjustCompaction,
    AfterCompaction,
    BeforeCompaction,
    Pipeline,
    PipelineResult,
    SummaryPart,
)
from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit._view import request_points
from historykit.errors import ArgumentTypeError, CompactionVetoedError, InvalidArgumentError
from historykit.processors import ClearToolResults, PairwiseTruncate, Repair, Summarize, Trigger
from historykit.testing import CountingSummarizer
from tests.strategies import examples, neutral_histories

WINDOW = 100_000
MARK = 1_500
"""Summarize's trigger, in tokens: a few reads cross it."""


def conversation(token: str = "TOKEN", reads: int = 10) -> list[Message]:
    """A task naming `token`, `reads` file reads (about 250 tokens each), a final request."""
    history = [Message.system("Be careful."), Message.user(f"Refactor the {token} module.")]
    for i in range(reads):
        history += [
            Message.assistant(
                f"Reading {token} file {i}.", [ToolCallPart(f"c{i}", "Read", {"path": f"f{i}"})]
            ),
            Message("tool", (ToolResultPart(f"c{i}", "Read", f"{token} line {i}: x = {i}\n" * 25),)),
        ]
    return [*history, Message.assistant("Read them all."), Message.user("Now the tests.")]


class Recorder:
    """Hooks that record every event, answering the before-hook with `answer`."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.before: list[BeforeCompaction] = []
        self.after: list[AfterCompaction] = []

    def on_before(self, event: BeforeCompaction) -> Any:
        self.before.append(event)
        return self.answer(event) if callable(self.answer) else self.answer

    def on_after(self, event: AfterCompaction) -> None:
        self.after.append(event)

    def pipeline(self, summarizer: CountingSummarizer, *steps: Any, **options: Any) -> Pipeline:
        return Pipeline(
            [*steps, summarize(summarizer), Repair()],
            before_compaction=self.on_before,
            after_compaction=self.on_after,
            **options,
        )


def summarize(summarizer: CountingSummarizer | None = None) -> Summarize:
    """Summarize past `MARK`, keeping the last two units; any gain is worth a summary here."""
    chosen = summarizer if summarizer is not None else CountingSummarizer()
    return Summarize(
        trigger=Trigger(max_tokens=MARK), summarizer=chosen, keep_last=2, min_gain=50, summary_tokens=300
    )


def summaries(messages: Sequence[Message]) -> list[SummaryPart]:
    return [p for m in messages for p in m.parts if isinstance(p, SummaryPart)]


def test_the_hooks_fire_once_around_an_automatic_compaction() -> None:
    hooks, summarizer = Recorder(), CountingSummarizer()
    history = conversation()
    result = hooks.pipeline(summarizer).run(history, WINDOW, conversation="user-1")
    (before,) = hooks.before
    (after,) = hooks.after
    report = result.report
    assert before == BeforeCompaction(
        conversation="user-1",
        automatic=True,
        reason="trigger",
        step="Summarize",
        tokens_before=report.tokens_before,
        context_window=WINDOW,
        focus=None,
        mode="persistent",
    )
    (summary,) = summaries(result.messages)
    assert len(summarizer.calls) == 1
    assert after.steps == ("Summarize",)
    assert (after.tokens_before, after.tokens_after) == (report.tokens_before, report.steps[0].tokens_after)
    assert after.tokens_after < after.tokens_before
    assert list(after.markers) == report.markers == [summary.marker]
    assert after.summary == summary.text and "TOKEN" in after.summary
    assert (after.conversation, after.automatic, after.reason, after.focus) == (
        "user-1",
        True,
        "trigger",
        None,
    )


def test_no_compaction_no_hook() -> None:
    hooks, summarizer = Recorder(), CountingSummarizer()
    small = conversation(reads=2)
    result = hooks.pipeline(summarizer).run(small, WINDOW)
    assert not result.report.changed
    assert hooks.before == hooks.after == []


def test_a_veto_leaves_the_history_and_calls_no_summarizer() -> None:
    hooks, summarizer = Recorder(answer=False), CountingSummarizer()
    history = conversation()
    result = hooks.pipeline(summarizer).run(history, WINDOW, conversation="c")
    assert len(hooks.before) == 1 and hooks.after == []
    assert summarizer.calls == []
    assert all(a is b for a, b in zip(result.messages, history, strict=True))
    assert result.report.markers == []
    assert "vetoed" in str(result.report)
    # The next call over the mark asks again: a veto holds for its call.
    hooks.pipeline(summarizer).run(history, WINDOW, conversation="c")
    assert len(hooks.before) == 2


def test_a_veto_that_would_overflow_the_window_raises() -> None:
    hooks, summarizer = Recorder(answer=False), CountingSummarizer()
    history = conversation()
    pipeline = hooks.pipeline(summarizer)
    tokens = pipeline.run(history, WINDOW).report.tokens_before
    with pytest.raises(CompactionVetoedError, match=r"on_before vetoed .* over the 2,000-token") as raised:
        pipeline.run(history, 2_000)
    assert f"{tokens:,} tokens" in str(raised.value)
    assert summarizer.calls == []
    # Proceeding instead: the compacted history fits.
    hooks.answer = None
    assert pipeline.run(history, 2_000).report.tokens_after <= 2_000


def test_an_adjusted_focus_reaches_the_summarizer_and_the_marker() -> None:
    hooks = Recorder(answer=AdjustCompaction(focus="  keep file 3  "))
    summarizer = CountingSummarizer()
    result = hooks.pipeline(summarizer).run(conversation(), WINDOW)
    assert summarizer.focuses == ["keep file 3"]
    (summary,) = summaries(result.messages)
    assert summary.marker is not None
    assert (summary.marker.automatic, summary.marker.focus) == (True, "keep file 3")
    assert "keep file 3" in summary.text
    (after,) = hooks.after
    assert after.focus == "keep file 3"


def test_manual_compaction_is_not_automatic_and_its_focus_can_be_replaced() -> None:
    small = conversation(reads=3)  # far under the mark: only a request compacts it
    hooks, summarizer = Recorder(), CountingSummarizer()
    hooks.pipeline(summarizer).compact(small, WINDOW, focus="the tests", conversation="m")
    (before,) = hooks.before
    assert (before.automatic, before.reason, before.focus, before.step) == (
        False,
        "manual",
        "the tests",
        "Summarize",
    )
    assert summarizer.focuses == ["the tests"]
    (after,) = hooks.after
    assert after.markers[0].automatic is False and after.summary is not None

    replaced = Recorder(answer=lambda event: AdjustCompaction(focus=f"{event.focus} and the docs"))
    summarizer = CountingSummarizer()
    result = replaced.pipeline(summarizer).compact(small, WINDOW, focus="the tests")
    assert summarizer.focuses == ["the tests and the docs"]
    assert result.report.markers[0].focus == "the tests and the docs"

    vetoed = Recorder(answer=False)
    summarizer = CountingSummarizer()
    result = vetoed.pipeline(summarizer).compact(small, WINDOW, focus="the tests")
    assert summarizer.calls == [] and vetoed.after == []
    assert all(a is b for a, b in zip(result.messages, small, strict=True))


def test_a_step_without_summarizer_is_asked_about_once_it_changed_the_history() -> None:
    clear = ClearToolResults(trigger=Trigger(max_tokens=MARK), keep=1, min_gain=1)
    history = conversation()
    hooks, summarizer = Recorder(), CountingSummarizer()
    result = hooks.pipeline(summarizer, clear).run(history, WINDOW)
    (before,) = hooks.before  # once for the call, though two steps may compact
    assert before.step == "ClearToolResults"
    (after,) = hooks.after
    assert after.steps[0] == "ClearToolResults"
    assert after.tokens_after == result.report.tokens_after

    vetoed, summarizer = Recorder(answer=False), CountingSummarizer()
    result = vetoed.pipeline(summarizer, clear).run(history, WINDOW)
    assert [e.step for e in vetoed.before] == ["ClearToolResults"]
    assert summarizer.calls == [] and vetoed.after == []
    assert all(a is b for a, b in zip(result.messages, history, strict=True))


def test_async_hooks_are_awaited_and_refused_by_sync_calls() -> None:
    seen: list[str] = []

    async def before(event: BeforeCompaction) -> AdjustCompaction:
        await asyncio.sleep(0)
        seen.append(f"before {event.conversation}")
        return AdjustCompaction(focus="async focus")

    async def after(event: AfterCompaction) -> None:
        await asyncio.sleep(0)
        seen.append(f"after {event.conversation}")

    summarizer = CountingSummarizer()
    pipeline = Pipeline([summarize(summarizer)], before_compaction=before, after_compaction=after)
    asyncio.run(pipeline.arun(conversation(), WINDOW, conversation="a"))
    assert seen == ["before a", "after a"] and summarizer.focuses == ["async focus"]

    with pytest.raises(ArgumentTypeError, match=r"before_compaction hook .*before is async"):
        pipeline.run(conversation(), WINDOW)

    def returns_a_coroutine(event: BeforeCompaction) -> Any:
        return before(event)

    sneaky = Pipeline([summarize()], before_compaction=returns_a_coroutine)
    with pytest.raises(ArgumentTypeError, match="returns_a_coroutine is async"):
        sneaky.run(conversation(), WINDOW)


def test_bad_hooks_and_bad_answers_are_clear_errors() -> None:
    with pytest.raises(ArgumentTypeError, match="before_compaction must be a function"):
        Pipeline([Summarize()], before_compaction="no")  # type: ignore[arg-type]
    pipeline = Recorder(answer="yes").pipeline(CountingSummarizer())
    with pytest.raises(ArgumentTypeError, match=r"returned 'yes': return None \(or True\) to proceed, False"):
        pipeline.run(conversation(), WINDOW)


def test_a_hook_that_raises_fails_the_call_and_nothing_is_remembered() -> None:
    calls = 0

    def before(event: BeforeCompaction) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the backup failed")

    summarizer = CountingSummarizer()
    pipeline = Pipeline([summarize(summarizer)], before_compaction=before)
    history = conversation()
    # View-only, call by call: the first call over the mark fails.
    points = iter(_calls(history))
    with pytest.raises(RuntimeError, match="the backup failed"):
        for point in points:
            pipeline.run(history[:point], WINDOW, mode="view", conversation="v")
    assert summarizer.calls == [] and calls == 1
    # Nothing was remembered for that call: it is derived again on the next try, which asks
    # again and compacts.
    result = pipeline.run(history[:point], WINDOW, mode="view", conversation="v")
    assert result.report.replayed_calls == 1
    assert calls == 2 and len(summaries(result.messages)) == 1

    def after(event: AfterCompaction) -> None:
        raise RuntimeError("the archive is down")

    failing = Pipeline([summarize()], after_compaction=after)
    with pytest.raises(RuntimeError, match="the archive is down"):
        failing.run(history, WINDOW)


def _calls(raw: list[Message]) -> list[int]:
    """The prefixes of `raw` that are model calls (a conversation played call by call)."""
    return request_points(raw)


def _play(pipeline: Pipeline, raw: list[Message], mode: str, key: str) -> list[PipelineResult[Message]]:
    """Every model call of `raw`, in `mode`: view-only gets the raw prefix; persistent the kept
    history plus what arrived since."""
    results = []
    kept: list[Message] = []
    start = 0
    for point in _calls(raw):
        given = raw[:point] if mode == "view" else [*kept, *raw[start:point]]
        result = pipeline.run(given, WINDOW, mode=mode, conversation=key)  # type: ignore[arg-type]
        kept, start = result.history, point
        results.append(result)
    return results


def test_view_only_fires_once_per_compaction_like_persistent_and_never_on_a_replay() -> None:
    raw = conversation(reads=30)
    fired: dict[str, int] = {}
    for mode in ("persistent", "view"):
        hooks, summarizer = Recorder(), CountingSummarizer()
        results = _play(hooks.pipeline(summarizer), raw, mode, "k")
        compactions = [r for r in results if r.report.markers]
        assert len(compactions) >= 3, "the conversation must compact several times"
        assert len(hooks.before) == len(hooks.after) == len(compactions) == len(summarizer.calls)
        assert [a.markers for a in hooks.after] == [tuple(r.report.markers) for r in compactions]
        assert {e.mode for e in hooks.before} == {mode}
        fired[mode] = len(hooks.before)
    assert fired["persistent"] == fired["view"]

    # A new process (empty caches) replays the stored raw history: the earlier compactions are
    # derived again without a hook; only the call being made may ask.
    hooks, summarizer = Recorder(), CountingSummarizer()
    last = hooks.pipeline(summarizer).run(raw, WINDOW, mode="view", conversation="k")
    assert last.report.replayed_calls == len(_calls(raw))
    assert len(summarizer.calls) >= 3
    assert len(hooks.before) <= 1 and len(hooks.after) <= 1
    # The same call again: a view seen before, no compaction and no hook.
    again = hooks.pipeline(summarizer).run(raw, WINDOW, mode="view", conversation="k")
    assert again.report.replayed_calls in (0, len(_calls(raw)))  # another pipeline: its own caches
    pipeline = hooks.pipeline(summarizer)
    pipeline.run(raw, WINDOW, mode="view", conversation="k")
    before = len(hooks.before)
    assert pipeline.run(raw, WINDOW, mode="view", conversation="k").report.replayed_calls == 0
    assert len(hooks.before) == before


def test_one_pipeline_gives_concurrent_conversations_their_own_hook_calls() -> None:
    tokens = [f"TOKEN{n:02d}X{uuid.uuid4().hex[:6]}" for n in range(24)]
    befores: dict[str, list[BeforeCompaction]] = {t: [] for t in tokens}
    afters: dict[str, list[AfterCompaction]] = {t: [] for t in tokens}

    async def before(event: BeforeCompaction) -> AdjustCompaction:
        await asyncio.sleep(0)  # other conversations run here
        assert isinstance(event.conversation, str)
        befores[event.conversation].append(event)
        return AdjustCompaction(focus=f"focus of {event.conversation}")

    async def after(event: AfterCompaction) -> None:
        await asyncio.sleep(0)
        assert isinstance(event.conversation, str)
        afters[event.conversation].append(event)

    summarizer = CountingSummarizer()
    pipeline = Pipeline([summarize(summarizer), Repair()], before_compaction=before, after_compaction=after)

    async def one(token: str, mode: str) -> None:
        raw = conversation(token, reads=16)
        kept: list[Message] = []
        start = 0
        for point in _calls(raw):
            await asyncio.sleep(0)
            given = raw[:point] if mode == "view" else [*kept, *raw[start:point]]
            result = await pipeline.arun(given, WINDOW, mode=mode, conversation=token)  # type: ignore[arg-type]
            kept, start = result.history, point

    async def everything() -> None:
        await asyncio.gather(*(one(t, "view" if i % 2 else "persistent") for i, t in enumerate(tokens)))

    asyncio.run(everything())
    for token in tokens:
        assert befores[token] and len(befores[token]) == len(afters[token])
        for event in afters[token]:
            assert event.summary is not None and token in event.summary
            assert f"focus of {token}" in event.summary
            others = [t for t in tokens if t != token and t in event.summary]
            assert others == [], f"{token}'s summary holds {others}"


def test_integration_hooks_and_pipeline_hooks_are_not_both_given() -> None:
    from historykit.plugins.langchain import HistoryKitMiddleware

    pipeline = Pipeline([Summarize()], before_compaction=lambda event: None)
    with pytest.raises(InvalidArgumentError, match="given to both the integration and its pipeline"):
        HistoryKitMiddleware(pipeline, after_compaction=lambda event: None)
    HistoryKitMiddleware(pipeline)  # the pipeline's own hooks serve it


@given(history=neutral_histories(), veto=st.booleans(), mark=st.integers(min_value=50, max_value=3_000))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hooks_on_random_histories(history: list[Message], veto: bool, mark: int) -> None:
    """Any history: the before-hook is asked at most once per call and only when a step would
    change it; a veto leaves the kept history exactly as given; the after-hook fires exactly when
    the compacting steps changed it, with the sizes the report has."""
    hooks = Recorder(answer=False if veto else None)
    steps = [
        ClearToolResults(trigger=Trigger(max_tokens=mark), keep=1, min_gain=1),
        Summarize(trigger=Trigger(max_tokens=mark), summarizer=CountingSummarizer(), keep_last=1),
        PairwiseTruncate(trigger=Trigger(max_tokens=mark)),
        Repair(),
    ]
    pipeline = Pipeline(steps, before_compaction=hooks.on_before, after_compaction=hooks.on_after)
    quiet = Pipeline(steps).run(history, WINDOW)
    result = pipeline.run(history, WINDOW)
    compacted = result.history is not history and any(
        s.changed for s in quiet.report.steps if s.processor != "Repair"
    )
    assert len(hooks.before) <= 1
    if veto:
        assert hooks.after == []
        assert len(result.history) == len(history)
        assert all(a is b for a, b in zip(result.history, history, strict=True))
        assert len(hooks.before) == int(any(s.changed for s in quiet.report.steps if s.processor != "Repair"))
    else:
        assert result.messages == quiet.messages
        assert len(hooks.after) == int(compacted)
        assert len(hooks.before) >= len(hooks.after)
        for event in hooks.after:
            assert event.tokens_before == result.report.tokens_before
            assert list(event.markers) == [
                m for s in result.report.steps if s.processor != "Repair" for m in s.notes.markers
            ]


class _Refused(Exception):
    """A provider's HTTP 400 for a request too long for its window."""

    status_code = 400


def test_compact_and_retry_after_an_overflow_asks_with_reason_overflow() -> None:
    from historykit._context_window import ContextWindow
    from historykit._pipeline import Call
    from historykit.plugins._overflow import recompact

    history = conversation()
    roomy = Summarize(summarizer=CountingSummarizer(), min_gain=50, summary_tokens=300)  # 80% of the window
    error = _Refused("prompt is too long: 2900 tokens > 2000 maximum")
    for answer in (None, False):
        hooks = Recorder(answer=answer)
        pipeline = Pipeline(
            [roomy, Repair()], before_compaction=hooks.on_before, after_compaction=hooks.on_after
        )
        call = Call(ContextWindow(WINDOW, "explicit"), conversation="o")
        sent = pipeline.run_call(history, call)
        assert not sent.report.changed and hooks.before == []  # far under the window's mark
        if answer is None:
            retried = recompact(pipeline, history, error, call, sent.messages)
            assert retried is not None and retried.report.tokens_after <= 2_000
            (before,) = hooks.before
            assert (before.reason, before.automatic, before.conversation) == ("overflow", True, "o")
            assert before.context_window < 2_000 and len(hooks.after) == 1
        else:
            # Vetoed: the provider refused this history already; it is not sent again.
            with pytest.raises(CompactionVetoedError, match="vetoed"):
                recompact(pipeline, history, error, call, sent.messages)
            assert [e.reason for e in hooks.before] == ["overflow"] and hooks.after == []


def test_an_output_offloaded_as_it_arrives_is_no_compaction_and_stays_on_a_veto() -> None:
    from historykit.processors import OffloadToolOutputs

    def with_huge_output(reads: int) -> list[Message]:
        """`conversation(reads=reads)` whose last read returned 900 lines (3 + 2i: read i's output)."""
        history = conversation(reads=reads)
        log = "".join(f"log line {i}\n" for i in range(900))
        history[1 + 2 * reads] = Message("tool", (ToolResultPart(f"c{reads - 1}", "Read", log),))
        return history

    offload = OffloadToolOutputs(max_tokens=600, keep_tokens=200)
    quiet = Recorder()
    result = quiet.pipeline(CountingSummarizer(), offload).run(with_huge_output(2), WINDOW)
    assert result.report.steps[0].changed and result.report.tokens_after < MARK  # shortened, no more
    assert quiet.before == quiet.after == []

    # A history the summary is due on: the veto stops the compaction, not the offload.
    vetoing, summarizer = Recorder(answer=False), CountingSummarizer()
    result = vetoing.pipeline(summarizer, offload).run(with_huge_output(10), WINDOW)
    assert [e.step for e in vetoing.before] == ["Summarize"] and vetoing.after == []
    assert summarizer.calls == [] and result.report.steps[0].changed
    assert result.report.markers == [m for m in result.report.steps[0].notes.markers]
    assert "vetoed" in str(result.report)
