"""A stored conversation resumes the view it was sent: with a store, every turn makes the same
summarizer calls and sends the model the same messages as when the conversation stays in memory.

- Pydantic AI: the README's store recipe (`store.load`, `agent.run(..., conversation=...)`,
  `store.save(result)` per turn) with `HistoryKit` on the agent, on SQLite and PostgreSQL, against
  the same agent carrying its conversation from run to run; also on a model that binds thinking,
  where every call's view must keep the thinking of the previous one valid (R13).
- LangGraph: `create_agent` with `HistoryKitMiddleware`, persistent and view-only, on a new
  `SQLModelSaver` per turn (a server that opens the database per request) against LangGraph's
  `InMemorySaver`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent

pytest.importorskip("pydantic_ai.conversation_store", reason="the conversation store needs Pydantic AI 2.x")

from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from historykit import Report, check, default_pipeline
from historykit.checkpointers import SQLModelConversationStore, SQLModelSaver
from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.plugins.pydantic_ai import HistoryKit
from tests.plugins.test_langgraph_agent import ToolCallingFakeModel
from tests.plugins.test_langgraph_agent import read_file as lc_read_file

pytestmark = pytest.mark.pydantic_ai

TURNS = 22
WINDOW = 8_000
PAI_WINDOW = 18_000
"""The Pydantic AI conversation's window: at `default_pipeline()`'s marks (clearing from `EDIT_AT`
when a batch pays for its cache rewrite, summaries from `SUMMARIZE_AT`) its turns are both cleared
and summarized."""


class CountingSummarizer:
    """Records every summarizer call (how many messages it was given) and answers deterministically."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, messages: Any, previous: Any = None) -> str:
        self.calls.append(len(messages))
        return f"Summary {len(self.calls)}: the files read so far and what they hold."


def _seen(messages: list[ModelMessage]) -> list[tuple[Any, ...]]:
    """What the model reads of a Pydantic AI history (no timestamps, ids or metadata)."""
    out: list[tuple[Any, ...]] = []
    for message in messages:
        for part in message.parts:
            out.append(
                (
                    type(message).__name__,
                    part.part_kind,
                    str(getattr(part, "content", "")),
                    str(getattr(part, "args", "")),
                    getattr(part, "signature", None),
                )
            )
    return out


class ReadingModel:
    """A Pydantic AI model function: each turn reads a file, then answers at length (with thinking
    signed by a binding model when `thinking=True`); it records every view it is sent."""

    def __init__(self, thinking: bool = False) -> None:
        self.thinking = thinking
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        n = len(self.sent)
        last = messages[-1]
        thought = [ThinkingPart(f"Thinking about call {n}.", signature=f"sig-{n}")] if self.thinking else []
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(
                [*thought, TextPart(f"Call {n}: I read it. " + "Here is what the module does. " * 4)],
                model_name="claude-opus-5-5" if self.thinking else None,
            )
        return ModelResponse(
            [*thought, ToolCallPart("read_file", {"path": f"src/mod{n}.py"}, tool_call_id=f"call-{n}")],
            model_name="claude-opus-5-5" if self.thinking else None,
        )


def _agent(model: ReadingModel, summarizer: CountingSummarizer, binds: bool) -> Agent[None, str]:
    kit = HistoryKit(default_pipeline(summarizer=summarizer), context_window=PAI_WINDOW, binds_thinking=binds)
    agent = Agent(FunctionModel(model), capabilities=[kit])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: a line of the module that is fairly long and says something\n" * 60

    return agent


async def _in_memory(binds: bool) -> tuple[ReadingModel, CountingSummarizer]:
    model, summarizer = ReadingModel(thinking=binds), CountingSummarizer()
    agent = _agent(model, summarizer, binds)
    conversation: Conversation | None = None
    for turn in range(TURNS):
        result = await agent.run(f"Turn {turn}: read the next module.", conversation=conversation)
        conversation = result.conversation
    return model, summarizer


