"""`Summarize` with a chain of summarizers (fallback in order, each with its retries; the marker
names the one that wrote the summary; each failure logged once) and with background summaries
(started under the trigger, used by the call that fires: the same views as the foreground)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timezone

import pytest
import tenacity
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.messages import TextPart as PaiTextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from historykit._messages import Message, SummaryPart
from historykit._pipeline import ProcessContext, StepNotes
from historykit.plugins.pydantic_ai import PydanticAISummarizer
from historykit.processors._summarize import Summarize
from historykit.processors._summarizers import ExtractiveSummarizer
from historykit.processors._trigger import Trigger
from historykit.processors._turns import notice_count

from .support import agent_session, assert_compaction_rules, context, exchange, request_points, tokens

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
NO_WAIT = tenacity.wait_none()


def clock() -> datetime:
    return WHEN


def summaries(messages: list[Message]) -> list[SummaryPart]:
    return [p for m in messages for p in m.parts if isinstance(p, SummaryPart)]


class Down:
    """A sync summarizer that always fails."""

    model_name = "weak-model"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        raise RuntimeError("weak model overloaded")


class ADown:
    """An async summarizer that always fails (no `model_name`: named by its class)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        await asyncio.sleep(0)
        raise TimeoutError("timed out")


class Works:
    """A summarizer (sync or async) that writes the extractive summary and records when it ran."""

    def __init__(self, model_name: str = "strong-model", delay: float = 0.0) -> None:
        self.model_name = model_name
        self.delay = delay
        self.calls: list[list[Message]] = []
        self.at: list[int] = []
        """The value of `clock_calls` (pipeline calls begun so far) at each call."""
        self.clock_calls = 0
        self.inner = ExtractiveSummarizer()

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls.append(list(messages))
        self.at.append(self.clock_calls)
        if self.delay:
            time.sleep(self.delay)
        return self.inner(messages)


class AWorks(Works):
    async def __call__(self, messages: Sequence[Message]) -> str:  # type: ignore[override]
        self.calls.append(list(messages))
        self.at.append(self.clock_calls)
        await asyncio.sleep(self.delay)
        return self.inner(messages)


def session() -> list[Message]:
    return agent_session(16)


# --- chains -----------------------------------------------------------------------------------------


def test_a_chain_falls_back_to_the_next_summarizer_and_the_marker_names_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = session()
    weak, strong = Down(), Works()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        summarizer=[weak, strong],
        attempts=2,
        retry_wait=NO_WAIT,
        clock=clock,
    )
    with caplog.at_level(logging.WARNING, logger="historykit"):
        out, notes = summarize.process(history, context())
    assert weak.calls == 2 and len(strong.calls) == 1  # each with its own attempts
    [summary] = summaries(out)
    assert summary.marker is not None and summary.marker.model == "strong-model"
    assert notes.markers == [summary.marker]
    assert any("weak-model: RuntimeError: weak model overloaded after 2 attempts" in d for d in notes.details)
    assert_compaction_rules(history, out)
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert record.name.startswith("historykit")
    assert "weak-model" in record.getMessage() and "trying strong-model next" in record.getMessage()


def test_the_first_summarizer_that_works_writes_and_the_rest_are_not_called() -> None:
    history = session()
    first, second = Works("cheap-model"), Works("reliable-model")
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=(first, second), retry_wait=NO_WAIT
    )
    out, _ = summarize.process(history, context())
    assert len(first.calls) == 1 and second.calls == []
    assert summaries(out)[0].marker.model == "cheap-model"  # type: ignore[union-attr]


async def test_an_async_chain_logs_each_failure_once_per_cause_then_truncates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adown, down = ADown(), Down()
    summarize = Summarize(
        trigger=Trigger(max_tokens=1_000), summarizer=[adown, down], attempts=3, retry_wait=NO_WAIT
    )
    with caplog.at_level(logging.WARNING, logger="historykit"):
        for steps in (12, 14):  # two compactions, the same causes
            history = agent_session(steps)
            out, notes = await summarize.aprocess(history, context())
            assert summaries(out) == [] and any(notice_count(m) for m in out)
            assert_compaction_rules(history, out)
            assert any("ADown: TimeoutError: timed out after 3 attempts" in d for d in notes.details)
    assert adown.calls == 6 and down.calls == 6
    messages = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(messages) == 2
    assert "ADown" in messages[0] and "trying weak-model next" in messages[0]
    assert "weak-model" in messages[1] and "truncating instead" in messages[1]


