"""Statements run on the driver's connection (`_direct`) answer exactly as SQLAlchemy's execution does.

Each statement is run through a plan twice (the first time through SQLAlchemy, which is also the
reference, then on the driver's cursor) and once more through `Connection.execute`: same rows,
same column names, same values after SQLAlchemy's conversions (JSON documents, SQLite's
datetimes), same counts of rows written, the same SQLAlchemy exception for a driver error, and the
engine's `before_cursor_execute` listeners see every statement. On MySQL/MariaDB every statement
keeps SQLAlchemy's path, and the same assertions hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from historykit.checkpointers._database import (
    NoRows,
    Plan,
    Query,
    create_async_engine,
    create_engine,
    prepare_database,
    rows_written,
    run_plan,
    run_plan_async,
)
from historykit.checkpointers._direct import direct_form
from historykit.checkpointers._saver_base import _COMPONENTS
from historykit.checkpointers._schema import CheckpointRow, CompactionRow

CHECKPOINTS = CheckpointRow.__table__  # type: ignore[attr-defined]
COMPACTIONS = CompactionRow.__table__  # type: ignore[attr-defined]
bp = sa.bindparam

INSERT_CHECKPOINT = sa.insert(CHECKPOINTS)
BY_IDS = sa.select(
    CHECKPOINTS.c.checkpoint_id,
    CHECKPOINTS.c.checkpoint,
    CHECKPOINTS.c.metadata,
    CHECKPOINTS.c.channel_versions,
).where(CHECKPOINTS.c.thread_id == bp("t"), CHECKPOINTS.c.checkpoint_id.in_(bp("ids", expanding=True)))
ORDERED_BY_IDS = BY_IDS.order_by(CHECKPOINTS.c.checkpoint_id)
OF_KNOWN_RUNS = sa.select(CHECKPOINTS.c.checkpoint_id).where(
    CHECKPOINTS.c.thread_id == bp("t"),
    CHECKPOINTS.c.run_id.in_(["r1", "r2"]),  # a list in the statement
)
RENAME_RUN = (
    sa.update(CHECKPOINTS)
    .where(CHECKPOINTS.c.thread_id == bp("t"), CHECKPOINTS.c.run_id == bp("old"))
    .values(run_id=bp("new"))
)
EITHER_RUN = sa.union_all(
    sa.select(sa.literal(False).label("top"), CHECKPOINTS.c.checkpoint_id).where(
        CHECKPOINTS.c.thread_id == bp("t"), CHECKPOINTS.c.checkpoint_id.in_(bp("ids", expanding=True))
    ),
    sa.select(sa.literal(True).label("top"), sa.func.max(CHECKPOINTS.c.checkpoint_id)).where(
        CHECKPOINTS.c.run_id.in_(bp("runs", expanding=True))
    ),
)
INSERT_COMPACTION = sa.insert(COMPACTIONS)
COMPACTION_TIMES = sa.select(COMPACTIONS.c.summary_seq, COMPACTIONS.c.created_at).where(
    COMPACTIONS.c.thread_id == bp("t")
)


def checkpoint(i: int, thread: str = "t1") -> dict[str, Any]:
    return {
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": f"c{i:03d}",
        "parent_checkpoint_id": f"c{i - 1:03d}" if i else None,
        "run_id": "r1",
        "encoding": "msgpack",
        "checkpoint": bytes([i % 256]) * (i + 1),
        "metadata": {"step": i, "source": "loop", "nested": {"é": [1, 2.5, None, True]}},
        "channel_versions": {"messages": f"{i:012d}.ab"},
    }


def plain(rows: Sequence[Any]) -> list[tuple[tuple[str, ...], tuple[Any, ...]]]:
    """Rows as (column names, values), whatever the row class."""
    return [(tuple(row._fields), tuple(row)) for row in rows]


def twice(query: Query, again: Query | None = None) -> Plan[tuple[Sequence[Any], Sequence[Any]]]:
    """A plan that runs a statement twice (`again`: with other parameters): through SQLAlchemy, then
    (where supported) on the driver's cursor."""
    first = yield query
    second = yield again or query
    return first, second


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, database_url: str) -> Any:
    """`run(statement, params)`: the answers of a plan running it twice, and of `Connection.execute`."""
    engine = create_engine(database_url)
    with engine.begin() as conn:
        prepare_database(conn, _COMPONENTS)
    if request.param == "sync":

        def run(
            statement: Any, params: Any, again: Any = None, reference: Any = None
        ) -> tuple[Any, Any, Any]:
            with engine.begin() as conn:
                plan = twice(Query(statement, params), Query(statement, again) if again is not None else None)
                first, second = run_plan(conn, plan)
                reference = conn.execute(statement, reference if reference is not None else params)
                expected = reference.all() if reference.returns_rows else NoRows(reference.rowcount)
            return first, second, expected

        yield run
        engine.dispose()
        return

    async_engine = create_async_engine(database_url)
    loop = asyncio.new_event_loop()

    async def arun(
        statement: Any, params: Any, again: Any = None, reference: Any = None
    ) -> tuple[Any, Any, Any]:
        async with async_engine.begin() as conn:
            plan = twice(Query(statement, params), Query(statement, again) if again is not None else None)
            first, second = await run_plan_async(conn, plan)
            reference = await conn.execute(statement, reference if reference is not None else params)
            expected = reference.all() if reference.returns_rows else NoRows(reference.rowcount)
        return first, second, expected

    yield lambda *args: loop.run_until_complete(arun(*args))
    loop.run_until_complete(async_engine.dispose())
    loop.close()
    engine.dispose()