async def _with_store(url: str, binds: bool) -> tuple[ReadingModel, CountingSummarizer, str]:
    model, summarizer = ReadingModel(thinking=binds), CountingSummarizer()
    agent = _agent(model, summarizer, binds)
    for turn in range(TURNS):
        # A new store per turn: what a server that opens the database per request does.
        store = SQLModelConversationStore(url)
        conversation = await store.load("chat") or Conversation(conversation_id="chat")
        result = await agent.run(f"Turn {turn}: read the next module.", conversation=conversation)
        await store.save(result)
        await store.aclose()
    return model, summarizer, url


@pytest.mark.parametrize("binds", [False, True], ids=["thinking-free", "binding-thinking"])
def test_the_store_recipe_sends_what_an_in_memory_conversation_sends(database_url: str, binds: bool) -> None:
    memory_model, memory_summaries = asyncio.run(_in_memory(binds))
    stored_model, stored_summaries, _ = asyncio.run(_with_store(database_url, binds))

    assert len(memory_summaries.calls) >= 2, "the conversation must be summarized more than once"
    assert stored_summaries.calls == memory_summaries.calls
    assert len(stored_model.sent) == len(memory_model.sent) == 2 * TURNS
    for call, (stored, memory) in enumerate(zip(stored_model.sent, memory_model.sent, strict=True)):
        assert _seen(stored) == _seen(memory), f"call {call} sent another view"
    if binds:
        for before, after in zip(stored_model.sent, stored_model.sent[1:]):
            assert not [v for v in check(after, sent_before=before, binds_thinking=True) if v.rule == "R13"]

    store = SQLModelConversationStore(database_url)
    transcript = asyncio.run(store.transcript("chat"))
    asyncio.run(store.aclose())
    assert transcript is not None
    # The originals: every prompt, call, result and answer once, valid as a history.
    prompts = [p.content for m in transcript.messages for p in m.parts if p.part_kind == "user-prompt"]
    assert prompts == [f"Turn {t}: read the next module." for t in range(TURNS)]
    results = [p for m in transcript.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(results) == TURNS and all(r.content.startswith("src/mod") for r in results)
    assert not check(transcript.messages)
    strategies = [c.marker.strategy for c in transcript.compactions]
    assert len(strategies) >= 3, "the conversation must compact several times"
    assert "summarize" in strategies and "clear_tool_results" in strategies
    # The view: what the model was last sent, then its answer.
    last_sent = _seen(stored_model.sent[-1])
    assert _seen(transcript.view or [])[: len(last_sent)] == last_sent
    # Then its answer alone (Pydantic AI sends consecutive requests merged; the view keeps them apart).
    answer = _seen(transcript.view or [])[len(last_sent) :]
    assert answer and {part[0] for part in answer} == {"ModelResponse"} and answer[-1][1] == "text"


# ---- LangGraph ----------------------------------------------------------------------------------


def _script() -> Iterator[AIMessage]:
    for n in range(TURNS):
        call = {"id": f"call_{n}", "name": "read_file", "args": {"path": f"src/mod{n % 17}.py"}}
        yield AIMessage(f"Next I read src/mod{n % 17}.py.", tool_calls=[call])
        yield AIMessage(f"Turn {n}: " + "the module computes totals from its values. " * 40)


def _lc_seen(messages: list[BaseMessage]) -> list[tuple[str, str, str]]:
    return [(m.type, str(m.content), str(getattr(m, "tool_calls", ""))) for m in messages]


def _langgraph_run(
    persist: bool,
    saver_for_turn: Callable[[], Any],
    *,
    cold: bool = False,
    reports: list[Report] | None = None,
) -> tuple[ToolCallingFakeModel, CountingSummarizer]:
    """`TURNS` turns of one thread; `cold`: a new middleware and pipeline every turn, as a server
    that loads the thread per request in a new process has."""
    summarizer = CountingSummarizer()
    model = ToolCallingFakeModel(messages=_script(), profile={"max_input_tokens": WINDOW})

    def new_middleware() -> HistoryKitMiddleware:
        on_report = None if reports is None else reports.append
        return HistoryKitMiddleware(
            default_pipeline(summarizer=summarizer), persist=persist, on_report=on_report
        )

    middleware = new_middleware()
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(TURNS):
        saver = saver_for_turn()
        if cold:
            middleware = new_middleware()
        agent = create_agent(model, [lc_read_file], middleware=[middleware], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage(f"Turn {turn}: read the next module.")]}, config)
        if isinstance(saver, SQLModelSaver):
            saver.close()
    return model, summarizer


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_saver_resumes_what_an_in_memory_graph_sends(database_url: str, persist: bool) -> None:
    memory_saver = InMemorySaver()
    memory_model, memory_summaries = _langgraph_run(persist, lambda: memory_saver)
    stored_model, stored_summaries = _langgraph_run(persist, lambda: SQLModelSaver(database_url))

    assert len(memory_summaries.calls) >= 2, "the thread must compact several times"
    assert stored_summaries.calls == memory_summaries.calls
    assert len(stored_model.inputs) == len(memory_model.inputs) == 2 * TURNS
    for call, (stored, memory) in enumerate(zip(stored_model.inputs, memory_model.inputs, strict=True)):
        assert _lc_seen(stored) == _lc_seen(memory), f"call {call} sent another view"

    with SQLModelSaver(database_url) as saver:
        transcript = saver.transcript("t")
    assert transcript is not None
    human = [m.content for m in transcript.messages if m.type == "human"]
    assert human == [f"Turn {t}: read the next module." for t in range(TURNS)]
    assert not check(transcript.messages)
    if persist:
        # Persistent: the state is the view, and every message a compaction wrote is a marker.
        assert "summarize" in {c.marker.strategy for c in transcript.compactions}
    else:
        # View-only: the state keeps every message as it arrived, and beside it the view last sent,
        # whose summaries and cleared copies are stored with their markers.
        assert "summarize" in {c.marker.strategy for c in transcript.compactions}
        assert _lc_seen((transcript.view or [])[:-1]) == _lc_seen(stored_model.inputs[-1])
        assert len(transcript.view or []) < len(transcript.messages)


