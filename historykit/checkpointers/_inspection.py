"""Read a historykit database without changing it: its threads, their counts, markers and transcripts.

Both stores write to the same tables: the LangGraph saver's threads (with their checkpoints) and the
Pydantic AI conversation store's conversations are rows of one thread table, over one message log and
one table of compaction markers. `DatabaseInspector` reads them for tools that look at a database
(the `historykit` command renders it): it returns plain frozen dataclasses, opens SQLite files
read-only (`mode=ro`: nothing is created, migrated or written, even in a file that could be) and
PostgreSQL in read-only transactions, and refuses a database that is not historykit's or that a newer
historykit wrote. Stored messages are decoded by the stores' own readers (`transcript()`), which
build only the message types of their framework: nothing read from the database is ever run.

One exception to "read-only": a LangGraph thread's checkpoint and transcript come from
`SQLModelSaver`, which takes a URL, not an engine, and opens the database as any saver does. On a
database of the current schema that only reads; one an older historykit wrote, it migrates (as
`historykit show` always did), unless the file cannot be written.

The API is synchronous. A conversation's details come from the asynchronous conversation store, run
to completion inside the call (on a worker thread when the caller is itself in an event loop, which
then waits: in async code, call the inspector through `asyncio.to_thread`).

Example:
    ```python
    from historykit.checkpointers._inspection import DatabaseInspector

    with DatabaseInspector("sqlite:///agent.db") as db:
        print(db.schema.versions)            # {'core': 3, 'langgraph': 1}
        for thread in db.threads():
            print(thread.thread_id, thread.framework, thread.messages, thread.compactions)
        details = db.details("thread-1")     # None: no such thread
        if details is not None:
            for marker in details.markers:
                print(marker.at, marker.marker.strategy, marker.marker.tokens_before)
    ```
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from historykit._messages import CompactionMarker
from historykit.checkpointers._conversation_schema import (
    CONVERSATIONS,
    ConversationEntryRow,
)
from historykit.checkpointers._database import (
    DEFAULT_BUSY_TIMEOUT,
    create_engine,
    normalize_url,
    read_only_reason,
)
from historykit.checkpointers._dialect import dialect_of
from historykit.checkpointers._schema import (
    CHECKPOINTS,
    CORE,
    BlobRow,
    CheckpointRow,
    CompactionRow,
    MessageRow,
    SchemaComponent,
    SchemaVersionRow,
    ThreadRow,
    WriteRow,
)
from historykit.errors import InvalidArgumentError, SchemaError, SchemaVersionError

if TYPE_CHECKING:
    from historykit.checkpointers._transcript import Transcript

__all__ = [
    "ConversationState",
    "DatabaseInspector",
    "LatestCheckpoint",
    "MarkerInfo",
    "SchemaInfo",
    "ThreadDetails",
    "ThreadSummary",
]

_COMPONENTS: tuple[SchemaComponent, ...] = (CORE, CHECKPOINTS, CONVERSATIONS)
"""Every component a historykit database may hold, in the order their versions are checked."""

_T = TypeVar("_T")

SCHEMA_TABLE = SchemaVersionRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """The historykit schema a database records: which components, at which version."""

    versions: Mapping[str, int]
    """`{component: version}` as recorded (`core`, `langgraph`, `pydantic_ai`)."""
    supported: Mapping[str, int]
    """`{component: version}` this historykit writes and reads up to."""
    tables: frozenset[str]
    """Every table of the database, historykit's and others'."""


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """What the tables say about one stored thread (a LangGraph thread or a Pydantic AI conversation)."""

    thread_id: str
    framework: str
    """The framework that created it: `langgraph` or `pydantic_ai`."""
    created_at: datetime | None
    """When it was first stored, in UTC (without an offset on SQLite, which keeps none)."""
    messages: int = 0
    """Rows of the message log: the originals and the messages compactions wrote."""
    compactions: int = 0
    """Compaction markers, every kind."""
    checkpoints: int = 0
    """LangGraph checkpoints (0 for a conversation)."""
    entries: int = 0
    """Conversation entries, every branch (0 for a LangGraph thread)."""
    storage: Mapping[str, int] = field(default_factory=dict)
    """Bytes of stored payload by kind: `messages`, `checkpoints`, `channel values`, `checkpoint writes`."""

    @property
    def storage_bytes(self) -> int:
        """Bytes of stored payload, every kind."""
        return sum(self.storage.values())


@dataclass(frozen=True, slots=True)
class LatestCheckpoint:
    """A LangGraph thread's latest checkpoint (root namespace)."""

    checkpoint_id: str
    timestamp: str | None
    """The checkpoint's `ts`, as LangGraph wrote it (ISO 8601)."""
    step: int | None
    """The `step` of its metadata."""
    messages: int | None
    """Messages in its `messages` channel; `None` when it has no such list."""
    pending_writes: int
    """Writes saved after it by tasks of a run in progress or interrupted."""


