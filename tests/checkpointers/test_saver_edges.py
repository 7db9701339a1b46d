"""Smaller differences from the official savers, and inputs that must fail clearly: awaitable
`setup`, plain paths for URLs, pruning finished subgraph calls, bounded reference blobs."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph

from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import CorruptRowError, create_engine
from tests.checkpointers.read_only_mount import run_read_only, skip_without_namespaces


def _echo_graph(saver: SQLModelSaver, *, subgraph: bool = False) -> Any:
    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    if subgraph:
        inner = StateGraph(MessagesState)
        inner.add_node("agent", agent)
        inner.add_edge(START, "agent")
        builder.add_node("child", inner.compile())
        builder.add_edge(START, "child")
    else:
        builder.add_node("agent", agent)
        builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _execute(url: str, sql: str, **params: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(sql), params)
            return list(result) if result.returns_rows else []
    finally:
        engine.dispose()


async def test_setup_can_be_awaited(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    await saver.setup()  # as users of AsyncSqliteSaver / AsyncPostgresSaver write it
    saver.setup()
    await saver.asetup()
    graph = _echo_graph(saver)
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})


def test_a_plain_path_is_a_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    saver = SQLModelSaver("agent.db")
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    assert (tmp_path / "agent.db").exists()
    absolute = SQLModelSaver(str(tmp_path / "agent.db"))
    assert len(absolute.transcript("t").messages) == 2


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing_dir" / "a.db"
    with pytest.raises(ValueError, match=rf"{missing.parent}' does not exist"):
        SQLModelSaver(f"sqlite:///{missing}").setup()
    with pytest.raises(ValueError, match="does not exist"):
        SQLModelSaver(str(missing)).setup()


def test_prune_drops_finished_subgraph_calls(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    graph = _echo_graph(saver, subgraph=True)
    config = {"configurable": {"thread_id": "sub"}}
    for text in ("one", "two", "three"):
        graph.invoke({"messages": [HumanMessage(text)]}, config, subgraphs=True)
    namespaces = {
        row[0] for row in _execute(database_url, "SELECT DISTINCT checkpoint_ns FROM historykit_checkpoint")
    }
    assert len([ns for ns in namespaces if ns.startswith("child:")]) == 3
    saver.prune(["sub"], strategy="keep_latest")
    left = _execute(
        database_url, "SELECT checkpoint_ns, COUNT(*) FROM historykit_checkpoint GROUP BY checkpoint_ns"
    )
    assert dict(left) == {"": 1}  # each call went with the root checkpoint it started from
    assert not _execute(
        database_url, "SELECT 1 FROM historykit_blob WHERE checkpoint_ns <> ''"
    ) and not _execute(database_url, "SELECT 1 FROM historykit_write WHERE checkpoint_ns <> ''")
    fresh = _echo_graph(SQLModelSaver(database_url), subgraph=True)
    assert [m.content for m in fresh.get_state(config).values["messages"]][-2:] == ["three", "echo: three"]
    fresh.invoke({"messages": [HumanMessage("four")]}, config)
    assert len(SQLModelSaver(database_url).transcript("sub").messages) == 8


@pytest.mark.parametrize("length", [10**8, 10**30])
def test_a_crafted_run_length_is_a_clear_error(sqlite_url: str, length: int) -> None:
    saver = SQLModelSaver(sqlite_url)
    config = {"configurable": {"thread_id": "refs"}}
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi")]}, config)
    blob = json.dumps({"v": 2, "runs": [0, length]})
    _execute(
        sqlite_url, "UPDATE historykit_blob SET data = :d WHERE encoding = 'historykit.refs'", d=blob.encode()
    )
    with pytest.raises(CorruptRowError, match="historykit_blob.*refers to .* messages, more than"):
        _echo_graph(SQLModelSaver(sqlite_url)).get_state(config)


def test_message_numbers_beyond_64_bits_are_a_clear_error(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    config = {"configurable": {"thread_id": "refs"}}
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi")]}, config)
    blob = json.dumps({"v": 2, "runs": [10**30, 1]})
    _execute(
        sqlite_url, "UPDATE historykit_blob SET data = :d WHERE encoding = 'historykit.refs'", d=blob.encode()
    )
    with pytest.raises(CorruptRowError, match=r"message numbers outside 0\.\.2\*\*63-1"):
        _echo_graph(SQLModelSaver(sqlite_url)).get_state(config)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A local port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    yield server.getsockname()[1]
    stop.set()
    worker.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_server_that_never_answers_fails_setup_quickly(silent_server: int, mode: str) -> None:
    saver = SQLModelSaver(f"postgresql+psycopg://user@127.0.0.1:{silent_server}/db", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(
        ConnectionError, match=rf"cannot connect to the database .*127\.0\.0\.1:{silent_server}.*timeout 2 s"
    ):
        if mode == "sync":
            saver.setup()
        else:
            await saver.asetup()
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("thread_id", "message"),
    [("a\x00b", "contains a NUL character"), ("é" * 1500, r"is 3,000 bytes long .*at most 1,000")],
)
def test_thread_ids_a_database_cannot_hold_are_named(database_url: str, thread_id: str, message: str) -> None:
    saver = SQLModelSaver(database_url)
    config = {"configurable": {"thread_id": thread_id}}
    with pytest.raises(ValueError, match=rf"the thread id .*{message}"):
        _echo_graph(saver).invoke({"messages": [HumanMessage("hi")]}, config)
    with pytest.raises(ValueError, match=message):
        saver.delete_thread(thread_id)
    with pytest.raises(ValueError, match=message):
        saver.transcript(thread_id)


def test_tool_arguments_nested_too_deep_are_named(database_url: str) -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    call = AIMessage("", tool_calls=[{"name": "f", "args": {"a": deep}, "id": "c1"}])
    saver = SQLModelSaver(database_url)
    with pytest.raises(ValueError, match=r"nests lists or dicts 200 or more levels deep.*msgpack"):
        _echo_graph(saver).invoke({"messages": [call]}, {"configurable": {"thread_id": "deep"}})


def test_a_transcript_never_shows_a_result_before_its_call(database_url: str) -> None:
    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done", id="ai-2")]}
        return {"messages": [AIMessage("", id="ai-1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])]}

    def tools(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [ToolMessage("result", tool_call_id="c1", id="tool-1")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "__end__")
    builder.add_edge("tools", "agent")
    saver = SQLModelSaver(database_url)
    builder.compile(checkpointer=saver).invoke(
        {"messages": [HumanMessage("go", id="h")]}, {"configurable": {"thread_id": "t"}}
    )
    assert [m.id for m in saver.transcript("t").messages] == ["h", "ai-1", "tool-1", "ai-2"]
    # As after a crash between LangGraph's background saves: the call was only logged later
    # (from the checkpoint saved on resume), at a position after its result's.
    ((after,),) = _execute(database_url, "SELECT position FROM historykit_message WHERE native_id = 'tool-1'")
    _execute(
        database_url, "UPDATE historykit_message SET position = :p WHERE native_id = 'ai-1'", p=after + "~"
    )
    assert [m.id for m in SQLModelSaver(database_url).transcript("t").messages] == [
        "h",
        "ai-1",
        "tool-1",
        "ai-2",
    ]


_READ_ONLY_READER = """
import sys
from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import ReadOnlyDatabaseError
saver = SQLModelSaver(sys.argv[1])
print([m.content for m in saver.transcript("t").messages])
config = {"configurable": {"thread_id": "t"}}
print(len(saver.get_tuple(config).checkpoint["channel_values"]["messages"]), len(list(saver.list(config))))
try:
    saver.delete_thread("t")
