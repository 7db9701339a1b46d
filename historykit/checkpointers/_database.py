"""Engines, schema versions and migrations for historykit's tables, sync and async.

`create_engine(url)` and `create_async_engine(url)` accept the same URLs: `sqlite:///path.db` (the
default kind: a file in WAL mode with a busy timeout, so several processes can write different
threads of it at once), `postgresql+psycopg://user@host/db` (`postgresql://` means psycopg 3) or
`mysql+pymysql://user@host/db` (MySQL or MariaDB, `historykit[mysql]`; `mysql://` means PyMySQL,
asyncmy for async engines). What differs between backends is asked of their `_dialect.Dialect`.
`prepare_database(conn, components)` creates, checks and migrates the tables of the given
`SchemaComponent`s; it is idempotent and safe to run from several processes at once.

Example:
    ```python
    from sqlmodel import select

    from historykit.checkpointers._database import create_engine, prepare_database, session
    from historykit.checkpointers._schema import CORE, MessageRow

    engine = create_engine("sqlite:///agent.db")
    with engine.begin() as conn:
        prepare_database(conn, [CORE])
    with session(engine) as s:
        rows = s.exec(select(MessageRow).where(MessageRow.thread_id == "t1")).all()
    ```
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
import tenacity
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL, Row, make_url
from sqlalchemy.sql import Executable
from sqlmodel import Session

from historykit._plans import adrive, drive
from historykit.checkpointers._dialect import dialect_of, supported_urls
from historykit.checkpointers._direct import direct_form, run_direct, run_direct_async
from historykit.checkpointers._schema import HistorykitTable, SchemaComponent, SchemaVersionRow, utcnow
from historykit.errors import (
    ArgumentTypeError,
    CorruptRowError,
    InvalidArgumentError,
    ReadOnlyDatabaseError,
    SchemaError,
    SchemaVersionError,
    UnreachableDatabaseError,
)

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer needs greenlet: imported only where async is used.
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
    from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "CorruptRowError",
    "NoRows",
    "Plan",
    "Query",
    "ReadOnlyDatabaseError",
    "SchemaError",
    "SchemaVersionError",
    "UnreachableDatabaseError",
    "async_session",
    "create_async_engine",
    "create_engine",
    "normalize_url",
    "prepare_database",
    "read_only_reason",
    "rows_written",
    "run_plan",
    "run_plan_async",
    "schema_is_current",
    "session",
    "unreachable_error",
]

DEFAULT_BUSY_TIMEOUT = 30.0
"""Seconds a SQLite writer waits for another process's write lock before giving up."""

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds a PostgreSQL connection may take to be established (a server that accepts and never
answers fails then, instead of blocking)."""

SCHEMA_TABLE = SchemaVersionRow.__table__  # type: ignore[attr-defined]


def unreachable_error(url: str | URL, exc: sa.exc.OperationalError) -> UnreachableDatabaseError:
    """The one-line error for a database that cannot be opened or reached: where (no password),
    and why, in the driver's words. Raise it `from None`: SQLAlchemy's chained error says the same
    in a hundred lines."""
    where = normalize_url(url).render_as_string(hide_password=True)
    reason = " ".join(str(exc.orig if exc.orig is not None else exc).split())
    verb = "open" if dialect_of(normalize_url(url).drivername).file_based else "connect to"
    return UnreachableDatabaseError(f"cannot {verb} the database {where}: {reason}")


def normalize_url(url: str | URL, *, asynchronous: bool = False) -> URL:
    """The SQLAlchemy URL to use: psycopg 3 for PostgreSQL, aiosqlite for async SQLite.

    A plain path (`agent.db`, `/data/agent.db`: no `scheme://`) means that SQLite file, as the CLI
    takes it.
    """
    if isinstance(url, str) and "://" not in url:
        if not url.strip():
            raise InvalidArgumentError(
                "the database URL is empty: use sqlite:///path.db or postgresql+psycopg://..."
            )
        url = URL.create("sqlite", database=url)
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise InvalidArgumentError(
            f"cannot parse the database URL {url!s} ({exc}): use sqlite:///path.db, a plain file path, "
            "or postgresql+psycopg://user@host/db"
        ) from None
    try:
        dialect = dialect_of(parsed.drivername)
    except InvalidArgumentError:
        raise InvalidArgumentError(f"unsupported database URL {url!s}: {supported_urls()}") from None
    return dialect.driver_url(parsed, asynchronous=asynchronous)


def _is_sqlite(url: URL) -> bool:
    return dialect_of(url.get_backend_name()).file_based


def _check_sqlite_file(url: URL) -> None:
    """A clear error, naming the path, for a SQLite file that cannot be opened or created."""
    if url.database in (None, "", ":memory:") or url.database.startswith("file:"):
        return
    path = Path(url.database)
    if path.is_dir():
        raise InvalidArgumentError(f"the SQLite database {str(path)!r} is a directory, not a file")
    if not path.exists() and not path.parent.is_dir():
        raise InvalidArgumentError(
            f"the SQLite database {str(path)!r} cannot be created: its directory "
            f"{str(path.parent)!r} does not exist (create it first)"
        )


_READ_ONLY: dict[str, str] = {}
"""Why each read-only SQLite URL this process opened can only be read (by rendered URL: engines
with other execution options share their URL)."""


def read_only_reason(engine: Engine | AsyncEngine) -> str | None:
    """Why `engine` (made by `create_engine`) can only read its SQLite file; `None` if it can write."""
    return _READ_ONLY.get(engine.url.render_as_string(hide_password=False))


def _read_only_sqlite(url: URL) -> tuple[URL, str | None]:
    """The URL that opens a SQLite file that cannot be written read-only, and why (`None`: the
    file can be written, the URL is unchanged).

    A read-only file is opened with `mode=ro`; in a directory that cannot be written (a read-only
    filesystem), also `immutable=1` unless a `-wal` file holds transactions: WAL readers otherwise
    need to create the `-shm` file there.
    """
    if url.query.get("mode") in ("ro", ("ro",)) or url.query.get("immutable") in ("1", ("1",)):
        return url, "its URL opens it read-only"
    if not url.database or url.database.startswith("file:") or url.query.get("mode"):
        return url, None
    path = Path(url.database).expanduser().resolve()
    if not path.exists():
        return url, None
    if not os.access(path.parent, os.W_OK):
        why = f"its directory {str(path.parent)!r} cannot be written (a read-only filesystem?)"
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            # Transactions not yet copied into the file: read them through the existing -wal and
            # -shm files (an immutable connection would ignore them).
            query = {"mode": "ro", "uri": "true"}
        else:
            query = {"mode": "ro", "immutable": "1", "uri": "true"}
    elif not os.access(path, os.W_OK):
        why = f"the file {str(path)!r} cannot be written"
        query = {"mode": "ro", "uri": "true"}
    else:
        return url, None
    return url.set(database=f"file:{path}").update_query_dict(query), why


def _switch_to_wal(cursor: Any, busy_timeout: float) -> None:
    """`PRAGMA journal_mode = WAL`, retried within the busy timeout: while another connection turns
    a new file to WAL, SQLite answers "database is locked" at once instead of calling the busy
    handler (workers opening a new file together hit it)."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(lambda exc: "locked" in str(exc)),
        wait=tenacity.wait_random_exponential(multiplier=0.005, max=0.2),
        stop=tenacity.stop_after_delay(busy_timeout),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            cursor.execute("PRAGMA journal_mode = WAL")