def direct_expected(database_url: str) -> bool:
    return not database_url.startswith("mysql")


def test_rows_values_and_counts_match_sqlalchemy(runner: Any) -> None:
    first, second, expected = runner(
        INSERT_CHECKPOINT,
        [checkpoint(i) for i in range(3)],
        [checkpoint(i) for i in range(3, 6)],
        [checkpoint(i) for i in range(6, 8)],
    )
    # SQLAlchemy's own count of an executemany is -1 on PostgreSQL (it batches the rows).
    assert [rows_written(first), rows_written(second)] == [3, 3] and rows_written(expected) in (2, -1)
    for ids in ([], ["c000"], ["c000", "c002", "c007", "missing"], [f"c{i:03d}" for i in range(8)]):
        first, second, expected = runner(ORDERED_BY_IDS, {"t": "t1", "ids": ids})
        assert plain(first) == plain(second) == plain(expected)
        assert len(expected) == len([i for i in ids if i != "missing"])
    rows = runner(ORDERED_BY_IDS, {"t": "t1", "ids": ["c001"]})[1]
    assert rows[0].metadata == checkpoint(1)["metadata"]
    assert rows[0]._mapping["channel_versions"] == {"messages": "000000000001.ab"}
    assert bytes(rows[0].checkpoint) == checkpoint(1)["checkpoint"]

    first, second, expected = runner(OF_KNOWN_RUNS, {"t": "t1"})
    assert sorted(plain(first)) == sorted(plain(second)) == sorted(plain(expected)) and len(expected) == 8

    for runs in ([], ["r1"], ["r1", "r0"]):
        first, second, expected = runner(EITHER_RUN, {"t": "t1", "ids": ["c003", "c004"], "runs": runs})
        assert sorted(plain(first)) == sorted(plain(second)) == sorted(plain(expected))
        assert {tuple(row) for row in second} >= {(False, "c003"), (False, "c004")}

    first, second, expected = runner(RENAME_RUN, {"t": "t1", "old": "r1", "new": "r2"})
    assert [rows_written(first), rows_written(second), rows_written(expected)] == [8, 0, 0]


def test_datetimes_read_back_alike(runner: Any) -> None:
    at = datetime(2026, 11, 27, 18, 0, 1, 234567, tzinfo=timezone.utc)

    def marker(seq: int) -> dict[str, Any]:
        return {
            "thread_id": "t1",
            "framework": "langgraph",
            "summary_seq": seq,
            "covered_from": 0,
            "covered_to": seq,
            "tokens_before": 100,
            "tokens_after": 10,
            "strategy": "summarize",
            "created_at": at,
            "automatic": True,
        }

    runner(INSERT_COMPACTION, [marker(1)], [marker(2)], [marker(3)])
    first, second, expected = runner(COMPACTION_TIMES, {"t": "t1"})
    assert plain(first) == plain(second) == plain(expected)
    assert sorted(row.summary_seq for row in second) == [1, 2, 3]
    assert {row.created_at.replace(tzinfo=timezone.utc) for row in second} == {at}


def test_a_driver_error_is_sqlalchemys_exception(runner: Any) -> None:
    with pytest.raises(sa.exc.IntegrityError):  # the same rows again, on the driver's cursor
        runner(INSERT_CHECKPOINT, [checkpoint(7)])
    # The transaction rolled back; the connection serves the next one.
    first, second, expected = runner(ORDERED_BY_IDS, {"t": "t1", "ids": ["c007"]})
    assert first == second == expected == []


