"""The tables of the Pydantic AI conversation store, on the same metadata as the shared ones.

A conversation is a `ConversationRow` (Pydantic AI's `ConversationRecord`: where its history ends,
its usage, scope and revision), the `ConversationBranchRow`s that name the last entries of the
branches it left, and a tree of `ConversationEntryRow`s, each pointing at the entry before it.
An entry holds no message of its own: it refers to a row of the shared message log
(`MessageRow`, by thread and `seq`), so a message is stored once per conversation however many
entries, branches and forks reach it. A fork's entries are the forked conversation's: the fork
points into its tree instead of copying it.

These tables form the `pydantic_ai` schema component, created, versioned and migrated by
`prepare_database` with the shared `CORE` tables.

Example:
    ```python
    from historykit.checkpointers._conversation_schema import CONVERSATIONS
    from historykit.checkpointers._database import create_engine, prepare_database
    from historykit.checkpointers._schema import CORE

    engine = create_engine("sqlite:///chat.db")
    with engine.begin() as conn:
        prepare_database(conn, [CORE, CONVERSATIONS])
    ```
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, Index
from sqlmodel import Field

from historykit.checkpointers._schema import JSON_DOCUMENT, HistorykitTable, SchemaComponent

__all__ = [
    "CONVERSATIONS",
    "ConversationBranchRow",
    "ConversationEntryRow",
    "ConversationRow",
]


class ConversationRow(HistorykitTable, table=True):
    """A conversation's record: the newest entry of its history and what the messages can't carry."""

    __tablename__ = "historykit_conversation"
    __table_args__ = (Index("ix_historykit_conversation_scope_updated", "scope", "updated_at"),)

    conversation_id: str = Field(primary_key=True)
    """Also the `thread_id` of the messages this conversation stored in the shared message log."""
    head_id: str | None = Field(default=None, index=True)
    """The newest `ConversationEntryRow.id` of the history, `None` while it has no messages."""
    usage: dict[str, Any] = Field(sa_column=Column(JSON_DOCUMENT, nullable=False))
    """`RunUsage`, as Pydantic dumps it to JSON."""
    deferred_tool_requests: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON_DOCUMENT))
    """`DeferredToolRequests`, as Pydantic dumps it to JSON, or `None`."""
    scope: str | None = None
    forked_from: str | None = None
    forked_at: str | None = None
    revision: str
    """Opaque token replaced on every write: the conditional `UPDATE` on it detects conflicts."""
    updated_at: datetime = Field(sa_type=DateTime(timezone=True), index=True)  # type: ignore[call-overload]
    """Always written in UTC: SQLite keeps no offset, and listing sorts on it."""
    format_version: int = 1


class ConversationBranchRow(HistorykitTable, table=True):
    """The last entry of a branch a conversation left, at `idx` in `ConversationRecord.branches`."""

    __tablename__ = "historykit_conversation_branch"

    conversation_id: str = Field(primary_key=True)
    idx: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    entry_id: str = Field(index=True)
    """Indexed: deleting a conversation asks which other conversations' branches end in its entries."""


class ConversationEntryRow(HistorykitTable, table=True):
    """One message in a conversation's log, linked to the entry before it."""

    __tablename__ = "historykit_conversation_entry"
    __table_args__ = (Index("ix_historykit_conversation_entry_message", "thread_id", "message_seq"),)

    row: int | None = Field(default=None, primary_key=True)
    """Storage order: an entry is always stored after the entry before it, so this orders transcripts."""
    id: str = Field(unique=True)
    """Pydantic AI's `ConversationEntry.id`."""
    parent_id: str | None = Field(default=None, index=True)
    """The entry before this one; indexed so deleting a conversation finds the entries built on its own."""
    position: int
    """How many entries come before this one in its history (0 for a first message)."""
    kind: str = "message"
    thread_id: str
    """The `MessageRow.thread_id` of the message: the conversation whose save stored it."""
    message_seq: int = Field(sa_type=BigInteger)  # type: ignore[call-overload]
    """The `MessageRow.seq` of the message in that thread."""


CONVERSATIONS = SchemaComponent(
    "pydantic_ai", 1, (ConversationRow, ConversationBranchRow, ConversationEntryRow)
)
"""The conversation store's tables; prepare them together with `schema.CORE`."""