def _configure_sqlite(sync_engine: Engine, busy_timeout: float, read_only: str | None = None) -> None:
    """WAL, a busy timeout and explicit transactions for every SQLite connection.

    pysqlite's own transaction handling starts transactions lazily and never as `IMMEDIATE`; a
    writer that first reads and then writes can then fail at once with "database is locked" when
    another process wrote in between, whatever the busy timeout. So transactions are begun here:
    `BEGIN IMMEDIATE` for connections marked `historykit_write=True` (they queue for the write
    lock up front, honouring the busy timeout), a plain `BEGIN` otherwise.
    """
    timeout_ms = int(busy_timeout * 1000)

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see above)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            if read_only is not None:
                return  # the journal mode is the file's own; nothing is written
            _switch_to_wal(cursor, busy_timeout)
            # NORMAL is durable across a crashed or killed process in WAL mode; only a power
            # loss can cost the last transactions, never consistency.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    if read_only is not None:
        _READ_ONLY[sync_engine.url.render_as_string(hide_password=False)] = read_only

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("historykit_write", False)
        if write and read_only is not None:
            raise ReadOnlyDatabaseError(
                f"the SQLite database {sync_engine.url.database!r} is opened read-only because {read_only}: "
                "reading works, writing does not"
            )
        # On the driver's connection: through `exec_driver_sql` a BEGIN costs what a statement
        # does (events, a result), eight times a LangGraph step.
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        finally:
            cursor.close()