def test_which_statements_run_directly(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        dialect = engine.dialect
        fresh = sa.select(CHECKPOINTS.c.checkpoint_id).where(CHECKPOINTS.c.thread_id == bp("t"))
        assert direct_form(dialect, fresh, {"t": "x"}) is None  # run once: SQLAlchemy's path
        form = direct_form(dialect, fresh, {"t": "x"})
        assert (form is not None) == direct_expected(database_url)
        union = sa.union_all(fresh, fresh)
        direct_form(dialect, union, {"t": "x"})
        assert (direct_form(dialect, union, {"t": "x"}) is not None) == direct_expected(database_url)
        with_list = sa.select(CHECKPOINTS.c.checkpoint_id).where(
            CHECKPOINTS.c.checkpoint_id.in_(bp("ids", expanding=True))
        )
        direct_form(dialect, with_list, [{"ids": ["a"]}])
        assert direct_form(dialect, with_list, [{"ids": ["a"]}, {"ids": ["a", "b"]}]) is None
        returning = sa.insert(CHECKPOINTS).returning(CHECKPOINTS.c.checkpoint_id)
        direct_form(dialect, returning, checkpoint(1))
        assert direct_form(dialect, returning, checkpoint(1)) is None
    finally:
        engine.dispose()


def test_listeners_see_direct_statements(database_url: str) -> None:
    engine = create_engine(database_url)
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if "historykit_checkpoint" in statement:
            seen.append(statement)

    with engine.begin() as conn:
        prepare_database(conn, _COMPONENTS)
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        with engine.begin() as conn:
            run_plan(conn, twice(Query(BY_IDS, {"t": "t1", "ids": ["a", "b"]})))
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
        engine.dispose()
    assert len(seen) == 2


def test_listeners_added_later_see_a_savers_direct_statements(database_url: str) -> None:
    """A listener added on every engine (tracing set up after the saver started) sees the saver's
    statements that already run on the driver's cursor: the runner asks SQLAlchemy's own
    has-events flags at each statement, not once."""
    from langgraph.checkpoint.base import empty_checkpoint

    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver(database_url)
    config: Any = {"configurable": {"thread_id": "traced", "checkpoint_ns": ""}}
    for _ in range(3):  # statements seen once run on the driver's cursor afterwards
        saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert saver.get_tuple(saved) is not None
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if "historykit_checkpoint" in statement:
            seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert saver.get_tuple(saved) is not None
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
        saver.close()
    assert any(s.lstrip().upper().startswith("INSERT") for s in seen)
    assert any(s.lstrip().upper().startswith("SELECT") for s in seen)


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.sampled_from([f"c{i:03d}" for i in range(6)] + ["x", "'; drop", "é"]), max_size=8),
)
def test_in_lists_of_any_length_match_sqlalchemy(
    tmp_path_factory: pytest.TempPathFactory, ids: list[str]
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('direct') / 'h.db'}"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            prepare_database(conn, _COMPONENTS)
            conn.execute(INSERT_CHECKPOINT, [checkpoint(i) for i in range(6)])
        with engine.begin() as conn:
            first, second = run_plan(conn, twice(Query(ORDERED_BY_IDS, {"t": "t1", "ids": ids})))
            expected = conn.execute(ORDERED_BY_IDS, {"t": "t1", "ids": ids}).all()
        assert plain(first) == plain(second) == plain(expected)
        assert [row.checkpoint_id for row in second] == sorted({i for i in ids if i.startswith("c")})
    finally:
        engine.dispose()


def test_compiled_forms_do_not_grow_with_instances(tmp_path: Any) -> None:
    """Savers and conversation stores made one after another (a server making one per request)
    share their statements: the compiled forms stop growing after the first of each."""
    import gc

    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from historykit.checkpointers import SQLModelConversationStore, SQLModelSaver, _direct

    url = f"sqlite:///{tmp_path / 'h.db'}"

    async def use_both(i: int) -> None:
        saver = SQLModelSaver(url)
        for _ in range(2):
            saver.get_tuple({"configurable": {"thread_id": f"t{i}"}})
        saver.close()
        store = SQLModelConversationStore(url)
        conversation = Conversation(
            conversation_id=f"c{i}", messages=[ModelRequest(parts=[UserPromptPart(f"hi {i}")])]
        )
        for _ in range(2):
            await store.save(conversation)
            await store.load(f"c{i}")
        await store.aclose()

    sizes = []
    for i in range(4):
        asyncio.run(use_both(i))
        gc.collect()
        sizes.append((len(_direct._FORMS), len(_direct._SEEN)))
    assert sizes[1] == sizes[2] == sizes[3]
