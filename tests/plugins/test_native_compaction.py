"""Provider-native compaction as a `Summarize` backend, in real agents of both frameworks.

Pydantic AI runs `HistoryKit` around `AnthropicModel` / `OpenAIResponsesModel`; LangChain runs
`HistoryKitMiddleware` in `create_agent` around `ChatAnthropic` / `ChatOpenAI` (Responses API). The
provider is the emulator (`tests/emulator`), through the official SDKs: it answers Anthropic's
`compaction` parameter with a signed block and `/responses/compact` with an encrypted item, and
refuses what the real APIs refuse (a model without on-demand compaction, a missing beta, an edited
block or item, a block sent to the other provider). What must hold:

- the trigger fires, the native backend writes the summary (one compaction request), the marker
  says `summarize` and names the backend, and the provider's own block is what later requests send
  (Anthropic: the assistant's compaction block first in `messages`; OpenAI: the compaction item,
  with nothing before it), while the run's history keeps historykit's summary (persistent) or every
  message (view only);
- no request is refused, on a binding model too (the thinking after the summary is dropped, as
  Anthropic requires when the compaction request did not run on the exact conversation);
- a native call the provider refuses falls through the chain: its retries, then the next
  summarizer, then truncation.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import pytest
import tenacity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit._messages import (
    PROVIDER_COMPACTION_KEY,
    CompactionMarker,
    Message,
    ProviderCompaction,
    SummaryPart,
)
from historykit._pipeline import Report
from historykit.plugins._native_compaction import (
    AnthropicCompactionSummarizer,
    OpenAICompactionSummarizer,
    anthropic_messages,
    responses_input,
)
from historykit.processors import Summarize, Trigger
from historykit.processors._summarizers import ExtractiveSummarizer
from tests.emulator import ProviderEmulator, RecordedRequest, Turn, extends, tool_loop
from tests.strategies import examples, neutral_histories

ANTHROPIC = "claude-opus-5-5"
"""Binds thinking (prefix checks) and has on-demand compaction."""
NO_ON_DEMAND = "claude-fable-5-2"
"""Binds thinking, but is not among the models with on-demand compaction: the request is refused."""
OPENAI = "gpt-5"
TOOL_TURNS = 14


def read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: " + " ".join(f"line{i}=value{i * 7}" for i in range(120))


def _emulator() -> ProviderEmulator:
    return ProviderEmulator(tool_loop(TOOL_TURNS, tool="read", args=lambda i: {"path": f"src/f{i}.py"}))


def _summarize(summarizer: Any, **overrides: Any) -> Summarize:
    settings: dict[str, Any] = {
        "trigger": Trigger(max_tokens=3_000),
        "keep_last": 2,
        "summary_tokens": 200,
        "min_gain": 200,
        "attempts": 2,
        "retry_wait": tenacity.wait_none(),
    }
    settings.update(overrides)
    return Summarize(summarizer=summarizer, **settings)


def _compactions(emulator: ProviderEmulator) -> list[RecordedRequest]:
    return [
        r
        for r in emulator.received
        if r.api == "openai-compact" or ("compaction" in r.body and r.api == "anthropic")
    ]


def _model_calls(emulator: ProviderEmulator) -> list[RecordedRequest]:
    return [r for r in emulator.received if r not in _compactions(emulator)]


def _assert_append_only_between_compactions(emulator: ProviderEmulator) -> None:
    """Each model call sends the previous one's history plus what arrived since, unless a compaction
    request came between them (the provider's cache keeps hitting)."""
    previous: RecordedRequest | None = None
    compactions = _compactions(emulator)
    for record in emulator.accepted:
        if record in compactions:
            previous = None
            continue
        if previous is not None:
            assert extends(previous, record)
        previous = record


def _markers(reports: list[Report]) -> list[Any]:
    return [m for r in reports for m in r.markers]


def _anthropic_blocks(request: RecordedRequest) -> list[tuple[int, dict[str, Any]]]:
    """The compaction blocks a request sends, with the index of their message."""
    return [
        (i, b)
        for i, m in enumerate(request.body["messages"])
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "compaction"
    ]


def _pydantic_ai_trims() -> bool:
    """Whether Pydantic AI sends nothing before a provider's compaction part (2.x: its models drop
    the history before one). 1.x sends it too, which the provider ignores (Anthropic) or reads and
    bills (OpenAI); historykit's LangChain glue always sends the block in place of it."""
    from pydantic_ai.models import Model

    return hasattr(Model, "_trim_before_compaction")


def _assert_anthropic_native(emulator: ProviderEmulator, reports: list[Report], trimmed: bool = True) -> None:
    assert emulator.rejected == []
    compactions = _compactions(emulator)
    assert compactions, "the trigger never fired"
    markers = _markers(reports)
    assert len(compactions) >= 2  # a summary written natively, then updated natively
    assert [m.strategy for m in markers] == ["summarize"] * len(compactions)
    assert {m.model for m in markers} == {f"anthropic-compaction:{ANTHROPIC}"}
    _assert_append_only_between_compactions(emulator)
    # After the first compaction, every model call opens with the block Anthropic wrote.
    after = _model_calls(emulator)[-1]
    [(index, block)] = _anthropic_blocks(after)
    assert block["content"] == emulator.compaction_summaries[-1]
    if trimmed:  # (Pydantic AI 1.x sends the block unsigned, as a threshold compaction's block)
        assert "compact-2026-09-04" in after.request.headers["anthropic-beta"]
        # The block first; the summary text (historykit's own: the block's content, completed) and
        # the task went to no Anthropic call after it: the block stands for them.
        assert index == 0
        assert not any(
            "[historykit] Summary of the earlier" in r.request.text() for r in _model_calls(emulator)
        )


def _assert_openai_native(emulator: ProviderEmulator, reports: list[Report], trimmed: bool = True) -> None:
    assert emulator.rejected == []
    compactions = _compactions(emulator)
    assert len(compactions) >= 2
    markers = _markers(reports)
    assert len(markers) == len(compactions)
    assert {m.model for m in markers} == {f"openai-compaction:{OPENAI}"}
    _assert_append_only_between_compactions(emulator)
    # The update sent OpenAI its earlier item back (it cannot be read anywhere else).
    assert any(item.get("type") == "compaction" for item in compactions[-1].body["input"])
    last = _model_calls(emulator)[-1].body["input"]
    kinds = [item.get("type", "message") for item in last]
    # The item stands for everything before it: nothing but instructions precede it.
    assert kinds.count("compaction") == 1
    if trimmed:
        assert all(item.get("role") == "system" for item in last[: kinds.index("compaction")])
        assert not any("OpenAI holds the full summary" in r.request.text() for r in _model_calls(emulator))


# --- Pydantic AI --------------------------------------------------------------------------------


def _pydantic_ai_agent(model: Any, summarize: Summarize, reports: list[Report], persist: bool = True) -> Any:
    from pydantic_ai import Agent

    from historykit.plugins.pydantic_ai import HistoryKit

    kit = HistoryKit(Pipeline([summarize]), on_report=reports.append, persist=persist)
    agent = Agent(model, instructions="Read the files you are asked about.", capabilities=[kit])
    agent.tool_plain(read)
    return agent


def _anthropic_model(emulator: ProviderEmulator, name: str = ANTHROPIC) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = emulator.anthropic_client(async_=True)
    return AnthropicModel(name, provider=AnthropicProvider(anthropic_client=client))


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_pydantic_ai_anthropic_native_compaction(persist: bool) -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), ANTHROPIC)
    agent = _pydantic_ai_agent(_anthropic_model(emulator), _summarize(native), reports, persist)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stale-thinking retry: nothing was refused
        result = await agent.run(
            "Read the files.", model_settings={"anthropic_thinking": {"type": "adaptive"}}
        )
    assert result.output == "All done."
    _assert_anthropic_native(emulator, reports, trimmed=_pydantic_ai_trims())
    history = result.all_messages()
    # The run's history never holds the provider's block as a response: only historykit's summary.
    responses = [m for m in history if m.kind == "response"]
    assert not any(p.part_kind == "compaction" for m in responses for p in m.parts)
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    neutral = PydanticAIAdapter().to_neutral(history)
    summaries = [p for m in neutral for p in m.parts if isinstance(p, SummaryPart)]
    if persist:  # historykit's summary, the provider's block in its metadata
        assert len(summaries) == 1 and summaries[0].provider_compaction is not None
        assert summaries[0].provider_compaction.block_dict()["content"] == emulator.compaction_summaries[-1]
    else:
        # View only: the transcript keeps every tool call, untouched.
        assert summaries == []
        calls = [p for m in responses for p in m.parts if p.part_kind == "tool-call"]
        assert len(calls) == TOOL_TURNS