@dataclass(frozen=True, slots=True)
class ConversationState:
    """A Pydantic AI conversation's record."""

    messages: int
    """Messages in its current history."""
    branches: int
    """Branches it left (an edited or compacted history keeps the original as one)."""
    revision: str
    updated_at: datetime
    forked_from: str | None
    """The conversation it was forked from, if any."""


@dataclass(frozen=True, slots=True)
class MarkerInfo:
    """A compaction marker, placed among the thread's originals."""

    at: int
    """How many originals the thread had logged before the message the compaction wrote."""
    marker: CompactionMarker
    """What the compaction did: strategy, what it covered, tokens before and after, when."""


@dataclass(frozen=True, slots=True)
class ThreadDetails:
    """One thread in full: its summary, its framework's state, its transcript's size and its markers."""

    summary: ThreadSummary
    latest_checkpoint: LatestCheckpoint | None = None
    """A LangGraph thread's latest checkpoint; `None` for a conversation or a thread without one."""
    conversation: ConversationState | None = None
    """A conversation's record; `None` for a LangGraph thread or a conversation without one."""
    original_messages: int = 0
    """Original messages of its transcript (what `historykit export` writes)."""
    view_messages: int | None = None
    """Messages of its view (the history as last stored); `None` when the store keeps none."""
    markers: tuple[MarkerInfo, ...] = ()
    """Its compaction markers, in the order they were logged."""


