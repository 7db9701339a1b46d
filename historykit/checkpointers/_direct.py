"""Statements a plan runs often, executed on the driver's connection.

SQLAlchemy spends about three times what the driver does on each statement it executes (an
execution context, a result object, rows: 110-130 µs against 35-40 µs for psycopg, measured on
the benchmark machine), and a LangGraph step runs about 24 statements. A plan's statements are
built once, so the second time one runs it is compiled here, once per dialect and parameter names,
and from then on executed on the driver's cursor of the same connection, inside the same
transaction. The SQL and the conversions are SQLAlchemy's own (its compiled string, its bind and
result processors, its rendering of `IN` lists, kept by the lists' lengths); only the
per-execution machinery is skipped. The engine's `before_cursor_execute` and
`after_cursor_execute` listeners (tracing, statement logs) still see every statement.

A statement keeps SQLAlchemy's path where its compiled form needs more: column defaults computed
at execution, `RETURNING`, literal-rendered parameters, `IN` lists in an executemany, result
column names that are not plain identifiers; and on MySQL/MariaDB (not measured). A driver error
is raised as SQLAlchemy raises it (`sqlalchemy.exc.DBAPIError` subclasses), and a connection the
driver says is gone is invalidated, so `SaverDatabase.run` retries the transaction as before.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import weakref
from collections import namedtuple
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.sql import Executable
from sqlalchemy.sql.expression import SelectBase

from historykit._plans import adrive, drive
from historykit.checkpointers._dialect import BINARY_RESULTS

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["DirectStatement", "direct_form", "run_direct", "run_direct_async"]

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


@dataclass(frozen=True, slots=True)
class _Rendered:
    """A statement's SQL with its `IN` lists expanded to given lengths, as SQLAlchemy renders it."""

    sql: str
    positional: tuple[str, ...] | None
    """Parameter names in order, for a driver whose placeholders are positional (`?`)."""
    binds: tuple[tuple[str, Callable[[Any], Any]], ...]
    """SQLAlchemy's bind processors (a JSON column's serializer, SQLite's datetime format)."""
    expansion: Mapping[str, Sequence[str]]
    """Each `IN` list's parameter, and the names its items are bound to."""


