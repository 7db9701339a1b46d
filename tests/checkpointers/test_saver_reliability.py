"""Reliability: concurrent writers, a writer killed mid-write, and databases that are damaged,
foreign or from a newer historykit."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, empty_checkpoint
from sqlmodel import Field

from historykit.checkpointers import CorruptRowError, SchemaError, SchemaVersionError, SQLModelSaver
from historykit.checkpointers._database import create_engine, prepare_database
from historykit.checkpointers._schema import CORE, HistorykitTable, SchemaComponent

# ---------------------------------------------------------------------------------------------
# A deterministic conversation per thread, written step by step
# ---------------------------------------------------------------------------------------------


def history_at(thread_id: str, steps: int) -> list[BaseMessage]:
    """The message list of `thread_id` after `steps` steps (each adds a tool call and its result)."""
    messages: list[BaseMessage] = [HumanMessage(f"task of {thread_id}", id=f"{thread_id}-h")]
    for i in range(steps):
        messages.append(
            AIMessage(
                "", id=f"{thread_id}-ai-{i}", tool_calls=[{"name": "read", "args": {"n": i}, "id": f"c{i}"}]
            )
        )
        messages.append(
            ToolMessage(f"{thread_id} result {i} " + "r" * 500, tool_call_id=f"c{i}", id=f"{thread_id}-t-{i}")
        )
    return messages


def put_step(
    saver: SQLModelSaver, config: RunnableConfig, thread_id: str, step: int, version: str | None
) -> tuple[RunnableConfig, str]:
    version = saver.get_next_version(version, None)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": history_at(thread_id, step + 1), "step": step}
    checkpoint["channel_versions"] = {"messages": version, "step": version}
    config = saver.put(
        config,
        checkpoint,
        {"source": "loop", "step": step, "parents": {}},
        dict(checkpoint["channel_versions"]),
    )
    saver.put_writes(config, [("step", step + 1)], f"task-{step}")
    return config, version


def write_thread(url: str, thread_id: str, steps: int, barrier: Any = None, report: Any = None) -> None:
    """A writer process: `steps` checkpoints of one thread; reports each committed one."""
    saver = SQLModelSaver(url)
    saver.setup()
    if barrier is not None:
        barrier.wait()
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    version = None
    for step in range(steps):
        config, version = put_step(saver, config, thread_id, step, version)
        if report is not None:
            report.put((config["configurable"]["checkpoint_id"], step))


def check_thread(saver: SQLModelSaver, thread_id: str, steps: int) -> None:
    base: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    listed = list(saver.list(base))
    assert len(listed) == steps
    assert [t.metadata["step"] for t in listed] == list(reversed(range(steps)))
    for loaded in listed:
        step = loaded.metadata["step"]
        assert loaded.checkpoint["channel_values"]["messages"] == history_at(thread_id, step + 1)
        assert loaded.pending_writes == [(f"task-{step}", "step", step + 1)]
    assert saver.transcript(thread_id).messages == history_at(thread_id, steps)


# ---------------------------------------------------------------------------------------------
# Concurrent writers
# ---------------------------------------------------------------------------------------------


def _processes() -> Any:
    """Writer processes forked from a clean server process that imported this module once (a
    fork of the test process itself would inherit its open connections and threads)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


def test_processes_writing_different_threads_of_one_sqlite_file_lose_nothing(sqlite_url: str) -> None:
    SQLModelSaver(sqlite_url).setup()
    ctx = _processes()
    writers, steps = 4, 25
    barrier = ctx.Barrier(writers)
    threads = [f"proc-{i}" for i in range(writers)]
    processes = [ctx.Process(target=write_thread, args=(sqlite_url, t, steps, barrier)) for t in threads]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
        assert p.exitcode == 0
    saver = SQLModelSaver(sqlite_url)
    for thread_id in threads:
        check_thread(saver, thread_id, steps)


