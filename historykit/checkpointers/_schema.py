"""The SQLModel tables of historykit's persistence layer, one definition for SQLite and PostgreSQL.

Who owns what:
- shared by every store (`CORE`): `SchemaVersionRow` (the recorded version of each component),
  `ThreadRow`, `MessageRow` (the message log) and `CompactionRow` (compaction markers). Written by
  `historykit.checkpointers._saver` (LangGraph) and `historykit.checkpointers._conversation_store`
  (Pydantic AI); `thread_id` means a LangGraph thread or a Pydantic AI conversation.
- the LangGraph checkpointer (`CHECKPOINTS`, module `saver`): `CheckpointRow`, `BlobRow`, `WriteRow`.
- the Pydantic AI conversation store defines its own tables and `SchemaComponent` in its module,
  on the same `HistorykitTable` base, so they are created and migrated with the rest.

Every table subclasses `HistorykitTable`, whose `metadata` is private to historykit: creating
historykit's tables never creates an application's own SQLModel tables, and the reverse.

A message is stored once per thread: `MessageRow` is addressed by the SHA-256 of its serialized
form within its thread and numbered by `seq` in the order the thread first saw it, so the whole
transcript reads back in order with one indexed query. Checkpoints refer to messages by `seq`.

Size: every byte a row or index holds beyond a message's own is paid a few times a step (LangGraph
saves four checkpoints a step on a plain agent loop). So the checkpointer's tables are `WITHOUT
ROWID` on SQLite (`WITHOUT_ROWID`), the transcript position has no index, the run id index covers
only the checkpoints that have one, and a checkpoint's body leaves out what its columns hold.

Example:
    ```python
    from historykit.checkpointers._database import create_engine, prepare_database
    from historykit.checkpointers._schema import CORE, MessageRow

    engine = create_engine("sqlite:///agent.db")
    with engine.begin() as conn:
        prepare_database(conn, [CORE])
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    DateTime,
    Index,
    LargeBinary,
    MetaData,
    Table,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from historykit._messages import CompactionMarker

__all__ = [
    "CHECKPOINTS",
    "CORE",
    "HASH_CHARS",
    "BlobRow",
    "CheckpointRow",
    "CompactionRow",
    "HistorykitTable",
    "MessageRow",
    "Migration",
    "SchemaComponent",
    "SchemaVersionRow",
    "ThreadRow",
    "TokenCountRow",
    "WriteRow",
    "utcnow",
]


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (what every stored timestamp is)."""
    return datetime.now(timezone.utc)


# JSONB on PostgreSQL so metadata filters can use its operators; JSON text elsewhere.
JSON_DOCUMENT = JSON().with_variant(JSONB(), "postgresql")


class HistorykitTable(SQLModel):
    """Base of every historykit table: a `MetaData` of its own, apart from `SQLModel.metadata`."""

    metadata: ClassVar[MetaData] = MetaData()  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Shared tables (component "core")
# ---------------------------------------------------------------------------------------------


class SchemaVersionRow(HistorykitTable, table=True):
    """The schema version of one component, as the code that last migrated it wrote it."""

    __tablename__ = "historykit_schema"

    component: str = Field(primary_key=True)
    """A `SchemaComponent.name` (`core`, `langgraph`, ...)."""
    version: int
    updated_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True))  # type: ignore[call-overload]


class ThreadRow(HistorykitTable, table=True):
    """A LangGraph thread or a Pydantic AI conversation."""

    __tablename__ = "historykit_thread"

    thread_id: str = Field(primary_key=True)
    framework: str
    """The framework that created it: `langgraph` or `pydantic_ai`."""
    created_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True))  # type: ignore[call-overload]


HASH_CHARS = 32
"""Hex characters of a message's SHA-256 the log keeps (`MessageRow.hash`; 64 before core version
4): 128 bits address a message among a thread's messages with no collision in any thread that fits
a database, and each row and both of its hash indexes hold 64 characters less."""