class DatabaseInspector:
    """A historykit database opened for reading: checked first, never created, migrated or written.

    Example:
        ```python
        with DatabaseInspector("postgresql+psycopg://user@host/db") as db:
            summary = db.thread("thread-1")  # None: no such thread
            transcript = db.transcript("thread-1")
        ```
    """

    def __init__(self, database: str | URL) -> None:
        """Open and check `database`.

        Args:
            database: `sqlite:///path.db` (the file must exist), a SQLite file's path, or
                `postgresql+psycopg://user@host/db`.

        Raises:
            InvalidArgumentError: A URL historykit cannot use, an in-memory or missing SQLite file.
            SchemaError: A database that is not historykit's, or whose tables were altered.
            SchemaVersionError: A database a newer historykit wrote.
        """
        self.url: URL = normalize_url(database)
        """The database's URL, normalized (`postgresql://` means psycopg 3)."""
        self._given = database
        self._engine = _read_only_engine(self.url)
        try:
            self.schema: SchemaInfo = self._read_schema()
            """The recorded schema versions and the database's tables."""
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def where(self) -> str:
        """The database as it was given, without its password: how messages name it."""
        try:
            return sa.make_url(self._given).render_as_string(hide_password=True)
        except sa.exc.ArgumentError:  # a plain file path
            return str(self._given)

    def close(self) -> None:
        """Close the database's connections."""
        self._engine.dispose()

    def __enter__(self) -> DatabaseInspector:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the schema ---------------------------------------------------------------------------------

    def _read_schema(self) -> SchemaInfo:
        with self._engine.connect() as conn:
            tables = frozenset(sa.inspect(conn).get_table_names())
            if SCHEMA_TABLE.name not in tables:
                found = ", ".join(sorted(tables)[:8]) or "no tables at all"
                raise SchemaError(
                    f"{self.where} is not a historykit database: it has no {SCHEMA_TABLE.name} table "
                    f"(it has {found})"
                )
            rows = conn.execute(sa.select(SCHEMA_TABLE.c.component, SCHEMA_TABLE.c.version)).all()
        recorded = {str(component): int(version) for component, version in rows}
        for component in _COMPONENTS:
            version = recorded.get(component.name)
            if version is None:
                continue
            if version > component.version:
                raise SchemaVersionError(
                    f"{self.where}: its historykit component {component.name!r} has schema version "
                    f"{version}, written by a newer historykit (this one reads up to {component.version}); "
                    "upgrade historykit to open it"
                )
            missing = [name for name in _table_names(component) if name not in tables]
            if missing:
                raise SchemaError(
                    f"{self.where}: the historykit table(s) {', '.join(missing)} are missing "
                    f"(component {component.name!r} is recorded): the database was altered outside historykit"
                )
        if CORE.name not in recorded:
            raise SchemaError(f"{self.where}: a {SCHEMA_TABLE.name} table without the {CORE.name} component")
        return SchemaInfo(
            versions=recorded,
            supported={component.name: component.version for component in _COMPONENTS},
            tables=tables,
        )

    # -- threads ------------------------------------------------------------------------------------

    def threads(self) -> list[ThreadSummary]:
        """Every stored thread and conversation, oldest first, with its counts and storage."""
        return self._summaries(None)

    def thread(self, thread_id: str) -> ThreadSummary | None:
        """One thread's summary; `None` if the database has no such thread."""
        found = self._summaries(thread_id)
        return found[0] if found else None

    def _summaries(self, only: str | None) -> list[ThreadSummary]:
        thread = ThreadRow.__table__  # type: ignore[attr-defined]
        query = sa.select(thread.c.thread_id, thread.c.framework, thread.c.created_at)
        if only is not None:
            query = query.where(thread.c.thread_id == only)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(thread.c.created_at, thread.c.thread_id)).all()
            if not rows:
                return []
            messages = _per_thread(conn, only, MessageRow, "data")
            compactions = _per_thread(conn, only, CompactionRow)
            checkpoints: dict[str, tuple[int, int]] = {}
            blobs: dict[str, tuple[int, int]] = {}
            writes: dict[str, tuple[int, int]] = {}
            if CheckpointRow.__tablename__ in self.schema.tables:
                checkpoints = _per_thread(conn, only, CheckpointRow, "checkpoint")
                blobs = _per_thread(conn, only, BlobRow, "data")
                writes = _per_thread(conn, only, WriteRow, "data")
            entries: dict[str, tuple[int, int]] = {}
            if ConversationEntryRow.__tablename__ in self.schema.tables:
                entries = _per_thread(conn, only, ConversationEntryRow)
        out = []
        for thread_id, framework, created_at in rows:
            storage: dict[str, int] = {}
            for label, per_thread in (
                ("messages", messages),
                ("checkpoints", checkpoints),
                ("channel values", blobs),
                ("checkpoint writes", writes),
            ):
                if thread_id in per_thread:
                    storage[label] = per_thread[thread_id][1]
            out.append(
                ThreadSummary(
                    thread_id=thread_id,
                    framework=framework,
                    created_at=_as_datetime(created_at),
                    messages=messages.get(thread_id, (0, 0))[0],
                    compactions=compactions.get(thread_id, (0, 0))[0],
                    checkpoints=checkpoints.get(thread_id, (0, 0))[0],
                    entries=entries.get(thread_id, (0, 0))[0],
                    storage=storage,
                )
            )
        return out

    # -- one thread in full -------------------------------------------------------------------------

    def transcript(self, thread_id: str) -> Transcript | None:
        """The thread's transcript, as its store gives it (`SQLModelSaver.transcript` or
        `SQLModelConversationStore.transcript`); `None` if the database has no such thread."""
        summary = self.thread(thread_id)
        if summary is None:
            return None
        if summary.framework == "langgraph":
            with self._saver() as saver:
                return saver.transcript(thread_id)
        return _complete(self._conversation(thread_id, state=False))[1]

    def details(self, thread_id: str) -> ThreadDetails | None:
        """The thread's summary, its latest checkpoint or conversation record, the size of its
        transcript and view, and its compaction markers; `None` if the database has no such thread."""
        summary = self.thread(thread_id)
        if summary is None:
            return None
        latest: LatestCheckpoint | None = None
        conversation: ConversationState | None = None
        if summary.framework == "langgraph":
            with self._saver() as saver:
                found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
                transcript = saver.transcript(thread_id)
            if found is not None:
                state = found.checkpoint.get("channel_values", {}).get("messages")
                latest = LatestCheckpoint(
                    checkpoint_id=found.checkpoint["id"],
                    timestamp=found.checkpoint.get("ts"),
                    step=found.metadata.get("step"),
                    messages=len(state) if isinstance(state, list) else None,
                    pending_writes=len(found.pending_writes or ()),
                )
        else:
            conversation, transcript = _complete(self._conversation(thread_id, state=True))
        return ThreadDetails(
            summary=summary,
            latest_checkpoint=latest,
            conversation=conversation,
            original_messages=len(transcript.messages) if transcript is not None else 0,
            view_messages=len(transcript.view)
            if transcript is not None and transcript.view is not None
            else None,
            markers=tuple(MarkerInfo(at=c.at, marker=c.marker) for c in transcript.compactions)
            if transcript is not None
            else (),
        )

    # -- the stores ---------------------------------------------------------------------------------

    def _saver(self) -> Any:
        from historykit.checkpointers._saver import SQLModelSaver

        # The saver opens its own engine from the URL (it takes no engine): a file that cannot be
        # written is opened read-only by `create_engine`, and an up-to-date schema is only checked.
        return SQLModelSaver(self.url)

    async def _conversation(
        self, conversation_id: str, *, state: bool
    ) -> tuple[ConversationState | None, Transcript | None]:
        from historykit.checkpointers._conversation_store import SQLModelConversationStore

        store = SQLModelConversationStore(self._engine)
        try:
            found: ConversationState | None = None
            if state:
                record = await store.read_record(conversation_id)
                if record is not None:
                    history = await store.read_history(record.head_id)
                    found = ConversationState(
                        messages=len(history),
                        branches=len(record.branches),
                        revision=record.revision,
                        updated_at=record.updated_at,
                        forked_from=record.forked_from,
                    )
            return found, await store.transcript(conversation_id)
        finally:
            await store.aclose()


