"""`SQLModelSaver`: a LangGraph checkpointer that stores every message once.

The official savers write a thread's whole message list again at every checkpoint, so a long
agent run stores its conversation thousands of times over. `SQLModelSaver` keeps a per-thread
**message log** (`historykit_message`): each message is stored once, addressed by the hash of its
serialized form and numbered as it is logged. A checkpoint stores a message channel as runs of
those numbers (`_refs`), a few bytes whatever the length of the conversation, and so does a write
of messages (a node's output: the message is logged when the write is saved). `put` recognizes the
message objects it already stored without serializing them again (`_message_cache`), so a step
costs the same at message 20 and at message 2,000. Every other channel value is a versioned blob,
shared by the checkpoints that did not change it.

Because messages stay in the log when compaction removes them from the graph state,
`transcript(thread_id)` returns everything the thread ever had, in conversation order (each
message at the place of the first checkpoint or write that had it), with its compaction markers.
A message LangGraph gives an id after its write was saved (`add_messages` does, for a node's
messages without one) stays one row: see `_match_other_form_plan`.

Every method exists sync and async on the same instance; each is written once, as a `Plan` that
yields statements, run by `run_plan` on a connection or `run_plan_async` on an async one.
`get_delta_channel_history` walks the ancestors of a `DeltaChannel` checkpoint in one recursive
query (plus one for the messages its writes refer to that the cache does not hold).

Caveats: messages are shared, not copied, between the checkpoints (and calls) that hold them, as
LangGraph's channels share them: treat them as immutable. Pruning and deleting runs is meant for
threads that are not running at the same time.

Example:
    ```python
    from langgraph.graph import START, MessagesState, StateGraph
    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver("sqlite:///agent.db")  # or "postgresql+psycopg://user@host/db"
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    print(len(saver.transcript("t1").messages))
    ```
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import json
import math
import random
import threading
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, cast

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from sqlalchemy import Engine
from sqlalchemy.engine import URL, Row

from historykit.checkpointers._dialect import dialect_of
from historykit.checkpointers._message_cache import KnownList, MessageCache, snapshot
from historykit.checkpointers._message_log import LoggedMessage, message_log
from historykit.checkpointers._refs import (
    REFS_ENCODING,
    Refs,
    Run,
    RunValues,
    decode_refs,
    encode_refs,
    expand_runs,
    extend_runs,
    merge_runs,
    to_runs,
)
from historykit.checkpointers._serde import RowCodec, default_serializer
from historykit.checkpointers.database import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    CorruptRowError,
    Plan,
    Query,
    create_async_engine,
    create_engine,
    normalize_url,
    prepare_database,
    read_only_reason,
    run_plan,
    run_plan_async,
)
from historykit.checkpointers.schema import (
    CHECKPOINTS,
    CORE,
    BlobRow,
    CheckpointRow,
    CompactionRow,
    MessageRow,
    ThreadRow,
    WriteRow,
    utcnow,
)
from historykit.checkpointers.transcript import StoredCompaction, Transcript
from historykit.errors import ArgumentTypeError, InvalidArgumentError, UnreachableDatabaseError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
from historykit.messages import COMPACTION_KEY, EDIT_KEY, CompactionMarker
from historykit.tokens import counts_of, remember_counts

__all__ = ["FRAMEWORK", "PruneStrategy", "SQLModelSaver"]

FRAMEWORK = "langgraph"
"""`framework` of the rows this saver writes in the shared tables."""

PruneStrategy = Literal["keep_latest", "keep_last", "delete"]

T = TypeVar("T")

THREADS = ThreadRow.__table__  # type: ignore[attr-defined]
MESSAGES = MessageRow.__table__  # type: ignore[attr-defined]
COMPACTIONS = CompactionRow.__table__  # type: ignore[attr-defined]
CHECKPOINT_ROWS = CheckpointRow.__table__  # type: ignore[attr-defined]
BLOBS = BlobRow.__table__  # type: ignore[attr-defined]
WRITES = WriteRow.__table__  # type: ignore[attr-defined]

_COMPONENTS = (CORE, CHECKPOINTS)
_CHUNK = 500  # ids per `IN (...)`: well under every backend's parameter limit
_MAX_RUNS_PER_QUERY = 64  # beyond this many ranges, fetch messages by `seq IN (...)` instead
_LIST_PAGE = 100


# ---------------------------------------------------------------------------------------------
# Statements (built once per dialect; plans only bind parameters)
# ---------------------------------------------------------------------------------------------


class _Statements:
    """The saver's statements for one SQL dialect."""

    def __init__(self, name: str) -> None:
        dialect = self.dialect = dialect_of(name)
        log = self.log = message_log(name)
        bp = sa.bindparam
        c_thread, c_ns, c_id = (
            CHECKPOINT_ROWS.c.thread_id,
            CHECKPOINT_ROWS.c.checkpoint_ns,
            CHECKPOINT_ROWS.c.checkpoint_id,
        )

        self.insert_thread = log.insert_thread
        # PostgreSQL row locks on the thread: each writer holds it (FOR NO KEY UPDATE) from its
        # first statement, so writers of one thread take turns numbering new messages and
        # `delete_thread` (FOR UPDATE) waits for them; taken at once at that strength, never
        # upgraded, so a writer and a delete cannot deadlock.
        anchored = sa.exists().where(MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.seq == bp("anchor"))
        self.check_thread = dialect.lock_for_writer(
            sa.select(THREADS.c.thread_id, anchored.label("anchored")).where(
                THREADS.c.thread_id == bp("thread_id")
            ),
            THREADS,
        )
        self.lock_thread_exclusive = log.lock_thread_exclusive
        self.find_hashes = log.find_hashes
        self.find_anonymous = sa.select(
            MESSAGES.c.seq, MESSAGES.c.anonymous_hash, MESSAGES.c.native_id, MESSAGES.c.position
        ).where(
            MESSAGES.c.thread_id == bp("thread_id"),
            MESSAGES.c.framework == FRAMEWORK,
            MESSAGES.c.anonymous_hash.in_(bp("hashes", expanding=True)),
        )
        # UPDATE reserves the column names as bind names: these use their own.
        self.complete_message = (
            sa.update(MESSAGES)
            .where(MESSAGES.c.thread_id == bp("t"), MESSAGES.c.seq == bp("s"), MESSAGES.c.native_id.is_(None))
            .values(hash=bp("h"), encoding=bp("e"), data=bp("d"), native_id=bp("n"))
        )
        self.lower_position = (
            sa.update(MESSAGES)
            .where(
                MESSAGES.c.thread_id == bp("t"),
                MESSAGES.c.seq == bp("s"),
                sa.or_(MESSAGES.c.position.is_(None), MESSAGES.c.position > bp("p")),
            )
            .values(position=bp("p"))
        )
        self.insert_blob = dialect.insert_ignore(BLOBS, ["thread_id", "checkpoint_ns", "channel", "version"])
        self.upsert_checkpoint = dialect.upsert(
            CHECKPOINT_ROWS,
            ["thread_id", "checkpoint_ns", "checkpoint_id"],
            # the parent is kept: re-putting a checkpoint must not rewire the chain
            ["run_id", "encoding", "checkpoint", "metadata", "channel_versions"],
        )
        write_key = ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]
        self.insert_writes = dialect.insert_ignore(WRITES, write_key)
        self.upsert_writes = dialect.upsert(WRITES, write_key, ["channel", "task_path", "encoding", "data"])

        self.checkpoint_columns = (
            c_thread,
            c_ns,
            c_id,
            CHECKPOINT_ROWS.c.parent_checkpoint_id,
            CHECKPOINT_ROWS.c.encoding,
            CHECKPOINT_ROWS.c.checkpoint,
            dialect.read_json(CHECKPOINT_ROWS.c["metadata"]),
            dialect.read_json(CHECKPOINT_ROWS.c.channel_versions),
        )
        self.get_checkpoint = sa.select(*self.checkpoint_columns).where(
            c_thread == bp("thread_id"), c_ns == bp("ns"), c_id == bp("checkpoint_id")
        )
        self.latest_checkpoint = (
            sa.select(*self.checkpoint_columns)
            .where(c_thread == bp("thread_id"), c_ns == bp("ns"))
            .order_by(c_id.desc())
            .limit(1)
        )
        # Channels and versions as two `IN` lists (the pairs are filtered after): a row-value
        # `(channel, version) IN (...)`, or an OR of pairs, makes SQLite read all of a thread's
        # blobs; this reads only the index entries asked for (versions are unique per channel).
        self.select_blobs = sa.select(BLOBS.c.channel, BLOBS.c.version, BLOBS.c.encoding, BLOBS.c.data).where(
            BLOBS.c.thread_id == bp("thread_id"),
            BLOBS.c.checkpoint_ns == bp("ns"),
            BLOBS.c.channel.in_(bp("channels", expanding=True)),
            BLOBS.c.version.in_(bp("versions", expanding=True)),
        )
        self.select_writes = sa.select(
            WRITES.c.checkpoint_id,
            WRITES.c.task_id,
            WRITES.c.idx,
            WRITES.c.channel,
            WRITES.c.task_path,
            WRITES.c.encoding,
            WRITES.c.data,
        ).where(
            WRITES.c.thread_id == bp("thread_id"),
            WRITES.c.checkpoint_ns == bp("ns"),
            WRITES.c.checkpoint_id.in_(bp("ids", expanding=True)),
        )

        thread_is = {
            table: table.c.thread_id == bp("thread_id") for table in (WRITES, BLOBS, CHECKPOINT_ROWS)
        }
        ours = {
            table: sa.and_(table.c.thread_id == bp("thread_id"), table.c.framework == FRAMEWORK)
            for table in (MESSAGES, COMPACTIONS, THREADS)
        }
        self.delete_thread = [
            *(sa.delete(table).where(cond) for table, cond in thread_is.items()),
            log.delete_counts,
            *(sa.delete(table).where(cond) for table, cond in ours.items()),
        ]
        self.delete_checkpoint_data = [sa.delete(table).where(cond) for table, cond in thread_is.items()]
        self.delete_namespace = [
            sa.delete(table).where(cond, table.c.checkpoint_ns == bp("ns"))
            for table, cond in thread_is.items()
        ]
        self.thread_has_data = sa.select(
            sa.exists().where(CHECKPOINT_ROWS.c.thread_id == bp("thread_id")).label("checkpoints"),
            sa.exists().where(MESSAGES.c.thread_id == bp("thread_id")).label("messages"),
        )
        self.copy_thread = [
            *(self._copy(table) for table in (MESSAGES, COMPACTIONS, CHECKPOINT_ROWS, BLOBS, WRITES)),
            log.copy_counts,
        ]

        self.thread_checkpoints = sa.select(
            c_ns,
            c_id,
            CHECKPOINT_ROWS.c.parent_checkpoint_id,
            dialect.read_json(CHECKPOINT_ROWS.c.channel_versions),
            dialect.read_json(CHECKPOINT_ROWS.c["metadata"]),
        ).where(c_thread == bp("thread_id"))
        self.ns_checkpoints = self.thread_checkpoints.where(c_ns == bp("ns"))
        self.runs_checkpoints = sa.select(
            c_thread,
            c_ns,
            c_id,
            dialect.read_json(CHECKPOINT_ROWS.c.channel_versions),
        ).where(CHECKPOINT_ROWS.c.run_id.in_(bp("run_ids", expanding=True)))
        self.snapshot_blobs = sa.select(BLOBS.c.channel, BLOBS.c.version).where(
            BLOBS.c.thread_id == bp("thread_id"),
            BLOBS.c.checkpoint_ns == bp("ns"),
            BLOBS.c.channel.in_(bp("channels", expanding=True)),
            BLOBS.c.encoding != "empty",
        )
        in_ids = {
            table: sa.and_(
                table.c.thread_id == bp("thread_id"),
                table.c.checkpoint_ns == bp("ns"),
                table.c.checkpoint_id.in_(bp("ids", expanding=True)),
            )
            for table in (WRITES, CHECKPOINT_ROWS)
        }
        self.delete_writes_of = sa.delete(WRITES).where(in_ids[WRITES])
        self.delete_checkpoints_of = sa.delete(CHECKPOINT_ROWS).where(in_ids[CHECKPOINT_ROWS])
        # UPDATE reserves the column names as bind names: these use their own.
        self.detach_parents = (
            sa.update(CHECKPOINT_ROWS)
            .where(c_thread == bp("t"), c_ns == bp("n"), c_id.in_(bp("orphans", expanding=True)))
            .values(parent_checkpoint_id=None)
        )
        self.delete_blobs_of = sa.delete(BLOBS).where(
            BLOBS.c.thread_id == bp("thread_id"),
            BLOBS.c.checkpoint_ns == bp("ns"),
            BLOBS.c.channel == bp("channel"),
            BLOBS.c.version.in_(bp("versions", expanding=True)),
        )

        self.thread_known = sa.select(THREADS.c.thread_id).where(THREADS.c.thread_id == bp("thread_id"))
        self.transcript_messages = (
            sa.select(MESSAGES.c.seq, MESSAGES.c.encoding, MESSAGES.c.data)
            .where(MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.framework == FRAMEWORK)
            .order_by(MESSAGES.c.position, MESSAGES.c.seq)
        )
        self.transcript_compactions = (
            sa.select(COMPACTIONS)
            .where(COMPACTIONS.c.thread_id == bp("thread_id"), COMPACTIONS.c.framework == FRAMEWORK)
            .order_by(COMPACTIONS.c.summary_seq, COMPACTIONS.c.id)
        )
        self.messages_in = sa.select(MESSAGES.c.seq, MESSAGES.c.encoding, MESSAGES.c.data).where(
            MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.seq.in_(bp("seqs", expanding=True))
        )

    @staticmethod
    def _copy(table: sa.Table) -> sa.Insert:
        columns = [c for c in table.columns if not (table is COMPACTIONS and c.name == "id")]
        target = sa.cast(sa.bindparam("target"), sa.String)
        select = sa.select(*[target if c.name == "thread_id" else c for c in columns]).where(
            table.c.thread_id == sa.bindparam("source")
        )
        if "framework" in table.c:
            select = select.where(table.c.framework == FRAMEWORK)
        return sa.insert(table).from_select([c.name for c in columns], select)

    def messages_by_runs(self, runs: Sequence[tuple[int, int]]) -> sa.Executable:
        """The messages of these runs: one primary-key range each (SQLite reads a whole thread for
        an OR of ranges)."""
        selects = [
            sa.select(MESSAGES.c.seq, MESSAGES.c.encoding, MESSAGES.c.data).where(
                MESSAGES.c.thread_id == sa.bindparam("thread_id"),
                MESSAGES.c.seq.between(first, first + length - 1),
            )
            for first, length in runs
        ]
        return selects[0] if len(selects) == 1 else sa.union_all(*selects)

    @functools.cache  # noqa: B019 - one instance per dialect, kept for the process
    def delta_history(self, n_channels: int) -> sa.TextClause:
        """Walk a checkpoint's ancestors and return, in one statement, each channel's writes back to
        (and including) its nearest stored value, plus that value.

        The recursive part carries one flag per channel, set once an ancestor holds a stored value
        for it, and stops as soon as every channel is seeded; the bound (the namespace's checkpoint
        count) ends a walk over a corrupted chain that loops.
        """

        def version(alias: str, i: int) -> str:
            return self.dialect.json_member_sql(f"{alias}.channel_versions", f"path{i}")

        def has_value(i: int) -> str:
            return (
                "EXISTS (SELECT 1 FROM historykit_blob hb WHERE hb.thread_id = :t AND hb.checkpoint_ns = :ns "
                f"AND hb.channel = :ch{i} AND hb.version = {version('p', i)} AND hb.encoding <> 'empty')"
            )

        idx = range(n_channels)
        seed_matches = [
            f"(b.channel = :ch{i} AND c.depth = s.s{i} AND b.version = {version('c', i)})" for i in idx
        ]
        flags = ", ".join(f"f{i}" for i in idx)
        sql = f"""
WITH RECURSIVE chain(checkpoint_id, parent_id, channel_versions, depth, {flags}) AS (
    SELECT checkpoint_id, parent_checkpoint_id, channel_versions, 0, {", ".join("0" for _ in idx)}
    FROM historykit_checkpoint
    WHERE thread_id = :t AND checkpoint_ns = :ns AND checkpoint_id = :cid
    UNION ALL
    SELECT p.checkpoint_id, p.parent_checkpoint_id, p.channel_versions, c.depth + 1,
        {", ".join(f"CASE WHEN c.f{i} = 1 OR {has_value(i)} THEN 1 ELSE 0 END" for i in idx)}
    FROM chain c CROSS JOIN historykit_checkpoint p
    WHERE p.thread_id = :t AND p.checkpoint_ns = :ns AND p.checkpoint_id = c.parent_id
        AND ({" OR ".join(f"c.f{i} = 0" for i in idx)})
        AND c.depth < (
            SELECT COUNT(*) FROM historykit_checkpoint n WHERE n.thread_id = :t AND n.checkpoint_ns = :ns
        )
),
seeds AS (
    SELECT {", ".join(f"MIN(CASE WHEN f{i} = 1 THEN depth END) AS s{i}" for i in idx)} FROM chain
)
SELECT 'w' AS kind, w.channel, c.depth, w.task_path, w.task_id, w.idx, w.encoding, w.data,
    w.checkpoint_id
FROM chain c CROSS JOIN seeds s CROSS JOIN historykit_write w
WHERE w.thread_id = :t AND w.checkpoint_ns = :ns AND w.checkpoint_id = c.checkpoint_id AND c.depth >= 1
    AND ({" OR ".join(f"(w.channel = :ch{i} AND (s.s{i} IS NULL OR c.depth <= s.s{i}))" for i in idx)})
UNION ALL
SELECT 'b', b.channel, c.depth, NULL, NULL, NULL, b.encoding, b.data, NULL
FROM chain c CROSS JOIN seeds s CROSS JOIN historykit_blob b
WHERE b.thread_id = :t AND b.checkpoint_ns = :ns AND b.encoding <> 'empty'
    AND ({" OR ".join(seed_matches)})
"""
        return sa.text(sql)


