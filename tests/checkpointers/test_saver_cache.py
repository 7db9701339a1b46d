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


def _one_node_graph(saver: SQLModelSaver, agent: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _echo_graph(saver: SQLModelSaver) -> Any:
    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"echo: {last.content}")]}

    return _one_node_graph(saver, agent)


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

    graph = _one_node_graph(SQLModelSaver(database_url), agent)
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


def test_a_run_resumes_from_the_objects_the_last_run_ended_with(database_url: str) -> None:
    """A run's first read hands it the history the last run ended with, copying only what that
    run's node added (the node's objects stay the node's): a step does not copy the history."""
    graph = _echo_graph(SQLModelSaver(database_url))
    config = {"configurable": {"thread_id": "runs"}}
    one = graph.invoke({"messages": [HumanMessage("one", id="h1")]}, config)["messages"]
    two = graph.invoke({"messages": [HumanMessage("two", id="h2")]}, config)["messages"]
    three = graph.invoke({"messages": [HumanMessage("three", id="h3")]}, config)["messages"]
    assert _contents(three) == [
        "human:one",
        "ai:echo: one",
        "human:two",
        "ai:echo: two",
        "human:three",
        "ai:echo: three",
    ]
    assert all(a is not b for a, b in zip(one, two, strict=False))  # run 1's were the node's and the caller's
    assert all(a is b for a, b in zip(two[:2], three[:2], strict=True))
    # Run 2's input and its node's answer were the caller's and the node's: copied, once.
    assert all(a == b and a is not b for a, b in zip(two[2:], three[2:4], strict=True))


def test_an_edit_of_what_get_state_returned_never_reaches_a_run(database_url: str) -> None:
    seen: list[list[str]] = []

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        seen.append(_contents(state["messages"]))
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    graph = _one_node_graph(SQLModelSaver(database_url), agent)
    config = {"configurable": {"thread_id": "isolated"}}
    graph.invoke({"messages": [HumanMessage("one", id="h1")]}, config)
    graph.invoke({"messages": [HumanMessage("two", id="h2")]}, config)
    read = graph.get_state(config).values["messages"]
    read[0].content = "scribbled on"  # never given back
    read[1].additional_kwargs["note"] = "scribbled on"
    out = graph.invoke({"messages": [HumanMessage("three", id="h3")]}, config)["messages"]
    assert seen[-1] == ["human:one", "ai:echo: one", "human:two", "ai:echo: two", "human:three"]
    assert out[1].additional_kwargs == {}
    assert all(a is not b for a, b in zip(read, out, strict=False))
    assert _contents(graph.get_state(config).values["messages"])[:2] == ["human:one", "ai:echo: one"]


def test_a_cold_read_decodes_each_message_once_and_still_sees_edits(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process's `get_state` decodes each stored message once: the private form an edit is
    detected against is decoded from the row's bytes only when a write compares with it. An edit
    made in place on what that read returned (a plain message, one the serializer stores, and one
    deep inside a tool call) is still written by `update_state`, and the older checkpoint keeps
    what it had."""
    from historykit.checkpointers import _serde

    config = {"configurable": {"thread_id": "cold"}}
    call = AIMessage("", id="a1", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": "c1"}])
    odd = HumanMessage("odd", id="h2", additional_kwargs={"when": (2026, 11)})  # a tuple: serializer form
    written = _echo_graph(SQLModelSaver(database_url))
    written.invoke({"messages": [HumanMessage("go", id="h1"), call, odd]}, config)

    decoded: list[bytes] = []
    unpack = _serde.unpack_message

    def counting(data: bytes) -> Any:
        decoded.append(data)
        return unpack(data)

    monkeypatch.setattr(_serde, "unpack_message", counting)
    cold = _echo_graph(SQLModelSaver(database_url))
    before = cold.get_state(config)
    plain = [m for m in before.values["messages"] if m.id != "h2"]
    assert len(decoded) == len(plain) == len({*decoded}) == 3  # h1, a1 and the echo, once each
    # The next read checks that what the first handed out is unchanged, without decoding again.
    again = cold.get_state(config).values["messages"]
    assert len(decoded) == 3 and all(a is b for a, b in zip(again, before.values["messages"], strict=True))

    go, deploy, read_odd = before.values["messages"][:3]
    go.content = "went"
    deploy.tool_calls[0]["args"]["target"] = "staging"
    read_odd.additional_kwargs["when"] = (2027, 1)
    # Edited in place but not given back: a read gets what is stored, not the edited objects.
    stored = cold.get_state(config).values["messages"]
    assert [stored[0].content, stored[1].tool_calls[0]["args"]] == ["go", {"target": "prod"}]
    assert stored[0] is not go and stored[1] is not deploy and stored[2] is not read_odd
    cold.update_state(config, {"messages": [go, deploy, read_odd]})

    fresh = _echo_graph(SQLModelSaver(database_url))
    now = fresh.get_state(config).values["messages"]
    assert [now[0].content, now[1].tool_calls[0]["args"], now[2].additional_kwargs] == [
        "went",
        {"target": "staging"},
        {"when": [2027, 1]},
    ]
    older = fresh.get_state(before.config).values["messages"]
    assert [older[0].content, older[1].tool_calls[0]["args"], older[2].additional_kwargs] == [
        "go",
        {"target": "prod"},
        {"when": [2026, 11]},
    ]


def test_the_private_copy_shares_nothing_mutable() -> None:
    """The copy the cache keeps of a stored message (and hands out) is `copy.deepcopy`'s, made
    faster: equal, of the same type, and no dict or list of it is the original's."""
    from historykit.checkpointers._message_cache import private_copy

    original = AIMessage(
        [{"type": "text", "text": "see"}, {"type": "image", "url": "u", "meta": {"w": [1, 2]}}],
        id="a1",
        tool_calls=[{"name": "deploy", "args": {"target": "prod", "tags": ["x"]}, "id": "c1"}],
        additional_kwargs={"nested": {"list": [{"deep": True}]}},
        response_metadata={"model": "m"},
    )
    copied = private_copy(original)
    assert copied == original and type(copied) is AIMessage and copied is not original
    assert copied.model_fields_set == original.model_fields_set

    def containers(value: Any) -> list[Any]:
        if isinstance(value, dict):
            return [value, *(c for item in value.values() for c in containers(item))]
        if isinstance(value, list):
            return [value, *(c for item in value for c in containers(item))]
        return []

    mine = {id(c) for c in containers(original.__dict__)}
    assert not mine & {id(c) for c in containers(copied.__dict__)}
    copied.tool_calls[0]["args"]["tags"].append("y")
    copied.additional_kwargs["nested"]["list"][0]["deep"] = False
    assert original.tool_calls[0]["args"] == {"target": "prod", "tags": ["x"]}
    assert original.additional_kwargs == {"nested": {"list": [{"deep": True}]}}
