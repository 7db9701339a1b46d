"""pytest plugin (`-p peer_plugin`) for LangGraph's own suites run from their sdists by `run_peer.py`.

It points the suites at our PostgreSQL server (upstream hard-codes a docker port), gives the
checkpoint-postgres suite a scratch database of its own instead of the server's `postgres` database,
keeps only the tests a checkpointer takes part in, and, with HISTORYKIT_PEER_SWAP=1, replaces the
official saver classes in the test modules by factories that build SQLModelSaver on the same database.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
import sqlalchemy as sa

POSTGRES_URL = os.environ.get("HISTORYKIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
SWAP = os.environ.get("HISTORYKIT_PEER_SWAP", "") == "1"
CHECKPOINTER_FIXTURES = {"sync_checkpointer", "async_checkpointer"}
SCRATCH = f"hk_peer_scratch_{uuid4().hex[:12]}"


def libpq_url(database: str) -> str:
    """Our server with another database, as a libpq URI (what the upstream suites connect with)."""
    return sa.make_url(POSTGRES_URL).set(database=database).render_as_string(hide_password=False)


def sqlalchemy_url(database: str) -> str:
    """Our server with another database, as a SQLAlchemy URL for SQLModelSaver."""
    url = sa.make_url(POSTGRES_URL).set(drivername="postgresql+psycopg", database=database)
    return url.render_as_string(hide_password=False)


def _server_prefix() -> str:
    # Upstream builds database URIs as DEFAULT_POSTGRES_URI + name.
    return libpq_url("").rstrip("/") + "/"


def pytest_configure(config: pytest.Config) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{SCRATCH}"')


def pytest_unconfigure(config: pytest.Config) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)')


def _upstream_modules() -> list[Any]:
    return [m for name, m in list(sys.modules.items()) if name == "tests" or name.startswith("tests.")]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for module in _upstream_modules():
        if hasattr(module, "DEFAULT_POSTGRES_URI"):
            module.DEFAULT_POSTGRES_URI = _server_prefix()
        if hasattr(module, "DEFAULT_URI"):
            module.DEFAULT_URI = libpq_url(SCRATCH)
        if SWAP:
            for name, factory in SWAPPED.items():
                if name in vars(module):
                    setattr(module, name, factory)
    keep, drop = [], []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        in_langgraph = config.getoption("--peer-suite") == "langgraph"
        if in_langgraph and not fixtures & CHECKPOINTER_FIXTURES:
            drop.append(item)
        elif "shallow" in item.nodeid:
            # ShallowPostgresSaver keeps one checkpoint per thread: historykit has no such saver.
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--peer-suite", default="", help="which upstream suite runs (langgraph, sqlite, postgres)"
    )


# -- the swap: the official saver classes, as factories of SQLModelSaver -------------------------------


def _mark(saver: Any, asynchronous: bool) -> Any:
    # The suites tell sync from async savers with isinstance(saver, AsyncPostgresSaver).
    saver._peer_async = asynchronous
    return saver


class _SwappedSaver(type):
    asynchronous: bool

    def __instancecheck__(cls, obj: object) -> bool:
        from historykit.checkpointers import SQLModelSaver

        return isinstance(obj, SQLModelSaver) and getattr(obj, "_peer_async", None) == cls.asynchronous


def _scratch_sqlite() -> str:
    # ":memory:" has no file SQLModelSaver could open with a second engine: a new file instead.
    return str(Path(tempfile.mkdtemp(prefix="hk-peer-")) / "peer.db")


def _sqlite_saver(conn_string: str, asynchronous: bool, serde: Any = None) -> Any:
    from historykit.checkpointers import SQLModelSaver

    path = _scratch_sqlite() if conn_string == ":memory:" else conn_string
    return _mark(SQLModelSaver(f"sqlite:///{path}", serde=serde), asynchronous)


def _postgres_saver(conn: Any, asynchronous: bool, serde: Any = None) -> Any:
    from sqlalchemy.pool import NullPool

    from historykit.checkpointers import SQLModelSaver

    if isinstance(conn, str):
        url = sa.make_url(conn).set(drivername="postgresql+psycopg")
    elif hasattr(conn, "conninfo"):  # a psycopg_pool pool
        url = sa.make_url(conn.conninfo).set(drivername="postgresql+psycopg")
    else:  # a psycopg connection
        info = conn.info
        url = sa.URL.create("postgresql+psycopg", info.user, info.password or None, info.host, info.port)
        url = url.set(database=info.dbname)
    # The suites drop the database right after closing *their* connection, never our saver: hold no
    # connection between calls, or the DROP DATABASE would wait for us.
    saver = SQLModelSaver(url, serde=serde, engine_kwargs={"poolclass": NullPool})
    return _mark(saver, asynchronous)


class SqliteSaver(metaclass=_SwappedSaver):
    asynchronous = False

    def __new__(cls, conn: Any, *, serde: Any = None) -> Any:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        return _sqlite_saver(path or ":memory:", cls.asynchronous, serde)

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str) -> Iterator[Any]:
        saver = _sqlite_saver(conn_string, cls.asynchronous)
        try:
            yield saver
        finally:
            saver.close()


class AsyncSqliteSaver(metaclass=_SwappedSaver):
    asynchronous = True

    def __new__(cls, conn: Any, *, serde: Any = None) -> Any:
        raise NotImplementedError("the peer swap cannot take over an open aiosqlite connection")

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str) -> AsyncIterator[Any]:
        saver = _sqlite_saver(conn_string, cls.asynchronous)
        try:
            yield saver
        finally:
            await saver.aclose()
            saver.close()


class PostgresSaver(metaclass=_SwappedSaver):
    asynchronous = False

    def __new__(cls, conn: Any, pipe: Any = None, serde: Any = None) -> Any:
        return _postgres_saver(conn, cls.asynchronous, serde)

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[Any]:
        saver = _postgres_saver(conn_string, cls.asynchronous)
        try:
            yield saver
        finally:
            saver.close()


class AsyncPostgresSaver(metaclass=_SwappedSaver):
    asynchronous = True

    def __new__(cls, conn: Any, pipe: Any = None, serde: Any = None) -> Any:
        return _postgres_saver(conn, cls.asynchronous, serde)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, **kwargs: Any) -> AsyncIterator[Any]:
        saver = _postgres_saver(conn_string, cls.asynchronous)
        try:
            yield saver
        finally:
            await saver.aclose()
            saver.close()


SWAPPED: dict[str, type] = {
    "SqliteSaver": SqliteSaver,
    "AsyncSqliteSaver": AsyncSqliteSaver,
    "PostgresSaver": PostgresSaver,
    "AsyncPostgresSaver": AsyncPostgresSaver,
}
