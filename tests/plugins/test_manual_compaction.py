"""Manual compaction with a focus, through real agents and the provider emulator, in both frameworks.

A conversation far below every trigger runs a first turn of tool calls; the user then asks for a
compaction with a focus (`compact(focus)` on the integration, Claude Code's `/compact <focus>`), and
the next turn's first model call summarizes: the summarizer (an LLM on a second emulator) gets the
focus in its prompt, the marker records `automatic=False` and the focus, the small history is
summarized (not truncated), the provider accepts every request (on a binding model the thinking
after the summary is dropped, else the emulator refuses it), and the later calls extend the
compacted view (append-only), in persistent and view-only mode alike. Stored threads are compacted
without a model call: a LangGraph thread through `graph.update_state` (`SQLModelSaver`), a Pydantic
AI conversation through `SQLModelConversationStore` (load, compact, save).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from historykit import default_pipeline
from historykit._messages import SummaryPart
from historykit._pipeline import Report
from historykit.processors import Summarize
from historykit.processors._summarizers import FOCUS_INSTRUCTIONS
from tests.emulator import (
    NON_BINDING_ANTHROPIC_MODEL,
    EmulatedRequest,
    ProviderEmulator,
    ToolCall,
    Turn,
    extends,
)

BINDING = "claude-fable-5-2"
SUMMARIZER = "claude-haiku-4-5"
WINDOW = 200_000
"""Far above the conversation: no automatic compaction fires, only the one asked for."""
SYSTEM = "Be careful."
FOCUS = "keep the details of the auth refactor"
FIRST_TURNS = 8
SECOND_TURNS = 3
SUMMARY = "## Task\n- Refactor the auth module.\n\n## Decisions\n- Tokens move to auth/tokens.py."


def read(path: str) -> str:
    """Read a file."""
    return "\n".join(f"{path} line {i}: token = sign(user_{i}, key={i * 7})" for i in range(40))


def _agent_emulator(model: str) -> ProviderEmulator:
    """First turn: `FIRST_TURNS` reads then an answer; second turn: `SECOND_TURNS` reads, then done.
    Fixed tool-call ids and signing secret: two runs that send the same views send the same bytes."""
    played = 0

    def script(request: EmulatedRequest) -> Turn:
        nonlocal played
        i, played = played, played + 1
        if i == FIRST_TURNS:
            return Turn(thinking=f"Step {i}: the files are read.", text="Read them all.")
        if i > FIRST_TURNS + SECOND_TURNS:
            return Turn(thinking=f"Step {i}: finished.", text="All done.")
        call = ToolCall("read", {"path": f"src/auth/f{i}.py"}, id=f"toolu_{i:04d}")
        return Turn(thinking=f"Step {i}: I will read a file.", text=f"Reading file {i}.", tool_calls=[call])

    return ProviderEmulator(script, secret=b"manual-compaction")


def _summarizer_emulator() -> ProviderEmulator:
    return ProviderEmulator(lambda request: Turn(text=SUMMARY), secret=b"summarizer")


def _assert_compacted_on_request(
    emulator: ProviderEmulator, summarizer: ProviderEmulator, reports: list[Report], at: int
) -> None:
    """`at`: the index of the second turn's first request, the one that compacts."""
    assert not emulator.rejected, [r.rejection for r in emulator.rejected]
    asked = [i for i, r in enumerate(reports) if any(not m.automatic for m in r.markers)]
    assert asked == [at]
    report = reports[at]
    assert not any(r.changed for i, r in enumerate(reports) if i != at)
    (marker,) = report.markers
    assert (marker.strategy, marker.focus, marker.model) == ("summarize", FOCUS, SUMMARIZER)
    # A small history (far below Summarize's 60% mark), summarized rather than truncated.
    assert marker.tokens_before < 0.6 * WINDOW
    assert marker.covered_to > marker.covered_from
    assert next(s.processor for s in report.steps if s.changed) == "Summarize"
    # The summarizer got the focus in its prompt, once.
    (summarized,) = summarizer.received
    assert (
        FOCUS_INSTRUCTIONS.format(focus=FOCUS) in summarized.history()["messages"][-1]["content"][0]["text"]
    )
    sent = emulator.received
    compacted = sent[at]
    assert "Tokens move to auth/tokens.py." in str(compacted.history())
    assert len(compacted.history()["messages"]) < len(sent[at - 1].history()["messages"])
    assert not extends(sent[at - 1], compacted)
    # The second turn continues from the compacted view, append-only.
    later = sent[at:]
    assert len(later) == SECOND_TURNS + 1
    assert all(extends(a, b) for a, b in itertools.pairwise(later))


