"""Databases for the persistence tests: SQLite files, and PostgreSQL and MySQL databases of their own.

PostgreSQL runs where the server answers (and must in CI, `CI=true`). MySQL/MariaDB is opt-in: set
`HISTORYKIT_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test` (a server and an account that may
create databases) to run the tests marked `mysql`; unset, they skip and say so.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import mysql_admin_url, postgres_admin_url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'historykit.db'}"


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A database created for this test session (unique name) and dropped at its end."""
    admin = postgres_admin_url()
    import psycopg

    name = f"historykit_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = sa.make_url(admin).set(drivername="postgresql+psycopg", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _drop_historykit_tables(url: str) -> None:
    """Drop every historykit table of the server database at `url` (PostgreSQL or MySQL)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            quote = conn.dialect.identifier_preparer.quote
            for name in sa.inspect(conn).get_table_names():
                if name.startswith("historykit"):
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {quote(name)}"))
    finally:
        engine.dispose()


@pytest.fixture
def new_postgres_database(postgres_database: str) -> Callable[[], str]:
    """The session's PostgreSQL database, emptied of historykit's tables at each call (creating a
    database per test costs seconds; dropping a dozen tables, milliseconds)."""

    def make() -> str:
        _drop_historykit_tables(postgres_database)
        return postgres_database

    return make


@pytest.fixture
def postgres_url(new_postgres_database: Callable[[], str]) -> str:
    return new_postgres_database()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each backend in turn: a new SQLite file, then the emptied PostgreSQL database, then the
    emptied MySQL/MariaDB one (opt-in: `HISTORYKIT_TEST_MYSQL_URL`)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'historykit.db'}"
    if request.param == "mysql":
        return str(request.getfixturevalue("new_mysql_database")())
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="session")
def mysql_database() -> Iterator[str]:
    """A MySQL/MariaDB database created for this test session (unique name), dropped at its end."""
    admin = sa.make_url(mysql_admin_url()).set(drivername="mysql+pymysql")
    name = f"historykit_test_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        engine.dispose()


@pytest.fixture
def new_mysql_database(mysql_database: str) -> Callable[[], str]:
    """The session's MySQL database, emptied of historykit's tables at each call."""

    def make() -> str:
        _drop_historykit_tables(mysql_database)
        return mysql_database

    return make
