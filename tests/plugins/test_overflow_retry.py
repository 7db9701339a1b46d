"""Compact and retry, through real agents and the provider emulator.

historykit is configured with a window larger than the one the emulator enforces, so the first call
that crosses the real window is refused with the provider's own error (`prompt is too long: N tokens
> M maximum`, OpenAI's `context_length_exceeded`). The integrations must compact harder and retry
once: the run succeeds with exactly one refused request, the report says so with an
`overflow-retry` marker, and later calls continue from the retried view (append-only). When even the
harder compaction cannot fit, the provider's error reaches the caller unchanged after two attempts.
"""

from __future__ import annotations

import importlib.metadata
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from historykit import default_pipeline
from historykit._pipeline import Report
from historykit.plugins._overflow import RETRY_STEP, RETRY_WINDOW_SOURCE, context_overflow, retry_window
from tests.emulator import (
    NON_BINDING_ANTHROPIC_MODEL,
    EmulatedRequest,
    ProviderEmulator,
    ToolCall,
    Turn,
    extends,
    tool_loop,
)

BINDING = "claude-fable-5-2"
_PAI2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")
REAL_WINDOW = 4_000
CONFIGURED = 50_000
TOOL_TURNS = 12
SYSTEM = "Be careful."


def read(path: str) -> str:
    """Read a file."""
    return "\n".join(f"{path} line {i}: value = {i * 7} + offset_{i}" for i in range(40))


def _emulator(model: str, window: int = REAL_WINDOW) -> ProviderEmulator:
    script = tool_loop(TOOL_TURNS, tool="read", args=lambda i: {"path": f"src/f{i}.py"})
    return ProviderEmulator(script, context_windows={model: window})


# For the modes' comparison: the view was compacted several times before the first refusal (each
# turn leaves notes that clearing tool results cannot take back), so replaying the conversation at
# the smaller window would send different views than persistent mode, which only has the last one.
# The windows are such that `default_pipeline()` compacts (clears tool results, from `EDIT_AT` of the
# configured window once a batch pays for its cache rewrite) before the history crosses the real
# window, which is under the configured summary mark (`SUMMARIZE_AT`).
LONG_TURNS = 30
LONG_CONFIGURED = 30_000
LONG_REAL_WINDOW = 8_000


def _deterministic_emulator(model: str) -> ProviderEmulator:
    """Fixed tool-call ids and signing secret: two runs that send the same views send identical requests."""
    played = 0

    def script(request: EmulatedRequest) -> Turn:
        nonlocal played
        i, played = played, played + 1
        if i >= LONG_TURNS:
            return Turn(thinking=f"Step {i}: finished.", text="All done.")
        call = ToolCall("read", {"path": f"src/f{i}.py"}, id=f"toolu_{i:04d}")
        notes = f"Turn {i} notes: " + " ".join(f"observation{j}" for j in range(60))
        return Turn(thinking=f"Step {i}: I will read a file.", text=notes, tool_calls=[call])

    return ProviderEmulator(script, context_windows={model: LONG_REAL_WINDOW}, secret=b"overflow-retry")


def _compacted_before_the_retry(reports: list[Report]) -> bool:
    retry = next(i for i, r in enumerate(reports) if any(s.processor == RETRY_STEP for s in r.steps))
    return any(r.changed for r in reports[:retry])


def _assert_one_retry(
    emulator: ProviderEmulator, reports: list[Report], stated: bool = True, real_window: int = REAL_WINDOW
) -> None:
    """`stated`: the error stated the maximum, so the retry budgets for less than the real window."""
    rejected = emulator.rejected
    assert len(rejected) == 1, [r.rejection for r in rejected]
    assert rejected[0].rejection is not None and rejected[0].rejection.rule == "window"
    # The call after the refusal was the retry, and it was accepted.
    refused_at = emulator.received.index(rejected[0])
    assert emulator.received[refused_at + 1].status == 200
    retries = [r for r in reports if any(s.processor == RETRY_STEP for s in r.steps)]
    assert len(retries) == 1
    report = retries[0]
    (marker,) = [m for m in report.markers if m.strategy == "overflow-retry"]
    assert marker.automatic
    assert marker.tokens_after < marker.tokens_before
    assert report.window_source == RETRY_WINDOW_SOURCE
    assert report.context_window < (real_window if stated else CONFIGURED * 0.6)
    # Later calls budget for the shrunk window and continue from the retried view.
    later = reports[reports.index(report) + 1 :]
    assert later and all(r.context_window == report.context_window for r in later)


