"""End to end: a LangGraph agent with tools, an interrupt, a compaction, a fork and time travel,
checkpointed by `SQLModelSaver`, through the sync API and the async API, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, StateSnapshot, interrupt

from historykit._messages import COMPACTION_KEY, CompactionMarker
from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import create_engine

KEEP_AFTER_COMPACTION = 2
COMPACT_ABOVE = 6


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def f():\n    return 1\n" * 20


@tool
def deploy(target: str) -> str:
    """Deploy the project (asks a human first)."""
    answer = interrupt({"question": f"deploy to {target}?"})
    return f"deployed to {target}" if answer == "yes" else "deployment cancelled"


def _call(i: int, name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", id=f"ai-{i}", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}])


SCRIPT = [
    _call(1, "read_file", path="a.py"),
    _call(2, "read_file", path="b.py"),
    _call(3, "deploy", target="prod"),
    AIMessage("Deployed after reading both files.", id="ai-4"),
    AIMessage("Here is the forked answer.", id="ai-5"),
    AIMessage("Stopping as asked.", id="ai-6"),
]
"""What the model says, call after call, across the whole scenario."""

MARKER = CompactionMarker(
    covered_from=0,
    covered_to=5,
    tokens_before=900,
    tokens_after=120,
    strategy="summarize",
    model="fake-model",
)


def build_graph(saver: SQLModelSaver, script: Iterator[AIMessage]) -> Any:
    model = GenericFakeChatModel(messages=script)

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    def compact(state: MessagesState) -> dict[str, list[Any]]:
        """Summarize all but the last messages once the history grows past a threshold."""
        messages = state["messages"]
        if len(messages) <= COMPACT_ABOVE:
            return {}
        summary = HumanMessage(
            content=f"Summary of {len(messages) - KEEP_AFTER_COMPACTION} earlier messages: "
            "read a.py and b.py.",
            id="summary-1",
            additional_kwargs={COMPACTION_KEY: MARKER.to_dict()},
        )
        kept = messages[-KEEP_AFTER_COMPACTION:]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept]}

    builder = StateGraph(MessagesState)
    builder.add_node("compact", compact)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([read_file, deploy]))
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "compact")
    return builder.compile(checkpointer=saver)


def _contents(messages: list[BaseMessage]) -> list[str]:
    """A readable fingerprint of a history: type and content (tool calls by name and argument)."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            call = m.tool_calls[0]
            out.append(f"ai:{call['name']}({next(iter(call['args'].values()))})")
        else:
            out.append(f"{m.type}:{str(m.content).splitlines()[0]}")
    return out


