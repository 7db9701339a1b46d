"""The SQL that differs between backends, one class per backend: SQLite, PostgreSQL, MySQL/MariaDB.

Everything else in `historykit.checkpointers` is written once, in SQLAlchemy Core or in SQL every
backend reads alike, and asks the `Dialect` of its connection (`dialect_of`) for the rest: upserts
and inserts that keep an existing row, row locks and advisory locks, reading a JSON member, what a
metadata filter can narrow in SQL, which driver a URL means, and what a table's types become.

Example:
    ```python
    from historykit.checkpointers._dialect import dialect_of

    dialect = dialect_of(engine.dialect.name)
    statement = dialect.insert_ignore(THREADS, ["thread_id"])
    ```
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL

from historykit.errors import InvalidArgumentError

__all__ = ["BINARY_RESULTS", "Dialect", "MySQL", "PostgreSQL", "SQLite", "dialect_of", "supported_urls"]

SCHEMA_LOCK = 7307720213
"""The advisory lock `prepare_database` holds ("historykit"), so processes starting together do not
race to create the same tables."""

BINARY_RESULTS = "historykit_binary_results"
"""An execution option: fetch the statement's rows in the driver's binary format where the backend
has one. psycopg reads PostgreSQL's text format by default, in which a `bytea` value arrives as
hex text, twice its size, to be decoded: for a long thread's message rows that is most of the
client's fetching (7.4 ms of CPU against 2.5 ms in binary for 1.9 MB)."""

STORE_LOCK = 7307720214
"""The conversation store's advisory lock: writers hold it shared, `delete` exclusively (see
`conversation_store`)."""