def _per_thread(
    conn: Connection, only: str | None, model: Any, payload: str | None = None
) -> dict[str, tuple[int, int]]:
    """`{thread_id: (rows, payload bytes)}` of `model`'s table, for one thread or all of them (bytes
    0 without a payload column)."""
    table = model.__table__
    key = table.c.thread_id
    size: Any = (
        sa.func.coalesce(sa.func.sum(sa.func.length(table.c[payload])), 0) if payload else sa.literal(0)
    )
    query = sa.select(key, sa.func.count(), size).group_by(key)
    if only is not None:
        query = query.where(key == only)
    return {row[0]: (int(row[1]), int(row[2])) for row in conn.execute(query)}


def _table_names(component: SchemaComponent) -> list[str]:
    return [str(model.__table__.name) for model in component.tables]  # type: ignore[attr-defined]


def _read_only_engine(url: URL) -> Engine:
    """An engine that can only read `url`.

    `create_engine` already opens a SQLite file that cannot be written read-only (`read_only_reason`
    says why); a file that could be written is opened with `mode=ro` here, which `create_engine`
    cannot do (it sets the file's journal mode on connecting, a write). A server's sessions are made
    read-only by the backend's own setting (`Dialect.read_only_connect_args`).
    """
    dialect = dialect_of(url.get_backend_name())
    if not dialect.file_based:
        return create_engine(url, connect_args=dialect.read_only_connect_args())
    if not url.database or url.database == ":memory:":
        raise InvalidArgumentError(
            f"{url.database or url}: an in-memory database holds no threads; give a SQLite file"
        )
    path = Path(url.database).expanduser()
    if not url.database.startswith("file:") and not path.exists():
        # Connecting would create it.
        raise InvalidArgumentError(f"{url.database}: no such database file")
    engine = create_engine(url)
    if read_only_reason(engine) is not None or url.database.startswith("file:"):
        return engine
    engine.dispose()
    read_only = url.set(database=f"file:{path.resolve()}").update_query_dict({"mode": "ro", "uri": "true"})
    return sa.create_engine(
        read_only, connect_args={"timeout": DEFAULT_BUSY_TIMEOUT, "check_same_thread": False}
    )


def _complete(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a store coroutine to completion from synchronous code, in an event loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    # `asyncio.run` refuses to run inside a running loop: give the coroutine a loop of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _as_datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