class Api:
    """The same scenario through the sync API (run in a worker thread) or the async API."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def __call__(
        self, sync: Callable[..., Any], asynchronous: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        if self.mode == "sync":
            return await asyncio.to_thread(sync, *args, **kw)
        return await asynchronous(*args, **kw)

    async def history(self, graph: Any, config: dict[str, Any]) -> list[StateSnapshot]:
        if self.mode == "sync":
            return await asyncio.to_thread(lambda: list(graph.get_state_history(config)))
        return [s async for s in graph.aget_state_history(config)]


def _count_rows(url: str, table: str, thread_id: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(f"SELECT COUNT(*) FROM {table} WHERE thread_id = :t"), {"t": thread_id}
                ).scalar_one()
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_agent_interrupt_compaction_fork_and_time_travel(database_url: str, mode: str) -> None:
    api = Api(mode)
    saver = SQLModelSaver(database_url)
    graph = build_graph(saver, iter(SCRIPT))
    t1 = {"configurable": {"thread_id": "t1"}}

    # 1. Tool calls, then an interrupt inside the deploy tool.
    await api(
        graph.invoke,
        graph.ainvoke,
        {"messages": [HumanMessage("Read a.py and b.py, then deploy.", id="h-1")]},
        t1,
    )
    state = await api(graph.get_state, graph.aget_state, t1)
    assert state.next == ("tools",)
    assert state.interrupts and state.interrupts[0].value == {"question": "deploy to prod?"}
    assert _contents(state.values["messages"]) == [
        "human:Read a.py and b.py, then deploy.",
        "ai:read_file(a.py)",
        "tool:# a.py",
        "ai:read_file(b.py)",
        "tool:# b.py",
        "ai:deploy(prod)",
    ]

    # 2. Resume: the tool runs, the history is compacted, the agent answers.
    await api(graph.invoke, graph.ainvoke, Command(resume="yes"), t1)
    state = await api(graph.get_state, graph.aget_state, t1)
    assert state.next == ()
    final_t1 = _contents(state.values["messages"])
    assert final_t1 == [
        "human:Summary of 5 earlier messages: read a.py and b.py.",
        "ai:deploy(prod)",
        "tool:deployed to prod",
        "ai:Deployed after reading both files.",
    ]

    # 3. The transcript keeps what compaction removed, in order, with the marker.
    transcript = await api(saver.transcript, saver.atranscript, "t1")
    assert _contents(transcript.view) == final_t1
    assert _contents(transcript.logged()) == [
        "human:Read a.py and b.py, then deploy.",
        "ai:read_file(a.py)",
        "tool:# a.py",
        "ai:read_file(b.py)",
        "tool:# b.py",
        "ai:deploy(prod)",
        "tool:deployed to prod",
        "human:Summary of 5 earlier messages: read a.py and b.py.",
        "ai:Deployed after reading both files.",
    ]
    (compaction,) = transcript.compactions
    assert compaction.marker == MARKER
    assert compaction.message.id == "summary-1"
    # Every message stored once, however many checkpoints hold it: the originals, and the summary.
    assert _count_rows(database_url, "historykit_message", "t1") == len(transcript.messages) + 1
    checkpoints = await api.history(graph, t1)
    assert len(checkpoints) > len(transcript.messages)

    # 4. A fork: copy the thread, continue the copy; the original is untouched.
    await api(saver.copy_thread, saver.acopy_thread, "t1", "t2")
    t2 = {"configurable": {"thread_id": "t2"}}
    await api(graph.invoke, graph.ainvoke, {"messages": [HumanMessage("And on the fork?", id="h-2")]}, t2)
    forked = await api(graph.get_state, graph.aget_state, t2)
    assert _contents(forked.values["messages"]) == [
        *final_t1,
        "human:And on the fork?",
        "ai:Here is the forked answer.",
    ]
    assert _contents((await api(graph.get_state, graph.aget_state, t1)).values["messages"]) == final_t1
    t2_transcript = await api(saver.transcript, saver.atranscript, "t2")
    assert _contents(t2_transcript.messages) == [
        *_contents(transcript.messages),
        "human:And on the fork?",
        "ai:Here is the forked answer.",
    ]
    assert [c.marker for c in t2_transcript.compactions] == [MARKER]
    assert len((await api(saver.transcript, saver.atranscript, "t1")).messages) == len(transcript.messages)

    # 5. Time travel: back to the checkpoint after the first tool result, and on from there.
    past = next(s for s in checkpoints if s.next == ("compact",) and len(s.values["messages"]) == 3)
    assert _contents(past.values["messages"])[-1] == "tool:# a.py"
    fork_config = await api(
        graph.update_state,
        graph.aupdate_state,
        past.config,
        {"messages": [HumanMessage("Stop here.", id="h-3")]},
    )
    await api(graph.invoke, graph.ainvoke, None, fork_config)
    travelled = await api(graph.get_state, graph.aget_state, t1)
    assert _contents(travelled.values["messages"]) == [
        "human:Read a.py and b.py, then deploy.",
        "ai:read_file(a.py)",
        "tool:# a.py",
        "human:Stop here.",
        "ai:Stopping as asked.",
    ]
    # The new branch hangs off the past checkpoint; the old branch is still readable.
    lineage = []
    cursor: dict[str, Any] | None = travelled.config
    while cursor is not None:
        snapshot = await api(graph.get_state, graph.aget_state, cursor)
        lineage.append(snapshot.config["configurable"]["checkpoint_id"])
        cursor = snapshot.parent_config
    assert past.config["configurable"]["checkpoint_id"] in lineage
    old_head = await api(graph.get_state, graph.aget_state, checkpoints[0].config)
    assert _contents(old_head.values["messages"]) == final_t1
    # Both branches' messages are in the transcript, each once.
    full = await api(saver.transcript, saver.atranscript, "t1")
    assert _contents(full.messages)[-2:] == ["human:Stop here.", "ai:Stopping as asked."]
    assert len(full.messages) == len(transcript.messages) + 2

    # 6. A new saver on the same database (no cache) reads the same state.
    fresh = SQLModelSaver(database_url)
    fresh_graph = build_graph(fresh, iter(()))
    reread = await api(fresh_graph.get_state, fresh_graph.aget_state, t1)
    assert reread.values["messages"] == travelled.values["messages"]
    assert [m.id for m in (await api(fresh.transcript, fresh.atranscript, "t1")).messages] == [
        m.id for m in full.messages
    ]

    # 7. delete_thread erases the thread, messages and markers included; the fork survives.
    await api(saver.delete_thread, saver.adelete_thread, "t1")
    for table in (
        "historykit_checkpoint",
        "historykit_blob",
        "historykit_write",
        "historykit_message",
        "historykit_compaction",
        "historykit_thread",
    ):
        assert _count_rows(database_url, table, "t1") == 0, table
    assert await api(saver.transcript, saver.atranscript, "t1") is None
    assert (await api(graph.get_state, graph.aget_state, t2)).values["messages"] == forked.values["messages"]
    await saver.aclose()
    saver.close()
    await fresh.aclose()
    fresh.close()