def _server_kwargs(url: URL, kwargs: dict[str, Any], connect_timeout: float) -> dict[str, Any]:
    """`create_engine` arguments for a database server: its dialect's, a connect timeout, and
    `pool_pre_ping` (a connection the server dropped is replaced instead of failing a call)."""
    dialect = dialect_of(url.get_backend_name())
    out = {**dialect.engine_kwargs(), **kwargs}
    out.setdefault("pool_pre_ping", True)
    out["connect_args"] = dialect.connect_args(out.pop("connect_args", {}), connect_timeout)
    return out


def create_engine(
    url: str | URL,
    *,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    **kwargs: Any,
) -> Engine:
    """A synchronous engine for `url` (SQLite in WAL mode with a busy timeout, or PostgreSQL)."""
    parsed = normalize_url(url)
    if _is_sqlite(parsed):
        if parsed.database in (None, "", ":memory:"):
            raise InvalidArgumentError(
                "an in-memory SQLite database is private to one connection; use a file "
                "(sqlite:///path.db) so every connection and process sees the same data"
            )
        _check_sqlite_file(parsed)
        parsed, why = _read_only_sqlite(parsed)
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("timeout", busy_timeout)
        connect_args.setdefault("check_same_thread", False)
        engine = sa.create_engine(parsed, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine, busy_timeout, why)
        return engine
    engine = sa.create_engine(parsed, **_server_kwargs(parsed, kwargs, connect_timeout))
    dialect_of(parsed.drivername).configure_engine(engine)
    return engine


def create_async_engine(
    url: str | URL,
    *,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    **kwargs: Any,
) -> AsyncEngine:
    """An asyncio engine for `url` (aiosqlite for SQLite, psycopg 3 async for PostgreSQL)."""
    from sqlalchemy.ext.asyncio import create_async_engine as sa_create_async_engine

    parsed = normalize_url(url, asynchronous=True)
    if _is_sqlite(parsed):
        if parsed.database in (None, "", ":memory:"):
            raise InvalidArgumentError("use a SQLite file (sqlite:///path.db), not an in-memory database")
        _check_sqlite_file(parsed)
        parsed, why = _read_only_sqlite(parsed)
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("timeout", busy_timeout)
        engine = sa_create_async_engine(parsed, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine.sync_engine, busy_timeout, why)
        return engine
    async_engine = sa_create_async_engine(parsed, **_server_kwargs(parsed, kwargs, connect_timeout))
    dialect_of(parsed.drivername).configure_engine(async_engine.sync_engine)
    return async_engine


@contextmanager
def session(engine: Engine) -> Iterator[Session]:
    """A SQLModel session that commits on success and rolls back on error."""
    with Session(engine.execution_options(historykit_write=True)) as s:
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