@pytest.mark.postgres
async def test_async_tasks_writing_one_postgres_database_lose_nothing(postgres_url: str) -> None:
    saver = SQLModelSaver(postgres_url)
    steps = 12

    async def writer(thread_id: str, ns: str = "") -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        version = None
        for step in range(steps):
            version = saver.get_next_version(version, None)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {
                "messages": history_at(f"{thread_id}{ns}", step + 1),
                "step": step,
            }
            checkpoint["channel_versions"] = {"messages": version, "step": version}
            meta: CheckpointMetadata = {"source": "loop", "step": step, "parents": {}}
            config = await saver.aput(config, checkpoint, meta, dict(checkpoint["channel_versions"]))
            await saver.aput_writes(config, [("step", step + 1)], f"task-{step}")

    # Eight threads, plus two namespaces of one more thread writing its message log at once.
    await asyncio.gather(
        *(writer(f"task-{i}") for i in range(8)), writer("common", ""), writer("common", "child:1")
    )
    for i in range(8):
        await asyncio.to_thread(check_thread, saver, f"task-{i}", steps)
    for ns in ("", "child:1"):
        listed = [
            t async for t in saver.alist({"configurable": {"thread_id": "common", "checkpoint_ns": ns}})
        ]
        assert len(listed) == steps
        assert listed[0].checkpoint["channel_values"]["messages"] == history_at(f"common{ns}", steps)
    shared = await saver.atranscript("common")
    assert len(shared.messages) == 2 * len(history_at("common", steps))
    await saver.aclose()
    saver.close()


def test_a_writer_killed_mid_write_leaves_every_committed_checkpoint(sqlite_url: str) -> None:
    SQLModelSaver(sqlite_url).setup()
    ctx = _processes()
    report = ctx.Queue()
    process = ctx.Process(target=write_thread, args=(sqlite_url, "victim", 10_000, None, report))
    process.start()
    committed = [report.get(timeout=60) for _ in range(30)]
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL
    while not report.empty():
        committed.append(report.get())

    engine = create_engine(sqlite_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
    engine.dispose()
    saver = SQLModelSaver(sqlite_url)
    for checkpoint_id, step in committed:
        loaded = saver.get_tuple(
            {"configurable": {"thread_id": "victim", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        )
        assert loaded is not None, f"committed checkpoint of step {step} is missing"
        assert loaded.checkpoint["channel_values"]["messages"] == history_at("victim", step + 1)
    # The thread goes on from its latest checkpoint.
    latest = saver.get_tuple({"configurable": {"thread_id": "victim", "checkpoint_ns": ""}})
    assert latest is not None and latest.metadata["step"] >= committed[-1][1]
    put_step(saver, latest.config, "victim", latest.metadata["step"] + 1, None)


# ---------------------------------------------------------------------------------------------
# Damaged, foreign and newer databases
# ---------------------------------------------------------------------------------------------


def _execute(url: str, *statements: str, **params: Any) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(sa.text(statement), params)
    finally:
        engine.dispose()


@pytest.fixture
def written(sqlite_url: str) -> RunnableConfig:
    """A database with a thread of three steps, written and closed."""
    saver = SQLModelSaver(sqlite_url)
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    version = None
    for step in range(3):
        config, version = put_step(saver, config, "t", step, version)
    saver.close()
    return config


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        (
            "UPDATE historykit_message SET data = X'C1C1C1' "
            "WHERE seq = (SELECT MIN(seq) FROM historykit_message)",
            r"message seq \d+ of thread 't' \(historykit_message\) cannot be decoded",
        ),
        (
            "UPDATE historykit_checkpoint SET checkpoint = X'92C3C3'",
            r"checkpoint \S+ of thread 't' \(historykit_checkpoint\) decodes to a list "
            "that is not a checkpoint",
        ),
        (
            "UPDATE historykit_checkpoint SET metadata = '{not json'",
            r"metadata of checkpoint \S+ of thread 't' \(historykit_checkpoint\) is not valid JSON",
        ),
        (
            "UPDATE historykit_checkpoint SET channel_versions = '[1, 2]'",
            r"channel_versions of checkpoint \S+ of thread 't' is a JSON list, expected an object",
        ),
        (
            'UPDATE historykit_blob SET data = CAST(\'{"v": 1, "runs": [5]}\' AS BLOB) '
            "WHERE encoding = 'historykit.refs'",
            r"blob 'messages'@\S+ of thread 't' \(historykit_blob\): the reference blob's runs are not pairs",
        ),
        (
            "DELETE FROM historykit_message WHERE seq = (SELECT MAX(seq) FROM historykit_message)",
            r"thread 't' refers to 1 message\(s\) missing from historykit_message",
        ),
        (
            "UPDATE historykit_write SET encoding = 'pickle'",
            r"write task-2/0 of checkpoint .* holds a pickle",
        ),
    ],
    ids=["message", "checkpoint", "metadata", "versions", "refs", "missing-message", "pickled-write"],
)
def test_a_corrupted_row_is_named(
    sqlite_url: str, written: RunnableConfig, statement: str, error: str
) -> None:
    _execute(sqlite_url, statement)
    with pytest.raises(CorruptRowError, match=error):
        SQLModelSaver(sqlite_url).get_tuple(written)


def test_a_missing_table_is_named(sqlite_url: str, written: RunnableConfig) -> None:
    _execute(sqlite_url, "DROP TABLE historykit_blob")
    with pytest.raises(
        SchemaError, match="the table historykit_blob of the historykit component 'langgraph' is missing"
    ):
        SQLModelSaver(sqlite_url).get_tuple(written)


def test_a_missing_column_is_named(sqlite_url: str, written: RunnableConfig) -> None:
    _execute(sqlite_url, "ALTER TABLE historykit_message DROP COLUMN native_id")
    with pytest.raises(SchemaError, match="historykit_message lacks the column\\(s\\) native_id"):
        SQLModelSaver(sqlite_url).get_tuple(written)


def test_a_newer_schema_is_refused_untouched(sqlite_url: str, written: RunnableConfig) -> None:
    _execute(sqlite_url, "UPDATE historykit_schema SET version = 99 WHERE component = 'langgraph'")
    with pytest.raises(SchemaVersionError, match="schema version 99, written by a newer historykit"):
        SQLModelSaver(sqlite_url).get_tuple(written)
    engine = create_engine(sqlite_url)
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.text("SELECT version FROM historykit_schema WHERE component = 'langgraph'")
            ).scalar_one()
            == 99
        )
    engine.dispose()