async def test_a_sync_summarizer_after_an_async_one_in_the_async_path() -> None:
    history = session()
    adown, strong = ADown(), Works()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=[adown, strong], retry_wait=NO_WAIT
    )
    out, _ = await summarize.aprocess(history, context())
    assert adown.calls == 3 and len(strong.calls) == 1
    assert summaries(out)[0].marker.model == "strong-model"  # type: ignore[union-attr]


def test_a_plain_function_in_a_chain_is_named_by_its_qualified_name() -> None:
    history = session()

    def my_summarizer(messages: Sequence[Message]) -> str:
        return ExtractiveSummarizer()(messages)

    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        summarizer=[Down(), my_summarizer],
        retry_wait=NO_WAIT,
    )
    out, _ = summarize.process(history, context())
    marker = summaries(out)[0].marker
    assert marker is not None and marker.model is not None and marker.model.endswith("my_summarizer")
    # The extractive summarizer says it is no model, in a chain too.
    extractive = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), summarizer=[Down(), ExtractiveSummarizer()]
    )
    extractive.retry_wait = NO_WAIT
    assert summaries(extractive.process(history, context())[0])[0].marker.model is None  # type: ignore[union-attr]


def _function_model(name: str, fails: bool) -> tuple[FunctionModel, list[int]]:
    calls: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(len(messages))
        if fails:
            raise RuntimeError(f"{name} is down")
        return ModelResponse(
            parts=[PaiTextPart(f"## Task\n- written by {name}\n\n## Done\n- read the files")]
        )

    return FunctionModel(respond, model_name=name), calls


async def test_a_chain_of_pydantic_ai_models() -> None:
    history = session()
    weak, weak_calls = _function_model("weak-fn", fails=True)
    strong, strong_calls = _function_model("strong-fn", fails=False)
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1),
        model=[weak, strong],
        attempts=2,
        retry_wait=NO_WAIT,
        clock=clock,
    )
    assert [s.model_name for s in summarize.summarizers] == ["weak-fn", "strong-fn"]  # type: ignore[attr-defined]
    out, notes = await summarize.aprocess(history, context())
    assert len(weak_calls) == 2 and len(strong_calls) == 1
    [summary] = summaries(out)
    assert "written by strong-fn" in summary.text and summary.marker is not None
    assert summary.marker.model == "strong-fn"
    assert any("weak-fn" in d for d in notes.details)
    # From sync code too (the async adapters run on historykit's background loop).
    again = Summarize(
        trigger=Trigger(max_tokens=tokens(history) - 1), model=(weak, strong), attempts=1, retry_wait=NO_WAIT
    )
    assert summaries(again.process(history, context())[0])[0].marker.model == "strong-fn"  # type: ignore[union-attr]


def test_model_names_make_a_chain_of_pydantic_ai_summarizers() -> None:
    summarize = Summarize(model=["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"], summary_tokens=500)
    assert all(isinstance(s, PydanticAISummarizer) for s in summarize.summarizers)
    assert [s.model_name for s in summarize.summarizers] == [  # type: ignore[attr-defined]
        "openai:gpt-4o-mini",
        "anthropic:claude-haiku-4-5",
    ]
    assert summarize.model_name == "openai:gpt-4o-mini"
    assert all(s.budget_tokens == 500 for s in summarize.summarizers)  # type: ignore[attr-defined]
    # One name is one summarizer, as before.
    assert len(Summarize(model="openai:gpt-4o-mini").summarizers) == 1