# --- Pydantic AI ---------------------------------------------------------------------------------


def _pai_model(emulator: ProviderEmulator, model_name: str) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return AnthropicModel(
        model_name, provider=AnthropicProvider(anthropic_client=emulator.anthropic_client(async_=True))
    )


def _pai_kit(summarizer: ProviderEmulator, persist: bool, reports: list[Report]) -> Any:
    from historykit.plugins.pydantic_ai import HistoryKit

    pipeline = default_pipeline(model=_pai_model(summarizer, SUMMARIZER))
    return HistoryKit(pipeline, context_window=WINDOW, persist=persist, on_report=reports.append)


def _pai_agent(emulator: ProviderEmulator, model_name: str, kit: Any) -> Any:
    from pydantic_ai import Agent

    agent = Agent(
        _pai_model(emulator, model_name),
        instructions=SYSTEM,
        capabilities=[kit],
        model_settings={"max_tokens": 1024},
    )
    agent.tool_plain(read)
    return agent


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
async def test_pydantic_ai_compacts_on_request_with_a_focus(persist: bool, model_name: str) -> None:
    emulator, summarizer = _agent_emulator(model_name), _summarizer_emulator()
    reports: list[Report] = []
    kit = _pai_kit(summarizer, persist, reports)
    agent = _pai_agent(emulator, model_name, kit)
    first = await agent.run("Refactor the auth module.")
    assert first.output == "Read them all."
    kit.compact(FOCUS)
    second = await agent.run("Now the billing part.", message_history=first.all_messages())
    assert second.output == "All done."
    _assert_compacted_on_request(emulator, summarizer, reports, at=FIRST_TURNS + 1)
    history = second.all_messages()
    # Persistent: the run's history is the compacted view; view-only: every message, unedited.
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    # A summary as the adapter reads it: a `CompactionPart` in 2.x, a marked user prompt in 1.x.
    neutral = PydanticAIAdapter().to_neutral(history)
    has_summary = any(isinstance(p, SummaryPart) for m in neutral for p in m.parts)
    assert has_summary is persist


@pytest.mark.pydantic_ai
async def test_pydantic_ai_modes_send_the_same_requests_around_a_manual_compaction() -> None:
    sent = {}
    for persist in (True, False):
        emulator, summarizer = _agent_emulator(BINDING), _summarizer_emulator()
        reports: list[Report] = []
        kit = _pai_kit(summarizer, persist, reports)
        agent = _pai_agent(emulator, BINDING, kit)
        first = await agent.run("Refactor the auth module.")
        kit.compact(FOCUS, conversation="someone-else")  # another conversation's: not this one's
        kit.compact(FOCUS)
        await agent.run("Now the billing part.", message_history=first.all_messages())
        _assert_compacted_on_request(emulator, summarizer, reports, at=FIRST_TURNS + 1)
        sent[persist] = [r.history() for r in emulator.received]
    assert sent[True] == sent[False]