@pytest.mark.pydantic_ai
async def test_pydantic_ai_openai_native_compaction() -> None:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    emulator = _emulator()
    reports: list[Report] = []
    client = emulator.openai_client(async_=True)
    native = OpenAICompactionSummarizer(client, OPENAI)
    model = OpenAIResponsesModel(OPENAI, provider=OpenAIProvider(openai_client=client))
    agent = _pydantic_ai_agent(model, _summarize(native), reports)
    result = await agent.run("Read the files.")
    assert result.output == "All done."
    _assert_openai_native(emulator, reports, trimmed=_pydantic_ai_trims())


@pytest.mark.pydantic_ai
async def test_pydantic_ai_native_compaction_refused_falls_back_through_the_chain() -> None:
    """The provider refuses the native call (no on-demand compaction on this model): after its
    attempts the next summarizer writes the summary, the run goes on, nothing else is refused."""
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), NO_ON_DEMAND)
    summarize = _summarize([native, ExtractiveSummarizer()])
    agent = _pydantic_ai_agent(_anthropic_model(emulator, NO_ON_DEMAND), summarize, reports)
    result = await agent.run("Read the files.", model_settings={"anthropic_thinking": {"type": "adaptive"}})
    assert result.output == "All done."
    refused = emulator.rejected
    markers = _markers(reports)
    assert markers and all(m.strategy == "summarize" and m.model is None for m in markers)
    # Each compaction tried the native call `attempts` times, each refused as Anthropic refuses it.
    assert len(refused) == 2 * len(markers)
    assert {r.rejection.rule for r in refused if r.rejection} == {"compaction"}
    assert all(r.status == 400 for r in refused)
    details = [d for r in reports for s in r.steps for d in s.notes.details]
    assert any("tried the next" in d and f"anthropic-compaction:{NO_ON_DEMAND}" in d for d in details)
    assert [r for r in emulator.received if r not in refused] == emulator.accepted
    assert not any("compaction" in str(r.body.get("messages", "")) for r in _model_calls(emulator))