class MessageRow(HistorykitTable, table=True):
    """The message log: every message a thread ever had, stored once, in the order first seen."""

    __tablename__ = "historykit_message"
    __table_args__ = (
        UniqueConstraint("thread_id", "hash", name="uq_historykit_message_hash"),
        Index("ix_historykit_message_anonymous", "thread_id", "anonymous_hash"),
    )
    # No index on `position`: the transcript is read whole and put in conversation order in Python
    # (`_saver_messages`), and a position is only ever updated by primary key (version 4 dropped it).
    # Not `WITHOUT ROWID` on SQLite: rows of 1-8 KB belong in a rowid table.

    thread_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True, sa_type=BigInteger, sa_column_kwargs={"autoincrement": False})  # type: ignore[call-overload]
    """The message's number in its thread, increasing as messages are logged: what stored message
    lists refer to. A thread's log starts at the current time in microseconds, so a deleted and
    re-created thread never reuses a number an earlier one had (caches keyed by `seq` stay valid)."""
    position: str | None = None
    """Sort key of the transcript, when a store needs one other than `seq` (the LangGraph saver:
    writes are saved concurrently, so logging order is not conversation order); `None` sorts by
    `seq`."""
    hash: str
    """The first `HASH_CHARS` hex characters of the SHA-256 of the message's serialized
    (unencrypted) form: its address within the thread."""
    anonymous_hash: str | None = None
    """The same hash of the message without its id, for a store whose framework gives a message its
    id only after saving it once without (LangGraph's `add_messages`): both forms are one row."""
    framework: str
    """`langgraph` (a LangChain message) or `pydantic_ai` (a `ModelMessage`)."""
    kind: str
    """The native message type (`ai`, `human`, `tool`, `request`, `response`, ...), for queries."""
    native_id: str | None = None
    """The framework's own message id, when it has one."""
    encoding: str
    """The serializer's type tag for `data` (`msgpack`, `json`, an encrypted variant, ...)."""
    data: bytes = Field(sa_type=LargeBinary)  # type: ignore[call-overload]
    created_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True))  # type: ignore[call-overload]


class CompactionRow(HistorykitTable, table=True):
    """A compaction marker: which summary replaced which messages, and what it saved."""

    __tablename__ = "historykit_compaction"
    __table_args__ = (UniqueConstraint("thread_id", "summary_seq", name="uq_historykit_compaction_summary"),)

    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(index=True)
    framework: str
    summary_seq: int = Field(sa_type=BigInteger)  # type: ignore[call-overload]
    """`MessageRow.seq` of the summary message in the same thread."""
    covered_from: int
    """Index (in the history the compaction saw) of the first message it replaced."""
    covered_to: int
    """Index one past the last message it replaced."""
    tokens_before: int
    tokens_after: int
    strategy: str
    model: str | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True))  # type: ignore[call-overload]
    automatic: bool = True
    focus: str | None = None
    """What a manual compaction was asked to keep (`CompactionMarker.focus`); added in version 2."""

    @classmethod
    def from_marker(
        cls, marker: CompactionMarker, *, thread_id: str, framework: str, summary_seq: int
    ) -> CompactionRow:
        return cls(
            thread_id=thread_id,
            framework=framework,
            summary_seq=summary_seq,
            covered_from=marker.covered_from,
            covered_to=marker.covered_to,
            tokens_before=marker.tokens_before,
            tokens_after=marker.tokens_after,
            strategy=marker.strategy,
            model=marker.model,
            created_at=marker.created_at,
            automatic=marker.automatic,
            focus=marker.focus,
        )

    def to_marker(self) -> CompactionMarker:
        created = self.created_at
        if created.tzinfo is None:  # SQLite keeps no offset; every timestamp is written in UTC
            created = created.replace(tzinfo=timezone.utc)
        return CompactionMarker(
            covered_from=self.covered_from,
            covered_to=self.covered_to,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            strategy=self.strategy,
            model=self.model,
            created_at=created,
            automatic=self.automatic,
            focus=self.focus,
        )


# ---------------------------------------------------------------------------------------------
# The LangGraph checkpointer (component "langgraph")
# ---------------------------------------------------------------------------------------------