@pytest.mark.pydantic_ai
async def test_pydantic_ai_stored_conversation_is_compacted_and_continued(tmp_path: Path) -> None:
    pytest.importorskip(
        "pydantic_ai.conversation_store", reason="the conversation store needs Pydantic AI 2.x"
    )
    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    emulator, summarizer = _agent_emulator(BINDING), _summarizer_emulator()
    reports: list[Report] = []
    kit = _pai_kit(summarizer, True, reports)
    agent = _pai_agent(emulator, BINDING, kit)
    first = await agent.run("Refactor the auth module.")
    await store.save(first)
    conversation_id = first.conversation.conversation_id
    original = first.all_messages()

    loaded = await store.load(conversation_id)
    assert loaded is not None
    compacted = await kit.compact_conversation(loaded, FOCUS)
    await store.save(compacted)
    (marker,) = kit.last_report.markers if kit.last_report else []
    assert not marker.automatic and marker.focus == FOCUS

    reloaded = await store.load(conversation_id)
    assert reloaded is not None and len(reloaded.messages) < len(original)
    summaries = [
        p
        for m in PydanticAIAdapter().to_neutral(reloaded.messages)
        for p in m.parts
        if isinstance(p, SummaryPart)
    ]
    assert [(s.marker.automatic, s.marker.focus) for s in summaries if s.marker] == [(False, FOCUS)]
    second = await agent.run("Now the billing part.", conversation=reloaded)
    assert second.output == "All done."
    await store.save(second)
    assert not emulator.rejected, [r.rejection for r in emulator.rejected]
    later = emulator.received[FIRST_TURNS + 1 :]
    assert all(extends(a, b) for a, b in itertools.pairwise(later))
    # The store keeps every original message beside the compacted history, with the marker.
    transcript = await store.transcript(conversation_id)
    assert transcript is not None
    assert all(m in transcript.messages for m in original)
    # Each stored message that holds the summary carries its marker (Pydantic AI may merge the
    # summary's request with the next one, which is logged as a message of its own).
    assert {
        (c.marker.automatic, c.marker.focus)
        for c in transcript.compactions
        if c.marker.strategy == "summarize"
    } == {(False, FOCUS)}
    await store.aclose()


@pytest.mark.pydantic_ai
async def test_pydantic_ai_view_only_conversation_cannot_be_rewritten() -> None:
    pytest.importorskip("pydantic_ai.conversation", reason="conversations need Pydantic AI 2.x")
    from pydantic_ai.conversation import Conversation

    kit = _pai_kit(_summarizer_emulator(), False, [])
    with pytest.raises(ValueError, match="view-only"):
        await kit.compact_conversation(Conversation(conversation_id="c"), FOCUS)


# --- LangChain -----------------------------------------------------------------------------------


def _lc_middleware(summarizer: ProviderEmulator, persist: bool, reports: list[Report]) -> Any:
    from historykit.plugins.langchain import HistoryKitMiddleware

    pipeline = default_pipeline(model=summarizer.chat_anthropic(SUMMARIZER, max_tokens=1024))
    return HistoryKitMiddleware(pipeline, context_window=WINDOW, persist=persist, on_report=reports.append)