def test_a_cold_view_only_resume_continues_the_stored_view(database_url: str) -> None:
    """A new middleware and pipeline every turn (a server loading the thread per request): each
    turn's first call continues the view the state kept instead of replaying the conversation."""
    memory_saver = InMemorySaver()
    memory_model, memory_summaries = _langgraph_run(False, lambda: memory_saver)
    reports: list[Report] = []
    cold_model, cold_summaries = _langgraph_run(
        False, lambda: SQLModelSaver(database_url), cold=True, reports=reports
    )

    assert cold_summaries.calls == memory_summaries.calls
    for call, (cold, memory) in enumerate(zip(cold_model.inputs, memory_model.inputs, strict=True)):
        assert _lc_seen(cold) == _lc_seen(memory), f"call {call} sent another view"
    # Two model calls a turn; without the stored view a turn's first call replays every earlier one.
    assert len(reports) == 2 * TURNS
    assert max(r.replayed_calls for r in reports) == 1


# ---- token counts ---------------------------------------------------------------------------------


def test_a_load_brings_back_the_counts_made_the_same_way_only(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from historykit import _tokens as tokens
    from historykit._digests import message_digest
    from historykit._tokens import TokenCounter, heuristic_tokenizer
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    model, summarizer = ReadingModel(), CountingSummarizer()
    agent = _agent(model, summarizer, False)

    async def two_turns() -> Conversation:
        store = SQLModelConversationStore(database_url)
        for turn in range(2):
            conversation = await store.load("counted") or Conversation(conversation_id="counted")
            await store.save(await agent.run(f"Turn {turn}.", conversation=conversation))
        await store.aclose()
        return conversation

    asyncio.run(two_turns())
    # A new process: nothing known but what the load brings back, for the messages it loaded.
    monkeypatch.setattr(tokens, "_LOADED", {})
    store = SQLModelConversationStore(database_url)
    loaded = asyncio.run(store.load("counted"))
    asyncio.run(store.aclose())
    assert loaded is not None
    neutral = PydanticAIAdapter().to_neutral(loaded.messages)
    exact = TokenCounter()
    for message in neutral:
        assert tokens.loaded_count(message.native, exact.count_method, message_digest(message)) is not None
    # What a counter of the same method takes for them is the count it makes itself.
    known = [TokenCounter().count_message(m) for m in neutral]
    monkeypatch.setattr(tokens, "_LOADED", {})
    assert known == [TokenCounter().count_message(m) for m in neutral]
    # A counter of another method (another tokenizer, or another counting scheme after an upgrade)
    # does not take them: it counts for itself.
    tokens.remember_counts({exact.count_method: {message_digest(neutral[0]): 10**9}}, loaded.messages)
    assert TokenCounter().count_message(PydanticAIAdapter().to_neutral(loaded.messages)[0]) == 10**9
    other = TokenCounter(tokenizer=heuristic_tokenizer)
    assert other.count_method != exact.count_method
    assert other.count_message(neutral[0]) < 10**9
    monkeypatch.setattr(tokens, "COUNT_SCHEME", tokens.COUNT_SCHEME + 1)
    assert TokenCounter().count_message(neutral[0]) < 10**9


def test_the_first_call_after_a_load_counts_only_what_is_new(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capability's first call on a loaded conversation finds the stored counts of every loaded
    message (the very objects the store loaded reach the pipeline), and tokenizes only the new
    request; a conversation whose stored count of an equal message was planted wrong does not
    change how another conversation is counted."""
    from historykit import _tokens as tokens
    from historykit._tokens import TokenCounter
    from historykit.plugins.pydantic_ai import PydanticAIAdapter
    from tests.checkpointers.stored_counts import PLANTED, plant_count, spy_loaded_counts

    model, summarizer = ReadingModel(), CountingSummarizer()
    agent = _agent(model, summarizer, False)

    async def turns(conversation_id: str) -> None:
        store = SQLModelConversationStore(database_url)
        conversation = Conversation(conversation_id=conversation_id)
        for turn in range(2):
            conversation = (await agent.run(f"Turn {turn}.", conversation=conversation)).conversation
            await store.save(conversation)
        await store.aclose()

    for conversation_id in ("planted", "clean"):
        asyncio.run(turns(conversation_id))
    plant_count(database_url, "planted")

    # A new process: both conversations loaded; the clean one runs its next turn.
    monkeypatch.setattr(tokens, "_LOADED", {})
    store = SQLModelConversationStore(database_url)
    both = {cid: asyncio.run(store.load(cid)) for cid in ("planted", "clean")}
    asyncio.run(store.aclose())
    found = spy_loaded_counts(monkeypatch)
    clean = both["clean"]
    assert clean is not None and both["planted"] is not None
    asyncio.run(agent.run("Turn 2.", conversation=clean))
    by_native = {id(native): answer for native, answer in found}
    loaded_ids = {id(message) for message in clean.messages}
    assert loaded_ids <= set(by_native)  # every loaded message was looked up ...
    assert all(by_native[i] is not None for i in loaded_ids)  # ... and found
    assert all(answer is None or answer < PLANTED for _, answer in found)
    # The request asks the same first question in both: counted as itself, not as planted.
    first = PydanticAIAdapter().to_neutral(clean.messages)[0]
    monkeypatch.setattr(tokens, "_LOADED", {})
    assert TokenCounter().count_message(first) < PLANTED