except ReadOnlyDatabaseError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("writer", ["closed", "still open"])
def test_a_database_on_a_read_only_filesystem_is_readable(tmp_path: Path, writer: str) -> None:
    """Closed: the file alone (opened immutable); still open: its -wal file holds the thread."""
    skip_without_namespaces()
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'agent.db'}"
    saver = SQLModelSaver(url)
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    if writer == "closed":
        saver.close()
    assert (folder / "agent.db-wal").exists() is (writer == "still open")
    script = tmp_path / "reader.py"
    script.write_text(_READ_ONLY_READER)
    lines = run_read_only(folder, script, url)
    assert lines[0] == "['hi', 'echo: hi']"
    assert lines[1] == "2 3"
    assert "refused:" in lines[2] and "opened read-only because its directory" in lines[2]


def test_a_message_with_content_none_passes_through_untouched(database_url: str) -> None:
    """LangChain refuses `content=None` at construction; a message changed to it afterwards is
    stored and read back as it is (as the official savers do), not turned into a TypeError."""
    odd = HumanMessage("x", id="odd")
    odd.content = None  # type: ignore[assignment]
    saver = SQLModelSaver(database_url)
    config = {"configurable": {"thread_id": "none"}}
    _echo_graph(saver).invoke({"messages": [odd]}, config)
    fresh = SQLModelSaver(database_url)
    assert [m.content for m in fresh.transcript("none").messages] == [None, "echo: None"]
    assert _echo_graph(fresh).get_state(config).values["messages"][0].content is None