def _lc_agent(emulator: ProviderEmulator, model_name: str, middleware: Any, checkpointer: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    llm = emulator.chat_anthropic(model_name, max_tokens=1024)
    return create_agent(
        llm, tools=[tool(read)], system_prompt=SYSTEM, middleware=[middleware], checkpointer=checkpointer
    )


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
def test_langchain_compacts_on_request_with_a_focus(persist: bool, model_name: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    emulator, summarizer = _agent_emulator(model_name), _summarizer_emulator()
    reports: list[Report] = []
    middleware = _lc_middleware(summarizer, persist, reports)
    agent = _lc_agent(emulator, model_name, middleware, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    state = agent.invoke({"messages": [{"role": "user", "content": "Refactor the auth module."}]}, config)
    assert state["messages"][-1].text == "Read them all."
    middleware.compact(FOCUS, thread_id="t1")
    state = agent.invoke({"messages": [{"role": "user", "content": "Now the billing part."}]}, config)
    assert state["messages"][-1].text == "All done."
    _assert_compacted_on_request(emulator, summarizer, reports, at=FIRST_TURNS + 1)
    kept = any("historykit_compaction" in m.additional_kwargs for m in state["messages"])
    assert kept is persist


async def test_langchain_async_modes_send_the_same_requests_around_a_manual_compaction() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    sent = {}
    for persist in (True, False):
        emulator, summarizer = _agent_emulator(BINDING), _summarizer_emulator()
        reports: list[Report] = []
        middleware = _lc_middleware(summarizer, persist, reports)
        agent = _lc_agent(emulator, BINDING, middleware, InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t1"}}
        await agent.ainvoke({"messages": [{"role": "user", "content": "Refactor the auth module."}]}, config)
        middleware.compact(FOCUS)
        await agent.ainvoke({"messages": [{"role": "user", "content": "Now the billing part."}]}, config)
        _assert_compacted_on_request(emulator, summarizer, reports, at=FIRST_TURNS + 1)
        sent[persist] = [r.history() for r in emulator.received]
    assert sent[True] == sent[False]


@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
def test_langgraph_stored_thread_is_compacted_through_the_graph(tmp_path: Path, model_name: str) -> None:
    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    emulator, summarizer = _agent_emulator(model_name), _summarizer_emulator()
    reports: list[Report] = []
    middleware = _lc_middleware(summarizer, True, reports)
    agent = _lc_agent(emulator, model_name, middleware, saver)
    config: Any = {"configurable": {"thread_id": "stored"}}
    agent.invoke({"messages": [{"role": "user", "content": "Refactor the auth module."}]}, config)
    original = agent.get_state(config).values["messages"]

    report = middleware.compact_thread(agent, config, FOCUS)
    (marker,) = report.markers
    assert not marker.automatic and marker.focus == FOCUS
    stored = agent.get_state(config).values["messages"]
    assert len(stored) < len(original)
    assert sum("historykit_compaction" in m.additional_kwargs for m in stored) == 1
    # On a binding model no thinking is left after the summary: the provider would refuse it.
    after_summary = stored[
        next(i for i, m in enumerate(stored) if "historykit_compaction" in m.additional_kwargs) :
    ]
    thinking = [
        b
        for m in after_summary
        if isinstance(m.content, list)
        for b in m.content
        if b.get("type") == "thinking"
    ]
    assert (not thinking) if model_name == BINDING else bool(thinking)

    state = agent.invoke({"messages": [{"role": "user", "content": "Now the billing part."}]}, config)
    assert state["messages"][-1].text == "All done."
    assert not emulator.rejected, [r.rejection for r in emulator.rejected]
    later = emulator.received[FIRST_TURNS + 1 :]
    assert len(later) == SECOND_TURNS + 1
    assert all(extends(a, b) for a, b in itertools.pairwise(later))
    # The saver's transcript still has every original message, and the marker.
    transcript = saver.transcript("stored")
    assert [m.id for m in original if m.id] == [m.id for m in transcript.messages if m.id][: len(original)]
    assert [
        (c.marker.automatic, c.marker.focus)
        for c in transcript.compactions
        if c.marker.strategy == "summarize"
    ] == [(False, FOCUS)]


async def test_langgraph_stored_thread_async_and_view_only(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    emulator, summarizer = _agent_emulator(BINDING), _summarizer_emulator()
    middleware = _lc_middleware(summarizer, True, [])
    agent = _lc_agent(emulator, BINDING, middleware, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "a"}}
    await agent.ainvoke({"messages": [{"role": "user", "content": "Refactor the auth module."}]}, config)
    report = await middleware.acompact_thread(agent, config, FOCUS, keep_last=1)
    assert [m.focus for m in report.markers] == [FOCUS]
    state = await agent.ainvoke({"messages": [{"role": "user", "content": "Now the billing part."}]}, config)
    assert state["messages"][-1].text == "All done."
    assert not emulator.rejected

    view_only = HistoryKitMiddleware(Summarize(), persist=False)
    with pytest.raises(ValueError, match="view-only"):
        view_only.compact_thread(agent, config, FOCUS)


@pytest.mark.parametrize("model_name", [BINDING, NON_BINDING_ANTHROPIC_MODEL])
def test_langgraph_prebuilt_agent_hook_compacts_on_request(model_name: str) -> None:
    """The `create_react_agent` pre-model hook (view only): the next call compacts, later ones extend it."""
    import warnings

    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    from historykit.plugins.langchain import HistoryKitHook

    emulator, summarizer = _agent_emulator(model_name), _summarizer_emulator()
    reports: list[Report] = []
    pipeline = default_pipeline(model=summarizer.chat_anthropic(SUMMARIZER, max_tokens=1024))
    hook = HistoryKitHook(pipeline, context_window=WINDOW, on_report=reports.append)
    llm = emulator.chat_anthropic(model_name, max_tokens=1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents in LangGraph 1.0
        agent = create_react_agent(llm, [tool(read)], pre_model_hook=hook, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "hook"}}
    agent.invoke({"messages": [{"role": "user", "content": "Refactor the auth module."}]}, config)
    hook.compact(FOCUS, thread_id="hook")
    state = agent.invoke({"messages": [{"role": "user", "content": "Now the billing part."}]}, config)
    assert state["messages"][-1].text == "All done."
    _assert_compacted_on_request(emulator, summarizer, reports, at=FIRST_TURNS + 1)
    assert not any("historykit_compaction" in m.additional_kwargs for m in state["messages"])  # view only
