"""historykit inside real LangGraph graphs with a fake chat model: the `create_react_agent` pre-model
hook (view only), the LangChain v1 `create_agent` middleware (view only and persistent, with
`InMemorySaver` and `SQLModelSaver` on a SQLite file), a persistent node in a plain `StateGraph`, and
the `add_messages` update the persistent modes write."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")

import tenacity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, create_react_agent
from pydantic import Field

from historykit import Pipeline, Report, TokenCounter, check, default_pipeline
from historykit._context_window import ContextWindow
from historykit._messages import COMPACTION_KEY, EDIT_KEY
from historykit.checkpointers import SQLModelSaver
from historykit.plugins.langchain import (
    HistoryKitHook,
    HistoryKitMiddleware,
    chat_model_context_window,
    state_update,
)
from historykit.processors import ClearToolResults, PairwiseTruncate, Repair, Summarize, Trigger
from tests.plugins.langchain_histories import langchain_histories
from tests.strategies import examples

WINDOW = 8_000
TURNS = 205
LIMIT = {"recursion_limit": 10 * TURNS}
TASK = "Read the modules under src/ and find the bug."


def file_content(path: str) -> str:
    """A few KB of a source file, different for every path."""
    return "\n".join(
        f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})  # step {i}" for i in range(70)
    )


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return file_content(path)


def script(turns: int) -> Iterator[AIMessage]:
    for n in range(turns):
        call = {"id": f"call_{n}", "name": "read_file", "args": {"path": f"src/mod{n % 17}.py"}}
        yield AIMessage(f"Next I read src/mod{n % 17}.py.", tool_calls=[call])
    yield AIMessage("All files read; the bug is in src/mod3.py.")


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools; it measures every input it gets."""

    sizes: list[int] = Field(default_factory=list)
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    counter: Any = Field(default_factory=TokenCounter)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFakeModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.sizes.append(self.counter.count(messages, use_usage=False).tokens)
        self.inputs.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def fake_model(turns: int = TURNS, window: int | None = WINDOW) -> ToolCallingFakeModel:
    profile = {"max_input_tokens": window} if window is not None else None
    return ToolCallingFakeModel(messages=script(turns), profile=profile)


