"""The plumbing of the LangGraph saver: engines (one sync, one async per event loop) shared by a
saver and its `with_allowlist` clones, transactions that act once committed, and `SaverDatabase`,
which runs plans on them for the saver's collaborators.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import Engine
from sqlalchemy.engine import URL, Row

from historykit._plans import adrive, drive
from historykit.checkpointers._database import (
    DEFAULT_CONNECT_TIMEOUT,
    Plan,
    Query,
    create_async_engine,
    create_engine,
    normalize_url,
    prepare_database,
    read_only_reason,
    run_plan,
    run_plan_async,
    schema_is_current,
)
from historykit.checkpointers._dialect import dialect_of
from historykit.checkpointers._message_cache import MessageCache
from historykit.checkpointers._schema import (
    utcnow,
)
from historykit.checkpointers._serde import RowCodec
from historykit.checkpointers._write_order import WriteOrder
from historykit.checkpointers._writer_guard import Verdict, WriterGuard
from historykit.errors import UnreachableDatabaseError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
from historykit.checkpointers._saver_sql import (
    _COMPONENTS,
    FRAMEWORK,
    T,
    _Statements,
)

__all__ = ["SaverDatabase"]

_DELETED_REMEMBERED = 10_000
"""Deleted threads a process remembers (`_Connections.deleted_threads`): a run still writing to one is rare
and brief, so the oldest can go."""
_SETTLE_SECONDS = 30.0
"""How long a write waits for its checkpoint under the single-writer guard (then it is written)."""
_SETTLE_POLL = 0.005
"""Seconds between two looks at a checkpoint a write waits for."""


# ---------------------------------------------------------------------------------------------
# Connections shared by a saver and its `with_allowlist` clones
# ---------------------------------------------------------------------------------------------


class _Transaction:
    """What a plan asks to happen once its transaction committed (cache updates)."""

    __slots__ = ("_after",)

    def __init__(self) -> None:
        self._after: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        self._after.append(callback)

    def committed(self) -> None:
        for callback in self._after:
            callback()


class _Connections:
    """Engines (one sync, one async per event loop), schema readiness and caches."""

    def __init__(
        self,
        url: str | URL,
        busy_timeout: float,
        engine_kwargs: Mapping[str, Any],
        cache_threads: int,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        single_writer: bool = False,
    ):
        self.url = url
        self.dialect = dialect_of(normalize_url(url).get_backend_name())
        self.busy_timeout = busy_timeout
        self.connect_timeout = connect_timeout
        self.engine_kwargs = dict(engine_kwargs)
        if self.dialect.locks_rows:
            # A connection the server dropped is found by the statement that uses it, and the
            # transaction runs again on a new one (`SaverDatabase.run`): pinging the server before
            # every transaction would add a round trip to each of a step's eight.
            self.engine_kwargs.setdefault("pool_pre_ping", False)
        self.lock = threading.Lock()
        self.engines: tuple[Engine, Engine] | None = None
        self.async_engines: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncEngine, AsyncEngine]
        ] = weakref.WeakKeyDictionary()
        self.ready = False
        self.single_writer = single_writer
        self.guard = WriterGuard() if single_writer else None
        """The single-writer guard's memory of this process's checkpoints (`_writer_guard`)."""
        self.cache = MessageCache(cache_threads)
        self.known_threads: set[str] = set()
        self.deleted_threads: dict[str, None] = {}
        """Threads this process saw deleted (by itself, or under a run by another process), oldest
        first, up to `_DELETED_REMEMBERED`: a node's writes that arrive after the delete must not
        bring the thread back, even once nothing else of it is cached (`SaverDatabase.check_thread_plan`)."""
        self.counted: dict[str, set[tuple[str, bytes]]] = defaultdict(set)
        """The token counts (`(method, digest)`) each thread holds, as far as this process knows."""
        self.count_positions: dict[str, int] = {}
        """Where in the process's noted counts (`counts_noted_since`) each thread's last put stopped."""
        self.counts_loaded: set[str] = set()
        """Threads whose stored counts this process read (`remember_counts`) since it started."""
        # SQLite has one writer at a time, and a writer that finds the lock taken sleeps in steps
        # of milliseconds (its busy handler): writers of this process (LangGraph saves writes and
        # checkpoints from several threads at once) queue here instead. On a server, a thread's
        # writers queue (`WriteOrder`: so the log numbers its messages in the conversation's order).
        self.write_order = WriteOrder(whole_database=not self.dialect.locks_rows)

    def writer(self, write: bool, thread_id: str | None) -> AbstractContextManager[None]:
        return self.write_order.turn(thread_id) if write else nullcontext()

    def async_writer(self, write: bool, thread_id: str | None) -> AbstractAsyncContextManager[None]:
        return self.write_order.aturn(thread_id) if write else nullcontext()

    def sync(self, write: bool) -> Engine:
        engines = self.engines
        if engines is None:
            with self.lock:
                if self.engines is None:
                    engine = create_engine(
                        self.url,
                        busy_timeout=self.busy_timeout,
                        connect_timeout=self.connect_timeout,
                        **self.engine_kwargs,
                    )
                    self.engines = (
                        engine.execution_options(historykit_write=False),
                        engine.execution_options(historykit_write=True),
                    )
                engines = self.engines
        if not self.ready:
            # Checked in a read transaction: a reader of a SQLite file never waits behind a writer,
            # and a database that can only be read answers. Only what is to be created or
            # migrated takes a write transaction.
            try:
                with engines[0].begin() as conn:
                    current = schema_is_current(conn, _COMPONENTS)
                if not current:
                    preparing = engines[0] if read_only_reason(engines[0]) else engines[1]
                    with preparing.begin() as conn:
                        prepare_database(conn, _COMPONENTS)
            except sa.exc.OperationalError as exc:
                raise self.unreachable(exc) from None  # its message has the driver's reason
            self.ready = True
        return engines[1] if write else engines[0]

    async def asynchronous(self, write: bool) -> AsyncEngine:
        loop = asyncio.get_running_loop()
        engines = self.async_engines.get(loop)
        if engines is None:
            engine = create_async_engine(
                self.url,
                busy_timeout=self.busy_timeout,
                connect_timeout=self.connect_timeout,
                **self.engine_kwargs,
            )
            engines = (
                engine.execution_options(historykit_write=False),
                engine.execution_options(historykit_write=True),
            )
            self.async_engines[loop] = engines
        if not self.ready:
            try:
                async with engines[0].begin() as conn:
                    current = await conn.run_sync(schema_is_current, _COMPONENTS)
                if not current:
                    preparing = engines[0] if read_only_reason(engines[0]) else engines[1]
                    async with preparing.begin() as conn:
                        await conn.run_sync(prepare_database, _COMPONENTS)
            except sa.exc.OperationalError as exc:
                raise self.unreachable(exc) from None  # its message has the driver's reason
            self.ready = True
        return engines[1] if write else engines[0]

    def unreachable(self, exc: sa.exc.OperationalError) -> Exception:
        """The error for a database that cannot be opened: where, and why (the driver's words)."""
        where = normalize_url(self.url).render_as_string(hide_password=True)
        # One line: the driver's message spans several (psycopg adds "Is the server running ...").
        reason = " ".join(str(exc.orig if exc.orig is not None else exc).split())
        if not self.dialect.file_based:
            return UnreachableDatabaseError(
                f"cannot connect to the database {where} "
                f"(connect timeout {self.connect_timeout:g} s): {reason}"
            )
        why = read_only_reason(self.engines[0]) if self.engines is not None else None
        if why is not None:
            reason = f"{reason} (it is opened read-only because {why})"
        return UnreachableDatabaseError(f"cannot open the database {where}: {reason}")

    def close(self) -> None:
        with self.lock:
            if self.engines is not None:
                self.engines[1].dispose()
                self.engines = None

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        engines = self.async_engines.pop(loop, None)
        if engines is not None:
            await engines[1].dispose()


class SaverDatabase:
    """What every collaborator of `SQLModelSaver` stands on: its connections (with the caches),
    its statements and codec, the runners that drive a plan in a transaction on a sync or an
    async connection, and the check that keeps the cache true to the thread's rows.

    Example:
        ```python
        base = SaverDatabase(connections, _statements("sqlite"), lambda: saver.serde)
        checkpoint = base.run(lambda txn: plans.get_tuple_plan(txn, config), write=False)
        ```
    """

    def __init__(self, db: _Connections, sql: _Statements, serde: Callable[[], SerializerProtocol]) -> None:
        self.db = db
        self.sql = sql
        self._serde = serde
        self._codec = RowCodec(serde())

    @property
    def codec(self) -> RowCodec:
        # `with_allowlist` clones the saver with a new `serde`: follow it.
        serde = self._serde()
        if self._codec.serde is not serde:
            self._codec = RowCodec(serde)
        return self._codec

    def run(
        self, build: Callable[[_Transaction], Plan[T]], *, write: bool, thread_id: str | None = None
    ) -> T:
        """Run the plan `build` makes in one transaction (again on a new connection if the server
        dropped the one it had); a write of one thread (`thread_id`) in that thread's turn."""
        with self.db.writer(write, thread_id):
            return self._run(build, write=write)

    def _run(self, build: Callable[[_Transaction], Plan[T]], *, write: bool) -> T:
        for attempt in range(_ATTEMPTS):
            engine = self.db.sync(write)
            txn = _Transaction()
            with engine.connect() as conn:
                transaction = conn.begin()
                try:
                    value = run_plan(conn, build(txn))
                except sa.exc.DBAPIError as exc:
                    if not _dropped(exc) or attempt + 1 == _ATTEMPTS:
                        raise
                    continue  # nothing was committed: the plan runs again on a new connection
                transaction.commit()
            txn.committed()
            return value
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def arun(
        self, build: Callable[[_Transaction], Plan[T]], *, write: bool, thread_id: str | None = None
    ) -> T:
        """`run` from async code."""
        async with self.db.async_writer(write, thread_id):
            return await self._arun(build, write=write)

    async def _arun(self, build: Callable[[_Transaction], Plan[T]], *, write: bool) -> T:
        for attempt in range(_ATTEMPTS):
            engine = await self.db.asynchronous(write)
            txn = _Transaction()
            async with engine.connect() as conn:
                transaction = await conn.begin()
                try:
                    value = await run_plan_async(conn, build(txn))
                except sa.exc.DBAPIError as exc:
                    if not _dropped(exc) or attempt + 1 == _ATTEMPTS:
                        raise
                    continue
                await transaction.commit()
            txn.committed()
            return value
        raise AssertionError("unreachable: the last attempt returns or raises")

    def settle(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Under the single-writer guard, wait until the checkpoint a write is for is stored or
        refused (`_writer_guard`); whether the write may be saved."""

        def answer(step: Any) -> Any:
            if step is None:
                time.sleep(_SETTLE_POLL)
                return None
            return self.run(_just(step), write=False)

        return bool(drive(self._settle_steps(thread_id, ns, checkpoint_id), answer))

    async def asettle(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        async def answer(step: Any) -> Any:
            if step is None:
                await asyncio.sleep(_SETTLE_POLL)
                return None
            return await self.arun(_just(step), write=False)

        return bool(await adrive(self._settle_steps(thread_id, ns, checkpoint_id), answer))

    def _settle_steps(self, thread_id: str, ns: str, checkpoint_id: str) -> Generator[Any, Any, bool]:
        """The wait of `settle`, written once: yields a plan to ask the database whether the
        checkpoint is stored (sent back its answer), or `None` to sleep a moment."""
        guard = self.db.guard
        assert guard is not None
        params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        deadline = time.monotonic() + _SETTLE_SECONDS
        while True:
            verdict = guard.verdict(thread_id, checkpoint_id)
            if verdict is not Verdict.WAIT and verdict is not Verdict.ASK_DATABASE:
                return verdict is Verdict.WRITE
            if verdict is Verdict.ASK_DATABASE and (yield _exists(self.sql.checkpoint_exists, params)):
                return True
            if time.monotonic() > deadline:
                return True
            yield None

    def check_thread_plan(self, txn: _Transaction, thread_id: str, *, create: bool = True) -> Plan[bool]:
        """Make sure the thread's row exists, and that what the cache knows of it still holds.

        Another process may have deleted the thread (and maybe started it again) since this
        process cached its messages: the cache's anchor (a number its log held) is then gone, and
        the thread is forgotten before anything refers to a message that is no longer there. On
        PostgreSQL the check locks the thread's row until the commit, so a `delete_thread` waits
        for this write, or this write sees the deletion. Without `create`, a thread this process
        wrote that is not there any more is left so (`put_writes`: a node's writes never bring back
        a thread deleted under its run); a thread it does not know is created (a run's first writes
        can reach the saver before its first checkpoint). Returns whether the thread is there.
        """
        db, cache = self.db, self.db.cache
        anchor = cache.anchor(thread_id)
        locks_rows = self.sql.dialect.locks_rows
        deleted = thread_id in db.deleted_threads
        if not locks_rows and anchor is None and thread_id not in db.known_threads and not deleted:
            rows: Sequence[Row[Any]] = ()
        else:
            rows = yield Query(self.sql.check_thread, {"thread_id": thread_id, "anchor": anchor or -1})
        if rows and (anchor is None or rows[0].anchored):
            db.deleted_threads.pop(thread_id, None)  # started again (by another process)
            return True
        known = anchor is not None or thread_id in db.known_threads or deleted
        if known:
            self.forget(thread_id)  # deleted by another process: nothing cached holds any more
        if not rows and not create and known:
            # Remembered as deleted: the run's later writes (its next task's, another node's) find
            # nothing cached either, and must not create the thread again (found by the delete race test).
            self.forget(thread_id, deleted=True)
            return False
        if not rows:
            yield Query(
                self.sql.insert_thread,
                {"thread_id": thread_id, "framework": FRAMEWORK, "created_at": utcnow()},
            )
            if locks_rows:
                yield Query(self.sql.check_thread, {"thread_id": thread_id, "anchor": -1})

        def created() -> None:
            db.known_threads.add(thread_id)
            db.deleted_threads.pop(thread_id, None)

        txn.after_commit(created)
        return True

    def forget(self, thread_id: str, *, deleted: bool = False) -> None:
        """Drop what this process knows of the thread; `deleted`: and remember it was deleted."""
        if deleted:
            tombstones = self.db.deleted_threads
            tombstones.pop(thread_id, None)
            tombstones[thread_id] = None
            while len(tombstones) > _DELETED_REMEMBERED:
                del tombstones[next(iter(tombstones))]
        self.db.cache.forget(thread_id)
        self.db.known_threads.discard(thread_id)
        self.db.counted.pop(thread_id, None)
        self.db.count_positions.pop(thread_id, None)
        self.db.counts_loaded.discard(thread_id)


_ATTEMPTS = 2
"""A transaction whose connection the server dropped (restarted, idle timeout, a proxy) runs once
more on a new connection; a second drop is an outage, and raises."""


def _dropped(exc: sa.exc.DBAPIError) -> bool:
    """Whether the statement failed because its connection is gone (SQLAlchemy invalidated it,
    so the pool hands out a new one): the transaction never reached its commit."""
    return bool(exc.connection_invalidated)


def _just(plan: Plan[T]) -> Callable[[_Transaction], Plan[T]]:
    """What `_run` takes, for a plan that needs no transaction hooks."""
    return lambda txn: plan


def _exists(statement: Any, params: dict[str, Any]) -> Plan[bool]:
    rows = yield Query(statement, params)
    return bool(rows)
