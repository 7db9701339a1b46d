"""Plans of queries (`historykit.checkpointers._database`) on every backend, sync and async alike.

What is checked, on a real SQLite file, PostgreSQL and MySQL/MariaDB database, by the same plan run
with `run_plan` on a blocking connection and with `run_plan_async` on an asyncio one:
- a query that fails raises inside the plan where it was yielded, so the plan can turn it into an
  error of its own (the conversation store's duplicate record becomes `ConversationConflict`), and
  its `finally` block runs then;
- a statement that returns no rows answers with how many rows it wrote: an `UPDATE` that matches
  its row counts 1 even when it sets the values the row already has, one that matches none 0.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from historykit.checkpointers._database import (
    NoRows,
    Plan,
    Query,
    create_async_engine,
    create_engine,
    rows_written,
    run_plan,
    run_plan_async,
)

# Named like historykit's tables so the server fixtures drop it between tests.
_METADATA = sa.MetaData()
_TABLE = sa.Table(
    "historykit_test_plans",
    _METADATA,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Integer, nullable=False),
)


class Duplicate(Exception):
    """The plan's own error for a key that is already stored."""


def _insert_twice(events: list[str]) -> Plan[int]:
    """Inserts a key, then the same key again, turning the second insert's failure into `Duplicate`."""
    yield Query(sa.insert(_TABLE), {"key": "a", "value": 1})
    try:
        yield Query(sa.insert(_TABLE), {"key": "a", "value": 2})
    except IntegrityError:
        raise Duplicate("a") from None
    finally:
        events.append("finally")
    return 0


def _updates() -> Plan[tuple[int, int, int]]:
    yield Query(sa.insert(_TABLE), [{"key": "a", "value": 1}, {"key": "b", "value": 1}])
    changed = yield Query(sa.update(_TABLE).where(_TABLE.c.key == "a").values(value=2))
    unchanged = yield Query(sa.update(_TABLE).where(_TABLE.c.key == "b").values(value=1))
    missing = yield Query(sa.update(_TABLE).where(_TABLE.c.key == "z").values(value=3))
    assert isinstance(missing, NoRows) and not missing
    return rows_written(changed), rows_written(unchanged), rows_written(missing)


Runner = Callable[[Callable[[], Plan[Any]]], Awaitable[Any]]


@pytest.fixture(params=["sync", "async"])
async def run(request: pytest.FixtureRequest, database_url: str) -> Any:
    """Runs a plan (made fresh by the function it is given) in a transaction of its own on a new
    table, with `run_plan` in a blocking engine or `run_plan_async` in an asyncio one."""
    engine = create_engine(database_url)
    with engine.begin() as conn:
        _METADATA.drop_all(conn)
        _METADATA.create_all(conn)
    if request.param == "sync":

        async def sync_runner(make: Callable[[], Plan[Any]]) -> Any:
            with engine.begin() as conn:
                return run_plan(conn, make())

        yield sync_runner
    else:
        async_engine = create_async_engine(database_url)

        async def async_runner(make: Callable[[], Plan[Any]]) -> Any:
            async with async_engine.begin() as conn:
                return await run_plan_async(conn, make())

        yield async_runner
        await async_engine.dispose()
    with engine.begin() as conn:
        _METADATA.drop_all(conn)
    engine.dispose()


async def test_a_failed_query_raises_inside_its_plan(run: Runner) -> None:
    events: list[str] = []
    with pytest.raises(Duplicate):
        await run(lambda: _insert_twice(events))
    assert events == ["finally"]  # run when the query failed, not when the generator is collected


async def test_a_statement_without_rows_answers_the_rows_it_wrote(run: Runner) -> None:
    assert await run(_updates) == (1, 1, 0)
