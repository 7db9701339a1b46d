"""The dialect seam without a server: which backend a URL means, and what each backend's SQL is."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.schema import CreateTable

from historykit.checkpointers._database import normalize_url
from historykit.checkpointers._dialect import MySQL, PostgreSQL, SQLite, dialect_of
from historykit.checkpointers._message_log import message_log
from historykit.checkpointers._schema import BlobRow, HistorykitTable, MessageRow, ThreadRow
from historykit.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("url", "sync", "asynchronous"),
    [
        ("sqlite:///a.db", "sqlite", "sqlite+aiosqlite"),
        ("a.db", "sqlite", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+psycopg", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg", "postgresql+psycopg"),
        ("mysql://u@h/db", "mysql+pymysql", "mysql+asyncmy"),
        ("mariadb://u@h/db", "mysql+pymysql", "mysql+asyncmy"),
        ("mysql+asyncmy://u@h/db", "mysql+pymysql", "mysql+asyncmy"),
    ],
)
def test_a_url_names_its_backend_and_driver(url: str, sync: str, asynchronous: str) -> None:
    assert normalize_url(url).drivername == sync
    assert normalize_url(url, asynchronous=True).drivername == asynchronous
    if sync.startswith("mysql"):
        assert normalize_url(url).query["charset"] == "utf8mb4"


def test_other_backends_and_drivers_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="unsupported database URL"):
        normalize_url("oracle://u@h/db")
    with pytest.raises(InvalidArgumentError, match="psycopg 3"):
        normalize_url("postgresql+asyncpg://u@h/db")
    with pytest.raises(InvalidArgumentError, match="PyMySQL"):
        normalize_url("mysql+mysqldb://u@h/db")


def test_each_backend_has_one_dialect() -> None:
    assert isinstance(dialect_of("sqlite"), SQLite)
    assert isinstance(dialect_of("postgresql+psycopg"), PostgreSQL)
    assert isinstance(dialect_of("mysql"), MySQL)
    assert isinstance(dialect_of("mariadb+pymysql"), MySQL)
    assert dialect_of("sqlite").file_based and not dialect_of("sqlite").locks_rows
    assert dialect_of("postgresql").locks_rows and dialect_of("mysql").locks_rows


def _sql(statement: sa.ClauseElement, dialect: sa.Dialect) -> str:
    return str(statement.compile(dialect=dialect))


def test_the_message_log_speaks_each_backend() -> None:
    threads = ThreadRow.__table__  # type: ignore[attr-defined]
    for name, compiler, conflict, lock in [
        ("sqlite", sqlite.dialect(), "ON CONFLICT (thread_id) DO NOTHING", None),
        ("postgresql", postgresql.dialect(), "ON CONFLICT (thread_id) DO NOTHING", "FOR NO KEY UPDATE"),
        ("mysql", mysql.dialect(), "ON DUPLICATE KEY UPDATE", "FOR UPDATE"),
    ]:
        log = message_log(name)
        assert conflict in _sql(log.insert_thread, compiler)
        locked = _sql(log.lock_thread, compiler)
        assert (lock in locked) if lock else ("FOR" not in locked)
        assert threads.name in locked


def test_mysql_tables_have_bounded_binary_keys_and_long_blobs() -> None:
    MySQL().adapt_tables(HistorykitTable.metadata)
    messages = _sql(CreateTable(MessageRow.__table__), mysql.dialect())  # type: ignore[attr-defined]
    assert "thread_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" in messages
    assert "data LONGBLOB" in messages
    assert "DATETIME(fsp=6)" in messages or "DATETIME(6)" in messages
    # The other backends' DDL is untouched.
    blobs = _sql(CreateTable(BlobRow.__table__), postgresql.dialect())  # type: ignore[attr-defined]
    assert "BYTEA" in blobs and "VARCHAR(191)" not in blobs