class Dialect:
    """What one backend does its own way. Subclasses fill it in; the defaults are standard SQL."""

    name: ClassVar[str]
    """SQLAlchemy's backend name (`Engine.dialect.name`)."""
    schemes: ClassVar[tuple[str, ...]]
    """The URL schemes that mean this backend."""
    file_based: ClassVar[bool] = False
    """A file opened by the process (SQLite), rather than a server."""
    locks_rows: ClassVar[bool] = True
    """Writers lock the thread's row (`SELECT ... FOR UPDATE`); SQLite locks the whole file instead
    (`BEGIN IMMEDIATE`), and writers of one process queue on a lock of their own."""

    # -- URLs and engines ----------------------------------------------------------------------

    def driver_url(self, url: URL, *, asynchronous: bool) -> URL:
        """`url` with the driver historykit uses for this backend."""
        raise NotImplementedError

    def connect_args(self, connect_args: Mapping[str, Any], connect_timeout: float) -> dict[str, Any]:
        """The driver's connection arguments, with the connect timeout (server backends)."""
        return dict(connect_args)

    def engine_kwargs(self) -> dict[str, Any]:
        """Extra `create_engine` arguments this backend needs."""
        return {}

    def read_only_connect_args(self) -> dict[str, Any]:
        """Connection arguments that make every session read-only (the inspection API's engines);
        SQLite opens the file read-only instead (`historykit.checkpointers._inspection`)."""
        return {}

    def configure_engine(self, sync_engine: Engine) -> None:
        """What this backend adds to an engine historykit made (for an asyncio engine: its
        `sync_engine`), such as honouring `BINARY_RESULTS`."""

    # -- statements ----------------------------------------------------------------------------

    def insert(self, table: sa.Table) -> Any:
        """An `INSERT` with this backend's conflict clauses available."""
        raise NotImplementedError

    def insert_ignore(self, table: sa.Table, index_elements: Sequence[str]) -> sa.Insert:
        """An `INSERT` that keeps the existing row when one has the same `index_elements`."""
        return self.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))  # type: ignore[no-any-return]

    def upsert(self, table: sa.Table, index_elements: Sequence[str], update: Sequence[str]) -> sa.Insert:
        """An `INSERT` that, on a row with the same `index_elements`, sets its `update` columns."""
        insert = self.insert(table)
        return insert.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=list(index_elements), set_={name: insert.excluded[name] for name in update}
        )

    def read_json(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """How to select a JSON column (`_parse_json` takes a parsed value or its text)."""
        return column

    def json_member_sql(self, document: str, param: str) -> str:
        """SQL text of the member named by the bound parameter `:param` of the JSON object in the
        column `document`, as text (`json_member_params` binds it)."""
        raise NotImplementedError

    def json_member_params(self, param: str, name: str) -> dict[str, Any]:
        """The parameters `json_member_sql(..., param)` binds for the member `name`."""
        return {param: name}

    def lock_for_writer(self, select: sa.Select[Any], table: sa.Table) -> sa.Select[Any]:
        """`select` of a thread's row, locking it for a writer of the thread until the commit:
        writers of one thread take turns numbering new messages, and a delete waits for them."""
        return select.with_for_update(of=table)

    def lock_exclusive(self, select: sa.Select[Any]) -> sa.Select[Any]:
        """`select` of a thread's row, locking it against every writer (a delete)."""
        return select.with_for_update()

    def metadata_condition(
        self, meta: sa.ColumnElement[Any], key: str, value: Any
    ) -> sa.ColumnElement[bool] | None:
        """A condition every checkpoint whose metadata matches `{key: value}` meets (`None`: the
        exact test, in Python, does all the work)."""
        return None

    @contextmanager
    def schema_lock(self, conn: Connection) -> Iterator[None]:
        """Hold the schema lock (see `SCHEMA_LOCK`) while the body runs in `conn`'s transaction."""
        yield

    def store_lock(self, *, exclusive: bool) -> sa.Executable | None:
        """The statement that takes the conversation store's lock (see `STORE_LOCK`) until the
        transaction ends; `None` where the transaction itself serializes writers (SQLite)."""
        return None

    def adapt_tables(self, metadata: sa.MetaData) -> None:
        """Give the tables of `metadata` the types this backend needs (idempotent)."""


class SQLite(Dialect):
    """A SQLite file: `ON CONFLICT`, JSON read as text, no row locks (writers lock the file)."""

    name = "sqlite"
    schemes = ("sqlite",)
    file_based = True
    locks_rows = False

    def driver_url(self, url: URL, *, asynchronous: bool) -> URL:
        driver = url.drivername.partition("+")[2]
        if asynchronous and driver in ("", "pysqlite"):
            return url.set(drivername="sqlite+aiosqlite")
        if not asynchronous and driver == "aiosqlite":
            return url.set(drivername="sqlite")
        return url

    def insert(self, table: sa.Table) -> Any:
        return sqlite_dialect.insert(table)

    def read_json(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        # Read JSON as text and parse it here, so a corrupted value is reported with the row it
        # belongs to instead of failing inside the driver.
        return sa.type_coerce(column, sa.Text).label(column.key)  # type: ignore[attr-defined]

    def json_member_sql(self, document: str, param: str) -> str:
        return f"json_extract({document}, :{param})"

    def json_member_params(self, param: str, name: str) -> dict[str, Any]:
        if '"' in name:
            raise InvalidArgumentError(
                f"get_delta_channel_history: channel name {name!r} contains a double quote"
            )
        return {param: f'$."{name}"'}

    def lock_for_writer(self, select: sa.Select[Any], table: sa.Table) -> sa.Select[Any]:
        return select

    def lock_exclusive(self, select: sa.Select[Any]) -> sa.Select[Any]:
        return select

    def metadata_condition(
        self, meta: sa.ColumnElement[Any], key: str, value: Any
    ) -> sa.ColumnElement[bool] | None:
        if value is None:  # matches a missing key too
            return None
        # SQLite stores keys JSON-escaped (non-ASCII as \uXXXX), which its path syntax does not
        # match: such keys, and quotes, are left to the exact test.
        if not key.isascii() or '"' in key or "\\" in key:
            return None
        path = f'$."{key}"'
        kind = sa.func.json_type(meta, path)
        if isinstance(value, str):
            return sa.and_(kind == "text", sa.func.json_extract(meta, path) == value)
        if isinstance(value, (bool, int, float)):
            return sa.and_(
                kind.in_(("integer", "real", "true", "false")), sa.func.json_extract(meta, path) == value
            )
        return kind.in_(("object",) if isinstance(value, Mapping) else ("array",))


class PostgreSQL(Dialect):
    """PostgreSQL through psycopg 3: `ON CONFLICT`, JSONB, row locks and advisory locks."""

    name = "postgresql"
    schemes = ("postgresql", "postgres")

    def driver_url(self, url: URL, *, asynchronous: bool) -> URL:
        if url.drivername.partition("+")[2] not in ("", "psycopg"):
            raise InvalidArgumentError(
                f"PostgreSQL URLs must use psycopg 3 (postgresql+psycopg://), got {url!s}"
            )
        return url.set(drivername="postgresql+psycopg")

    def read_only_connect_args(self) -> dict[str, Any]:
        return {"options": "-c default_transaction_read_only=on"}

    def configure_engine(self, sync_engine: Engine) -> None:
        from psycopg import pq

        binary = pq.Format.BINARY

        @event.listens_for(sync_engine, "before_cursor_execute")
        def _binary_results(
            conn: Connection, cursor: Any, statement: str, params: Any, context: Any, many: bool
        ) -> None:
            if context is not None and context.execution_options.get(BINARY_RESULTS):
                # SQLAlchemy's asyncio adapter wraps psycopg's cursor; the cursor is this
                # statement's alone, so the format lasts for it only.
                getattr(cursor, "_cursor", cursor).format = binary

    def connect_args(self, connect_args: Mapping[str, Any], connect_timeout: float) -> dict[str, Any]:
        out = dict(connect_args)
        # libpq counts whole seconds (and at least 2); psycopg applies it to the whole handshake.
        out.setdefault("connect_timeout", max(2, _whole_seconds(connect_timeout)))
        return out

    def insert(self, table: sa.Table) -> Any:
        return pg_dialect.insert(table)

    def json_member_sql(self, document: str, param: str) -> str:
        return f"({document} ->> :{param})"

    def lock_for_writer(self, select: sa.Select[Any], table: sa.Table) -> sa.Select[Any]:
        # FOR NO KEY UPDATE: taken at once at that strength, never upgraded, so a writer and a
        # delete (FOR UPDATE) cannot deadlock.
        return select.with_for_update(key_share=True, of=table)

    def metadata_condition(
        self, meta: sa.ColumnElement[Any], key: str, value: Any
    ) -> sa.ColumnElement[bool] | None:
        if value is None:
            return None
        jsonb = sa.type_coerce(meta, pg_dialect.JSONB)
        if isinstance(value, str):
            return jsonb.contains({key: value})
        if isinstance(value, (bool, int, float)):  # 1 matches true, as in Python
            return sa.func.jsonb_typeof(jsonb[key]).in_(("number", "boolean"))
        return jsonb.has_key(key)

    @contextmanager
    def schema_lock(self, conn: Connection) -> Iterator[None]:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        yield

    def store_lock(self, *, exclusive: bool) -> sa.Executable | None:
        function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        return sa.text(f"SELECT {function}(:key)").bindparams(key=STORE_LOCK)


MYSQL_KEY_CHARS = 191
"""The length of a MySQL/MariaDB string column: InnoDB indexes at most 3,072 bytes per key, and the
widest key (a blob's thread, namespace, channel and version) holds four of them in utf8mb4."""


class MySQL(Dialect):
    """MySQL or MariaDB through PyMySQL (asyncmy for asyncio): `ON DUPLICATE KEY UPDATE`, row
    locks, named locks, binary-collated strings of at most `MYSQL_KEY_CHARS` characters."""

    name = "mysql"
    schemes = ("mysql", "mariadb")

    def driver_url(self, url: URL, *, asynchronous: bool) -> URL:
        if url.drivername.partition("+")[2] not in ("", "pymysql", "asyncmy"):
            raise InvalidArgumentError(
                f"MySQL/MariaDB URLs use PyMySQL (mysql+pymysql://), or asyncmy for asyncio; got {url!s}"
            )
        url = url.set(drivername="mysql+asyncmy" if asynchronous else "mysql+pymysql")
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        return url

    def connect_args(self, connect_args: Mapping[str, Any], connect_timeout: float) -> dict[str, Any]:
        out = dict(connect_args)
        out.setdefault("connect_timeout", max(1, _whole_seconds(connect_timeout)))
        return out

    def read_only_connect_args(self) -> dict[str, Any]:
        return {"init_command": "SET SESSION TRANSACTION READ ONLY"}

    def engine_kwargs(self) -> dict[str, Any]:
        # Each statement sees what committed before it, as on PostgreSQL: a writer that waited for
        # the thread's lock then reads the numbers the previous writer gave.
        return {"isolation_level": "READ COMMITTED"}

    def insert(self, table: sa.Table) -> Any:
        return mysql_dialect.insert(table)

    def insert_ignore(self, table: sa.Table, index_elements: Sequence[str]) -> sa.Insert:
        # A no-op update rather than INSERT IGNORE, which would also turn real errors (a value
        # too long) into warnings.
        first = index_elements[0]
        return self.insert(table).on_duplicate_key_update({first: table.c[first]})  # type: ignore[no-any-return]

    def upsert(self, table: sa.Table, index_elements: Sequence[str], update: Sequence[str]) -> sa.Insert:
        insert = self.insert(table)
        return insert.on_duplicate_key_update({name: insert.inserted[name] for name in update})  # type: ignore[no-any-return]

    def json_member_sql(self, document: str, param: str) -> str:
        return f"JSON_UNQUOTE(JSON_EXTRACT({document}, :{param}))"

    def json_member_params(self, param: str, name: str) -> dict[str, Any]:
        return {param: "$." + _json_string(name)}

    def lock_for_writer(self, select: sa.Select[Any], table: sa.Table) -> sa.Select[Any]:
        return select.with_for_update()

    def store_lock(self, *, exclusive: bool) -> sa.Executable | None:
        # MySQL has no transaction-scoped advisory lock: the conversation store's row of the
        # schema table serves as one (shared: LOCK IN SHARE MODE; exclusive: FOR UPDATE).
        schema = sa.table("historykit_schema", sa.column("component"))
        select = sa.select(schema.c.component).where(schema.c.component == "pydantic_ai")
        return select.with_for_update(read=not exclusive)

    @contextmanager
    def schema_lock(self, conn: Connection) -> Iterator[None]:
        # A named lock belongs to the session, not the transaction. MySQL commits each CREATE TABLE
        # at once, so the version row is committed too before the lock goes: released earlier, a
        # process starting beside this one would find the tables without their recorded version.
        # The commit is the driver's, so the caller's transaction stays usable (MySQL's DDL had
        # already made it several).
        conn.execute(sa.text("SELECT GET_LOCK('historykit_schema', 60)"))
        try:
            yield
            conn.connection.commit()
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK('historykit_schema')"))

    def adapt_tables(self, metadata: sa.MetaData) -> None:
        for table in metadata.tables.values():
            for column in table.columns:
                column.type = _mysql_type(column.type)


def _json_string(name: str) -> str:
    return json.dumps(name)


def _mysql_type(type_: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    """`type_` with the MySQL variant it needs (unchanged when it has one already)."""
    if "mysql" in getattr(type_, "_variant_mapping", {}):
        return type_
    if isinstance(type_, sa.LargeBinary):
        return type_.with_variant(mysql_dialect.LONGBLOB(), "mysql")
    if isinstance(type_, sa.DateTime):
        return type_.with_variant(mysql_dialect.DATETIME(fsp=6), "mysql")
    if isinstance(type_, sa.JSON):
        return type_
    if isinstance(type_, (sa.String, sa.types.TypeDecorator)) and _is_text(type_):
        # Case- and accent-sensitive, as thread ids, hashes and versions are on the other backends.
        return type_.with_variant(
            mysql_dialect.VARCHAR(MYSQL_KEY_CHARS, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
        )
    return type_


def _is_text(type_: sa.types.TypeEngine[Any]) -> bool:
    impl = type_.impl_instance if isinstance(type_, sa.types.TypeDecorator) else type_
    return isinstance(impl, sa.String) and not isinstance(impl, sa.Text)


def _whole_seconds(seconds: float) -> int:
    return math.ceil(seconds)


_DIALECTS: tuple[Dialect, ...] = (SQLite(), PostgreSQL(), MySQL())


@functools.cache
def dialect_of(name: str) -> Dialect:
    """The `Dialect` of a SQLAlchemy backend name or URL scheme (`sqlite`, `postgresql`, `mysql`,
    `mariadb`, with or without `+driver`)."""
    backend = name.partition("+")[0]
    for dialect in _DIALECTS:
        if backend == dialect.name or backend in dialect.schemes:
            return dialect
    raise InvalidArgumentError(f"unsupported database backend {name!r}: {supported_urls()}")


def supported_urls() -> str:
    """The URL forms historykit takes, for error messages."""
    return "use sqlite:///path.db, postgresql+psycopg://user@host/db or mysql+pymysql://user@host/db"