WITHOUT_ROWID = {"sqlite_with_rowid": False}
"""Table options of the checkpointer's tables: on SQLite, the table is its primary-key b-tree (a
rowid table keeps a second copy of every key in its primary-key index: 11% of the file of a
1,000-step thread). Their rows are small, and every read and write goes by primary key. Other backends keep a
table by its primary key already (InnoDB) or have no such option (PostgreSQL)."""

_RUN_ID_INDEX = Index(
    "ix_historykit_checkpoint_run_id",
    "run_id",
    # Only the checkpoints that have a run id (a run of the LangGraph server, say): `delete_for_runs`
    # asks for `run_id IN (...)`, which a NULL never matches. MySQL has no partial index.
    sqlite_where=text("run_id IS NOT NULL"),
    postgresql_where=text("run_id IS NOT NULL"),
)


class CheckpointRow(HistorykitTable, table=True):
    """One checkpoint: its body without channel values, which live in `BlobRow`s."""

    __tablename__ = "historykit_checkpoint"
    __table_args__ = (_RUN_ID_INDEX, WITHOUT_ROWID)

    thread_id: str = Field(primary_key=True)
    checkpoint_ns: str = Field(default="", primary_key=True)
    checkpoint_id: str = Field(primary_key=True)
    parent_checkpoint_id: str | None = None
    run_id: str | None = None
    """Copied out of the metadata so `delete_for_runs` is one indexed delete."""
    encoding: str
    checkpoint: bytes = Field(sa_type=LargeBinary)  # type: ignore[call-overload]
    """The serialized checkpoint minus `channel_values`, `id` (the `checkpoint_id` column; rows
    written before version 2 still have it) and, when they are all strings, `channel_versions`
    (the column of that name)."""
    meta: dict[str, Any] = Field(sa_column=Column("metadata", JSON_DOCUMENT, nullable=False))
    """The checkpoint metadata (JSON, so `list` filters run in SQL)."""
    channel_versions: dict[str, str] = Field(sa_column=Column(JSON_DOCUMENT, nullable=False))
    """`{channel: version}` as strings: which `BlobRow` holds each channel's value, readable in SQL."""


class BlobRow(HistorykitTable, table=True):
    """The value of one channel at one version, shared by every checkpoint at that version."""

    __tablename__ = "historykit_blob"
    __table_args__ = (WITHOUT_ROWID,)

    thread_id: str = Field(primary_key=True)
    checkpoint_ns: str = Field(default="", primary_key=True)
    channel: str = Field(primary_key=True)
    version: str = Field(primary_key=True)
    encoding: str
    """A serializer type tag, `empty` (the channel had no value), or `historykit.refs`."""
    data: bytes | None = Field(default=None, sa_type=LargeBinary)  # type: ignore[call-overload]


class WriteRow(HistorykitTable, table=True):
    """A pending write of a task, attached to the checkpoint it follows."""

    __tablename__ = "historykit_write"
    __table_args__ = (WITHOUT_ROWID,)

    thread_id: str = Field(primary_key=True)
    checkpoint_ns: str = Field(default="", primary_key=True)
    checkpoint_id: str = Field(primary_key=True)
    task_id: str = Field(primary_key=True)
    idx: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    channel: str
    task_path: str = ""
    encoding: str
    data: bytes | None = Field(default=None, sa_type=LargeBinary)  # type: ignore[call-overload]


# ---------------------------------------------------------------------------------------------
# Components: groups of tables versioned and migrated together
# ---------------------------------------------------------------------------------------------

Migration = Callable[[Connection], None]
"""Brings a component's tables from version `n - 1` to `n` (registered under `n`)."""