def test_bad_chains_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="summarizer is an empty list"):
        Summarize(summarizer=[])
    with pytest.raises(ValueError, match="model is an empty list"):
        Summarize(model=())
    with pytest.raises(TypeError, match="summarizer 1 must be a callable taking messages, got a int"):
        Summarize(summarizer=[Works(), 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="model must be a Pydantic AI model name"):
        Summarize(model=["openai:gpt-4o-mini", 3])
    for bad in (0, 1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="background_at must be a fraction in"):
            Summarize(background_at=bad)  # type: ignore[arg-type]


# --- background summaries ---------------------------------------------------------------------------

LONG = 48
"""Exchanges in the long replay: several compactions at the mark below."""
HIGH = 6_000


def _long_session() -> list[Message]:
    return agent_session(LONG, lines=30)


def _fired(notes: StepNotes) -> bool:
    return bool(notes.markers)


Replay = tuple[list[list[Message]], list[bool], list[list[str]]]
"""The view, whether it compacted, and the notes' details of every call."""


async def _replay_async(
    summarize: Summarize, summarizer: Works, history: list[Message], ctx: ProcessContext
) -> Replay:
    """Persistent mode, call by call, with the agent's work between calls (the event loop runs)."""
    carried: list[Message] = []
    last = 0
    views: list[list[Message]] = []
    fired: list[bool] = []
    details: list[list[str]] = []
    for index, point in enumerate(request_points(history)):
        summarizer.clock_calls = index
        carried, notes = await summarize.aprocess(carried + history[last:point], ctx)
        last = point
        views.append(carried)
        fired.append(_fired(notes))
        details.append(notes.details)
        await asyncio.sleep(0.002)  # the model call and the tools: background work runs here
    return views, fired, details


async def test_background_summaries_give_the_same_views_and_run_before_the_call_that_fires() -> None:
    history = _long_session()
    ctx = context()
    plain = AWorks()
    foreground = Summarize(trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=plain, clock=clock)
    ahead = AWorks()
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=ahead, clock=clock, background_at=0.5
    )
    views, fired, _ = await _replay_async(foreground, plain, history, ctx)
    bg_views, bg_fired, bg_details = await _replay_async(background, ahead, history, ctx)
    assert sum(fired) >= 3, "the replay must compact several times"
    assert bg_views == views and bg_fired == fired
    used = [i for i, d in enumerate(bg_details) if any("written in the background" in x for x in d)]
    assert used, "no compaction used its background summary"
    # The summary a firing call used was asked for by an earlier call, with the very same inputs.
    for index in used:
        [summary] = [p for p in summaries(bg_views[index]) if p.marker and p.marker.covered_to > 0][-1:]
        calls = [at for at, inputs in zip(ahead.at, ahead.calls) if ahead.inner(inputs) in summary.text]
        assert calls and min(calls) < index
    # Every foreground summary is among the background instance's calls (no different spans).
    foreground_inputs = plain.calls
    assert all(inputs in ahead.calls for inputs in foreground_inputs)
    started = sum(any("started a background summary" in x for x in d) for d in bg_details)
    assert len(ahead.calls) <= len(plain.calls) + started


def test_background_summaries_from_sync_code_run_in_a_thread() -> None:
    history = _long_session()
    ctx = context()
    plain, ahead = Works(), Works(delay=0.001)
    foreground = Summarize(trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=plain, clock=clock)
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=ahead, clock=clock, background_at=0.5
    )
    carried: list[Message] = []
    bg_carried: list[Message] = []
    last = 0
    used = 0
    for index, point in enumerate(request_points(history)):
        new = history[last:point]
        last = point
        carried, _ = foreground.process(carried + new, ctx)
        ahead.clock_calls = index
        bg_carried, notes = background.process(bg_carried + new, ctx)
        assert bg_carried == carried, f"the views differ at call {index}"
        used += any("written in the background" in d for d in notes.details)
        time.sleep(0.003)
    assert used >= 1


async def test_view_only_mode_with_background_summaries_gives_the_persistent_views() -> None:
    history = _long_session()
    ctx = context()
    plain = AWorks()
    views, _, _ = await _replay_async(
        Summarize(trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=plain, clock=clock),
        plain,
        history,
        ctx,
    )
    ahead = AWorks()
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=ahead, clock=clock, background_at=0.5
    )
    from historykit._pipeline import Pipeline

    pipeline = Pipeline([background], counter=ctx.counter)
    for index, point in enumerate(request_points(history)):
        result = await pipeline.arun(history[:point], ctx.context_window, mode="view", conversation="c")
        assert list(result.messages) == views[index], f"the views differ at call {index}"
        await asyncio.sleep(0.002)


async def test_a_failed_background_summary_is_tried_again_in_the_foreground(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = _long_session()
    ctx = context()
    plain = AWorks()
    views, _, _ = await _replay_async(
        Summarize(trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=plain, clock=clock),
        plain,
        history,
        ctx,
    )

    class FlakyOnce(AWorks):
        """Fails its first call (the background one), then works."""

        async def __call__(self, messages: Sequence[Message]) -> str:  # type: ignore[override]
            if not self.at:
                self.at.append(-1)
                raise RuntimeError("first call fails")
            return await super().__call__(messages)

    flaky = FlakyOnce()
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH),
        keep_last=3,
        summarizer=flaky,
        clock=clock,
        background_at=0.5,
        attempts=1,
    )
    with caplog.at_level(logging.WARNING, logger="historykit"):
        bg_views, _, _ = await _replay_async(background, flaky, history, ctx)
    assert bg_views == views
    assert flaky.at[0] == -1 and len(flaky.calls) >= len(plain.calls)
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert "the call that needs it summarizes in the foreground" in record.getMessage()


