"""The read-only inspection API, on SQLite files and PostgreSQL: what it reports, and what it refuses."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from historykit._messages import COMPACTION_KEY, CompactionMarker
from historykit.checkpointers._inspection import DatabaseInspector
from historykit.errors import InvalidArgumentError, SchemaError, SchemaVersionError

TS = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
GRAPH_MARKER = CompactionMarker(
    covered_from=0, covered_to=3, tokens_before=800, tokens_after=80, strategy="summarize", created_at=TS
)
CONVERSATION_MARKER = CompactionMarker(
    covered_from=0, covered_to=2, tokens_before=600, tokens_after=60, strategy="summarize", created_at=TS
)


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _write_graph(url: str) -> None:
    """A LangGraph thread of two turns, compacted once by a state update that carries a marker."""
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from historykit.checkpointers import SQLModelSaver

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage(f"answer {len(state['messages'])}")]})
    builder.add_edge(START, "agent")
    with SQLModelSaver(url) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [("user", "first")]}, _config("t-graph"))
        graph.invoke({"messages": [("user", "second")]}, _config("t-graph"))
        state = graph.get_state(_config("t-graph")).values["messages"]
        summary = HumanMessage(
            "Summary: two questions answered.",
            id="summary-1",
            additional_kwargs={COMPACTION_KEY: GRAPH_MARKER.to_dict()},
        )
        graph.update_state(
            _config("t-graph"), {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, state[-1]]}
        )


def _write_conversation(url: str) -> None:
    """A Pydantic AI conversation saved twice: whole, then compacted (the original left as a branch)."""
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import CompactionPart, ModelRequest, ModelResponse, TextPart, UserPromptPart

    from historykit.checkpointers import SQLModelConversationStore

    async def main() -> None:
        store = SQLModelConversationStore(url)
        try:
            messages = [
                ModelRequest(parts=[UserPromptPart("hello", timestamp=TS)]),
                ModelResponse(parts=[TextPart("hi")], timestamp=TS),
                ModelRequest(parts=[UserPromptPart("and then?", timestamp=TS)]),
                ModelResponse(parts=[TextPart("then this")], timestamp=TS),
            ]
            await store.save(Conversation(conversation_id="c-chat", messages=messages))
            loaded = await store.load("c-chat")
            assert loaded is not None
            summary = ModelRequest(
                parts=[CompactionPart(content="They greeted each other.")],
                metadata={COMPACTION_KEY: CONVERSATION_MARKER.to_dict()},
            )
            compacted = Conversation(
                conversation_id="c-chat",
                messages=[summary, *loaded.messages[-2:]],
                usage=loaded.usage,
                revision=loaded.revision,
            )
            await store.save(compacted)
        finally:
            await store.aclose()

    asyncio.run(main())


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ]
)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file's URL (no file yet), or the session's emptied PostgreSQL or
    MySQL/MariaDB one."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agent.db'}"
    if request.param == "mysql":
        return str(request.getfixturevalue("new_mysql_database")())
    new_postgres_database: Callable[[], str] = request.getfixturevalue("new_postgres_database")
    return new_postgres_database()


@pytest.fixture
def url(fresh_url: str) -> str:
    """A database both stores wrote: one LangGraph thread and one conversation, each compacted once."""
    _write_graph(fresh_url)
    _write_conversation(fresh_url)
    return fresh_url


def _execute(url: str, statement: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def test_threads_with_their_counts(url: str) -> None:
    from historykit.checkpointers import SQLModelSaver

    with DatabaseInspector(url) as db:
        assert db.schema.versions == {"core": 4, "langgraph": 2, "pydantic_ai": 1} == db.schema.supported
        assert {"historykit_thread", "historykit_message"} <= db.schema.tables
        found = {t.thread_id: t for t in db.threads()}
    assert set(found) == {"t-graph", "c-chat"}
    graph, chat = found["t-graph"], found["c-chat"]
    assert (graph.framework, chat.framework) == ("langgraph", "pydantic_ai")
    with SQLModelSaver(url) as saver:
        transcript = saver.transcript("t-graph")
        checkpoints = list(saver.list(_config("t-graph")))
    assert transcript is not None
    assert graph.messages == len(transcript.messages) + len(transcript.compactions)
    assert graph.compactions == 1 and graph.checkpoints == len(checkpoints) and graph.entries == 0
    # (writes: what `update_state` saved after a checkpoint)
    assert set(graph.storage) - {"checkpoint writes"} == {"messages", "checkpoints", "channel values"}
    assert graph.storage_bytes == sum(graph.storage.values()) > 0
    assert isinstance(graph.created_at, datetime)
    assert chat.compactions == 1 and chat.checkpoints == 0 and chat.entries > 0
    assert chat.messages == 5  # four originals and the summary, each stored once
    assert set(chat.storage) == {"messages"}


def test_a_langgraph_thread_in_full(url: str) -> None:
    from historykit.checkpointers import SQLModelSaver

    with DatabaseInspector(url) as db:
        details = db.details("t-graph")
        transcript = db.transcript("t-graph")
    with SQLModelSaver(url) as saver:
        latest = saver.get_tuple(_config("t-graph"))
        stored = saver.transcript("t-graph")
    assert details is not None and latest is not None and stored is not None and transcript is not None
    assert details.summary.thread_id == "t-graph" and details.conversation is None
    checkpoint = details.latest_checkpoint
    assert checkpoint is not None
    assert checkpoint.checkpoint_id == latest.checkpoint["id"] and checkpoint.step == latest.metadata["step"]
    assert checkpoint.timestamp == latest.checkpoint["ts"] and checkpoint.pending_writes == 0
    assert checkpoint.messages == details.view_messages == 2
    assert details.original_messages == len(stored.messages) == 4
    assert [(m.at, m.marker) for m in details.markers] == [(4, GRAPH_MARKER)]
    assert transcript.messages == stored.messages


def test_a_conversation_in_full(url: str) -> None:
    with DatabaseInspector(url) as db:
        details = db.details("c-chat")
        transcript = db.transcript("c-chat")
    assert details is not None and transcript is not None
    assert details.latest_checkpoint is None
    record = details.conversation
    assert record is not None
    assert record.messages == 3 and record.branches == 1 and record.forked_from is None and record.revision
    assert details.original_messages == len(transcript.messages) == 4
    assert [m.marker for m in details.markers] == [CONVERSATION_MARKER]


def test_a_missing_thread_is_none(url: str) -> None:
    with DatabaseInspector(url) as db:
        assert db.thread("no-such-thread") is None
        assert db.details("no-such-thread") is None
        assert db.transcript("no-such-thread") is None


def test_an_empty_historykit_database(fresh_url: str) -> None:
    from historykit.checkpointers import SQLModelSaver

    SQLModelSaver(fresh_url).setup()
    with DatabaseInspector(fresh_url) as db:
        assert db.threads() == [] and db.thread("t") is None and db.details("t") is None
        assert db.schema.versions == {"core": 4, "langgraph": 2}


def test_a_database_with_no_tables_is_not_historykits(fresh_url: str) -> None:
    if fresh_url.startswith("sqlite"):
        sqlite3.connect(fresh_url.removeprefix("sqlite:///")).close()
    with pytest.raises(SchemaError, match="is not a historykit database: .*no tables at all"):
        DatabaseInspector(fresh_url)


def test_a_database_that_is_not_historykits(fresh_url: str) -> None:
    if fresh_url.startswith("sqlite"):
        sqlite3.connect(fresh_url.removeprefix("sqlite:///")).close()
    _execute(fresh_url, "CREATE TABLE historykit_notes_of_someone (body TEXT)")
    try:
        with pytest.raises(SchemaError, match="not a historykit database.*historykit_notes_of_someone"):
            DatabaseInspector(fresh_url)
    finally:
        _execute(fresh_url, "DROP TABLE historykit_notes_of_someone")


def test_a_database_from_a_newer_historykit(url: str) -> None:
    _execute(url, "UPDATE historykit_schema SET version = 99 WHERE component = 'core'")
    with pytest.raises(SchemaVersionError, match="schema version 99.*newer historykit"):
        DatabaseInspector(url)


def test_a_recorded_component_with_a_missing_table(url: str) -> None:
    _execute(url, "DROP TABLE historykit_conversation_branch")
    with pytest.raises(SchemaError, match="historykit_conversation_branch are missing"):
        DatabaseInspector(url)


def test_a_missing_or_in_memory_sqlite_database_is_refused_and_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for given in (str(missing), f"sqlite:///{missing}"):
        with pytest.raises(InvalidArgumentError, match="no such database file"):
            DatabaseInspector(given)
    assert not missing.exists()
    with pytest.raises(InvalidArgumentError, match="in-memory"):
        DatabaseInspector("sqlite://")


def test_inspecting_a_sqlite_file_never_changes_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    _write_graph(f"sqlite:///{path}")
    before = path.read_bytes()
    with DatabaseInspector(path.as_posix()) as db:  # a plain path names a SQLite file
        assert [t.thread_id for t in db.threads()] == ["t-graph"]
        assert db.thread("t-graph") is not None
    # (A reader of a file in WAL mode may create its -shm index and an empty -wal: SQLite's own files
    # for readers, not the database.)
    assert path.read_bytes() == before

    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = foreign.read_bytes()
    with pytest.raises(SchemaError, match="not a historykit database.*notes"):
        DatabaseInspector(f"sqlite:///{foreign}")
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("app.db")) == ["app.db"]


def test_a_read_only_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "agent.db"
    url = f"sqlite:///{path}"
    _write_graph(url)
    _write_conversation(url)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP)
    try:
        if os.access(path, os.W_OK):
            # root writes whatever the permissions say: let historykit see the file as others would.
            access = os.access

            def no_write(p: Any, mode: int) -> bool:
                return False if Path(p) == path and mode == os.W_OK else access(p, mode)

            monkeypatch.setattr(os, "access", no_write)
        before = path.read_bytes()
        with DatabaseInspector(url) as db:
            assert {t.thread_id for t in db.threads()} == {"t-graph", "c-chat"}
            graph, chat = db.details("t-graph"), db.details("c-chat")
            assert graph is not None and graph.markers[0].marker == GRAPH_MARKER
            assert chat is not None and chat.markers[0].marker == CONVERSATION_MARKER
        assert path.read_bytes() == before
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.postgres
def test_postgresql_sessions_only_read(new_postgres_database: Callable[[], str]) -> None:
    url = new_postgres_database()
    _write_graph(url)
    _write_conversation(url)
    with DatabaseInspector(url) as db:
        engine = db._engine
        with pytest.raises(sa.exc.InternalError, match="read-only transaction"), engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM historykit_thread"))
        assert {t.thread_id for t in db.threads()} == {"t-graph", "c-chat"}


def test_a_conversation_from_inside_an_event_loop(url: str) -> None:
    async def inspect() -> Any:
        with DatabaseInspector(url) as db:
            return db.details("c-chat")

    details = asyncio.run(inspect())
    assert details is not None and [m.marker for m in details.markers] == [CONVERSATION_MARKER]


def test_a_server_database_is_read_in_read_only_sessions(url: str) -> None:
    """PostgreSQL and MySQL/MariaDB sessions of the inspector refuse a write (each by its own setting)."""
    if url.startswith("sqlite"):
        pytest.skip("a SQLite file is opened read-only instead (the tests above)")
    with DatabaseInspector(url) as db:
        with pytest.raises(sa.exc.DBAPIError), db._engine.connect() as conn:
            conn.execute(sa.text("CREATE TABLE historykit_inspection_probe (x INTEGER)"))
            conn.execute(sa.text("INSERT INTO historykit_inspection_probe VALUES (1)"))
        assert db.threads(), "reading still works"