def _append_only_after_retry(emulator: ProviderEmulator, reports: list[Report]) -> None:
    """Each accepted request after the retry extends the previous one unless that call compacted."""
    accepted = emulator.received[emulator.received.index(emulator.rejected[0]) + 1 :]
    retry_report = next(i for i, r in enumerate(reports) if any(s.processor == RETRY_STEP for s in r.steps))
    follow = reports[retry_report + 1 :]
    assert len(follow) == len(accepted) - 1
    for (before, after), report in zip(itertools.pairwise(accepted), follow):
        if not report.changed:
            assert extends(before, after), "a call without compaction must extend the retried view"


# --- Pydantic AI ---------------------------------------------------------------------------------


def _pai_agent(emulator: ProviderEmulator, model_name: str, kit: Any, settings: Any = None) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    model = AnthropicModel(
        model_name, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )
    settings = {"max_tokens": 1024} if settings is None else settings
    agent = Agent(model, instructions=SYSTEM, capabilities=[kit], model_settings=settings)
    agent.tool_plain(read)
    return agent


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
async def test_pydantic_ai_compacts_and_retries_once(persist: bool, model_name: str) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    emulator = _emulator(model_name)
    reports: list[Report] = []
    kit = HistoryKit(default_pipeline(), context_window=CONFIGURED, persist=persist, on_report=reports.append)
    result = await _pai_agent(emulator, model_name, kit).run("Read the files.")
    assert result.output == "All done."
    _assert_one_retry(emulator, reports)
    _append_only_after_retry(emulator, reports)


@pytest.mark.pydantic_ai
async def test_pydantic_ai_modes_send_the_same_requests_around_a_retry() -> None:
    """View-only and persistent send the same requests, the refused one and the retry included (the
    retry replays only the refused call, from the view the previous call had). AnthropicModel streams
    when `max_tokens` is left to it: the refusal comes as the stream opens."""
    from historykit.plugins.pydantic_ai import HistoryKit

    sent = {}
    for persist in (True, False):
        emulator = _deterministic_emulator(BINDING)
        reports: list[Report] = []
        kit = HistoryKit(
            default_pipeline(), context_window=LONG_CONFIGURED, persist=persist, on_report=reports.append
        )
        agent = _pai_agent(emulator, BINDING, kit, settings={})  # no max_tokens: Pydantic AI streams
        assert (await agent.run("Read the files.")).output == "All done."
        assert emulator.received[0].body.get("stream") is _PAI2  # 1.x does not stream here
        _assert_one_retry(emulator, reports, real_window=LONG_REAL_WINDOW)
        assert _compacted_before_the_retry(reports)
        sent[persist] = [r.history() for r in emulator.received]
    assert sent[True] == sent[False]


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_pydantic_ai_second_overflow_reaches_the_caller(persist: bool) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    from historykit.plugins.pydantic_ai import HistoryKit

    emulator = _emulator(BINDING, window=300)
    kit = HistoryKit(default_pipeline(), context_window=CONFIGURED, persist=persist)
    huge = "Please consider: " + " ".join(f"word{i}" for i in range(2_000))
    with pytest.raises(ModelHTTPError) as raised:
        await _pai_agent(emulator, BINDING, kit).run(huge)
    assert raised.value.status_code == 400
    assert "prompt is too long" in str(raised.value.body)
    assert len(emulator.received) == 2 and len(emulator.rejected) == 2