def assert_every_input_fits(model: ToolCallingFakeModel, turns: int = TURNS) -> None:
    assert len(model.sizes) == turns + 1
    assert max(model.sizes) <= WINDOW
    for messages in model.inputs[:: max(1, turns // 20)]:
        assert check(messages) == []
        assert any(isinstance(m, HumanMessage) and m.content == TASK for m in messages)


def assert_untouched_transcript(messages: list[BaseMessage], turns: int = TURNS) -> None:
    """Every call the model made and every result, with the file as read: nothing lost."""
    calls = {tc["id"] for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls}
    assert {f"call_{n}" for n in range(turns)} <= calls
    originals = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.content.startswith("src/")
    }
    assert {f"call_{n}" for n in range(turns)} <= originals


def test_react_agent_pre_model_hook_is_view_only_and_keeps_the_state() -> None:
    model = fake_model()
    reports: list[Report] = []
    hook = HistoryKitHook(default_pipeline(), model=model, on_report=reports.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents in LangGraph 1.0
        agent = create_react_agent(model, [read_file], pre_model_hook=hook)

    out = agent.invoke({"messages": [HumanMessage(TASK)]}, LIMIT)

    assert out["messages"][-1].content.startswith("All files read")
    assert_every_input_fits(model)
    # The state keeps every message, unedited: 1 task + a call and a result per turn + the answer.
    assert len(out["messages"]) == 2 * TURNS + 2
    assert all(
        m.content == file_content(m.content.split(":", 1)[0])
        for m in out["messages"]
        if isinstance(m, ToolMessage)
    )
    assert_untouched_transcript(out["messages"])
    assert len(reports) == TURNS + 1 and hook.last_report is reports[-1]
    assert {(r.context_window, r.window_source) for r in reports} == {(WINDOW, "model profile")}
    assert any(r.markers for r in reports)


async def test_react_agent_hook_runs_async_with_an_explicit_window() -> None:
    model = fake_model(turns=60, window=None)
    reports: list[Report] = []
    hook = HistoryKitHook(default_pipeline(), context_window=WINDOW, on_report=reports.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [read_file], pre_model_hook=hook)
    out = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, LIMIT)
    assert_every_input_fits(model, 60)
    assert len(out["messages"]) == 2 * 60 + 2
    assert {r.window_source for r in reports} == {"explicit"}


def test_create_agent_middleware_view_only_keeps_the_state() -> None:
    model = fake_model(turns=80)
    middleware = HistoryKitMiddleware(default_pipeline())
    agent = create_agent(
        model, [read_file], system_prompt="You are a careful engineer.", middleware=[middleware]
    )

    out = agent.invoke({"messages": [HumanMessage(TASK)]}, LIMIT)

    assert_every_input_fits(model, 80)
    assert len(out["messages"]) == 2 * 80 + 2
    assert_untouched_transcript(out["messages"], 80)
    # The system message was budgeted with the history and reached the model.
    assert all(isinstance(m[0], SystemMessage) for m in model.inputs)
    assert middleware.last_report is not None and middleware.last_report.window_source == "model profile"


def _thread(name: str) -> dict[str, Any]:
    return {**LIMIT, "configurable": {"thread_id": name}}


def test_create_agent_middleware_persistent_with_in_memory_checkpoints() -> None:
    model = fake_model()
    reports: list[Report] = []
    middleware = HistoryKitMiddleware(default_pipeline(), persist=True, on_report=reports.append)
    saver = InMemorySaver()
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=saver)

    out = agent.invoke({"messages": [HumanMessage(TASK)]}, _thread("t1"))

    assert out["messages"][-1].content.startswith("All files read")
    assert_every_input_fits(model)
    state = agent.get_state(_thread("t1")).values["messages"]
    # The state (and the checkpoint it comes from) holds the processed history, not 400 messages.
    assert len(state) < TURNS // 2
    assert len({m.id for m in state}) == len(state)
    assert state[0].content == TASK and state[-1].content.startswith("All files read")
    assert any(COMPACTION_KEY in m.additional_kwargs for m in state)
    assert check(state) == []
    assert len(reports) == TURNS + 1 and any(r.markers for r in reports)

    # The next turn starts from the processed state.
    model.messages = script(3)
    model.sizes.clear()
    after = agent.invoke({"messages": [HumanMessage("Check src/mod3.py once more.")]}, _thread("t1"))
    assert max(model.sizes) <= WINDOW
    assert len(after["messages"]) < TURNS // 2
    assert after["messages"][-1].content.startswith("All files read")


async def test_create_agent_middleware_persistent_with_sqlmodel_saver_keeps_the_transcript(
    tmp_path: Path,
) -> None:
    model = fake_model()
    middleware = HistoryKitMiddleware(default_pipeline(), persist=True)
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=saver)

    out = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, _thread("t1"))

    assert out["messages"][-1].content.startswith("All files read")
    assert_every_input_fits(model)
    state = (await agent.aget_state(_thread("t1"))).values["messages"]
    assert len(state) < TURNS // 2
    # The message log still has every message the thread ever had, and the compactions.
    transcript = await saver.atranscript("t1")
    assert len(transcript.messages) > 2 * TURNS
    assert_untouched_transcript(transcript.messages)
    assert transcript.compactions
    for compaction in transcript.compactions:
        kwargs = compaction.message.additional_kwargs
        assert (COMPACTION_KEY if compaction.marker.strategy == "summarize" else EDIT_KEY) in kwargs
    assert any(c.marker.strategy == "summarize" for c in transcript.compactions)


def test_persistent_node_in_a_plain_state_graph() -> None:
    model = fake_model()
    reports: list[Report] = []
    compact = HistoryKitHook(
        default_pipeline(), context_window=WINDOW, persist=True, on_report=reports.append
    )

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("compact", compact)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "compact")
    graph = builder.compile(checkpointer=InMemorySaver())

    out = graph.invoke({"messages": [SystemMessage("You are careful."), HumanMessage(TASK)]}, _thread("g"))

    assert_every_input_fits(model)
    assert len(out["messages"]) < TURNS // 2
    assert isinstance(out["messages"][0], SystemMessage) and out["messages"][1].content == TASK
    assert check(out["messages"]) == []
    assert {r.window_source for r in reports} == {"explicit"}


