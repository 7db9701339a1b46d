"""Databases written by an older historykit: migrated in place, every stored thing read back the same.

Each test writes a thread with today's saver, keeps what the saver reads back, then lays the same
rows out as the older schema had them (tables, indexes, recorded versions, checkpoint bodies) and
opens the database with a new saver, which migrates it.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Annotated, Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import create_engine
from historykit.checkpointers._dialect import dialect_of
from historykit.checkpointers._schema import CHECKPOINTS, CORE, HASH_CHARS, utcnow
from tests.checkpointers.test_saver_storage import query

_TABLES = [model.__table__ for component in (CORE, CHECKPOINTS) for model in component.tables]  # type: ignore[attr-defined]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


def _agent(state: State) -> dict[str, Any]:
    turn = state.get("turns", 0) + 1
    # No id: `add_messages` gives it one, so the log also holds its id-less form's hash.
    return {"messages": [AIMessage(f"reply {turn} " + "x" * 300 * turn)], "turns": turn}


def _write_thread(saver: SQLModelSaver) -> tuple[RunnableConfig, list[str]]:
    graph = StateGraph(State).add_node("agent", _agent).add_edge(START, "agent").compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    run_ids = []
    for turn in range(4):
        run_id = str(uuid.uuid4())
        run_ids.append(run_id)
        graph.invoke(
            {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]},
            {"configurable": {"thread_id": "t", "run_id": run_id}},
        )
    graph.update_state(config, {"messages": [HumanMessage("an edit", id="h-edit")]})
    latest = saver.get_tuple(config)
    assert latest is not None
    saver.put_writes(
        latest.config, [("turns", 99), ("messages", [HumanMessage("pending", id="p")])], "task-1"
    )
    graph.invoke(
        {"messages": [HumanMessage("other thread", id="o")]},
        {"configurable": {"thread_id": "u", "run_id": str(uuid.uuid4())}},
    )
    return config, run_ids


def _read_back(saver: SQLModelSaver, config: RunnableConfig) -> dict[str, Any]:
    def plain(found: CheckpointTuple) -> tuple[Any, ...]:
        return (
            found.config,
            found.checkpoint,
            found.metadata,
            found.parent_config,
            [(task, channel, value) for task, channel, value in found.pending_writes or []],
        )

    listed = [plain(found) for found in saver.list(config)]
    each = []
    for found in saver.list(config):
        got = saver.get_tuple(found.config)
        assert got is not None
        each.append(plain(got))
    transcript = saver.transcript("t")
    assert transcript is not None
    return {
        "latest": plain(saver.get_tuple(config)),  # type: ignore[arg-type]
        "list": listed,
        "each": each,
        "filtered": [plain(found) for found in saver.list(config, filter={"source": "update"})],
        "before": [plain(found) for found in saver.list(config, before=listed[1][0], limit=2)],
        "other": [plain(found) for found in saver.list({"configurable": {"thread_id": "u"}})],
        "transcript": [(m.type, m.id, m.content) for m in transcript.messages],
    }


def _old_layout(dialect_name: str) -> sa.MetaData:
    """Core version 3 and langgraph version 1, as they were created: rowid tables, an index on
    the transcript position, a run id index over every checkpoint."""
    old = sa.MetaData()
    for table in _TABLES:
        copy = table.to_metadata(old)
        copy.dialect_options["sqlite"]["with_rowid"] = True
        if table.name == "historykit_message":
            sa.Index("ix_historykit_message_position", copy.c.thread_id, copy.c.position)
        if table.name == "historykit_checkpoint":
            copy.indexes.clear()
            sa.Index("ix_historykit_checkpoint_run_id", copy.c.run_id)
    sa.Table(
        "historykit_schema",
        old,
        sa.Column("component", sa.String, primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    dialect_of(dialect_name).adapt_tables(old)
    return old


def _relayout_as_before(url: str) -> None:
    """Replace the tables of the database at `url` by the older layout holding the same rows,
    checkpoint bodies with their id as older versions wrote them."""
    engine = create_engine(url)
    serde = JsonPlusSerializer()
    try:
        with engine.begin() as conn:
            rows = {
                table.name: [dict(row._mapping) for row in conn.execute(sa.select(table))]
                for table in _TABLES
            }
            for row in rows["historykit_message"]:  # whole SHA-256 hashes: a prefix is kept today
                for column in ("hash", "anonymous_hash"):
                    if row[column] is not None:
                        assert len(row[column]) == HASH_CHARS
                        row[column] += hashlib.sha256(row[column].encode()).hexdigest()[:32]
            for row in rows["historykit_checkpoint"]:
                body = serde.loads_typed((row["encoding"], row["checkpoint"]))
                assert "id" not in body  # written without it today
                row["encoding"], row["checkpoint"] = serde.dumps_typed({**body, "id": row["checkpoint_id"]})
            existing = set(sa.inspect(conn).get_table_names())
            for name in [*(t.name for t in reversed(_TABLES)), "historykit_schema"]:
                if name in existing:
                    conn.execute(sa.text(f"DROP TABLE {name}"))
        with engine.begin() as conn:
            old = _old_layout(conn.dialect.name)
            old.create_all(conn)
            for name, table_rows in rows.items():
                if table_rows:
                    conn.execute(sa.insert(old.tables[name]), table_rows)
            conn.execute(
                sa.insert(old.tables["historykit_schema"]),
                [
                    {"component": "core", "version": 3, "updated_at": utcnow()},
                    {"component": "langgraph", "version": 1, "updated_at": utcnow()},
                ],
            )
    finally:
        engine.dispose()


def _message_count(url: str) -> int:
    return int(query(url, "SELECT COUNT(*) FROM historykit_message")[0][0])


def _layout(url: str) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            out: dict[str, Any] = {
                "versions": dict(
                    conn.execute(sa.text("SELECT component, version FROM historykit_schema")).all()
                ),
                "message indexes": {i["name"] for i in inspector.get_indexes("historykit_message")},
            }
            if conn.dialect.name == "sqlite":
                out["sql"] = dict(
                    conn.execute(sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")).all()
                )
            if conn.dialect.name == "postgresql":
                out["run id index"] = conn.execute(
                    sa.text(
                        "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_historykit_checkpoint_run_id'"
                    )
                ).scalar_one()
            return out
    finally:
        engine.dispose()


def test_a_database_of_the_older_layout_is_migrated_and_reads_the_same(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    config, run_ids = _write_thread(saver)
    expected = _read_back(saver, config)
    saver.close()
    _relayout_as_before(database_url)
    before = _layout(database_url)
    assert before["versions"] == {"core": 3, "langgraph": 1}
    assert "ix_historykit_message_position" in before["message indexes"]

    saver = SQLModelSaver(database_url)
    saver.setup()
    after = _layout(database_url)
    assert after["versions"] == {"core": CORE.version, "langgraph": CHECKPOINTS.version}
    assert "ix_historykit_message_position" not in after["message indexes"]
    if "sql" in after:  # SQLite: the checkpointer's tables are their primary keys now
        for name in ("historykit_checkpoint", "historykit_blob", "historykit_write"):
            assert "WITHOUT ROWID" not in before["sql"][name]
            assert after["sql"][name].rstrip().endswith("WITHOUT ROWID")
        assert not any(name.endswith("_by_rowid") for name in after["sql"])
    if "run id index" in after:
        assert "WHERE (run_id IS NOT NULL)" in after["run id index"]
    assert _read_back(saver, config) == expected
    # What the migration kept is written to and deleted as before.
    graph_messages = expected["transcript"]
    saver.put_writes(saver.get_tuple(config).config, [("turns", 7)], "task-2")  # type: ignore[union-attr]
    saver.delete_for_runs(run_ids[-1:])
    assert len(list(saver.list(config))) < len(expected["list"])
    assert [(m.type, m.id, m.content) for m in saver.transcript("t").messages] == graph_messages  # type: ignore[union-attr]
    saver.close()
    # A message saved again is found by its (migrated) hash: no second row.
    again = SQLModelSaver(database_url)
    graph = StateGraph(State).add_node("agent", _agent).add_edge(START, "agent").compile(checkpointer=again)
    logged = _message_count(database_url)
    graph.update_state(config, {"messages": [HumanMessage("question 1", id="h1")]})
    assert [m.content for m in graph.get_state(config).values["messages"] if m.id == "h1"] == ["question 1"]
    assert _message_count(database_url) == logged
    again.close()
    fresh = SQLModelSaver(database_url)  # nothing cached: read from the migrated rows alone
    assert _read_back(fresh, {"configurable": {"thread_id": "u"}})["latest"] == expected["other"][0]
    fresh.close()


def test_a_new_database_has_the_current_layout(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    saver.setup()
    saver.close()
    layout = _layout(sqlite_url)
    assert layout["versions"] == {"core": CORE.version, "langgraph": CHECKPOINTS.version}
    assert "ix_historykit_message_position" not in layout["message indexes"]
    for name in ("historykit_checkpoint", "historykit_blob", "historykit_write"):
        assert layout["sql"][name].rstrip().endswith("WITHOUT ROWID")
    assert "WITHOUT ROWID" not in layout["sql"]["historykit_message"]


def test_delete_for_runs_uses_the_run_index(sqlite_url: str) -> None:
    """The partial run id index serves `run_id IN (...)` (SQLite proves a NULL never matches)."""
    saver = SQLModelSaver(sqlite_url)
    saver.setup()
    saver.close()
    engine = create_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            plan = conn.execute(
                sa.text(
                    "EXPLAIN QUERY PLAN SELECT checkpoint_id FROM historykit_checkpoint "
                    "WHERE run_id IN (:a, :b)"
                ),
                {"a": "run-1", "b": "run-2"},
            ).all()
    finally:
        engine.dispose()
    assert any("ix_historykit_checkpoint_run_id" in str(row) for row in plan), plan