@functools.cache
def _statements(dialect: str) -> _Statements:
    return _Statements(dialect)


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
    ):
        self.url = url
        self.dialect = dialect_of(normalize_url(url).get_backend_name())
        self.busy_timeout = busy_timeout
        self.connect_timeout = connect_timeout
        self.engine_kwargs = dict(engine_kwargs)
        self.lock = threading.Lock()
        self.engines: tuple[Engine, Engine] | None = None
        self.async_engines: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncEngine, AsyncEngine]
        ] = weakref.WeakKeyDictionary()
        self.ready = False
        self.cache = MessageCache(cache_threads)
        self.known_threads: set[str] = set()
        self.counted: dict[str, set[tuple[str, bytes]]] = defaultdict(set)
        """The token counts (`(method, digest)`) each thread holds, as far as this process knows."""
        self.counts_loaded: set[str] = set()
        """Threads whose stored counts this process read (`remember_counts`) since it started."""
        # SQLite has one writer at a time, and a writer that finds the lock taken sleeps in steps
        # of milliseconds (its busy handler): writers of this process (LangGraph saves writes and
        # checkpoints from several threads at once) queue here instead.
        self.sqlite_writers = None if self.dialect.locks_rows else threading.Lock()
        self.async_sqlite_writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def writer(self, write: bool) -> AbstractContextManager[object]:
        if write and self.sqlite_writers is not None:
            return self.sqlite_writers
        return nullcontext()

    def async_writer(self, write: bool) -> AbstractAsyncContextManager[object]:
        if not write or self.sqlite_writers is None:
            return nullcontext()
        loop = asyncio.get_running_loop()
        lock = self.async_sqlite_writers.get(loop)
        if lock is None:
            lock = self.async_sqlite_writers[loop] = asyncio.Lock()
        return lock

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
            # A database that can only be read is checked in a read transaction (it is never
            # created or migrated then: that would be a write).
            preparing = engines[0] if read_only_reason(engines[0]) else engines[1]
            try:
                with preparing.begin() as conn:
                    prepare_database(conn, _COMPONENTS)
            except sa.exc.OperationalError as exc:
                raise self.unreachable(exc) from exc
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
            preparing = engines[0] if read_only_reason(engines[0]) else engines[1]
            try:
                async with preparing.begin() as conn:
                    await conn.run_sync(prepare_database, _COMPONENTS)
            except sa.exc.OperationalError as exc:
                raise self.unreachable(exc) from exc
            self.ready = True
        return engines[1] if write else engines[0]

    def unreachable(self, exc: sa.exc.OperationalError) -> Exception:
        """The error for a database that cannot be opened: where, and why (the driver's words)."""
        where = normalize_url(self.url).render_as_string(hide_password=True)
        reason = str(exc.orig).strip() if exc.orig is not None else str(exc)
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


# ---------------------------------------------------------------------------------------------
# Value helpers
# ---------------------------------------------------------------------------------------------