def test_a_failing_summarizer_does_not_fail_the_graph() -> None:
    calls: list[int] = []

    def broken(messages: Any) -> str:
        calls.append(len(messages))
        raise ConnectionError("summarizer unreachable")

    steps = [
        Summarize(summarizer=broken, attempts=2, retry_wait=tenacity.wait_none())
        if isinstance(p, Summarize)
        else p
        for p in default_pipeline().processors
    ]
    model = fake_model(turns=80)
    middleware = HistoryKitMiddleware(Pipeline(steps), persist=True)
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage(TASK)]}, _thread("f"))
    assert out["messages"][-1].content.startswith("All files read")
    assert_every_input_fits(model, 80)
    assert calls


def test_the_window_comes_from_the_chat_model_profile() -> None:
    stated = ContextWindow(50_000, "model profile")
    assert chat_model_context_window(fake_model(window=50_000)) == stated
    assert chat_model_context_window(fake_model(window=None)) is None
    assert chat_model_context_window(fake_model(window=50_000).bind(stop=["x"])) == stated
    assert chat_model_context_window(None) is None


def test_bad_configuration_and_state_are_refused() -> None:
    with pytest.raises(TypeError, match="historykit processor or Pipeline"):
        HistoryKitHook(lambda messages: messages)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context_window"):
        HistoryKitMiddleware(default_pipeline(), context_window=0)
    with pytest.raises(ValueError, match="'messages'"):
        HistoryKitHook(Repair()).invoke({"other": []})


# --- the add_messages update ---------------------------------------------------------------------


def _with_ids(history: list[BaseMessage]) -> list[BaseMessage]:
    return add_messages([], history)  # type: ignore[return-value]


def _same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return [(m.id, type(m), m.content) for m in a] == [(m.id, type(m), m.content) for m in b]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    langchain_histories(min_turns=2, max_turns=5),
    st.integers(200, 3_000),
    st.booleans(),
)
def test_state_update_turns_the_state_into_the_processed_history(
    history: list[BaseMessage], window: int, appended: bool
) -> None:
    old = _with_ids(history)
    pipeline = Pipeline(
        [
            ClearToolResults(min_tokens=1, min_gain=0),
            Summarize(trigger=Trigger(max_tokens=window), min_gain=0),
            PairwiseTruncate(),
            Repair(),
        ]
    )
    new = pipeline.run(old, context_window=window).messages
    response = [AIMessage("the next answer", id="response-1")] if appended else []
    update = state_update(old, new, appended=response)
    state = add_messages(add_messages(old, response), update) if response else add_messages(old, update)
    # add_messages gives the new messages the ids the update chose: compare by content and order.
    assert [(type(m), m.content) for m in state] == [(type(m), m.content) for m in [*new, *response]]
    assert len({m.id for m in state}) == len(state)
    # Messages the processors kept untouched stay the very same objects, under their ids.
    for index, msg in enumerate(new):
        if any(msg is o for o in old):
            assert state[index] is msg
    if new is not old and len(new) == len(old) and all(a is b for a, b in zip(new, old)):
        assert update == []


def test_state_update_is_minimal_for_removals_and_edits() -> None:
    old = _with_ids([HumanMessage("task"), AIMessage("a"), HumanMessage("b"), AIMessage("c")])
    edited = old[3].model_copy(update={"content": "c, shorter"})
    update = state_update(old, [old[0], old[2], edited])
    assert [type(m).__name__ for m in update] == ["RemoveMessage", "AIMessage"]
    assert update[0].id == old[1].id and update[1] is edited
    assert _same(add_messages(old, update), [old[0], old[2], edited])
    # A message that goes in between forces a full replacement.
    summary = HumanMessage("summary")
    update = state_update(old, [old[0], summary, old[3]])
    assert update[0].id == "__remove_all__"
    assert [m.content for m in add_messages(old, update)] == ["task", "summary", "c"]
    assert state_update(old, list(old)) == []