async def test_a_background_summary_saves_the_firing_calls_wait() -> None:
    """Not a timing test (benchmarks/bench_background_summary.py measures): the firing call finds
    the summary done, so the summarizer is not called again on that call."""
    history = _long_session()
    ctx = context()
    ahead = AWorks(delay=0.01)
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=ahead, clock=clock, background_at=0.5
    )
    carried: list[Message] = []
    last = 0
    for index, point in enumerate(request_points(history)):
        ahead.clock_calls = index
        before = len(ahead.calls)
        carried, notes = await background.aprocess(carried + history[last:point], ctx)
        last = point
        if any("written in the background" in d for d in notes.details):
            assert len(ahead.calls) == before, "the firing call summarized again"
            return
        await asyncio.sleep(0.03)
    pytest.fail("no compaction used its background summary")


def _varied_session() -> list[Message]:
    """Exchanges of uneven size: the firing call's overshoot is not predictable."""
    history = agent_session(0)
    for n in range(LONG):
        history += exchange(n, lines=8 + (n * 37) % 45, parallel=1 + n % 3)
    return history


@pytest.mark.parametrize("background_at", [0.3, 0.5, 0.9])
async def test_background_summaries_of_uneven_work_still_give_the_foreground_views(
    background_at: float,
) -> None:
    history = _varied_session()
    ctx = context()
    plain, ahead = AWorks(), AWorks()
    views, fired, _ = await _replay_async(
        Summarize(trigger=Trigger(max_tokens=HIGH), keep_last=3, summarizer=plain, clock=clock),
        plain,
        history,
        ctx,
    )
    background = Summarize(
        trigger=Trigger(max_tokens=HIGH),
        keep_last=3,
        summarizer=ahead,
        clock=clock,
        background_at=background_at,
    )
    bg_views, bg_fired, _ = await _replay_async(background, ahead, history, ctx)
    assert sum(fired) >= 3 and bg_views == views and bg_fired == fired
    # What the background could not predict, the foreground summarized: the same inputs either way.
    assert all(inputs in ahead.calls for inputs in plain.calls)


async def test_background_summaries_over_a_corpus_session(largest_corpus_session: list[Message]) -> None:
    history = largest_corpus_session
    ctx = context(window=60_000)
    plain, ahead = AWorks(), AWorks()
    views, fired, _ = await _replay_async(
        Summarize(trigger=Trigger(max_fraction=0.5), summarizer=plain, clock=clock), plain, history, ctx
    )
    background = Summarize(
        trigger=Trigger(max_fraction=0.5), summarizer=ahead, clock=clock, background_at=0.6
    )
    bg_views, _, details = await _replay_async(background, ahead, history, ctx)
    assert sum(fired) >= 2 and bg_views == views
    assert any(any("written in the background" in d for d in call) for call in details)


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
async def test_a_pydantic_ai_agent_sends_the_same_requests_with_background_summaries(persist: bool) -> None:
    """A real agent loop (FunctionModel, a tool, the `HistoryKit` capability on the agent's event
    loop): the model receives the same requests with and without background summaries, and the
    summaries the background wrote were used."""
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.usage import UsageLimits

    from historykit import Pipeline
    from historykit.plugins.pydantic_ai import HistoryKit, PydanticAIAdapter

    async def run(background_at: float | None) -> tuple[list[list[Message]], list[str]]:
        received: list[list[Message]] = []
        summarizer = AWorks()

        async def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
            received.append(PydanticAIAdapter().to_neutral(messages))
            await asyncio.sleep(0.002)  # the model thinks: background work runs meanwhile
            n = len(received)
            if n > 40:
                return pai.ModelResponse([pai.TextPart("Done.")])
            return pai.ModelResponse(
                [pai.ToolCallPart("read_file", {"path": f"src/m{n}.py"}, tool_call_id=f"c{n}")]
            )

        summarize = Summarize(
            trigger=Trigger(max_tokens=HIGH),
            keep_last=3,
            summarizer=summarizer,
            clock=clock,
            background_at=background_at,
        )
        details: list[str] = []
        kit = HistoryKit(
            Pipeline([summarize]),
            context_window=100_000,
            persist=persist,
            on_report=lambda r: details.extend(d for s in r.steps for d in s.notes.details),
        )
        agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=[kit])

        @agent.tool_plain
        def read_file(path: str) -> str:
            """Read a file."""
            size = 20 + (len(received) * 37) % 60
            return "\n".join(f"{path}:{i}: value_{i} = compute({i})" for i in range(size))

        await agent.run("Read the files and find the bug.", usage_limits=UsageLimits(request_limit=None))
        return received, details

    plain, plain_details = await run(None)
    ahead, ahead_details = await run(0.5)
    assert any("summarized" in d for d in plain_details)
    assert len(ahead) == len(plain)
    for index, (a, b) in enumerate(zip(plain, ahead)):
        assert [(m.role, m.parts) for m in a] == [(m.role, m.parts) for m in b], f"request {index} differs"
    assert any("written in the background" in d for d in ahead_details)
