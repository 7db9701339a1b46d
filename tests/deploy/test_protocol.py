"""What LangGraph's Agent Server asks of a checkpointer, without the server: its factory form, its
prune strategy, `list({})`, its channel versions, and the agent's private state kept out of what a
graph shows (the server tests, `test_agent_server.py`, run the same through `langgraph dev`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from historykit.checkpointers import AgentServerCheckpointer, SQLModelSaver
from historykit.checkpointers._agent_server import DEFAULT_URL, URL_VARIABLE, checkpointer
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.plugins.langchain import hide_private_state, private_state_keys
from tests.deploy import agent_app


def _graph() -> StateGraph:
    def reply(state: MessagesState) -> dict[str, list[tuple[str, str]]]:
        return {"messages": [("ai", f"reply to {len(state['messages'])} messages")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder


def _fill(saver: object) -> None:
    graph = _graph().compile(checkpointer=saver)  # type: ignore[arg-type]
    for thread in ("a", "b"):
        for turn in range(3):
            graph.invoke({"messages": [("user", f"{thread}{turn}")]}, {"configurable": {"thread_id": thread}})


def _listed(saver: object, config: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in saver.list(config):  # type: ignore[attr-defined]
        thread = item.config["configurable"]["thread_id"]
        counts[thread] = counts.get(thread, 0) + 1
    return counts


def test_list_without_a_thread_lists_every_thread_as_in_memory_saver_does(tmp_path: Path) -> None:
    reference, saver = InMemorySaver(), SQLModelSaver(f"sqlite:///{tmp_path / 'h.db'}")
    _fill(reference)
    _fill(saver)
    everything = _listed(reference, None)
    assert everything == {"a": 9, "b": 9}  # 3 turns of 3 checkpoints (input, loop, loop)
    assert _listed(reference, {}) == everything
    for config in (None, {}, {"configurable": {}}):
        assert _listed(saver, config) == everything, config

    async def alisted(config: object) -> int:
        return len([item async for item in saver.alist(config)])  # type: ignore[arg-type]

    assert asyncio.run(alisted({})) == 18
    with pytest.raises(ArgumentTypeError, match="RunnableConfig"):
        list(saver.list("a"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="configurable"):
        list(saver.list({"configurable": "a"}))  # type: ignore[typeddict-item]
    saver.close()


def test_prune_delete_all_is_the_servers_name_for_delete(tmp_path: Path) -> None:
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'h.db'}")
    _fill(saver)
    saver.prune(["a"], strategy="delete_all")
    asyncio.run(saver.aprune(["b"], strategy="delete_all"))
    assert _listed(saver, None) == {}
    # As with "delete", the messages stay in the log.
    transcript = saver.transcript("a")
    assert transcript is not None and [m.content for m in transcript.messages][:2] == [
        "a0",
        "reply to 1 messages",
    ]
    with pytest.raises(InvalidArgumentError, match="keep_last does not apply"):
        saver.prune(["a"], strategy="delete_all", keep_last=2)
    with pytest.raises(InvalidArgumentError, match="'delete_all'"):
        saver.prune(["a"], strategy="everything")
    saver.close()


def _stored_versions(url: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT channel_versions FROM historykit_checkpoint")).all()
        blobs = conn.execute(sa.text("SELECT version FROM historykit_blob")).all()
    engine.dispose()
    return [v for (text,) in rows for v in json.loads(text).values()] + [v for (v,) in blobs]


def test_versions_have_the_official_width_and_are_stored_short(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    saver = SQLModelSaver(url)
    first = saver.get_next_version(None, None)
    counter, suffix = first.split(".")
    assert len(counter) == 32 and int(counter) == 1 and len(suffix) == 8
    assert int(saver.get_next_version(first, None).split(".")[0]) == 2
    # A version the server wrote (its suffix is a float) is continued by its counter.
    server = f"{41:032}.0.{'7' * 16}"
    assert saver.get_next_version(server, None).startswith(f"{42:032}.")

    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"counter": 1, "other": 2}
    checkpoint["channel_versions"] = {"counter": first, "other": server}
    checkpoint["versions_seen"] = {"node": {"counter": first, "other": server}}
    saver.put(config, checkpoint, {"source": "input", "step": -1}, dict(checkpoint["channel_versions"]))

    stored = _stored_versions(url)
    assert sorted(stored) == sorted([first[20:], server] * 2)
    got = saver.get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_versions"] == {"counter": first, "other": server}
    assert got.checkpoint["versions_seen"] == {"node": {"counter": first, "other": server}}
    assert got.checkpoint["channel_values"] == {"counter": 1, "other": 2}
    saver.close()


class _ServerVersions(SQLModelSaver):
    """A saver whose graph gets the versions LangGraph's Agent Server makes: its checkpointer adapter
    (langgraph-api's `_CustomCheckpointerAdapter.get_next_version`) writes `f"{n:032}.{random():.16f}"`
    whatever the saver's own method; `test_agent_server.py` runs the real adapter."""

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        counter = 0 if current is None else int(str(current).split(".")[0])
        return f"{counter + 1:032}.{0.5:.16f}"


@pytest.mark.parametrize("order", ["historykit first", "server first"])
def test_a_thread_moves_between_historykit_versions_and_the_servers(tmp_path: Path, order: str) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    kinds = [SQLModelSaver, _ServerVersions] * 2
    if order == "server first":
        kinds.reverse()
    config = {"configurable": {"thread_id": "t"}}
    for turn, kind in enumerate(kinds):
        with kind(url) as saver:
            out = _graph().compile(checkpointer=saver).invoke({"messages": [("user", f"q{turn}")]}, config)
        assert out is not None, f"turn {turn} did not run"
        assert [m.content for m in out["messages"]][-2:] == [f"q{turn}", f"reply to {2 * turn + 1} messages"]


def test_the_factory_opens_and_closes_a_saver_on_the_database_it_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    assert checkpointer.resolved_url() == DEFAULT_URL
    from_env = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv(URL_VARIABLE, from_env)
    assert checkpointer.resolved_url() == from_env
    given = AgentServerCheckpointer(url=f"sqlite:///{tmp_path / 'given.db'}", single_writer=True)
    assert given.resolved_url() == given.url
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        AgentServerCheckpointer(url=" ").resolved_url()

    async def serve() -> None:
        # What the server does with it: call it, enter what it returns.
        async with checkpointer() as saver:
            assert isinstance(saver, SQLModelSaver)
            assert (tmp_path / "env.db").exists()  # the schema is made on entry
            graph = _graph().compile(checkpointer=saver)
            await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
        async with given() as guarded:
            assert guarded._db.guard is not None

    asyncio.run(serve())
    with SQLModelSaver(from_env) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_hide_private_state_keeps_the_keys_in_the_checkpoint_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(agent_app.PERSIST_VARIABLE, raising=False)
    monkeypatch.delenv(agent_app.CALLS_VARIABLE, raising=False)
    saver = InMemorySaver()
    graph = agent_app.build(saver)  # view-only: the middleware keeps its view in the state
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"messages": [HumanMessage(agent_app.prompt("t", 0))]}, config)
    assert not private_state_keys() & set(out)
    assert not private_state_keys() & set(graph.get_state(config).values)
    assert all(not private_state_keys() & set(s.values) for s in graph.get_state_history(config))
    streamed = list(
        graph.stream({"messages": [HumanMessage(agent_app.prompt("t", 1))]}, config, stream_mode="values")
    )
    assert streamed and all(not private_state_keys() & set(values) for values in streamed)
    stored = saver.get_tuple(config)
    assert stored is not None and {"historykit_view", "historykit_view_of"} <= set(
        stored.checkpoint["channel_values"]
    )

    plain = _graph().compile()
    assert hide_private_state(plain) is plain  # nothing of historykit's to hide
    with pytest.raises(ArgumentTypeError, match="compiled LangGraph graph"):
        hide_private_state(_graph())  # type: ignore[type-var]