@pytest.mark.pydantic_ai
async def test_pydantic_ai_openai_chat_model_compacts_and_retries() -> None:
    """OpenAI's wording (`context_length_exceeded`, "maximum context length is M tokens")."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from historykit.plugins.pydantic_ai import HistoryKit

    emulator = _emulator("gpt-5")
    reports: list[Report] = []
    kit = HistoryKit(default_pipeline(), context_window=CONFIGURED, persist=False, on_report=reports.append)
    model = OpenAIChatModel(
        "gpt-5", provider=OpenAIProvider(openai_client=emulator.openai_client(async_=True))
    )
    agent = Agent(model, instructions=SYSTEM, capabilities=[kit])
    agent.tool_plain(read)
    result = await agent.run("Read the files.")
    assert result.output == "All done."
    _assert_one_retry(emulator, reports)
    assert emulator.rejected[0].response["error"]["code"] == "context_length_exceeded"


# --- LangChain -----------------------------------------------------------------------------------


def _lc_agent(emulator: ProviderEmulator, model_name: str, middleware: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    llm = emulator.chat_anthropic(model_name, max_tokens=1024)
    return create_agent(llm, tools=[tool(read)], system_prompt=SYSTEM, middleware=[middleware])


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
def test_langchain_compacts_and_retries_once(persist: bool, model_name: str) -> None:
    from historykit.plugins.langchain import HistoryKitMiddleware

    emulator = _emulator(model_name)
    reports: list[Report] = []
    middleware = HistoryKitMiddleware(
        default_pipeline(), context_window=CONFIGURED, persist=persist, on_report=reports.append
    )
    state = _lc_agent(emulator, model_name, middleware).invoke(
        {"messages": [{"role": "user", "content": "Read the files."}]}
    )
    assert state["messages"][-1].text == "All done."
    _assert_one_retry(emulator, reports)
    _append_only_after_retry(emulator, reports)


def test_langchain_modes_send_the_same_requests_around_a_retry() -> None:
    from historykit.plugins.langchain import HistoryKitMiddleware

    sent = {}
    for persist in (True, False):
        emulator = _deterministic_emulator(NON_BINDING_ANTHROPIC_MODEL)
        reports: list[Report] = []
        middleware = HistoryKitMiddleware(
            default_pipeline(), context_window=LONG_CONFIGURED, persist=persist, on_report=reports.append
        )
        state = _lc_agent(emulator, NON_BINDING_ANTHROPIC_MODEL, middleware).invoke(
            {"messages": [{"role": "user", "content": "Read the files."}]}
        )
        assert state["messages"][-1].text == "All done."
        _assert_one_retry(emulator, reports, real_window=LONG_REAL_WINDOW)
        assert _compacted_before_the_retry(reports)
        sent[persist] = [r.history() for r in emulator.received]
    assert sent[True] == sent[False]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_langchain_a_resumed_thread_keeps_its_shrunk_window(persist: bool) -> None:
    """The window a thread shrank to is kept in its state: a new middleware (a new process) resuming
    the thread budgets for it at once instead of overflowing again."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    played = 0

    def script(request: EmulatedRequest) -> Turn:
        nonlocal played
        i, played = played, played + 1
        if i in (TOOL_TURNS, TOOL_TURNS + 5):
            return Turn(text="All done.")
        return Turn(text=f"Reading file {i}.", tool_calls=[ToolCall("read", {"path": f"src/f{i}.py"})])

    emulator = ProviderEmulator(script, context_windows={NON_BINDING_ANTHROPIC_MODEL: REAL_WINDOW})
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "shrinking"}}
    reports: list[Report] = []
    for turn in range(2):
        middleware = HistoryKitMiddleware(
            default_pipeline(), context_window=CONFIGURED, persist=persist, on_report=reports.append
        )
        llm = emulator.chat_anthropic(NON_BINDING_ANTHROPIC_MODEL, max_tokens=1024)
        agent = create_agent(
            llm, tools=[tool(read)], system_prompt=SYSTEM, middleware=[middleware], checkpointer=saver
        )
        state = agent.invoke({"messages": [{"role": "user", "content": f"Read the files ({turn})."}]}, config)
        assert state["messages"][-1].text == "All done."
    assert len(emulator.rejected) == 1, "the resumed thread overflowed again"
    retry = next(i for i, r in enumerate(reports) if any(s.processor == RETRY_STEP for s in r.steps))
    shrunk = reports[retry].context_window
    assert all(r.context_window == shrunk and r.window_source == RETRY_WINDOW_SOURCE for r in reports[retry:])


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_langchain_async_second_overflow_reaches_the_caller(persist: bool) -> None:
    from langchain_core.exceptions import ContextOverflowError

    from historykit.plugins.langchain import HistoryKitMiddleware

    emulator = _emulator(BINDING, window=300)
    middleware = HistoryKitMiddleware(default_pipeline(), context_window=CONFIGURED, persist=persist)
    huge = "Please consider: " + " ".join(f"word{i}" for i in range(2_000))
    with pytest.raises(ContextOverflowError) as raised:
        await _lc_agent(emulator, BINDING, middleware).ainvoke(
            {"messages": [{"role": "user", "content": huge}]}
        )
    assert "prompt is too long" in str(raised.value)
    assert len(emulator.received) == 2 and len(emulator.rejected) == 2