def _messages_written(value: Any) -> list[BaseMessage]:
    """The messages a write carries (a message or a list of them), `RemoveMessage`s excepted."""
    if isinstance(value, BaseMessage):
        return [] if isinstance(value, RemoveMessage) else [value]
    if type(value) is list and value and all(isinstance(m, BaseMessage) for m in value):
        return [m for m in value if not isinstance(m, RemoveMessage)]
    return []


def _written_value(refs: Refs, messages: Mapping[int, BaseMessage]) -> Any:
    """The value of a write stored as references: one message, or the list of them, as written
    (the messages that had no id then have none now)."""
    values = [messages[seq] for seq in expand_runs(refs.runs)]
    for i in refs.without_id:
        if values[i].id is not None:
            values[i] = values[i].model_copy(update={"id": None})
    return values[0] if refs.single else values


def _configurable(config: RunnableConfig | None, what: str) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise ArgumentTypeError(f"{what}: expected a RunnableConfig dict, got {type(config).__name__}")
    configurable = config.get("configurable")
    if not isinstance(configurable, Mapping):
        raise InvalidArgumentError(f"{what}: the config has no 'configurable' dict")
    return configurable


_MAX_KEY_BYTES = 1000
"""The longest thread id, namespace or checkpoint id (UTF-8 bytes): PostgreSQL's index entries
hold a few kilobytes at most, and every backend takes the same ids."""