@pytest.mark.postgres
async def test_a_newer_schema_is_refused_on_postgres_too(postgres_url: str) -> None:
    saver = SQLModelSaver(postgres_url)
    await saver.asetup()
    await saver.aclose()
    saver.close()
    _execute(
        postgres_url, f"UPDATE historykit_schema SET version = {CORE.version + 1} WHERE component = 'core'"
    )
    with pytest.raises(SchemaVersionError, match=f"component 'core' has schema version {CORE.version + 1}"):
        await SQLModelSaver(postgres_url).aget_tuple({"configurable": {"thread_id": "t"}})


def test_savers_starting_together_on_a_new_database_all_open_it(database_url: str, tmp_path: Any) -> None:
    """Workers of a new deployment start at once: each creates or finds the tables, none mistakes
    another's half-made schema for a foreign one (MySQL commits each CREATE TABLE at once, and once
    released its schema lock too early: a worker found the tables without their recorded version)."""
    import threading

    from tests.checkpointers.conftest import _drop_historykit_tables

    workers = 6
    for attempt in range(8):
        if database_url.startswith("sqlite"):
            url = f"sqlite:///{tmp_path / f'attempt-{attempt}.db'}"
        else:
            url = database_url
            _drop_historykit_tables(url)
        barrier = threading.Barrier(workers)
        failures: list[BaseException] = []

        def start(
            url: str = url, barrier: threading.Barrier = barrier, failures: list[BaseException] = failures
        ) -> None:
            saver = SQLModelSaver(url)
            try:
                barrier.wait(30)
                saver.get_tuple({"configurable": {"thread_id": "t"}})
            except BaseException as exc:  # every failure is reported, none swallowed
                failures.append(exc)
            finally:
                saver.close()

        threads = [threading.Thread(target=start) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == [], f"attempt {attempt}: {failures[0]!r}"


def test_tables_not_made_by_historykit_are_not_reused(sqlite_url: str) -> None:
    _execute(sqlite_url, "CREATE TABLE historykit_checkpoint (x INTEGER)")
    with pytest.raises(
        SchemaError, match="has the table\\(s\\) historykit_checkpoint but no recorded version"
    ):
        SQLModelSaver(sqlite_url).setup()


def test_a_version_1_database_gains_the_markers_focus_and_token_counts(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        prepare_database(conn, [CORE])
        # What version 1 had: markers without a focus, no token counts, an index on the position.
        conn.execute(sa.text("ALTER TABLE historykit_compaction DROP COLUMN focus"))
        conn.execute(
            sa.text("CREATE INDEX ix_historykit_message_position ON historykit_message (thread_id, position)")
        )
        conn.execute(sa.text("DROP TABLE historykit_token_count"))
        conn.execute(sa.text("UPDATE historykit_schema SET version = 1 WHERE component = 'core'"))
    with engine.begin() as conn:
        prepare_database(conn, [CORE])
        columns = {c["name"] for c in sa.inspect(conn).get_columns("historykit_compaction")}
        tables = set(sa.inspect(conn).get_table_names())
        version = conn.execute(sa.text("SELECT version FROM historykit_schema WHERE component = 'core'"))
        assert version.scalar_one() == CORE.version == 4
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("historykit_message")}
    assert "focus" in columns and "historykit_token_count" in tables
    assert "ix_historykit_message_position" not in indexes
    engine.dispose()


class _MigratedRow(HistorykitTable, table=True):
    __tablename__ = "historykit_test_migrated"

    id: int | None = Field(default=None, primary_key=True)


def test_an_older_schema_is_migrated_in_order(sqlite_url: str) -> None:
    steps: list[int] = []
    v1 = SchemaComponent("test-component", 1, (_MigratedRow,))

    def to_v2(conn: sa.Connection) -> None:
        steps.append(2)
        conn.execute(sa.text("ALTER TABLE historykit_test_migrated ADD COLUMN added INTEGER"))

    def to_v3(conn: sa.Connection) -> None:
        steps.append(3)

    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        prepare_database(conn, [CORE, v1])
    v3 = SchemaComponent("test-component", 3, (_MigratedRow,), {2: to_v2, 3: to_v3})
    with engine.begin() as conn:
        prepare_database(conn, [CORE, v3])
    with engine.begin() as conn:
        prepare_database(conn, [CORE, v3])  # idempotent
        columns = {c["name"] for c in sa.inspect(conn).get_columns("historykit_test_migrated")}
        version = conn.execute(
            sa.text("SELECT version FROM historykit_schema WHERE component = 'test-component'")
        )
        assert version.scalar_one() == 3
    assert steps == [2, 3]
    assert "added" in columns

    def to_v4(conn: sa.Connection) -> None:
        conn.execute(sa.text("ALTER TABLE historykit_test_migrated ADD COLUMN later INTEGER"))

    gap = SchemaComponent("test-component", 5, (_MigratedRow,), {4: to_v4})
    with (
        pytest.raises(
            SchemaVersionError,
            match="no migration of the historykit component 'test-component' from schema version 4 to 5",
        ),
        engine.begin() as conn,
    ):
        prepare_database(conn, [gap])
    # The failed migration left nothing behind: its transaction rolled back.
    with engine.connect() as conn:
        version = conn.execute(
            sa.text("SELECT version FROM historykit_schema WHERE component = 'test-component'")
        )
        assert version.scalar_one() == 3
        assert {c["name"] for c in sa.inspect(conn).get_columns("historykit_test_migrated")} == columns
    engine.dispose()


def test_bad_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="unsupported database URL"):
        SQLModelSaver("oracle://localhost/db")
    with pytest.raises(ValueError, match="psycopg 3"):
        SQLModelSaver("postgresql+asyncpg://localhost/db")
    with pytest.raises(ValueError, match="in-memory SQLite database"):
        SQLModelSaver("sqlite://").setup()


def test_a_thread_id_can_be_reused_after_delete(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    config: RunnableConfig = {"configurable": {"thread_id": "again", "checkpoint_ns": ""}}
    put_step(saver, config, "again", 0, None)
    saver.delete_thread("again")
    other = SQLModelSaver(sqlite_url)  # another process's view: its cache never saw the delete
    stale = other.get_tuple(config)
    assert stale is None
    config = {"configurable": {"thread_id": "again", "checkpoint_ns": ""}}
    fresh = [HumanMessage(f"new {uuid.uuid4()}", id="n")]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": fresh}
    checkpoint["channel_versions"] = {"messages": "1"}
    stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"messages": "1"})
    assert saver.get_tuple(stored).checkpoint["channel_values"]["messages"] == fresh  # type: ignore[union-attr]
    assert other.get_tuple(stored).checkpoint["channel_values"]["messages"] == fresh  # type: ignore[union-attr]