@dataclass(frozen=True)
class SchemaComponent:
    """A group of tables with a recorded version and the migrations that reach it.

    `prepare_database` creates a component's tables the first time, records its version, migrates an
    older one, and refuses a newer one or one whose tables are missing.

    Example:
        ```python
        CONVERSATIONS = SchemaComponent("pydantic_ai", 1, (ConversationRow, RecordRow))
        ```
    """

    name: str
    """Key in `historykit_schema`."""
    version: int
    """The version this code writes."""
    tables: tuple[type[HistorykitTable], ...]
    """The component's table classes (all on `HistorykitTable`)."""
    migrations: Mapping[int, Migration] = field(default_factory=dict)
    """`{n: step}` where `step` migrates version `n - 1` to `n`; one for every `n` up to `version`."""


class TokenCountRow(HistorykitTable, table=True):
    """A message's token count as a store's reader last counted it, so the first model call after a
    load tokenizes only what is new (`historykit._tokens.remember_counts`)."""

    __tablename__ = "historykit_token_count"

    thread_id: str = Field(primary_key=True)
    digest: str = Field(primary_key=True)
    """Hex `historykit._digests.message_digest` of the neutral message counted."""
    method: str = Field(primary_key=True)
    """How it was counted (`TokenCounter.count_method`: tokenizer and counting scheme): a count made
    another way, by another tokenizer or an older scheme, is not reused."""
    tokens: int


def _add_marker_focus(conn: Connection) -> None:
    # Version 2: markers record the focus of a manual compaction.
    conn.execute(text("ALTER TABLE historykit_compaction ADD COLUMN focus VARCHAR"))


def _add_token_counts(conn: Connection) -> None:
    # Version 3: stored token counts.
    TokenCountRow.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]


def _smaller_message_keys(conn: Connection) -> None:
    # Version 4: no index on the transcript position (see `MessageRow`): 4% of a long thread's
    # file. Dropped through a table of its own, so that `MessageRow`'s table does not gain it back.
    old = Table("historykit_message", MetaData(), Column("thread_id"), Column("position"))
    Index("ix_historykit_message_position", old.c.thread_id, old.c.position).drop(conn, checkfirst=True)
    # Hashes cut to `HASH_CHARS` (a prefix of the same SHA-256: what the code now computes).
    conn.execute(
        text(
            f"UPDATE historykit_message SET hash = SUBSTR(hash, 1, {HASH_CHARS}), "
            f"anonymous_hash = SUBSTR(anonymous_hash, 1, {HASH_CHARS})"
        )
    )


def _checkpoint_tables_by_key(conn: Connection) -> None:
    # Langgraph version 2: on SQLite, the checkpoint, blob and write tables rebuilt `WITHOUT ROWID`
    # (see `WITHOUT_ROWID`), every row copied as it is; on SQLite and PostgreSQL, the run id index
    # only over the checkpoints that have one. (Checkpoint bodies written from now on leave out
    # their id; the older ones, which have it, read the same.)
    if conn.dialect.name not in ("sqlite", "postgresql"):
        return
    conn.execute(text("DROP INDEX ix_historykit_checkpoint_run_id"))
    if conn.dialect.name == "postgresql":
        _RUN_ID_INDEX.create(conn)
        return
    for model in (CheckpointRow, BlobRow, WriteRow):
        table: Table = model.__table__  # type: ignore[attr-defined,union-attr]
        name, columns = table.name, ", ".join(f'"{column.name}"' for column in table.columns)
        conn.execute(text(f"ALTER TABLE {name} RENAME TO {name}_by_rowid"))
        table.create(conn)  # with its index
        conn.execute(text(f"INSERT INTO {name} ({columns}) SELECT {columns} FROM {name}_by_rowid"))
        conn.execute(text(f"DROP TABLE {name}_by_rowid"))


CORE = SchemaComponent(
    "core",
    4,
    (ThreadRow, MessageRow, CompactionRow, TokenCountRow),
    {2: _add_marker_focus, 3: _add_token_counts, 4: _smaller_message_keys},
)
"""The shared tables: threads, the message log and compaction markers."""

CHECKPOINTS = SchemaComponent(
    "langgraph", 2, (CheckpointRow, BlobRow, WriteRow), {2: _checkpoint_tables_by_key}
)
"""The LangGraph checkpointer's tables."""