def _key(value: object, name: str, what: str) -> str:
    text = str(value)
    if "\x00" in text:
        raise InvalidArgumentError(
            f"{what}: the {name} {text!r} contains a NUL character, which databases cannot store"
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > _MAX_KEY_BYTES:
        raise InvalidArgumentError(
            f"{what}: the {name} is {size:,} bytes long ({text[:40]!r}...); "
            f"at most {_MAX_KEY_BYTES:,} are stored"
        )
    return text


def _thread_of(config: RunnableConfig, what: str) -> tuple[str, str, str | None]:
    configurable = _configurable(config, what)
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidArgumentError(f"{what}: the config has no configurable 'thread_id'")
    ns = configurable.get("checkpoint_ns") or ""
    checkpoint_id = configurable.get("checkpoint_id")
    return (
        _key(thread_id, "thread id", what),
        _key(ns, "checkpoint namespace", what),
        _key(checkpoint_id, "checkpoint id", what) if checkpoint_id else None,
    )


def _check_json(value: Any, path: str) -> None:
    """Raise `TypeError` naming `path` unless `value` is plain JSON."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{path} is {value!r}, which JSON cannot hold")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgumentTypeError(
                    f"{path} has a key of type {type(key).__name__}; JSON keys are strings"
                )
            _check_json(item, f"{path}[{key!r}]")
        return
    raise ArgumentTypeError(
        f"{path} is a {type(value).__name__}, which is not JSON (str, number, bool, None, list, dict)"
    )


def _parse_json(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise CorruptRowError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CorruptRowError(f"{where} is a JSON {type(value).__name__}, expected an object")
    return value


def _matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """`InMemorySaver`'s metadata filter: each value equals the metadata's (Python equality: a
    missing key is `None`, `1 == True == 1.0`, a dict or list equals only an equal one)."""
    return all(_json_equal(metadata.get(key), value) for key, value in filter.items())


def _json_equal(actual: Any, expected: Any) -> bool:
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(map(_json_equal, actual, expected))
        )
    if isinstance(expected, Mapping):
        return (
            isinstance(actual, Mapping)
            and actual.keys() == expected.keys()
            and all(_json_equal(actual[key], value) for key, value in expected.items())
        )
    return bool(actual == expected)


def _with_view(transcript: Transcript, latest: CheckpointTuple | None) -> Transcript:
    """`transcript` with its view: the root graph's `messages` channel at the latest checkpoint."""
    messages = latest.checkpoint.get("channel_values", {}).get("messages") if latest is not None else None
    view = list(messages) if isinstance(messages, list) else None
    return replace(transcript, view=view)


def _calls_before_results(
    entries: Sequence[tuple[int, BaseMessage]],
) -> builtins.list[tuple[int, BaseMessage]]:
    """`entries` with every tool result after the AI message that calls it.

    Transcript positions come from the checkpoints and writes that had each message; when a run
    stops between LangGraph's out-of-order background saves, a tool result can be logged from its
    write while the call is only logged later (from the next checkpoint, on resume), at a later
    position. The result then moves to just after its call.
    """
    caller: dict[str, int] = {}
    for i, (_, message) in enumerate(entries):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                caller.setdefault(str(call.get("id")), i)
    if not caller:
        return list(entries)
    waiting: dict[int, builtins.list[tuple[int, BaseMessage]]] = defaultdict(list)
    out: builtins.list[tuple[int, BaseMessage]] = []
    for i, entry in enumerate(entries):
        message = entry[1]
        if isinstance(message, ToolMessage) and caller.get(str(message.tool_call_id), -1) > i:
            waiting[caller[str(message.tool_call_id)]].append(entry)
            continue
        out.append(entry)
        out.extend(waiting.pop(i, ()))
    return out


def _chunks(items: Sequence[T], size: int = _CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


_Page = tuple[list[CheckpointTuple], tuple[str, str, str] | None, bool]
"""A page of `list`: its tuples, the cursor after it, and whether more rows may follow."""


class _Pending(NamedTuple):
    """A message to find in the log or add to it."""

    encoding: str
    data: bytes
    message: BaseMessage
    message_id: str | None
    """The id it was serialized with (the object may have been given one since)."""
    position: str
    """Its transcript position, if it is new (see `_position`)."""
    anonymous: str
    """The hash of the message without its id (its own hash when it has none)."""


class _Found(NamedTuple):
    """Where a message is in the log."""

    seq: int
    position: str | None
    same: bool = True
    """The row holds this very form of the message (not the form with the id it lacks)."""


def _position(checkpoint_id: str, *key: object) -> str:
    """A transcript position: messages in the order of the checkpoints that first had them.

    Messages of a checkpoint's state sort under its id (then `0`); messages of the writes saved
    after it (the next step's node outputs) after them (then `1`), in LangGraph's write order. The
    positions do not depend on when a row was saved: LangGraph saves writes and checkpoints from
    several threads at once, so saving order is not conversation order.
    """
    parts = [f"{part:09d}" if isinstance(part, int) else str(part) for part in key]
    return "|".join([checkpoint_id, *parts])


@dataclass(frozen=True, slots=True)
class _MessageChannel:
    """A channel of a `put` whose value is a list of LangChain messages."""

    channel: str
    version: str
    messages: list[BaseMessage]
    snapshot: bool
    """The value is a `DeltaChannel`'s `_DeltaSnapshot` of the list."""
    known: KnownList
    """The head of the list already stored under this channel by the last `put` or `get_tuple`."""


@dataclass
class _ListQuery:
    """A validated `list` request."""

    conditions: list[sa.ColumnElement[bool]]
    python_filter: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None


class _Done:
    """What `setup()` returns: already done, and awaitable (`await saver.setup()`)."""

    __slots__ = ()

    def __await__(self) -> Iterator[None]:
        return iter(())


# ---------------------------------------------------------------------------------------------
# The saver
# ---------------------------------------------------------------------------------------------


class SQLModelSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on SQLModel tables (SQLite or PostgreSQL) that stores each message once.

    Every method is available sync and async on the same instance (`put`/`aput`, `list`/`alist`,
    ...), including the extended `delete_for_runs`, `copy_thread` and `prune`, and
    `get_delta_channel_history` for `DeltaChannel` graphs. `transcript(thread_id)` returns every
    message the thread ever had, including those compaction removed from the state.

    Example:
        ```python
        from historykit.checkpointers import SQLModelSaver

        with SQLModelSaver("sqlite:///agent.db") as saver:
            graph = builder.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "t1"}}
            graph.invoke({"messages": [("user", "hello")]}, config)
            saver.prune(["t1"], strategy="keep_last", keep_last=10)
            transcript = saver.transcript("t1")
        ```
    """

    def __init__(
        self,
        url: str | URL = "sqlite:///historykit.db",
        *,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        cached_threads: int = 32,
        engine_kwargs: Mapping[str, Any] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Args:
        url: `sqlite:///path.db` or `postgresql+psycopg://user@host/db` (`postgresql://` works too).
        serde: a LangGraph serializer (default: strict msgpack, no pickle); an
            `EncryptedSerializer` encrypts every stored value and message.
        busy_timeout: seconds a SQLite writer waits for another process's lock.
        cached_threads: how many threads' message objects to remember (0 turns the cache off;
            then every step serializes its whole message list again to find the new messages).
        engine_kwargs: extra arguments for SQLAlchemy's `create_engine` (pool size, echo, ...).
        connect_timeout: seconds a server connection may take to open (whole seconds, at least 2
            on PostgreSQL): a server that accepts and never answers fails then with
            `UnreachableDatabaseError` (a `ConnectionError`).
        """
        super().__init__(serde=serde or default_serializer())
        self._codec_cache = RowCodec(self.serde)
        self._db = _Connections(url, busy_timeout, engine_kwargs or {}, cached_threads, connect_timeout)
        self._sql = _statements(self._db.dialect.name)

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def _codec(self) -> RowCodec:
        # `with_allowlist` clones the saver with a new `serde`: follow it.
        if self._codec_cache.serde is not self.serde:
            self._codec_cache = RowCodec(self.serde)
        return self._codec_cache

    def _run(self, build: Callable[[_Transaction], Plan[T]], *, write: bool) -> T:
        engine = self._db.sync(write)
        txn = _Transaction()
        with self._db.writer(write), engine.begin() as conn:
            value = run_plan(conn, build(txn))
        txn.committed()
        return value

    async def _arun(self, build: Callable[[_Transaction], Plan[T]], *, write: bool) -> T:
        engine = await self._db.asynchronous(write)
        txn = _Transaction()
        async with self._db.async_writer(write), engine.begin() as conn:
            value = await run_plan_async(conn, build(txn))
        txn.committed()
        return value

    def setup(self) -> _Done:
        """Create or migrate the tables now (otherwise the first call does it).

        `await saver.setup()` works too, as with LangGraph's async savers (the work is done when
        `setup()` returns; `asetup()` does it on the event loop's engine).
        """
        self._db.sync(write=True)
        return _Done()

    async def asetup(self) -> None:
        await self._db.asynchronous(write=True)

    def close(self) -> None:
        """Dispose of the synchronous engine (the async one: `aclose`)."""
        self._db.close()

    async def aclose(self) -> None:
        await self._db.aclose()

    def __enter__(self) -> SQLModelSaver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLModelSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """`"<counter>.<random>"`: ordered, and distinct on two branches forked from one checkpoint.

        Zero-padded to a fixed width so versions compare as strings; shorter than the official
        savers' (a dozen of them are stored with every checkpoint), and still ordered after them.
        """
        if current is None:
            counter = 0
        elif isinstance(current, (int, float)):
            counter = int(current)
        else:
            counter = int(str(current).split(".")[0])
        return f"{counter + 1:012}.{random.getrandbits(32):08x}"

    def _check_thread_plan(self, txn: _Transaction, thread_id: str) -> Plan[None]:
        """Make sure the thread's row exists, and that what the cache knows of it still holds.

        Another process may have deleted the thread (and maybe started it again) since this
        process cached its messages: the cache's anchor (a number its log held) is then gone, and
        the thread is forgotten before anything refers to a message that is no longer there. On
        PostgreSQL the check locks the thread's row until the commit, so a `delete_thread` waits
        for this write, or this write sees the deletion.
        """
        db, cache = self._db, self._db.cache
        anchor = cache.anchor(thread_id)
        locks_rows = self._sql.dialect.locks_rows
        if not locks_rows and anchor is None and thread_id not in db.known_threads:
            rows: Sequence[Row[Any]] = ()
        else:
            rows = yield Query(self._sql.check_thread, {"thread_id": thread_id, "anchor": anchor or -1})
        if rows and (anchor is None or rows[0].anchored):
            return
        if anchor is not None or thread_id in db.known_threads:
            self._forget(thread_id)  # deleted by another process: nothing cached holds any more
        if not rows:
            yield Query(
                self._sql.insert_thread,
                {"thread_id": thread_id, "framework": FRAMEWORK, "created_at": utcnow()},
            )
            if locks_rows:
                yield Query(self._sql.check_thread, {"thread_id": thread_id, "anchor": -1})
        txn.after_commit(lambda: db.known_threads.add(thread_id))

    # -- put ------------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(
            lambda txn: self._put_plan(txn, config, checkpoint, metadata, new_versions), write=True
        )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._arun(
            lambda txn: self._put_plan(txn, config, checkpoint, metadata, new_versions), write=True
        )

    def _put_plan(
        self,
        txn: _Transaction,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        thread_id, ns, parent_id = _thread_of(config, "put")
        yield from self._check_thread_plan(txn, thread_id)
        codec = self._codec
        values = checkpoint["channel_values"]
        body = {key: value for key, value in checkpoint.items() if key != "channel_values"}
        if all(type(v) is str for v in checkpoint["channel_versions"].values()):
            # The `channel_versions` column holds them exactly: a second copy in the body would be
            # a tenth of a long thread's database.
            del body["channel_versions"]
        body_encoding, body_data = codec.dumps(body)
        meta = dict(get_serializable_checkpoint_metadata(config, metadata))
        _check_json(meta, "checkpoint metadata")
        run_id = meta.get("run_id")

        blobs: builtins.list[dict[str, Any]] = []
        message_channels: builtins.list[_MessageChannel] = []
        cache = self._db.cache
        for channel, version in new_versions.items():
            if channel not in values:
                continue
            value = values[channel]
            snapshot = isinstance(value, _DeltaSnapshot)
            inner = value.value if snapshot else value
            if type(inner) is list and inner:
                # The head LangGraph handed us last time is known to be messages: check the rest.
                known = cache.known_prefix(thread_id, (ns, channel), inner)
                if all(map(isinstance, islice(inner, len(known.messages), None), repeat(BaseMessage))):
                    message_channels.append(_MessageChannel(channel, str(version), inner, snapshot, known))
                    continue
            encoding, data = codec.dumps(value)
            blobs.append(self._blob(thread_id, ns, channel, str(version), encoding, data))

        if message_channels:
            stored = yield from self._store_messages_plan(
                txn, thread_id, ns, checkpoint["id"], message_channels
            )
            yield from self._record_counts_plan(txn, thread_id, message_channels)
            for item, runs in zip(message_channels, stored, strict=True):
                data = encode_refs(runs, snapshot=item.snapshot)
                blobs.append(self._blob(thread_id, ns, item.channel, item.version, REFS_ENCODING, data))
        if blobs:
            yield Query(self._sql.insert_blob, blobs)
        yield Query(
            self._sql.upsert_checkpoint,
            {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": parent_id,
                "run_id": str(run_id) if run_id is not None else None,
                "encoding": body_encoding,
                "checkpoint": body_data,
                "metadata": meta,
                "channel_versions": {
                    channel: str(v) for channel, v in checkpoint["channel_versions"].items()
                },
            },
        )
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }

    @staticmethod
    def _blob(
        thread_id: str, ns: str, channel: str, version: str, encoding: str, data: bytes | None
    ) -> dict[str, Any]:
        return {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "channel": channel,
            "version": version,
            "encoding": encoding,
            "data": data,
        }

    def _store_messages_plan(
        self,
        txn: _Transaction,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        channels: Sequence[_MessageChannel],
    ) -> Plan[builtins.list[builtins.list[Run]]]:
        """Put every message of these lists in the thread's log (once); return each list's runs.

        The head of a list that is the very list stored last time costs nothing; the rest goes
        through `_log_plan`.
        """
        cache = self._db.cache
        tail_seqs: builtins.list[tuple[builtins.list[int], builtins.list[Any]]] = []
        for item in channels:
            start = len(item.known.messages)
            tail = item.messages[start:]
            positions = [_position(checkpoint_id, 0, ns, item.channel, start + i) for i in range(len(tail))]
            tail_seqs.append(
                (yield from self._log_plan(txn, thread_id, tail, positions)) if tail else ([], [])
            )
        out: builtins.list[builtins.list[Run]] = []
        remembered: builtins.list[tuple[tuple[str, str], KnownList]] = []
        for item, (resolved, forms) in zip(channels, tail_seqs, strict=True):
            runs = extend_runs(item.known.runs, resolved)
            out.append(runs)
            if None not in forms:  # a message that cannot be copied is never taken as known
                known = KnownList(
                    list(item.messages), item.known.seqs + resolved, runs, item.known.forms + forms
                )
                remembered.append(((ns, item.channel), known))

        def remember() -> None:
            for key, known in remembered:
                cache.remember_list(thread_id, key, known, written=True)

        txn.after_commit(remember)
        return out

    def _log_plan(
        self,
        txn: _Transaction,
        thread_id: str,
        messages: Sequence[BaseMessage],
        positions: Sequence[str],
        without_id: builtins.list[bool] | None = None,
    ) -> Plan[tuple[builtins.list[int], builtins.list[Any]]]:
        """The log number of each message, adding to the log the ones it lacks (at `positions` of
        the transcript), with the private copy of each message's stored form (`None` for one that
        cannot be copied); `without_id` learns which messages had no id as they were stored.

        Objects the cache knows, unchanged, cost a lookup; the others are serialized and hashed,
        and looked up in (or added to) the log.
        """
        cache = self._db.cache
        hits = cache.seqs_of(thread_id, messages)
        seqs: builtins.list[int] = [0] * len(messages)
        ids: builtins.list[str | None] = [None] * len(messages)
        forms: builtins.list[Any] = [None] * len(messages)
        pending: dict[str, _Pending] = {}
        unknown: builtins.list[tuple[int, str]] = []
        lower: dict[int, str] = {}  # seq -> an earlier position than the one it is known at
        for i, hit in enumerate(hits):
            if hit is not None:
                seqs[i], ids[i], forms[i] = hit.seq, hit.message_id, hit.form
                if hit.position is None or positions[i] < hit.position:
                    lower[seqs[i]] = min(positions[i], lower.get(seqs[i], positions[i]))
                continue
            message = messages[i]
            form, message_id, encoding, data, digest = self._serialize(message)
            ids[i], forms[i] = message_id, form
            stored = form if form is not None else message
            if digest in pending:
                pending[digest] = pending[digest]._replace(
                    position=min(pending[digest].position, positions[i])
                )
            else:
                anonymous = digest
                if message_id is not None:
                    _, _, anonymous = self._codec.dumps_hashed(stored.model_copy(update={"id": None}))
                pending[digest] = _Pending(encoding, data, stored, message_id, positions[i], anonymous)
            unknown.append((i, digest))
        found: dict[str, _Found] = {}
        if pending:
            found = yield from self._append_to_log_plan(thread_id, pending)
            for i, digest in unknown:
                seqs[i], stored_position, _ = found[digest]
                if stored_position is None or positions[i] < stored_position:
                    lower[seqs[i]] = min(positions[i], lower.get(seqs[i], positions[i]))
        if lower:
            # A message first logged from a later write (they are saved concurrently) moves up to
            # the earliest place it had.
            yield Query(
                self._sql.lower_position,
                [{"t": thread_id, "s": seq, "p": position} for seq, position in lower.items()],
            )
        learned = [
            (seqs[i], messages[i], forms[i], lower.get(seqs[i], found[digest].position), found[digest].same)
            for i, digest in unknown
        ]
        learned += [
            (seqs[i], messages[i], forms[i], lower[seqs[i]], False)
            for i, hit in enumerate(hits)
            if hit is not None and seqs[i] in lower
        ]
        if learned:
            txn.after_commit(lambda: cache.add(thread_id, learned, written=True))
        if without_id is not None:
            without_id[:] = [message_id is None for message_id in ids]
        return seqs, forms

    def _serialize(self, message: BaseMessage) -> tuple[Any, str | None, str, bytes, str]:
        """`(form, id, encoding, data, hash)` of a message as one consistent form, `form` being a
        private copy of the message as serialized (what the cache compares it with later; `None`
        when the message cannot be copied).

        The serialized copy is the message the log holds: LangGraph may give the message an id
        (on this very object, from another thread) while we copy it, and the caller may change it
        later; the copy does not move.
        """
        form = snapshot(message)
        if form is None:  # cannot be copied: serialize the object itself, as one consistent form
            while True:
                message_id = message.id
                encoding, data, digest = self._codec.dumps_hashed(message)
                if message.id == message_id:
                    return None, message_id, encoding, data, digest
        encoding, data, digest = self._codec.dumps_hashed(form)
        return form, form.id, encoding, data, digest

    def _append_to_log_plan(self, thread_id: str, pending: Mapping[str, _Pending]) -> Plan[dict[str, _Found]]:
        """Where each hashed message is in the log, adding the ones the log lacks (with their
        markers)."""
        # Numbers are allocated per thread: on a server, concurrent writers of one thread take
        # turns on the thread row, locked by `_check_thread_plan` at the start of the write.
        log = self._sql.log
        rows = yield from log.find_plan(thread_id, list(pending))
        found: dict[str, _Found] = {digest: _Found(row.seq, row.position) for digest, row in rows.items()}
        new = [digest for digest in pending if digest not in found]
        inherited: dict[str, str] = {}
        if new:
            inherited = yield from self._match_other_form_plan(thread_id, pending, new, found)
            new = [digest for digest in new if digest not in found]
        if not new:
            return found
        logged: builtins.list[LoggedMessage] = []
        for digest in new:
            encoding, data, message, message_id, position, anonymous = pending[digest]
            logged.append(
                LoggedMessage(
                    hash=digest,
                    kind=str(message.type),
                    encoding=encoding,
                    data=data,
                    native_id=message_id,
                    position=min(position, inherited.get(digest, position)),
                    anonymous_hash=anonymous,
                    marker=self._marker_of(message, thread_id),
                )
            )
        seqs = yield from log.append_plan(thread_id, FRAMEWORK, logged)
        for seq, message in zip(seqs, logged, strict=True):
            found[message.hash] = _Found(seq, message.position)
        return found

    def _match_other_form_plan(
        self,
        thread_id: str,
        pending: Mapping[str, _Pending],
        new: Sequence[str],
        found: dict[str, _Found],
    ) -> Plan[dict[str, str]]:
        """Find the messages logged in their other form: without the id they have now, or with
        the id they do not have yet.

        A message is logged when the write that carries it is saved, as the node returned it;
        LangGraph's `add_messages` gives an id to a message that lacks one as it enters the state,
        on the same object, while writes are saved from other threads. So a message can reach the
        log without its id first (its row is then completed in place, keeping its number and its
        earlier position), or with it first (the id-less form then refers to that row). Either
        way the transcript holds it once, and a write still reads back exactly as written: its
        references say which messages had no id (`Refs.without_id`), and those lose it on reading,
        so replaying the write gives them new ids as the original run did, and two equal messages
        of one write stay two. (The second one then gets a row of its own, at the write's
        position: returned, `{hash: position}`, for the rows to add.)
        """
        by_anonymous: dict[str, builtins.list[str]] = defaultdict(list)
        for digest in new:
            by_anonymous[pending[digest].anonymous].append(digest)
        rows = yield Query(self._sql.find_anonymous, {"thread_id": thread_id, "hashes": list(by_anonymous)})
        completions: dict[str, int] = {}
        taken: set[int] = set()
        inherited: dict[str, str] = {}
        for row in sorted(rows, key=lambda r: r.seq):
            for digest in by_anonymous[row.anonymous_hash]:
                if digest in found or digest in completions:
                    continue
                # Only the race described above, not an older message that merely reads the same:
                # the row came from a later place than this form (id-less first) or an earlier one.
                later = row.position is None or row.position > pending[digest].position
                if pending[digest].message_id is None:
                    if row.native_id is not None and later:
                        found[digest] = _Found(row.seq, row.position, same=False)  # the row has the id
                elif row.native_id is None and not later:
                    if row.seq not in taken:
                        completions[digest] = row.seq
                        taken.add(row.seq)
                    elif row.position is not None:
                        inherited[digest] = min(row.position, inherited.get(digest, row.position))
        if not completions:
            return inherited
        for digest, seq in completions.items():
            encoding, data, _, message_id, _, _ = pending[digest]
            yield Query(
                self._sql.complete_message,
                {"t": thread_id, "s": seq, "h": digest, "e": encoding, "d": data, "n": message_id},
            )
        # Only rows that still had no id were completed (another writer may have been first).
        completed = yield from self._sql.log.find_plan(thread_id, list(completions))
        found.update({digest: _Found(row.seq, row.position) for digest, row in completed.items()})
        return inherited

    @staticmethod
    def _marker_of(message: BaseMessage, thread_id: str) -> CompactionMarker | None:
        """The marker of the compaction that wrote `message` (a summary's `COMPACTION_KEY`, any other
        message's `EDIT_KEY`); `None` for an original."""
        kwargs = message.additional_kwargs or {}
        key = COMPACTION_KEY if kwargs.get(COMPACTION_KEY) is not None else EDIT_KEY
        raw = kwargs.get(key)
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidArgumentError(
                f"message {message.id!r} of thread {thread_id!r}: additional_kwargs[{key!r}] is a "
                f"{type(raw).__name__}, expected the dict of CompactionMarker.to_dict()"
            )
        try:
            return CompactionMarker.from_dict(dict(raw))
        except (ValueError, TypeError) as exc:
            raise InvalidArgumentError(
                f"message {message.id!r} of thread {thread_id!r}: bad compaction marker: {exc}"
            ) from None

    # -- put_writes -----------------------------------------------------------------------------

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        if writes:
            self._run(lambda txn: self._put_writes_plan(txn, config, writes, task_id, task_path), write=True)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        if writes:
            await self._arun(
                lambda txn: self._put_writes_plan(txn, config, writes, task_id, task_path), write=True
            )

    def _put_writes_plan(
        self,
        txn: _Transaction,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Plan[None]:
        thread_id, ns, checkpoint_id = _thread_of(config, "put_writes")
        if checkpoint_id is None:
            raise InvalidArgumentError("put_writes: the config has no configurable 'checkpoint_id'")
        rows: builtins.list[dict[str, Any]] = []
        logged: builtins.list[BaseMessage] = []
        positions: builtins.list[str] = []
        as_refs: builtins.list[tuple[int, int, int, bool]] = []  # row, first logged, count, single
        for idx, (channel, value) in enumerate(writes):
            write_idx = WRITES_IDX_MAP.get(channel, idx)
            # A node's messages go to the log now, in the order LangGraph applies writes: the
            # transcript has them even if no checkpoint ever holds them (a DeltaChannel between
            # snapshots, a compaction before the next checkpoint), and the write refers to them.
            messages = _messages_written(value)
            encoding, data = "", None
            if messages:
                first = len(logged)
                logged.extend(messages)
                positions.extend(
                    _position(checkpoint_id, 1, task_path, task_id, write_idx, i)
                    for i in range(len(messages))
                )
            single = isinstance(value, BaseMessage)
            if messages and (single or len(messages) == len(value)):  # no RemoveMessage in it
                as_refs.append((len(rows), first, len(messages), single))
            else:
                encoding, data = self._codec.dumps(value)
            rows.append(
                {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                    "task_id": task_id,
                    "idx": write_idx,
                    "channel": channel,
                    "task_path": task_path,
                    "encoding": encoding,
                    "data": data,
                }
            )
        if logged:
            yield from self._check_thread_plan(txn, thread_id)
            without_id: builtins.list[bool] = []
            seqs, _ = yield from self._log_plan(txn, thread_id, logged, positions, without_id)
            for row_index, first, count, single in as_refs:
                rows[row_index]["encoding"] = REFS_ENCODING
                rows[row_index]["data"] = encode_refs(
                    to_runs(seqs[first : first + count]),
                    single=single,
                    without_id=[i for i in range(count) if without_id[first + i]],
                )
        # Special writes (errors, interrupts, ...) replace an earlier one; regular writes of a
        # task are written once, so a retried task cannot duplicate them.
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        yield Query(self._sql.upsert_writes if replace else self._sql.insert_writes, rows)

    # -- get_tuple / list -----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(lambda txn: self._get_tuple_plan(txn, config), write=False)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(lambda txn: self._get_tuple_plan(txn, config), write=False)

    def _get_tuple_plan(self, txn: _Transaction, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        thread_id, ns, checkpoint_id = _thread_of(config, "get_tuple")
        if checkpoint_id is not None:
            rows = yield Query(
                self._sql.get_checkpoint, {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
            )
        else:
            rows = yield Query(self._sql.latest_checkpoint, {"thread_id": thread_id, "ns": ns})
        if not rows:
            return None
        (loaded,) = yield from self._load_plan(rows, remember=True)
        if thread_id not in self._db.counts_loaded:
            yield from self._restore_counts_plan(txn, thread_id)
        return loaded

    def _restore_counts_plan(self, txn: _Transaction, thread_id: str) -> Plan[None]:
        """Make the thread's stored token counts known to every `TokenCounter` of the same method
        (`historykit.tokens.remember_counts`), once per process: the first model call after a cold
        load then tokenizes only what is new."""
        by_method = yield from self._sql.log.read_counts_plan(thread_id)
        db = self._db

        def remember() -> None:
            for method, counts in by_method.items():
                remember_counts(method, counts)
                db.counted[thread_id].update((method, digest) for digest in counts)
            db.counts_loaded.add(thread_id)

        txn.after_commit(remember)

    def _record_counts_plan(
        self, txn: _Transaction, thread_id: str, channels: Sequence[_MessageChannel]
    ) -> Plan[None]:
        """Keep the token counts this process made of the messages of a checkpoint (`counts_of`)
        that the thread does not hold yet. Nothing is tokenized here: a message no counter
        counted has no count to keep."""
        recorded = self._db.counted[thread_id]
        counts: dict[str, dict[bytes, int]] = {}
        for item in channels:
            for message in item.messages:
                made = counts_of(message)
                if made:
                    for (method, digest), tokens in made.items():
                        if (method, digest) not in recorded:
                            counts.setdefault(method, {})[digest] = tokens
        if not counts:
            return
        yield from self._sql.log.record_counts_plan(thread_id, counts)
        txn.after_commit(
            lambda: recorded.update((method, digest) for method, by in counts.items() for digest in by)
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        query = self._list_query(config, filter, before, limit)
        cursor: tuple[str, str, str] | None = None
        remaining = query.limit
        while remaining is None or remaining > 0:
            page, cursor, full = self._run(self._list_page(query, cursor, remaining), write=False)
            yield from page
            if remaining is not None:
                remaining -= len(page)
            if not full:
                return

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        query = self._list_query(config, filter, before, limit)
        cursor: tuple[str, str, str] | None = None
        remaining = query.limit
        while remaining is None or remaining > 0:
            page, cursor, full = await self._arun(self._list_page(query, cursor, remaining), write=False)
            for item in page:
                yield item
            if remaining is not None:
                remaining -= len(page)
            if not full:
                return

    def _list_query(
        self, config: RunnableConfig | None, filter: Any, before: RunnableConfig | None, limit: Any
    ) -> _ListQuery:
        """Validate `list`'s arguments and turn them into SQL conditions (and a Python filter for
        the values SQLite's JSON functions cannot compare)."""
        conditions: builtins.list[sa.ColumnElement[bool]] = []
        if config is not None:
            configurable = _configurable(config, "list")
            if configurable.get("thread_id") is not None:
                conditions.append(CHECKPOINT_ROWS.c.thread_id == str(configurable["thread_id"]))
            if configurable.get("checkpoint_ns") is not None:
                conditions.append(CHECKPOINT_ROWS.c.checkpoint_ns == str(configurable["checkpoint_ns"]))
            if configurable.get("checkpoint_id"):
                conditions.append(CHECKPOINT_ROWS.c.checkpoint_id == str(configurable["checkpoint_id"]))
        if before is not None:
            before_id = _configurable(before, "list(before=...)").get("checkpoint_id")
            if not before_id:
                raise InvalidArgumentError("list(before=...): the config has no configurable 'checkpoint_id'")
            conditions.append(CHECKPOINT_ROWS.c.checkpoint_id < str(before_id))
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ArgumentTypeError(f"list(limit=...) must be an int or None, got {type(limit).__name__}")
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"list(limit=...) must not be negative, got {limit}")
        python_filter: dict[str, Any] = {}
        if filter is not None:
            if not isinstance(filter, Mapping):
                raise ArgumentTypeError(f"list(filter=...) must be a dict, got {type(filter).__name__}")
            meta = CHECKPOINT_ROWS.c["metadata"]
            for key, value in filter.items():
                if not isinstance(key, str) or not key:
                    raise ArgumentTypeError(f"list(filter=...) keys must be non-empty strings, got {key!r}")
                _check_json(value, f"list(filter=...)[{key!r}]")
                # The database narrows the rows down (a condition that every match meets); the
                # exact test, InMemorySaver's, runs on what it returns (`_matches`).
                python_filter[key] = value
                condition = self._filter_condition(meta, key, value)
                if condition is not None:
                    conditions.append(condition)
        return _ListQuery(conditions, python_filter, limit)

    def _filter_condition(
        self, meta: sa.ColumnElement[Any], key: str, value: Any
    ) -> sa.ColumnElement[bool] | None:
        """A condition every checkpoint whose metadata matches `{key: value}` meets, or `None`."""
        return self._db.dialect.metadata_condition(meta, key, value)

    def _list_page(
        self, query: _ListQuery, cursor: tuple[str, str, str] | None, remaining: int | None
    ) -> Callable[[_Transaction], Plan[_Page]]:
        return lambda txn: self._list_page_plan(query, cursor, remaining)

    def _list_page_plan(
        self, query: _ListQuery, cursor: tuple[str, str, str] | None, remaining: int | None
    ) -> Plan[_Page]:
        size = _LIST_PAGE if remaining is None or query.python_filter else min(remaining, _LIST_PAGE)
        c = CHECKPOINT_ROWS.c
        conditions = list(query.conditions)
        if cursor is not None:
            conditions.append(sa.tuple_(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < sa.tuple_(*cursor))
        order = (c.checkpoint_id.desc(), c.thread_id.desc(), c.checkpoint_ns.desc())
        # The page is chosen on the keys alone, then joined to its rows: when the namespace is not
        # given, the database sorts every checkpoint of the thread for each page, and sorting
        # narrow keys (from the primary-key index) costs a fraction of sorting whole rows.
        page = (
            sa.select(c.thread_id, c.checkpoint_ns, c.checkpoint_id)
            .where(*conditions)
            .order_by(*order)
            .limit(size)
            .subquery("page")
        )
        statement = (
            sa.select(*self._sql.checkpoint_columns)
            .join_from(
                CHECKPOINT_ROWS,
                page,
                sa.and_(
                    c.thread_id == page.c.thread_id,
                    c.checkpoint_ns == page.c.checkpoint_ns,
                    c.checkpoint_id == page.c.checkpoint_id,
                ),
            )
            .order_by(*order)
        )
        fetched = yield Query(statement)
        rows = fetched
        if query.python_filter:
            rows = [
                row
                for row in fetched
                if _matches(
                    _parse_json(
                        row.metadata,
                        f"metadata of checkpoint {row.checkpoint_id} of thread {row.thread_id!r}",
                    ),
                    query.python_filter,
                )
            ]
        loaded = (yield from self._load_plan(rows)) if rows else []
        if remaining is not None:
            loaded = loaded[:remaining]
        if not fetched:
            return loaded, cursor, False
        last = fetched[-1]
        return loaded, (last.checkpoint_id, last.thread_id, last.checkpoint_ns), len(fetched) == size

    def _load_plan(
        self, rows: Sequence[Row[Any]], *, remember: bool = False
    ) -> Plan[builtins.list[CheckpointTuple]]:
        """Rebuild checkpoint tuples from checkpoint rows: their blobs, writes and messages.

        With `remember`, each message list read is remembered as its channel's last list, so the
        `put` that follows a resume recognizes it without a lookup per message.
        """
        codec = self._codec
        groups: dict[tuple[str, str], builtins.list[Row[Any]]] = defaultdict(list)
        versions: dict[tuple[str, str, str], dict[str, str]] = {}
        for row in rows:
            groups[(row.thread_id, row.checkpoint_ns)].append(row)
            where = f"channel_versions of checkpoint {row.checkpoint_id} of thread {row.thread_id!r}"
            versions[(row.thread_id, row.checkpoint_ns, row.checkpoint_id)] = _parse_json(
                row.channel_versions, where
            )

        blobs: dict[tuple[str, str, str, str], tuple[str, bytes | None]] = {}
        writes: dict[tuple[str, str, str], builtins.list[Row[Any]]] = defaultdict(list)
        for (thread_id, ns), group in groups.items():
            pairs = sorted(
                {
                    (ch, str(v))
                    for row in group
                    for ch, v in versions[(thread_id, ns, row.checkpoint_id)].items()
                }
            )
            wanted = set(pairs)
            for chunk in _chunks(pairs):
                found = yield Query(
                    self._sql.select_blobs,
                    {
                        "thread_id": thread_id,
                        "ns": ns,
                        "channels": sorted({channel for channel, _ in chunk}),
                        "versions": sorted({version for _, version in chunk}),
                    },
                )
                for b in found:
                    if (b.channel, b.version) in wanted:
                        blobs[(thread_id, ns, b.channel, b.version)] = (b.encoding, b.data)
            for id_chunk in _chunks([row.checkpoint_id for row in group]):
                found = yield Query(
                    self._sql.select_writes, {"thread_id": thread_id, "ns": ns, "ids": list(id_chunk)}
                )
                for w in found:
                    writes[(thread_id, ns, w.checkpoint_id)].append(w)

        refs: dict[tuple[str, str, str, str], Refs] = {}
        # The list last stored or read under a channel, when it is the one asked for (the
        # checkpoint a run resumes from), is not rebuilt message by message.
        known_lists: dict[tuple[str, str, str, str], builtins.list[BaseMessage]] = {}
        list_runs: dict[str, builtins.list[Run]] = defaultdict(list)
        for key, (encoding, data) in blobs.items():
            if encoding == REFS_ENCODING:
                decoded = self._decode_refs(
                    f"blob {key[2]!r}@{key[3]} of thread {key[0]!r} (historykit_blob)", data
                )
                refs[key] = decoded
                known = self._db.cache.read_list(key[0], (key[1], key[2]), decoded.runs)
                if known is not None:
                    known_lists[key] = known
                else:
                    list_runs[key[0]].extend(decoded.runs)
        # The lists of a page overlap (each is mostly its predecessor plus a message or two):
        # their union is a few ranges, fetched once and sliced for each list.
        ranges = {thread_id: merge_runs(runs) for thread_id, runs in list_runs.items()}
        needed: dict[str, set[int]] = defaultdict(set)
        for thread_id, merged in ranges.items():
            needed[thread_id].update(expand_runs(merged))
        write_refs: dict[tuple[str, str, str, str, int], Refs] = {}
        for (thread_id, ns, checkpoint_id), rows_of in writes.items():
            for w in rows_of:
                if w.encoding == REFS_ENCODING:
                    where = f"write {w.task_id}/{w.idx} of checkpoint {checkpoint_id} of thread {thread_id!r}"
                    decoded = write_refs[(thread_id, ns, checkpoint_id, w.task_id, w.idx)] = (
                        self._decode_refs(where, w.data)
                    )
                    needed[thread_id].update(expand_runs(decoded.runs))
        messages, forms = (yield from self._messages_plan(needed)) if needed else ({}, {})
        sliced = {thread_id: RunValues(merged, messages[thread_id]) for thread_id, merged in ranges.items()}
        cache = self._db.cache

        out: builtins.list[CheckpointTuple] = []
        for row in rows:
            thread_id, ns, checkpoint_id = row.thread_id, row.checkpoint_ns, row.checkpoint_id
            where = f"checkpoint {checkpoint_id} of thread {thread_id!r} (historykit_checkpoint)"
            body = codec.loads(row.encoding, row.checkpoint, where=where)
            if not isinstance(body, dict) or "id" not in body:
                raise CorruptRowError(f"{where} decodes to a {type(body).__name__} that is not a checkpoint")
            body.setdefault("channel_versions", dict(versions[(thread_id, ns, checkpoint_id)]))
            channel_values: dict[str, Any] = {}
            for channel, version in versions[(thread_id, ns, checkpoint_id)].items():
                key = (thread_id, ns, channel, str(version))
                blob = blobs.get(key)
                if blob is None or blob[0] == "empty":
                    continue
                if key in refs:
                    decoded = refs[key]
                    known_messages = known_lists.get(key)
                    if known_messages is not None:
                        values = known_messages
                    else:
                        values = sliced[thread_id].get(decoded.runs)
                        if remember and not decoded.snapshot:
                            seqs = expand_runs(decoded.runs)
                            thread_forms = forms[thread_id]
                            if all(seq in thread_forms for seq in seqs):
                                read = KnownList(
                                    list(values), seqs, decoded.runs, [thread_forms[seq] for seq in seqs]
                                )
                                cache.remember_list(thread_id, (ns, channel), read)
                    channel_values[channel] = _DeltaSnapshot(values) if decoded.snapshot else values
                else:
                    blob_where = f"blob {channel!r}@{version} of thread {thread_id!r} (historykit_blob)"
                    channel_values[channel] = codec.loads(blob[0], blob[1], where=blob_where)
            pending: builtins.list[PendingWrite] = []
            for w in sorted(
                writes.get((thread_id, ns, checkpoint_id), ()),
                key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx),
            ):
                write_key = (thread_id, ns, checkpoint_id, w.task_id, w.idx)
                if write_key in write_refs:
                    value = _written_value(write_refs[write_key], messages[thread_id])
                else:
                    value = codec.loads(
                        w.encoding,
                        w.data,
                        where=f"write {w.task_id}/{w.idx} of checkpoint {checkpoint_id} of thread "
                        f"{thread_id!r} (historykit_write)",
                    )
                pending.append((w.task_id, w.channel, value))
            metadata = _parse_json(row.metadata, f"metadata of {where}")
            config: RunnableConfig = {
                "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
            }
            parent: RunnableConfig | None = None
            if row.parent_checkpoint_id:
                parent = {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": row.parent_checkpoint_id,
                    }
                }
            checkpoint = cast(Checkpoint, {**body, "channel_values": channel_values})
            out.append(
                CheckpointTuple(config, checkpoint, cast(CheckpointMetadata, metadata), parent, pending)
            )
        return out

    @staticmethod
    def _decode_refs(where: str, data: bytes | None) -> Refs:
        try:
            return decode_refs(data)
        except ValueError as exc:
            raise CorruptRowError(f"{where}: {exc}") from None

    def _messages_plan(
        self, needed: Mapping[str, Iterable[int]]
    ) -> Plan[tuple[dict[str, dict[int, BaseMessage]], dict[str, dict[int, Any]]]]:
        """The message objects of the given numbers, from the cache or the log (decoded once), and
        the private copies of their stored forms (for the ones that could be copied)."""
        cache = self._db.cache
        out: dict[str, dict[int, BaseMessage]] = {}
        out_forms: dict[str, dict[int, Any]] = {}
        for thread_id, seq_iter in needed.items():
            known, forms, missing_set = cache.lookup(thread_id, set(seq_iter))
            out_forms[thread_id] = forms
            if not missing_set:
                out[thread_id] = known
                continue
            missing = sorted(missing_set)
            runs = to_runs(missing)
            queries: builtins.list[Query]
            if len(runs) <= _MAX_RUNS_PER_QUERY:
                queries = [Query(self._sql.messages_by_runs(runs), {"thread_id": thread_id})]
            else:
                queries = [
                    Query(self._sql.messages_in, {"thread_id": thread_id, "seqs": list(chunk)})
                    for chunk in _chunks(missing)
                ]
            fetched: builtins.list[tuple[int, BaseMessage]] = []
            for query in queries:
                for row in (yield query):
                    fetched.append((row.seq, self._decode_message(thread_id, row)))
            known.update(fetched)
            learned = [(seq, message, snapshot(message), None, True) for seq, message in fetched]
            forms.update((seq, form) for seq, _, form, _, _ in learned if form is not None)
            cache.add(thread_id, learned)
            absent = [seq for seq in missing if seq not in known]
            if absent:
                raise CorruptRowError(
                    f"thread {thread_id!r} refers to {len(absent)} message(s) missing from "
                    "historykit_message "
                    f"(seq {', '.join(map(str, absent[:5]))}{', ...' if len(absent) > 5 else ''})"
                )
            out[thread_id] = known
        return out, out_forms

    def _decode_message(self, thread_id: str, row: Row[Any]) -> BaseMessage:
        where = f"message seq {row.seq} of thread {thread_id!r} (historykit_message)"
        message = self._codec.loads(row.encoding, row.data, where=where)
        if not isinstance(message, BaseMessage):
            raise CorruptRowError(f"{where} decodes to a {type(message).__name__}, not a LangChain message")
        return message

    # -- delta channels -------------------------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._run(lambda txn: self._delta_history_plan(config, channels), write=False)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return await self._arun(lambda txn: self._delta_history_plan(config, channels), write=False)

    def _delta_history_plan(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Plan[Mapping[str, DeltaChannelHistory]]:
        thread_id, ns, checkpoint_id = _thread_of(config, "get_delta_channel_history")
        names = list(dict.fromkeys(channels))
        if checkpoint_id is None:
            latest = yield Query(self._sql.latest_checkpoint, {"thread_id": thread_id, "ns": ns})
            if not latest:
                return {name: {"writes": []} for name in names}
            checkpoint_id = latest[0].checkpoint_id
        params: dict[str, Any] = {"t": thread_id, "ns": ns, "cid": checkpoint_id}
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise ArgumentTypeError(
                    f"get_delta_channel_history: channel {i} is a {type(name).__name__}, not a str"
                )
            params[f"ch{i}"] = name
            params.update(self._sql.dialect.json_member_params(f"path{i}", name))
        rows = yield Query(self._sql.delta_history(len(names)), params)

        codec = self._codec
        write_rows: dict[str, builtins.list[Row[Any]]] = defaultdict(list)
        seed_rows: dict[str, Row[Any]] = {}
        for row in rows:
            if row.kind == "w":
                write_rows[row.channel].append(row)
            else:
                seed_rows[row.channel] = row
        refs: dict[str, tuple[Refs, builtins.list[int]]] = {}
        for name, row in seed_rows.items():
            if row.encoding == REFS_ENCODING:
                decoded = self._decode_refs(
                    f"blob {name!r} (seed) of thread {thread_id!r} (historykit_blob)", row.data
                )
                refs[name] = (decoded, expand_runs(decoded.runs))
        write_refs: dict[tuple[str, int, str], Refs] = {}
        for name, channel_rows in write_rows.items():
            for r in channel_rows:
                if r.encoding == REFS_ENCODING:
                    where = f"write {r.task_id}/{r.idx} on {name!r} of thread {thread_id!r}"
                    write_refs[(r.task_id, r.idx, r.checkpoint_id)] = self._decode_refs(where, r.data)
        needed = {seq for _, seqs in refs.values() for seq in seqs} | {
            seq for decoded in write_refs.values() for seq in expand_runs(decoded.runs)
        }
        thread_messages: dict[int, BaseMessage] = {}
        if needed:
            thread_messages = (yield from self._messages_plan({thread_id: needed}))[0][thread_id]

        result: dict[str, DeltaChannelHistory] = {}
        for name in names:
            ordered = sorted(
                write_rows.get(name, ()),
                key=lambda r: (-r.depth, writes_sort_key(r.task_path or "", r.task_id or "", r.idx or 0)),
            )
            entry: DeltaChannelHistory = {
                "writes": [
                    (
                        r.task_id,
                        name,
                        _written_value(write_refs[(r.task_id, r.idx, r.checkpoint_id)], thread_messages)
                        if r.encoding == REFS_ENCODING
                        else codec.loads(
                            r.encoding,
                            r.data,
                            where=f"write {r.task_id}/{r.idx} on {name!r} of thread {thread_id!r}",
                        ),
                    )
                    for r in ordered
                ]
            }
            if name in seed_rows:
                if name in refs:
                    decoded, seqs = refs[name]
                    values = [thread_messages[seq] for seq in seqs]
                    entry["seed"] = _DeltaSnapshot(values) if decoded.snapshot else values
                else:
                    row = seed_rows[name]
                    entry["seed"] = codec.loads(
                        row.encoding,
                        row.data,
                        where=f"seed of {name!r} of thread {thread_id!r} (historykit_blob)",
                    )
            result[name] = entry
        return result

    # -- deleting, copying, pruning -------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes, blobs, messages and compaction markers."""
        self._run(
            lambda txn: self._delete_thread_plan(txn, _key(thread_id, "thread id", "delete_thread")),
            write=True,
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(
            lambda txn: self._delete_thread_plan(txn, _key(thread_id, "thread id", "delete_thread")),
            write=True,
        )

    def _delete_thread_plan(self, txn: _Transaction, thread_id: str) -> Plan[None]:
        if self._sql.dialect.locks_rows:
            # Waits for the writers that hold the thread (`_check_thread_plan`), so none of their
            # rows is left referring to a message deleted here.
            yield Query(self._sql.lock_thread_exclusive, {"thread_id": thread_id})
        for statement in self._sql.delete_thread:
            yield Query(statement, {"thread_id": thread_id})
        txn.after_commit(lambda: self._forget(thread_id))

    def _forget(self, thread_id: str) -> None:
        self._db.cache.forget(thread_id)
        self._db.known_threads.discard(thread_id)
        self._db.counted.pop(thread_id, None)
        self._db.counts_loaded.discard(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob, the message log and the markers to a new thread."""
        self._run(
            lambda txn: self._copy_thread_plan(txn, str(source_thread_id), str(target_thread_id)), write=True
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(
            lambda txn: self._copy_thread_plan(txn, str(source_thread_id), str(target_thread_id)), write=True
        )

    def _copy_thread_plan(self, txn: _Transaction, source: str, target: str) -> Plan[None]:
        if source == target:
            raise InvalidArgumentError(
                f"copy_thread: the source and the target are the same thread {source!r}"
            )
        target_rows = yield Query(self._sql.thread_has_data, {"thread_id": target})
        if target_rows[0].checkpoints or target_rows[0].messages:
            raise InvalidArgumentError(
                f"copy_thread: the target thread {target!r} already has checkpoints or messages; "
                "delete it first or choose a new thread id"
            )
        source_rows = yield Query(self._sql.thread_has_data, {"thread_id": source})
        if not (source_rows[0].checkpoints or source_rows[0].messages):
            return
        yield Query(
            self._sql.insert_thread, {"thread_id": target, "framework": FRAMEWORK, "created_at": utcnow()}
        )
        for statement in self._sql.copy_thread:
            yield Query(statement, {"source": source, "target": target})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) made by these runs; messages stay in the log."""
        ids = self._run_ids(run_ids)
        if ids:
            self._run(lambda txn: self._delete_for_runs_plan(ids), write=True)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = self._run_ids(run_ids)
        if ids:
            await self._arun(lambda txn: self._delete_for_runs_plan(ids), write=True)

    @staticmethod
    def _run_ids(run_ids: Sequence[str]) -> builtins.list[str]:
        if isinstance(run_ids, (str, bytes)):
            raise ArgumentTypeError("delete_for_runs expects a sequence of run ids, not a single string")
        return [str(run_id) for run_id in run_ids]

    def _delete_for_runs_plan(self, run_ids: builtins.list[str]) -> Plan[None]:
        doomed: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
        for chunk in _chunks(run_ids):
            rows = yield Query(self._sql.runs_checkpoints, {"run_ids": list(chunk)})
            for row in rows:
                where = f"channel_versions of checkpoint {row.checkpoint_id} of thread {row.thread_id!r}"
                doomed[(row.thread_id, row.checkpoint_ns)][row.checkpoint_id] = _parse_json(
                    row.channel_versions, where
                )
        for (thread_id, ns), deleted in doomed.items():
            yield from self._drop_checkpoints_plan(thread_id, ns, deleted)

    def _drop_checkpoints_plan(
        self, thread_id: str, ns: str, deleted: Mapping[str, Mapping[str, str]]
    ) -> Plan[None]:
        """Delete checkpoints of one namespace with their writes, detach their children, and delete
        the blobs only they used."""
        ids = sorted(deleted)
        for chunk in _chunks(ids):
            params = {"thread_id": thread_id, "ns": ns, "ids": list(chunk)}
            yield Query(self._sql.delete_writes_of, params)
            yield Query(self._sql.delete_checkpoints_of, params)
        kept_rows = yield Query(self._sql.ns_checkpoints, {"thread_id": thread_id, "ns": ns})
        yield from self._collect_garbage_plan(thread_id, ns, deleted, kept_rows)

    def _collect_garbage_plan(
        self, thread_id: str, ns: str, deleted: Mapping[str, Mapping[str, str]], kept_rows: Sequence[Row[Any]]
    ) -> Plan[None]:
        orphans = [row.checkpoint_id for row in kept_rows if row.parent_checkpoint_id in deleted]
        for chunk in _chunks(orphans):
            yield Query(self._sql.detach_parents, {"t": thread_id, "n": ns, "orphans": list(chunk)})
        referenced: set[tuple[str, str]] = set()
        for row in kept_rows:
            where = f"channel_versions of checkpoint {row.checkpoint_id} of thread {thread_id!r}"
            referenced.update((ch, str(v)) for ch, v in _parse_json(row.channel_versions, where).items())
        garbage: dict[str, set[str]] = defaultdict(set)
        for channel_versions in deleted.values():
            for channel, version in channel_versions.items():
                if (channel, str(version)) not in referenced:
                    garbage[channel].add(str(version))
        for channel, versions in garbage.items():
            for chunk in _chunks(sorted(versions)):
                yield Query(
                    self._sql.delete_blobs_of,
                    {"thread_id": thread_id, "ns": ns, "channel": channel, "versions": list(chunk)},
                )

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        """Delete old checkpoints of these threads; their messages stay in the log (`transcript`).

        Strategies: `keep_latest` keeps the newest checkpoint of each namespace; `keep_last` keeps
        the `keep_last` newest; `delete` removes every checkpoint, write and blob. With a
        `DeltaChannel`, the ancestors (and writes) a kept checkpoint needs to rebuild its state,
        back to the nearest stored snapshot, are kept too.
        """
        keep, ids = self._prune_args(thread_ids, strategy, keep_last)
        for thread_id in ids:
            self._run(lambda txn, t=thread_id: self._prune_plan(t, keep), write=True)  # type: ignore[misc]

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        keep, ids = self._prune_args(thread_ids, strategy, keep_last)
        for thread_id in ids:
            await self._arun(lambda txn, t=thread_id: self._prune_plan(t, keep), write=True)  # type: ignore[misc]

    @staticmethod
    def _prune_args(
        thread_ids: Sequence[str], strategy: str, keep_last: int | None
    ) -> tuple[int | None, builtins.list[str]]:
        if isinstance(thread_ids, (str, bytes)):
            raise ArgumentTypeError("prune expects a sequence of thread ids, not a single string")
        if keep_last is not None and (
            isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
        ):
            raise InvalidArgumentError(f"prune(keep_last=...) must be a positive int, got {keep_last!r}")
        keep: int | None
        if strategy == "keep_latest":
            keep = keep_last or 1
        elif strategy == "keep_last":
            if keep_last is None:
                raise InvalidArgumentError("prune(strategy='keep_last') needs keep_last=N")
            keep = keep_last
        elif strategy == "delete":
            if keep_last is not None:
                raise InvalidArgumentError(
                    "prune(strategy='delete') deletes every checkpoint; keep_last does not apply"
                )
            keep = None
        else:
            raise InvalidArgumentError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest', 'keep_last' or 'delete'"
            )
        return keep, list(dict.fromkeys(_key(t, "thread id", "prune") for t in thread_ids))

    def _prune_plan(self, thread_id: str, keep: int | None) -> Plan[None]:
        if keep is None:
            for statement in self._sql.delete_checkpoint_data:
                yield Query(statement, {"thread_id": thread_id})
            return
        rows = yield Query(self._sql.thread_checkpoints, {"thread_id": thread_id})
        by_ns: dict[str, builtins.list[Row[Any]]] = defaultdict(list)
        for row in rows:
            by_ns[row.checkpoint_ns].append(row)
        root_ids = sorted((row.checkpoint_id for row in by_ns.get("", ())), reverse=True)
        kept_roots = set(root_ids[:keep])
        for ns in [ns for ns in by_ns if self._finished_call(ns, by_ns[ns], set(root_ids), kept_roots)]:
            for statement in self._sql.delete_namespace:
                yield Query(statement, {"thread_id": thread_id, "ns": ns})
            del by_ns[ns]
        for ns, ns_rows in by_ns.items():
            by_id = {row.checkpoint_id: row for row in ns_rows}
            versions = {
                row.checkpoint_id: _parse_json(
                    row.channel_versions, f"channel_versions of checkpoint {row.checkpoint_id}"
                )
                for row in ns_rows
            }
            newest = sorted(by_id, reverse=True)
            kept = set(newest[:keep])
            yield from self._keep_delta_ancestors_plan(thread_id, ns, kept, by_id, versions)
            deleted = {cid: versions[cid] for cid in by_id if cid not in kept}
            if not deleted:
                continue
            for chunk in _chunks(sorted(deleted)):
                params = {"thread_id": thread_id, "ns": ns, "ids": list(chunk)}
                yield Query(self._sql.delete_writes_of, params)
                yield Query(self._sql.delete_checkpoints_of, params)
            yield from self._collect_garbage_plan(thread_id, ns, deleted, [by_id[cid] for cid in kept])

    @staticmethod
    def _finished_call(ns: str, rows: Sequence[Row[Any]], roots: set[str], kept_roots: set[str]) -> bool:
        """A subgraph call's namespace (`node:task_id`) whose root checkpoint is pruned: it goes
        with it, as with PostgresSaver. A `checkpointer=True` subgraph's namespace (no task id)
        keeps its state across calls, and a call whose root checkpoint is not saved yet (runs
        save in the background) may still be running: both stay."""
        if ":" not in ns:
            return False
        newest = max(rows, key=lambda row: row.checkpoint_id)
        parents = _parse_json(newest.metadata, f"metadata of checkpoint {newest.checkpoint_id}").get(
            "parents"
        )
        root = parents.get("") if isinstance(parents, Mapping) else None
        return root in roots and root not in kept_roots

    def _keep_delta_ancestors_plan(
        self,
        thread_id: str,
        ns: str,
        kept: set[str],
        by_id: Mapping[str, Row[Any]],
        versions: Mapping[str, Mapping[str, str]],
    ) -> Plan[None]:
        """Add to `kept` the ancestors a kept checkpoint's `DeltaChannel`s are rebuilt from.

        LangGraph records in a checkpoint's metadata (`counters_since_delta_snapshot`) which delta
        channels have writes since their last snapshot; for those, the chain back to the nearest
        ancestor holding a stored value (and the writes on the way) must survive.
        """
        needs: dict[str, set[str]] = {}
        for cid in kept:
            meta = _parse_json(by_id[cid].metadata, f"metadata of checkpoint {cid}")
            counters = meta.get("counters_since_delta_snapshot")
            if isinstance(counters, Mapping) and counters:
                needs[cid] = {str(ch) for ch in counters}
        if not needs:
            return
        channels = sorted(set().union(*needs.values()))
        stored_rows = yield Query(
            self._sql.snapshot_blobs, {"thread_id": thread_id, "ns": ns, "channels": channels}
        )
        stored = {(row.channel, row.version) for row in stored_rows}
        for cid, pending in needs.items():
            pending = {ch for ch in pending if (ch, str(versions[cid].get(ch))) not in stored}
            cursor = by_id[cid].parent_checkpoint_id
            seen: set[str] = set()
            while pending and cursor in by_id and cursor not in seen:
                seen.add(cursor)
                kept.add(cursor)
                pending = {ch for ch in pending if (ch, str(versions[cursor].get(ch))) not in stored}
                cursor = by_id[cursor].parent_checkpoint_id

    # -- the transcript -------------------------------------------------------------------------

    def transcript(self, thread_id: str) -> Transcript | None:
        """The thread's original messages in first-seen order, every compaction made over them (with
        the message it wrote), and the view: the `messages` of its latest checkpoint (`Transcript`).
        `None` for a thread the saver does not have, as `SQLModelConversationStore.transcript`."""
        key = _key(thread_id, "thread id", "transcript")
        transcript = self._run(lambda txn: self._transcript_plan(key), write=False)
        if transcript is None:
            return None
        return _with_view(transcript, self.get_tuple({"configurable": {"thread_id": key}}))

    async def atranscript(self, thread_id: str) -> Transcript | None:
        key = _key(thread_id, "thread id", "transcript")
        transcript = await self._arun(lambda txn: self._transcript_plan(key), write=False)
        if transcript is None:
            return None
        return _with_view(transcript, await self.aget_tuple({"configurable": {"thread_id": key}}))

    def _transcript_plan(self, thread_id: str) -> Plan[Transcript | None]:
        thread = yield Query(self._sql.thread_known, {"thread_id": thread_id})
        if not thread:
            return None
        rows = yield Query(self._sql.transcript_messages, {"thread_id": thread_id})
        compaction_rows = yield Query(self._sql.transcript_compactions, {"thread_id": thread_id})
        cache = self._db.cache
        known, _, _ = cache.lookup(thread_id, {row.seq for row in rows})
        decoded: builtins.list[tuple[int, BaseMessage]] = []
        entries: builtins.list[tuple[int, BaseMessage]] = []
        for row in rows:
            message = known.get(row.seq)
            if message is None:
                message = self._decode_message(thread_id, row)
                decoded.append((row.seq, message))
            entries.append((row.seq, message))
        cache.add(thread_id, [(seq, message, snapshot(message), None, True) for seq, message in decoded])
        markers = {row.summary_seq: row for row in compaction_rows}
        known_seqs = {seq for seq, _ in entries}
        for seq, row in markers.items():
            if seq not in known_seqs:
                raise CorruptRowError(
                    f"compaction marker {row.id} of thread {thread_id!r} (historykit_compaction) refers to "
                    f"message seq {seq}, which is not in historykit_message"
                )
        originals: builtins.list[BaseMessage] = []
        compactions: builtins.list[StoredCompaction] = []
        for seq, message in _calls_before_results(entries):
            marker_row = markers.get(seq)
            if marker_row is None:
                originals.append(message)
            else:
                marker = CompactionRow.model_validate(marker_row._mapping).to_marker()
                compactions.append(StoredCompaction(marker=marker, message=message, at=len(originals)))
        return Transcript(thread_id=thread_id, messages=originals, compactions=compactions)