async def test_langchain_async_compacts_and_retries_once() -> None:
    from historykit.plugins.langchain import HistoryKitMiddleware

    emulator = _emulator(BINDING)
    reports: list[Report] = []
    middleware = HistoryKitMiddleware(default_pipeline(), context_window=CONFIGURED, on_report=reports.append)
    state = await _lc_agent(emulator, BINDING, middleware).ainvoke(
        {"messages": [{"role": "user", "content": "Read the files."}]}
    )
    assert state["messages"][-1].text == "All done."
    _assert_one_retry(emulator, reports)
    _append_only_after_retry(emulator, reports)


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_langchain_openai_responses_compacts_and_retries(persist: bool) -> None:
    """OpenAI Responses states no figures ("Your input exceeds the context window of this model"):
    the retry budgets for the refused request's size, which is enough here."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from historykit.plugins.langchain import HistoryKitMiddleware

    emulator = _emulator("gpt-5")
    reports: list[Report] = []
    middleware = HistoryKitMiddleware(
        default_pipeline(), context_window=CONFIGURED, persist=persist, on_report=reports.append
    )
    llm = emulator.chat_openai("gpt-5", use_responses_api=True)
    agent = create_agent(llm, tools=[tool(read)], system_prompt=SYSTEM, middleware=[middleware])
    state = agent.invoke({"messages": [{"role": "user", "content": "Read the files."}]})
    assert state["messages"][-1].text == "All done."
    _assert_one_retry(emulator, reports, stated=False)
    assert emulator.rejected[0].response["error"]["code"] == "context_length_exceeded"


# --- recognising the error -----------------------------------------------------------------------


def test_sdk_errors_are_recognised_with_their_figures() -> None:
    import anthropic
    import openai

    emulator = ProviderEmulator(tool_loop(0, tool="read"), context_windows={BINDING: 10, "gpt-5": 10})
    with pytest.raises(anthropic.BadRequestError) as a:
        emulator.anthropic_client().messages.create(
            model=BINDING, max_tokens=10, messages=[{"role": "user", "content": "hello there " * 20}]
        )
    found = context_overflow(a.value)
    assert found is not None and found.maximum == 10 and found.tokens is not None and found.tokens > 10
    with pytest.raises(openai.BadRequestError) as o:
        emulator.openai_client().chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "hello there " * 20}]
        )
    found = context_overflow(o.value)
    assert found is not None and found.maximum == 10
    with pytest.raises(openai.BadRequestError) as r:
        emulator.openai_client().responses.create(model="gpt-5", input="hello there " * 20)
    found = context_overflow(r.value)
    assert found is not None and found.maximum is None  # the Responses wording has no figures
    assert len(emulator.rejected) == 3


def test_other_errors_are_not_overflows() -> None:
    import anthropic

    emulator = ProviderEmulator(tool_loop(0, tool="read"))
    with pytest.raises(anthropic.BadRequestError) as a:  # R4: the first message is not the user's
        emulator.anthropic_client().messages.create(
            model=BINDING, max_tokens=10, messages=[{"role": "assistant", "content": "hi"}]
        )
    assert context_overflow(a.value) is None
    assert context_overflow(ValueError("prompt is too long: 5 tokens > 3 maximum")) is None  # no status


def test_retry_window() -> None:
    from historykit.plugins.langchain import ContextOverflow

    stated = ContextOverflow("prompt is too long", tokens=5_000, maximum=4_000)
    assert retry_window(stated, 50_000, 4_500) == 4_000 * 4_500 // 5_000  # in historykit's measure
    assert retry_window(ContextOverflow("too long"), 50_000, 60_000) == 30_000
    assert retry_window(ContextOverflow("too long"), 50_000, 9_000) == 9_000  # the window is below 9,000
    assert retry_window(ContextOverflow("x", 90_000, 80_000), 50_000, 49_000) == 30_000  # max above ours


@given(
    tokens=st.integers(1, 10**7),
    maximum=st.integers(1, 10**7),
    window=st.integers(2, 10**7),
    sent=st.integers(0, 10**7),
    stated=st.booleans(),
)
def test_retry_window_is_always_smaller(
    tokens: int, maximum: int, window: int, sent: int, stated: bool
) -> None:
    from historykit.plugins.langchain import ContextOverflow

    overflow = ContextOverflow("too long", tokens, maximum) if stated else ContextOverflow("too long")
    assert 1 <= retry_window(overflow, window, sent) < window


@pytest.mark.pydantic_ai
@given(
    tokens=st.integers(1, 10**7),
    maximum=st.integers(1, 10**7),
    provider=st.sampled_from(["anthropic", "openai"]),
)
def test_pydantic_ai_http_errors_give_their_figures(tokens: int, maximum: int, provider: str) -> None:
    """The bodies as the providers send them, in Pydantic AI's `ModelHTTPError`."""
    from pydantic_ai.exceptions import ModelHTTPError

    if provider == "anthropic":
        message = f"prompt is too long: {tokens} tokens > {maximum} maximum"
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    else:
        message = (
            f"This model's maximum context length is {maximum} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        body = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    found = context_overflow(ModelHTTPError(400, "a-model", body=body))
    assert found is not None and (found.tokens, found.maximum) == (tokens, maximum)
    assert context_overflow(ModelHTTPError(500, "a-model", body=body)) is None  # not a refusal of the request


def test_remember_view_is_where_later_view_calls_continue() -> None:
    """`Pipeline.remember_view`: a view made outside the replay (the retry) is what the next view-only
    call under that window starts from; only the new call is replayed."""
    from historykit import Pipeline
    from historykit._messages import Message, TextPart
    from historykit.processors import Repair

    def msg(role: Any, text: str) -> Message:
        return Message(role, (TextPart(text),))

    raw = [msg("user", "task"), msg("assistant", "first answer"), msg("user", "more")]
    pipeline = Pipeline([Repair()])
    retried = [msg("user", "task, compacted by the retry"), *raw[1:]]
    pipeline.remember_view(raw, retried, 3_000, binds_thinking=False, conversation="c")
    later = [*raw, msg("assistant", "second answer"), msg("user", "next")]
    result = pipeline.run(later, 3_000, mode="view", binds_thinking=False, conversation="c")
    assert result.report.replayed_calls == 1
    assert result.messages == [*retried, *later[3:]]
    # Under the configured window the conversation's own views are derived as before.
    assert pipeline.run(later, 50_000, mode="view", binds_thinking=False, conversation="c").messages == later