@dataclass(frozen=True, slots=True)
class DirectStatement:
    """One statement compiled for one dialect and one set of parameter names."""

    compiled: Any
    """SQLAlchemy's `Compiled`: its SQL, and what `construct_params` fills in."""
    lists: tuple[str, ...]
    """The parameters that are `IN` lists (expanded at execution: the SQL depends on their lengths)."""
    row: type | None
    """The row class of a statement that returns rows; `None` for one that does not."""
    results: tuple[Any, ...] | None
    """Each result column's type (its result processor is found with the cursor's description)."""
    binary: bool
    """Rows in the driver's binary format (`BINARY_RESULTS`)."""
    rendered: dict[tuple[int, ...], _Rendered]
    """The SQL by the lengths of the `IN` lists (one entry, `()`, for a statement without)."""

    def arguments(self, params: Params) -> tuple[str, bool, Any]:
        """The SQL to run, whether it runs once per parameter set, and the driver's arguments."""
        if isinstance(params, Sequence):
            assert not self.lists  # `direct_form` leaves such a statement to SQLAlchemy
            rendered = self.rendered[()]
            return rendered.sql, True, [self._bound(rendered, self._values(p)) for p in params]
        values = self._values(params)
        lengths = tuple(len(values[name]) for name in self.lists)
        rendered = self.rendered.get(lengths) or self._render(values, lengths)
        for name, names in rendered.expansion.items():
            values.update(zip(names, values.pop(name), strict=True))
        return rendered.sql, False, self._bound(rendered, values)

    def _values(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return self.compiled.construct_params(params, _check=False)  # type: ignore[no-any-return]

    @staticmethod
    def _bound(rendered: _Rendered, values: dict[str, Any]) -> Any:
        for name, process in rendered.binds:
            if name in values:
                values[name] = process(values[name])
        if rendered.positional is not None:
            return tuple(values[name] for name in rendered.positional)
        return values

    def _render(self, values: dict[str, Any], lengths: tuple[int, ...]) -> _Rendered:
        # SQLAlchemy's own expansion; the SQL depends only on the lists' lengths, so it is kept.
        expanded = self.compiled._process_parameters_for_postcompile(dict(values))
        binds = {**self.compiled._bind_processors, **expanded.processors}
        for name in self.lists:
            binds.pop(name, None)
        rendered = _Rendered(
            expanded.statement,
            tuple(expanded.positiontup) if self.compiled.positional else None,
            tuple(binds.items()),
            {name: tuple(expanded.parameter_expansion[name]) for name in self.lists},
        )
        self.rendered[lengths] = rendered
        return rendered

    def rows(self, dialect: Dialect, cursor: Any, fetched: Sequence[Any]) -> list[Any]:
        assert self.row is not None and self.results is not None
        processors = [
            type_._cached_result_processor(dialect, description[1])
            for type_, description in zip(self.results, cursor.description, strict=True)
        ]
        make = self.row._make  # type: ignore[attr-defined]
        if not any(processors):
            return [make(row) for row in fetched]
        pairs = list(enumerate(processors))
        return [
            make([process(row[i]) if process is not None else row[i] for i, process in pairs])
            for row in fetched
        ]


class _Row:
    """What SQLAlchemy's `Row` offers that plans use beyond a named tuple."""

    __slots__ = ()

    @property
    def _mapping(self) -> dict[str, Any]:
        return self._asdict()  # type: ignore[attr-defined, no-any-return]


_DRIVERS = {("sqlite", "pysqlite"), ("sqlite", "aiosqlite"), ("postgresql", "psycopg")}
"""The drivers measured (MySQL's statements keep SQLAlchemy's path)."""

_FORMS: weakref.WeakKeyDictionary[
    Executable, dict[tuple[str, frozenset[str], bool], DirectStatement | None]
] = weakref.WeakKeyDictionary()
"""Each statement's compiled forms, by dialect, parameter names and whether it runs once per
parameter set; `None`: run it through SQLAlchemy. A compiled form refers to its statement, so an
entry stays for good: the stores build their statements once per dialect, never per instance or
per call (`test_compiled_forms_do_not_grow_with_instances`); a statement built per call runs once
and is never compiled here (`_SEEN`)."""
_SEEN: weakref.WeakSet[Executable] = weakref.WeakSet()
"""Statements executed once: a statement built for one call only is never compiled here."""


def direct_form(dialect: Dialect, statement: Executable, params: Params) -> DirectStatement | None:
    """The statement's direct form for `dialect` and `params`' names; `None` to run it through
    SQLAlchemy (the first time a statement runs, or one whose compiled form needs SQLAlchemy)."""
    forms = _FORMS.get(statement)
    if forms is None:
        if statement not in _SEEN:
            _SEEN.add(statement)
            return None
        forms = _FORMS[statement] = {}
    first = params[0] if isinstance(params, Sequence) and params else params
    names = frozenset(first) if isinstance(first, Mapping) else frozenset()
    many = isinstance(params, Sequence)
    key = (f"{dialect.name}+{dialect.driver}", names, many)
    if key not in forms:
        forms[key] = _compile(dialect, statement, names, many)
    return forms[key]


def _compile(
    dialect: Dialect, statement: Executable, names: frozenset[str], many: bool
) -> DirectStatement | None:
    if (dialect.name, dialect.driver) not in _DRIVERS or not isinstance(
        statement, (SelectBase, sa.Insert, sa.Update, sa.Delete)
    ):
        return None
    compiled: Any = statement.compile(dialect=dialect, column_keys=sorted(names))
    lists = tuple(sorted(compiled.bind_names[bind] for bind in compiled.post_compile_params))
    needs_sqlalchemy = (
        "literal_execute_params",
        "insert_prefetch",
        "update_prefetch",
        "postfetch",
        "_insertmanyvalues",
        "effective_returning",
    )
    if (
        any(getattr(compiled, name, None) for name in needs_sqlalchemy)
        or (lists and many)
        or any(not bind.expanding or bind.literal_execute for bind in compiled.post_compile_params)
    ):
        return None
    row: type | None = None
    results: tuple[Any, ...] | None = None
    if isinstance(statement, SelectBase):
        columns = compiled._result_columns
        keys = [column.keyname for column in columns]
        if len(set(keys)) != len(keys) or any(
            not key.isidentifier() or keyword.iskeyword(key) or key.startswith("_") for key in keys
        ):
            return None
        row = type("DirectRow", (_Row, namedtuple("DirectRow", keys)), {"__slots__": ()})
        results = tuple(column.type for column in columns)
    binary = dialect.name == "postgresql" and bool(statement.get_execution_options().get(BINARY_RESULTS))
    rendered: dict[tuple[int, ...], _Rendered] = {}
    if not lists:
        positional = tuple(compiled.positiontup) if compiled.positional else None
        rendered[()] = _Rendered(compiled.string, positional, tuple(compiled._bind_processors.items()), {})
    return DirectStatement(compiled, lists, row, results, binary, rendered)


def run_direct(conn: Connection, form: DirectStatement, params: Params) -> Sequence[Row[Any]] | int:
    """Execute `form` on `conn`'s driver connection, in its transaction: its rows, or for a
    statement that returns none, the driver's count of rows written."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        return drive(_statement(conn, cursor, form, params), _call)
    except sa.exc.DBAPIError as error:
        if error.connection_invalidated:
            conn.invalidate(error.orig)
        raise
    finally:
        cursor.close()


async def run_direct_async(
    conn: AsyncConnection, driver: Any, form: DirectStatement, params: Params
) -> Sequence[Row[Any]] | int:
    """`run_direct` from async code: on `driver`, the asyncio driver's connection under `conn`."""
    sync = conn.sync_connection
    assert sync is not None
    cursor = driver.cursor()
    if inspect.isawaitable(cursor):  # aiosqlite's
        cursor = await cursor
    try:
        return await adrive(_statement(sync, cursor, form, params), _call)
    except sa.exc.DBAPIError as error:
        if error.connection_invalidated:
            await conn.invalidate(error.orig)
        raise
    finally:
        await cursor.close()


def _statement(
    conn: Connection, cursor: Any, form: DirectStatement, params: Params
) -> Generator[Callable[[], Any], Any, Sequence[Row[Any]] | int]:
    """One statement on a driver's cursor, written once for both runners: it yields the driver's
    calls (`drive` makes them; `adrive` awaits what they return, an asyncio driver's coroutines)."""
    sql, many, arguments = form.arguments(params)
    if form.binary:
        cursor.format = _binary_format()
    # SQLAlchemy's own test before dispatching an event: whether anything listens on the
    # connection or its engine (iterating its empty listener collections costs more than that).
    listened = conn._has_events or conn.engine._has_events
    if listened:
        sql, arguments = _before(conn, cursor, sql, arguments, many)
    try:
        yield functools.partial(cursor.executemany if many else cursor.execute, sql, arguments)
        if listened:
            _after(conn, cursor, sql, arguments, many)
        if form.row is None:
            return int(cursor.rowcount)
        fetched = yield cursor.fetchall
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _wrapped(conn, sql, arguments, exc, cursor) from exc
    return form.rows(conn.dialect, cursor, fetched)


def _call(call: Callable[[], Any]) -> Any:
    return call()


def _before(conn: Connection, cursor: Any, sql: str, arguments: Any, many: bool) -> tuple[str, Any]:
    """SQLAlchemy's `before_cursor_execute` event, for whoever listens (tracing, statement logs):
    the statement and arguments to run, as its listeners leave them (SQLAlchemy has every
    listener return them, changed or not)."""
    for listener in conn.dispatch.before_cursor_execute:
        sql, arguments = listener(conn, cursor, sql, arguments, None, many)
    return sql, arguments


def _after(conn: Connection, cursor: Any, sql: str, arguments: Any, many: bool) -> None:
    for listener in conn.dispatch.after_cursor_execute:
        listener(conn, cursor, sql, arguments, None, many)


def _wrapped(
    conn: Connection, sql: str, arguments: Any, exc: Exception, cursor: Any
) -> sa.exc.StatementError:
    """`exc` as SQLAlchemy raises it (its exception tree), marked `connection_invalidated` when the
    driver says the connection is gone (the runner invalidates it then, as SQLAlchemy does, so the
    pool replaces it and `SaverDatabase.run` retries the transaction)."""
    dialect = conn.dialect
    gone = bool(dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor))  # type: ignore[arg-type]
    return sa.exc.DBAPIError.instance(
        sql,
        arguments,
        exc,
        dialect.loaded_dbapi.Error,
        hide_parameters=conn.engine.hide_parameters,
        connection_invalidated=gone,
        dialect=dialect,
        ismulti=isinstance(arguments, list),
    )


def _binary_format() -> Any:
    from psycopg import pq

    return pq.Format.BINARY