@pytest.mark.pydantic_ai
async def test_pydantic_ai_native_compaction_refused_alone_truncates() -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), NO_ON_DEMAND)
    agent = _pydantic_ai_agent(_anthropic_model(emulator, NO_ON_DEMAND), _summarize([native]), reports)
    result = await agent.run("Read the files.", model_settings={"anthropic_thinking": {"type": "adaptive"}})
    assert result.output == "All done."
    markers = _markers(reports)
    assert markers and {m.strategy for m in markers} == {"truncate"}
    assert all(r.rejection is not None and r.rejection.rule == "compaction" for r in emulator.rejected)


# --- LangChain ----------------------------------------------------------------------------------


def _langchain_agent(
    chat_model: Any, summarize: Summarize, reports: list[Report], persist: bool = True
) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from historykit.plugins.langchain import HistoryKitMiddleware

    middleware = HistoryKitMiddleware(Pipeline([summarize]), persist=persist, on_report=reports.append)
    return create_agent(
        chat_model,
        [tool(read)],
        system_prompt="Read the files you are asked about.",
        middleware=[middleware],
    )


def _final_text(state: dict[str, Any]) -> str:
    content = state["messages"][-1].content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_langchain_anthropic_native_compaction(persist: bool) -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), ANTHROPIC)
    chat = emulator.chat_anthropic(ANTHROPIC, thinking={"type": "adaptive"}, max_tokens=4096)
    agent = _langchain_agent(chat, _summarize(native), reports, persist)
    state = await agent.ainvoke({"messages": [("user", "Read the files.")]})
    assert _final_text(state) == "All done."
    _assert_anthropic_native(emulator, reports)
    kinds = [type(m).__name__ for m in state["messages"]]
    if persist:
        summaries = [m for m in state["messages"] if PROVIDER_COMPACTION_KEY in m.additional_kwargs]
        assert summaries and kinds.count("HumanMessage") >= 2
    else:
        assert kinds.count("ToolMessage") == TOOL_TURNS