@asynccontextmanager
async def async_session(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """The asyncio counterpart of `session`."""
    from sqlmodel.ext.asyncio.session import AsyncSession

    async with AsyncSession(engine.execution_options(historykit_write=True)) as s:
        try:
            yield s
            await s.commit()
        except BaseException:
            await s.rollback()
            raise


# ---------------------------------------------------------------------------------------------
# Plans: query logic written once, run by a sync or an async connection
# ---------------------------------------------------------------------------------------------

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Query:
    """One statement of a `Plan`, with its parameters (a list of dicts runs it once per dict)."""

    statement: Executable
    params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None


Plan = Generator[Query, Sequence[Row[Any]], T]
"""A generator that yields `Query`s, receives each one's rows (`NoRows`, empty, when it returns
none; `rows_written` says how many rows it wrote) and returns its result. A query that fails raises
inside the plan, where it yielded it. The same plan runs on a `Connection` (`run_plan`) or an
`AsyncConnection` (`run_plan_async`), so every store method is written once for both."""


class NoRows(tuple[Row[Any], ...]):
    """The answer to a statement that returns no rows: empty, and the rows it wrote (`rowcount`)."""

    rowcount: int

    def __new__(cls, rowcount: int) -> NoRows:
        answer = super().__new__(cls)
        answer.rowcount = rowcount
        return answer


def rows_written(answer: Sequence[Row[Any]]) -> int:
    """How many rows the statement a plan was sent `answer` for wrote (its DBAPI `rowcount`: the
    rows an `UPDATE` matched, on every backend historykit supports)."""
    if not isinstance(answer, NoRows):
        raise ArgumentTypeError("rows_written: the statement returned rows, not a count of written rows")
    return answer.rowcount


def run_plan(conn: Connection, plan: Plan[T]) -> T:
    """Run `plan` on a synchronous connection (inside the caller's transaction)."""

    def rows(query: Query) -> Sequence[Row[Any]]:
        form = direct_form(conn.dialect, query.statement, query.params)
        if form is not None:
            answer = run_direct(conn, form, query.params)
            return NoRows(answer) if isinstance(answer, int) else answer
        result = conn.execute(query.statement, query.params)  # type: ignore[arg-type]
        return result.all() if result.returns_rows else NoRows(result.rowcount)

    return drive(plan, rows)


async def run_plan_async(conn: AsyncConnection, plan: Plan[T]) -> T:
    """Run `plan` on an asyncio connection (inside the caller's transaction)."""
    driver: Any = None  # the asyncio driver's connection, asked for once (a greenlet switch each time)

    async def rows(query: Query) -> Sequence[Row[Any]]:
        nonlocal driver
        form = direct_form(conn.dialect, query.statement, query.params)
        if form is not None:
            if driver is None:
                driver = (await conn.get_raw_connection()).driver_connection
            answer = await run_direct_async(conn, driver, form, query.params)
            return NoRows(answer) if isinstance(answer, int) else answer
        result = await conn.execute(query.statement, query.params)  # type: ignore[arg-type]
        return result.all() if result.returns_rows else NoRows(result.rowcount)

    return await adrive(plan, rows)


# ---------------------------------------------------------------------------------------------
# Schema versions
# ---------------------------------------------------------------------------------------------


def prepare_database(conn: Connection, components: Sequence[SchemaComponent]) -> None:
    """Create, check or migrate the tables of `components` inside `conn`'s transaction.

    - a component seen for the first time: its tables are created and its version recorded;
    - an older recorded version: its migrations run, in order;
    - a newer recorded version: `SchemaVersionError`, nothing touched;
    - a recorded component with a missing table or column: `SchemaError` naming it.

    Run it inside a write transaction (`engine.begin()`); on a server it takes the schema lock
    (`Dialect.schema_lock`) so processes starting together do not race to create the same tables.
    """
    dialect = dialect_of(conn.dialect.name)
    dialect.adapt_tables(HistorykitTable.metadata)
    with dialect.schema_lock(conn):
        SCHEMA_TABLE.create(conn, checkfirst=True)
        recorded = {row.component: row.version for row in conn.execute(sa.select(SCHEMA_TABLE))}
        for component in components:
            _prepare_component(conn, component, recorded.get(component.name))


def schema_is_current(conn: Connection, components: Sequence[SchemaComponent]) -> bool:
    """Whether every component's tables are there at its current version, checked without writing
    (a read transaction: on SQLite a reader never waits behind a writer, and a read-only file can
    answer). `False` when something is to be created or migrated (`prepare_database`, in a write
    transaction); a newer version or a missing table or column raises as `prepare_database` does.
    """
    if not sa.inspect(conn).has_table(SCHEMA_TABLE.name):
        return False
    recorded = {row.component: row.version for row in conn.execute(sa.select(SCHEMA_TABLE))}
    for component in components:
        version = recorded.get(component.name)
        if version is None or version < component.version:
            return False
        _check_version(component, version)
    # The tables and columns are inspected once per database and process: again only when the
    # recorded versions (or, on SQLite, the file's schema cookie) changed since.
    key = (conn.engine.url.render_as_string(hide_password=False), tuple(c.name for c in components))
    sqlite = conn.dialect.name == "sqlite"
    cookie = conn.exec_driver_sql("PRAGMA schema_version").scalar() if sqlite else None
    fingerprint = (tuple(sorted(recorded.items())), cookie)
    if _CHECKED.get(key) == fingerprint:
        return True
    for component in components:
        _check_tables(conn, component)
    _CHECKED[key] = fingerprint
    return True


_CHECKED: dict[tuple[str, tuple[str, ...]], tuple[Any, ...]] = {}
"""The databases whose tables this process inspected, with what they were checked at."""


def _check_version(component: SchemaComponent, recorded: int) -> None:
    if recorded > component.version:
        raise SchemaVersionError(
            f"the database's historykit component {component.name!r} has schema version {recorded}, "
            f"written by a newer historykit; this version reads up to version {component.version}. "
            "Upgrade historykit to open it."
        )


def _prepare_component(conn: Connection, component: SchemaComponent, recorded: int | None) -> None:
    tables = [model.__table__ for model in component.tables]  # type: ignore[attr-defined]
    for table in tables:
        if table.metadata is not HistorykitTable.metadata:
            raise ArgumentTypeError(
                f"table {table.name} of component {component.name!r} is not a HistorykitTable"
            )
    if recorded is None:
        existing = set(sa.inspect(conn).get_table_names())
        clash = [t.name for t in tables if t.name in existing]
        if clash:
            raise SchemaError(
                f"the database has the table(s) {', '.join(clash)} but no recorded version for the "
                f"historykit component {component.name!r}: it was not created by historykit "
                "(or its historykit_schema table was emptied); refusing to reuse it"
            )
        for table in tables:
            table.create(conn)
        conn.execute(
            sa.insert(SCHEMA_TABLE).values(
                component=component.name, version=component.version, updated_at=utcnow()
            )
        )
        return
    _check_version(component, recorded)
    if recorded < component.version:
        for target in range(recorded + 1, component.version + 1):
            step = component.migrations.get(target)
            if step is None:
                raise SchemaVersionError(
                    f"no migration of the historykit component {component.name!r} from schema version "
                    f"{target - 1} to {target}"
                )
            step(conn)
        conn.execute(
            sa.update(SCHEMA_TABLE)
            .where(SCHEMA_TABLE.c.component == component.name)
            .values(version=component.version, updated_at=utcnow())
        )
    _check_tables(conn, component)


def _check_tables(conn: Connection, component: SchemaComponent) -> None:
    inspector = sa.inspect(conn)
    existing = set(inspector.get_table_names())
    for model in component.tables:
        table = model.__table__  # type: ignore[attr-defined]
        if table.name not in existing:
            raise SchemaError(
                f"the table {table.name} of the historykit component {component.name!r} is missing from "
                "the database (it is recorded as created): the database was altered outside historykit"
            )
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        missing = [c.name for c in table.columns if c.name not in columns]
        if missing:
            raise SchemaError(
                f"the table {table.name} lacks the column(s) {', '.join(missing)} that historykit's "
                f"component {component.name!r} (schema version {component.version}) needs"
            )
