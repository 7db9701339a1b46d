"""Checkpointer fixtures for LangGraph's own test suite: its official savers and SQLModelSaver side by side.

`run_peer.py` appends `from peer_langgraph import *` to the unpacked sdist's `tests/conftest.py`, so these
two fixtures replace the upstream ones of the same name (the last definition in a module wins). The
official SQLite savers come from the sdist's own `tests/conftest_checkpointer.py`; the PostgreSQL ones,
like SQLModelSaver, use the run's scratch database (`peer_plugin`), their tables emptied before each
test (upstream creates a database per test: a second a test in CREATE and DROP, where emptying the
tables costs milliseconds). SQLModelSaver on SQLite gets a new file per test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from pathlib import Path

import psycopg
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from peer_plugin import SCRATCH, libpq_url, sqlalchemy_url

from historykit.checkpointers import SQLModelSaver
from tests import conftest_checkpointer as upstream  # the sdist's module, not historykit's tests


def _test_id(name: str) -> str:
    # Ids that no other parameter of the suite uses (its `cache` fixture has a "sqlite" too), so the
    # report can tell which saver a test ran with: official_sqlite, ..., hk_postgres_aio.
    return name if name.startswith("hk_") else f"official_{name}"


def _empty_tables(pattern: str) -> None:
    """Empty one saver's tables, keeping their schema records (`checkpoint_migrations`,
    `historykit_schema`): the savers then see their own, up-to-date, empty schema."""
    with psycopg.connect(libpq_url(SCRATCH), autocommit=True) as conn:
        names = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE %s"
            " AND tablename NOT IN ('checkpoint_migrations', 'historykit_schema')",
            (pattern,),
        ).fetchall()
        if names:
            conn.execute("TRUNCATE " + ", ".join(f'"{name}"' for (name,) in names))


@contextmanager
def _official_postgres() -> Iterator[BaseCheckpointSaver]:
    with PostgresSaver.from_conn_string(libpq_url(SCRATCH)) as checkpointer:
        checkpointer.setup()
        _empty_tables("checkpoint%")
        yield checkpointer


@asynccontextmanager
async def _official_postgres_aio() -> AsyncIterator[BaseCheckpointSaver]:
    async with AsyncPostgresSaver.from_conn_string(libpq_url(SCRATCH)) as checkpointer:
        await checkpointer.setup()
        _empty_tables("checkpoint%")
        yield checkpointer


@contextmanager
def _historykit(name: str, tmp_path: Path) -> Iterator[SQLModelSaver]:
    if name.startswith("hk_sqlite"):
        url = f"sqlite:///{tmp_path / 'peer.db'}"
    else:
        _empty_tables("historykit%")
        url = sqlalchemy_url(SCRATCH)
    saver = SQLModelSaver(url)
    saver.setup()  # as the official savers are set up above: no saver does its schema work in a test
    try:
        yield saver
    finally:
        saver.close()


@asynccontextmanager
async def _historykit_aio(name: str, tmp_path: Path) -> AsyncIterator[SQLModelSaver]:
    with _historykit(name, tmp_path) as saver:
        try:
            yield saver
        finally:
            await saver.aclose()


SYNC: dict[str, Callable[[Path], AbstractContextManager[BaseCheckpointSaver]]] = {
    "sqlite": lambda _: upstream._checkpointer_sqlite(),
    "postgres": lambda _: _official_postgres(),
    "hk_sqlite": lambda tmp: _historykit("hk_sqlite", tmp),
    "hk_postgres": lambda tmp: _historykit("hk_postgres", tmp),
}
ASYNC: dict[str, Callable[[Path], AbstractAsyncContextManager[BaseCheckpointSaver]]] = {
    "sqlite_aio": lambda _: upstream._checkpointer_sqlite_aio(),
    "postgres_aio": lambda _: _official_postgres_aio(),
    "hk_sqlite_aio": lambda tmp: _historykit_aio("hk_sqlite_aio", tmp),
    "hk_postgres_aio": lambda tmp: _historykit_aio("hk_postgres_aio", tmp),
}


@pytest.fixture(scope="function", params=list(SYNC), ids=_test_id)
def sync_checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    with SYNC[request.param](tmp_path) as checkpointer:
        yield checkpointer


@pytest.fixture(scope="function", params=list(ASYNC), ids=_test_id)
async def async_checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseCheckpointSaver]:
    async with ASYNC[request.param](tmp_path) as checkpointer:
        yield checkpointer


__all__ = ["async_checkpointer", "sync_checkpointer"]