async def test_langchain_openai_native_compaction() -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = OpenAICompactionSummarizer(emulator.openai_client(async_=True), OPENAI)
    chat = emulator.chat_openai(OPENAI, use_responses_api=True)
    agent = _langchain_agent(chat, _summarize(native), reports)
    state = await agent.ainvoke({"messages": [("user", "Read the files.")]})
    assert _final_text(state) == "All done."
    _assert_openai_native(emulator, reports)


async def test_langchain_native_compaction_refused_falls_back_through_the_chain() -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), NO_ON_DEMAND)
    chat = emulator.chat_anthropic(NO_ON_DEMAND, thinking={"type": "adaptive"}, max_tokens=4096)
    agent = _langchain_agent(chat, _summarize([native, ExtractiveSummarizer()]), reports)
    state = await agent.ainvoke({"messages": [("user", "Read the files.")]})
    assert _final_text(state) == "All done."
    markers = _markers(reports)
    assert markers and all(m.strategy == "summarize" and m.model is None for m in markers)
    assert len(emulator.rejected) == 2 * len(markers)
    assert {r.rejection.rule for r in emulator.rejected if r.rejection} == {"compaction"}


# --- the block through the adapters and the delivery ----------------------------------------------


def _native_history(compaction: ProviderCompaction) -> list[Message]:
    marker = CompactionMarker(1, 5, 4_000, 1_000, "summarize", model=f"{compaction.provider}-compaction:m")
    return [
        Message.user("Fix src/io.py."),
        Message("user", (SummaryPart("[historykit] Summary ...", marker, provider_compaction=compaction),)),
        Message.assistant("Continuing."),
        Message.user("Go on."),
    ]


_BLOCKS = [
    ProviderCompaction(
        "anthropic", ANTHROPIC, '{"content": "Summary.", "signature": "sig", "type": "compaction"}'
    ),
    ProviderCompaction("openai", OPENAI, '{"encrypted_content": "enc", "id": "cmp_1", "type": "compaction"}'),
]


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("compaction", _BLOCKS, ids=["anthropic", "openai"])
def test_pydantic_ai_history_keeps_the_block_and_sends_it_to_its_provider(
    compaction: ProviderCompaction,
) -> None:
    from pydantic_ai import messages as pai

    from historykit.plugins.pydantic_ai import PydanticAIAdapter, with_provider_compaction

    adapter = PydanticAIAdapter()
    native = adapter.to_native(_native_history(compaction))
    stored = pai.ModelMessagesTypeAdapter.validate_json(pai.ModelMessagesTypeAdapter.dump_json(native))
    summaries = [p for m in adapter.to_neutral(stored) for p in m.parts if isinstance(p, SummaryPart)]
    assert [s.provider_compaction for s in summaries] == [compaction]
    sent = with_provider_compaction(stored)
    assert len(sent) == len(stored) + 1
    # The request holding the summary (a `CompactionPart` in 2.x, a `TextContent` in 1.x) is followed
    # by the added response; every native message is passed on as the very same object.
    holder = next(i for i, (a, b) in enumerate(zip(sent, stored, strict=False)) if a is not b) - 1
    assert all(a is b for a, b in zip(sent[: holder + 1], stored, strict=False))
    assert all(a is b for a, b in zip(sent[holder + 2 :], stored[holder + 1 :], strict=True))
    added = sent[holder + 1]
    assert isinstance(added, pai.ModelResponse) and added.provider_name == compaction.provider
    [part] = added.parts
    assert isinstance(part, pai.CompactionPart) and part.provider_name == compaction.provider
    block = compaction.block_dict()
    if compaction.provider == "anthropic":
        assert (part.content, part.provider_details) == (block["content"], {"signature": block["signature"]})
    else:
        assert (part.content, part.id, part.provider_details) == (None, block["id"], block)
    rest = stored[holder + 1 :]
    assert with_provider_compaction(rest) == rest  # no summary: nothing added


