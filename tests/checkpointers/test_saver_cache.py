"""The saver's message cache never disagrees with the database: in-place edits, objects reused
across threads, and threads deleted by another worker (each saver instance stands for a process:
its cache is its own), on a SQLite file and on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph

from historykit.checkpointers import SQLModelSaver

SYSTEM_PROMPT = SystemMessage("You are a careful assistant.")
"""Module-level, as applications write it: the same object enters every run."""


def _echo_graph(saver: SQLModelSaver) -> Any:
    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"echo: {last.content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _contents(messages: list[Any]) -> list[str]:
    return [f"{m.type}:{m.content}" for m in messages]


def test_an_in_place_edit_then_update_state_is_stored(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    graph = _echo_graph(saver)
    config = {"configurable": {"thread_id": "edit"}}
    graph.invoke({"messages": [HumanMessage("draft", id="h1")]}, config)
    before = graph.get_state(config)

    # LangGraph's human-in-the-loop pattern: edit the message object in place, then update_state.
    message = graph.get_state(config).values["messages"][0]
    message.content = "reviewed"
    graph.update_state(config, {"messages": [message]})

    assert _contents(graph.get_state(config).values["messages"]) == ["human:reviewed", "ai:echo: draft"]
    # The older checkpoint is unchanged, in this process and in a fresh one.
    older = graph.get_state(before.config)
    assert _contents(older.values["messages"]) == ["human:draft", "ai:echo: draft"]
    fresh = _echo_graph(SQLModelSaver(database_url))
    assert _contents(fresh.get_state(config).values["messages"]) == ["human:reviewed", "ai:echo: draft"]
    assert _contents(fresh.get_state(before.config).values["messages"]) == ["human:draft", "ai:echo: draft"]


def test_a_nested_in_place_edit_is_stored(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    graph = _echo_graph(saver)
    config = {"configurable": {"thread_id": "nested"}}
    call = AIMessage("", id="a1", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": "c1"}])
    graph.invoke({"messages": [HumanMessage("go", id="h1"), call]}, config)
    message = graph.get_state(config).values["messages"][1]
    message.tool_calls[0]["args"]["target"] = "staging"  # deep inside the message
    graph.update_state(config, {"messages": [message]})
    fresh = SQLModelSaver(database_url)
    state = _echo_graph(fresh).get_state(config)
    assert state.values["messages"][1].tool_calls[0]["args"] == {"target": "staging"}


def test_what_a_read_hands_out_is_the_callers_to_change(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    graph = _echo_graph(saver)
    config = {"configurable": {"thread_id": "reads"}}
    graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    graph.get_state(config).values["messages"][0].content = "scribbled on"  # never written back
    assert _contents(graph.get_state(config).values["messages"]) == ["human:hello", "ai:echo: hello"]
    assert [m.content for m in saver.transcript("reads").messages] == ["hello", "echo: hello"]


def test_a_read_never_hands_out_the_writers_objects(database_url: str) -> None:
    """LangGraph's `test_state_graph_packets`: a fake model's scripted message, read back through
    `get_state` and edited there, must not change what the model emits next (the official savers
    return copies)."""
    scripted = AIMessage("scripted answer", id="a1")

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [scripted]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=SQLModelSaver(database_url))
    one = {"configurable": {"thread_id": "one"}}
    graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, one)
    read = graph.get_state(one).values["messages"][1]
    assert read == scripted and read is not scripted
    read.content = "edited by a reviewer"
    graph.update_state(one, {"messages": [read]})
    assert scripted.content == "scripted answer"
    two = {"configurable": {"thread_id": "two"}}
    graph.invoke({"messages": [HumanMessage("hi", id="h2")]}, two)
    assert _contents(graph.get_state(two).values["messages"]) == ["human:hi", "ai:scripted answer"]
    assert _contents(graph.get_state(one).values["messages"])[1] == "ai:edited by a reviewer"


def test_one_message_object_reused_across_threads(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    graph = _echo_graph(saver)
    a, b = {"configurable": {"thread_id": "A"}}, {"configurable": {"thread_id": "B"}}
    template = HumanMessage("first")
    graph.invoke({"messages": [template]}, a)
    template.content = "second"  # the caller reuses its object for another conversation
    graph.invoke({"messages": [template]}, b)

    assert _contents(graph.get_state(a).values["messages"]) == ["human:first", "ai:echo: first"]
    assert _contents(graph.get_state(b).values["messages"]) == ["human:second", "ai:echo: second"]
    assert [m.content for m in saver.transcript("A").messages] == ["first", "echo: first"]
    fresh = _echo_graph(SQLModelSaver(database_url))
    assert _contents(fresh.get_state(a).values["messages"]) == ["human:first", "ai:echo: first"]
    assert _contents(fresh.get_state(b).values["messages"]) == ["human:second", "ai:echo: second"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_thread_deleted_by_another_worker_is_written_whole(database_url: str, mode: str) -> None:
    worker_a = SQLModelSaver(database_url)
    worker_b = SQLModelSaver(database_url)
    graph = _echo_graph(worker_a)
    config = {"configurable": {"thread_id": "user-42"}}

    async def run(text: str) -> None:
        payload = {"messages": [SYSTEM_PROMPT, HumanMessage(text)]}
        if mode == "sync":
            graph.invoke(payload, config)
        else:
            await graph.ainvoke(payload, config)

    await run("one")
    if mode == "sync":
        worker_b.delete_thread("user-42")
    else:
        await worker_b.adelete_thread("user-42")
    await run("two")

    fresh = SQLModelSaver(database_url)
    expected = ["system:You are a careful assistant.", "human:two", "ai:echo: two"]
    assert _contents(_echo_graph(fresh).get_state(config).values["messages"]) == expected
    assert _contents(fresh.transcript("user-42").messages) == expected
    assert len(list(fresh.list(config))) == len(list(worker_a.list(config)))