@pytest.mark.parametrize("compaction", _BLOCKS, ids=["anthropic", "openai"])
def test_langchain_history_keeps_the_block(compaction: ProviderCompaction) -> None:
    from langchain_core.messages import messages_from_dict, messages_to_dict

    from historykit.plugins.langchain import LangChainAdapter

    adapter = LangChainAdapter()
    native = adapter.to_native(_native_history(compaction))
    stored = messages_from_dict(messages_to_dict(native))
    summaries = [p for m in adapter.to_neutral(stored) for p in m.parts if isinstance(p, SummaryPart)]
    assert [s.provider_compaction for s in summaries] == [compaction]
    # An edit of the text keeps the block; dropping the block drops its metadata.
    edited = adapter.to_neutral(stored)
    part = edited[1].parts[0]
    assert isinstance(part, SummaryPart)
    edited[1] = replace(edited[1], parts=(replace(part, text="shorter"),))
    assert adapter.to_native(edited)[1].additional_kwargs[PROVIDER_COMPACTION_KEY] == compaction.to_dict()
    edited[1] = replace(edited[1], parts=(replace(part, provider_compaction=None),))
    assert PROVIDER_COMPACTION_KEY not in adapter.to_native(edited)[1].additional_kwargs


def test_a_backend_refuses_a_client_of_another_kind() -> None:
    with pytest.raises(TypeError, match="anthropic.Anthropic or AsyncAnthropic"):
        AnthropicCompactionSummarizer(object(), ANTHROPIC)
    with pytest.raises(TypeError, match=r"openai.OpenAI or AsyncOpenAI"):
        OpenAICompactionSummarizer(ProviderEmulator(lambda r: Turn()).anthropic_client(), OPENAI)
    with pytest.raises(ValueError, match="model must be a non-empty model id"):
        OpenAICompactionSummarizer(ProviderEmulator(lambda r: Turn()).openai_client(), "")


def test_langchain_sync_agent_with_sync_clients() -> None:
    """`agent.invoke` runs the middleware's sync path; a sync SDK client compacts on the caller's thread."""
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(), ANTHROPIC)
    chat = emulator.chat_anthropic(ANTHROPIC, thinking={"type": "adaptive"}, max_tokens=4096)
    agent = _langchain_agent(chat, _summarize(native), reports)
    state = agent.invoke({"messages": [("user", "Read the files.")]})
    assert _final_text(state) == "All done."
    _assert_anthropic_native(emulator, reports)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_transcript_summarized_natively_in_a_sync_pipeline(provider: str) -> None:
    """No agent: a real transcript (a Claude Code session) through `Pipeline.run`, sync clients;
    the summary keeps the provider's block."""
    from historykit.formats import read_transcript

    messages = read_transcript("historykit/data/sample_session.jsonl").history
    emulator = ProviderEmulator(lambda request: Turn(text="unused"))
    native: Any = (
        AnthropicCompactionSummarizer(emulator.anthropic_client(), ANTHROPIC)
        if provider == "anthropic"
        else OpenAICompactionSummarizer(emulator.openai_client(), OPENAI)
    )
    summarize = Summarize(trigger=Trigger(max_tokens=20_000), summarizer=[native, ExtractiveSummarizer()])
    result = Pipeline([summarize]).run(messages, context_window=200_000)
    [marker] = result.report.markers
    assert (marker.strategy, marker.model) == ("summarize", native.model_name)
    assert marker.tokens_after < marker.tokens_before
    [summary] = [p for m in result.messages for p in m.parts if isinstance(p, SummaryPart)]
    assert summary.provider_compaction is not None and summary.provider_compaction.provider == provider
    assert emulator.rejected == [] and len(emulator.received) == 1
    if provider == "anthropic":  # the text is Anthropic's summary, completed with the user's words
        assert emulator.compaction_summaries[0] in summary.text
    else:  # OpenAI's cannot be read: the text names the item and is historykit's extractive summary
        assert emulator.compaction_summaries[0] not in summary.text
        assert "encrypted compaction item cmp_" in summary.text and "## Task" in summary.text


def _assert_other_provider_reads_the_text(emulator: ProviderEmulator, api: str) -> None:
    assert emulator.rejected == []
    assert len(_compactions(emulator)) >= 2
    calls = [r for r in emulator.received if r.api == api]
    after = [r for r in calls if "[historykit] Summary of the earlier" in r.request.text()]
    assert after, "the summary text never reached the other provider"
    assert not any('"type": "compaction"' in r.request.text() for r in calls)


@pytest.mark.pydantic_ai
async def test_pydantic_ai_another_provider_reads_the_summary_text() -> None:
    """Anthropic writes the summary for an agent whose model is OpenAI's (Chat Completions): the
    model is sent historykit's summary text, never Anthropic's block."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), ANTHROPIC)
    model = OpenAIChatModel(
        OPENAI, provider=OpenAIProvider(openai_client=emulator.openai_client(async_=True))
    )
    result = await _pydantic_ai_agent(model, _summarize(native), reports).run("Read the files.")
    assert result.output == "All done."
    _assert_other_provider_reads_the_text(emulator, "openai-chat")


async def test_langchain_another_provider_reads_the_summary_text() -> None:
    emulator = _emulator()
    reports: list[Report] = []
    native = AnthropicCompactionSummarizer(emulator.anthropic_client(async_=True), ANTHROPIC)
    agent = _langchain_agent(emulator.chat_openai(OPENAI), _summarize(native), reports)
    state = await agent.ainvoke({"messages": [("user", "Read the files.")]})
    assert _final_text(state) == "All done."
    _assert_other_provider_reads_the_text(emulator, "openai-chat")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=neutral_histories(max_turns=4, max_steps=3), data=st.data())
def test_any_span_makes_a_compaction_request_the_provider_accepts(history: list[Message], data: Any) -> None:
    """What a summarizer is given (the task, perhaps an earlier summary, then any span, even one
    that splits a call from its result) goes to both compaction endpoints as a request they accept:
    the pairing rules hold, thinking is left out, and the summary comes back."""
    start = data.draw(st.integers(0, len(history) - 1))
    end = data.draw(st.integers(start + 1, len(history)))
    span = history[start:end]
    if data.draw(st.booleans()):
        span = [Message("user", (SummaryPart("[historykit] Summary of the earlier conversation."),)), *span]
    emulator = ProviderEmulator(lambda request: Turn(text="unused"))
    wire = anthropic_messages(span)
    items = responses_input(span)
    if not wire:
        assert not items
        with pytest.raises(ValueError, match="nothing to compact"):
            AnthropicCompactionSummarizer(emulator.anthropic_client(), ANTHROPIC)(span)
        return
    assert not any(b["type"] == "thinking" for m in wire for b in m["content"])
    anthropic_summary = AnthropicCompactionSummarizer(emulator.anthropic_client(), ANTHROPIC)(span)
    openai_summary = OpenAICompactionSummarizer(emulator.openai_client(), OPENAI)(span)
    assert emulator.rejected == []
    assert str(anthropic_summary) == emulator.compaction_summaries[0]
    assert openai_summary.provider_compaction.provider == "openai"
