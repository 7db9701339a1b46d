"""Pydantic AI's `ConversationStore` on historykit's SQLModel tables, SQLite or PostgreSQL.

`SQLModelConversationStore` keeps a conversation the way Pydantic AI 2.x's
`pydantic_ai.conversation_store.ConversationStore` describes it — a record pointing at the newest
entry of a tree of entries, each holding one message and pointing at the one before — on the
tables of `conversation_schema`, and keeps the messages themselves in the message log shared with
the LangGraph checkpointer (`schema.MessageRow`): each message once per conversation, addressed by
the SHA-256 of its JSON form, as `ModelMessagesTypeAdapter` writes it (no pickle: decoding a row
validates JSON, it never runs code).

- `read_history` loads a whole history, or its last `limit` messages, in one query: a recursive
  common table expression walks the parent links.
- Saves are checked against the record's revision with a conditional write, so a concurrent
  writer gets `ConversationConflict` instead of being overwritten.
- A saved summary (a `CompactionPart` in a `ModelRequest` whose `metadata[COMPACTION_KEY]` is a
  `CompactionMarker.to_dict()`) is recorded as a compaction marker, and `transcript()` returns
  every message the conversation ever had, with its markers.
- `delete` deletes the conversation, its branches, and every entry, message and marker no other
  conversation (a fork) still reaches.

This module needs Pydantic AI 2.x; `historykit.checkpointers` imports it only on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar, cast

import anyio.to_thread
import sqlalchemy as sa
from pydantic import TypeAdapter, ValidationError

try:
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.run import AgentRunResult
except ImportError as exc:  # Pydantic AI 1.x has no conversation stores, or it isn't installed
    raise ImportError(
        "SQLModelConversationStore implements pydantic_ai.conversation_store.ConversationStore, which "
        "Pydantic AI 2.x provides: install `historykit[pydantic-ai]` with pydantic-ai-slim>=2 "
        f"(the import failed with: {exc})"
    ) from exc
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
)
from pydantic_ai.tools import DeferredToolRequests

try:
    # How `ConversationStore.load` marks what it loaded as stored (so a save appends after it);
    # private to Pydantic AI: without it, `load` takes Pydantic AI's own path.
    from pydantic_ai._conversation_marks import mark_stored
except ImportError:  # pragma: no cover - another Pydantic AI 2.x
    mark_stored = None  # type: ignore[assignment]
from pydantic_ai.usage import RunUsage
from sqlalchemy import Engine, Table
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from historykit import _provenance as provenance
from historykit._digests import message_digest
from historykit._frameworks import adapter_for
from historykit._messages import COMPACTION_KEY, EDIT_KEY, CompactionMarker
from historykit._tokens import TokenCounter, loaded_count, remember_counts
from historykit.checkpointers._conversation_schema import (
    CONVERSATIONS,
    ConversationBranchRow,
    ConversationEntryRow,
    ConversationRow,
)
from historykit.checkpointers._database import (
    CorruptRowError,
    Plan,
    Query,
    create_engine,
    prepare_database,
    read_only_reason,
    rows_written,
    run_plan,
    run_plan_async,
    schema_is_current,
    unreachable_error,
)
from historykit.checkpointers._dialect import Dialect
from historykit.checkpointers._message_log import CHUNK, LoggedMessage, MessageLog, chunks, message_log
from historykit.checkpointers._schema import CORE, CompactionRow, MessageRow, ThreadRow, TokenCountRow
from historykit.checkpointers._transcript import StoredCompaction, Transcript
from historykit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["MessageSerializer", "SQLModelConversationStore", "ViewSaving"]

DEFAULT_URL = "sqlite:///historykit.db"
FRAMEWORK = "pydantic_ai"
"""`framework` of the threads, messages and markers this store writes."""
JSON_ENCODING = "json"
"""`MessageRow.encoding` of a message stored as plain `ModelMessagesTypeAdapter` JSON."""

# Every store method is a `Plan` of queries (`_database.Plan`), written once: `_run` drives it with
# `run_plan_async` on an asyncio engine's connection, or with `run_plan` in a worker thread on a
# blocking engine's.
#
# Writers hold the store's lock shared, `delete` exclusively (`Dialect.store_lock`: an advisory lock
# on PostgreSQL; SQLite serializes writers with `BEGIN IMMEDIATE`). A delete decides which entries
# no other conversation reaches: a fork created, or a message reused, while it decides would
# otherwise be left pointing at deleted rows.

_CONVERSATION: Table = ConversationRow.__table__  # type: ignore[attr-defined]
_BRANCH: Table = ConversationBranchRow.__table__  # type: ignore[attr-defined]
_ENTRY: Table = ConversationEntryRow.__table__  # type: ignore[attr-defined]
_MESSAGE: Table = MessageRow.__table__  # type: ignore[attr-defined]
_MARKER: Table = CompactionRow.__table__  # type: ignore[attr-defined]
_THREAD: Table = ThreadRow.__table__  # type: ignore[attr-defined]
_COUNT: Table = TokenCountRow.__table__  # type: ignore[attr-defined]

_USAGE = TypeAdapter(RunUsage)
_DEFERRED = TypeAdapter(DeferredToolRequests)

_T = TypeVar("_T")


class MessageSerializer(Protocol):
    """What `SQLModelConversationStore(serde=...)` takes: LangGraph's `SerializerProtocol` shape.

    It is handed a message's JSON as `bytes` and must give the same bytes back; LangGraph's
    `EncryptedSerializer` does, so messages can be stored encrypted.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


class ViewSaving(ConversationStore):
    """What makes a conversation store keep the view a historykit run was sent (mixed into
    `SQLModelConversationStore`; any other `ConversationStore` can take it the same way)."""

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """Save a conversation, as `ConversationStore.save` does, keeping the view a run was sent.

        A history that holds messages historykit wrote (a summary, a cleared copy, a notice: the run
        was processed persistently, `HistoryKit(persist=True)`) is the view the model was last sent
        plus what came after. It is saved as it is: it becomes the conversation's current history,
        which `load` gives back, so the next run continues that view instead of compacting the
        originals again. The messages it replaced stay stored: the history they were in is kept as
        a branch, the message log keeps each of them, and `transcript()` returns them as the
        originals, with a marker for every message a compaction wrote. (A conversation loaded with
        `limit=` and compacted is saved the same way: its view replaces the current history, and
        the earlier messages stay in the branch and the transcript.)

        Any other history is saved as Pydantic AI's stores save it: the run's new messages are
        appended.
        """
        result = conversation if isinstance(conversation, AgentRunResult) else None
        # A result builds a new `Conversation` on every access: take it once, as the base class does.
        held = result.conversation if result is not None else cast(Conversation, conversation)
        if not any(_written_by_compaction(m) for m in held.messages):
            return await super().save(conversation, scope=scope)
        await self._save_unstored_originals(held, scope)
        # Compare with the stored history rather than append after the loaded messages: the run
        # replaced some of them, and what is stored must be what the next run continues.
        held.new_message_index = None
        entries = await super().save(held, scope=scope)
        if result is not None and held.revision is not None:
            result._conversation_saved(held.revision)  # the base class tells the result the same way
        return entries

    async def _save_unstored_originals(self, conversation: Conversation, scope: str | None) -> None:
        """Save the originals the run replaced before any save saw them (`historykit._provenance`)
        after the stored history, as one more step of it: the view saved next leaves that history
        as a branch, so its messages stay stored and in the transcript."""
        expanded = [original for message in conversation.messages for original in provenance.expand(message)]
        held = {id(message) for message in conversation.messages}
        if all(id(message) in held for message in expanded):
            return  # nothing this process replaced: every original is in the history, or stored before
        record = await self.read_record(conversation.conversation_id)
        stored = (
            [entry.message for entry in await self.read_history(record.head_id)]
            if record is not None and record.head_id is not None
            else []
        )
        unstored = [m for m in expanded if not _written_by_compaction(m) and m not in stored]
        originals = Conversation(
            conversation_id=conversation.conversation_id,
            messages=[*stored, *unstored],
            usage=conversation.usage,
            revision=conversation.revision,
        )
        await super().save(originals, scope=scope)
        conversation.revision = originals.revision


class SQLModelConversationStore(ViewSaving):
    """A Pydantic AI `ConversationStore` on SQLite (the default) or PostgreSQL.

    Example:
        ```python
        from pydantic_ai import Agent
        from historykit.checkpointers import SQLModelConversationStore

        store = SQLModelConversationStore("sqlite:///chat.db")
        agent = Agent("openai:gpt-5")

        async def turn(conversation_id: str, prompt: str) -> str:
            conversation = await store.load(conversation_id)
            result = await agent.run(prompt, conversation=conversation)
            await store.save(result)
            return result.output
        ```

    `delete` erases what only the deleted conversation reached: its entries, its messages in the
    shared message log and their compaction markers. What a fork of it still uses stays until the
    fork is deleted too.
    """

    def __init__(
        self,
        database: str | URL | Engine | AsyncEngine = DEFAULT_URL,
        *,
        serde: MessageSerializer | None = None,
    ) -> None:
        """Open (and create or migrate the tables of) a database.

        Args:
            database: A URL (`sqlite:///path.db`, `postgresql+psycopg://user@host/db`) or an engine
                made by `historykit.checkpointers._database.create_engine` / `create_async_engine`
                (whose SQLite connections begin write transactions with `BEGIN IMMEDIATE`). Blocking
                engines run in a worker thread, asyncio engines on the event loop.
            serde: Stores each message's JSON through it, e.g. LangGraph's `EncryptedSerializer`;
                `None` stores the JSON as it is.
        """
        self.serde = serde
        self._counter = TokenCounter()
        """Counts what a save stores, as a pipeline with the default tokenizer counts it."""
        self._async_engine: AsyncEngine | None = None
        self._engine: Engine | None = None
        self._prepared = False
        if isinstance(database, AsyncEngine):
            self._async_engine = database
        elif isinstance(database, Engine):
            self._engine = database
        else:
            self._engine = create_engine(database)
        self._log = message_log(self.engine.dialect.name)
        """The message log's statements and plans for the engine's SQL dialect."""
        if self._engine is not None:
            # Eagerly, so a database from a newer historykit is refused when the store is made;
            # checked in a read transaction (a SQLite reader never waits behind a writer), and only
            # created or migrated, in a write transaction, when it must be. A database that can
            # only be read is checked, never created or migrated.
            try:
                with self._engine.execution_options(historykit_write=False).begin() as conn:
                    current = schema_is_current(conn, [CORE, CONVERSATIONS])
                if not current:
                    write = read_only_reason(self._engine) is None
                    with self._engine.execution_options(historykit_write=write).begin() as conn:
                        prepare_database(conn, [CORE, CONVERSATIONS])
            except sa.exc.OperationalError as exc:
                raise unreachable_error(self._engine.url, exc) from None
            self._prepared = True
            # SQLAlchemy compiles a statement the first time a process runs it (a few ms each):
            # here, once, rather than inside the first load of a new process. Nothing is kept, and
            # a failure (a read-only database without the tables) is the first load's to report.
            # Twice: a statement's first run takes SQLAlchemy's path and the second compiles the
            # form the plan runners run on the driver's cursor (`_direct`), whose row type costs as
            # much again to build.
            with (
                contextlib.suppress(sa.exc.SQLAlchemyError),
                self._engine.execution_options(historykit_write=False).begin() as conn,
            ):
                run_plan(conn, _compile_load(self._log, serde))
                run_plan(conn, _compile_load(self._log, serde))
            # anyio imports its event loop backend on its first worker-thread call, 15-45 ms of
            # CPU: here, where a server makes its store, rather than inside the first load.
            with contextlib.suppress(ImportError):
                importlib.import_module("anyio._backends._asyncio")

    # ---- token counts ---------------------------------------------------------------------------

    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        """`ConversationStore.load`, and the token counts the store kept for the conversation's
        messages become known, for those very message objects, to every `TokenCounter` counting the
        same way (`historykit._tokens.remember_counts`): the first model call after the load
        tokenizes only what is new."""
        if mark_stored is None or (limit is not None and limit < 0):
            # Pydantic AI's own path (it says what is wrong with a negative limit).
            conversation = await super().load(conversation_id, limit=limit, scope=scope)
            by_method = await self._run(self._log.read_counts_plan(conversation_id)) if conversation else {}
        else:
            # The record, its history and the counts in one transaction (one worker-thread hop):
            # three would cost a new process's first load more than reading the rows does.
            try:
                loaded = await self._run(
                    _read_conversation(self._log, conversation_id, scope, limit, self.serde)
                )
            except LookupError:
                # An entry a concurrent save or delete released between the statements (PostgreSQL
                # reads each statement afresh): Pydantic AI's loop reads the record again.
                return await super().load(conversation_id, limit=limit, scope=scope)
            if loaded is None:
                return None
            record, entries, by_method = loaded
            conversation = Conversation(
                messages=[entry.message for entry in entries],
                usage=record.usage,
                conversation_id=record.conversation_id,
                deferred_tool_requests=record.deferred_tool_requests,
                revision=record.revision,
            )
            mark_stored(conversation, conversation.messages)  # as `ConversationStore.load` does
        if conversation is not None:  # for the very messages loaded, never another conversation's
            remember_counts(by_method, conversation.messages)
        return conversation

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """`ViewSaving.save`, and the token count of every message of the saved history is kept
        (counted with historykit's default tokenizer, unless a load already made it known)."""
        messages = (
            conversation.all_messages() if isinstance(conversation, AgentRunResult) else conversation.messages
        )
        entries = await super().save(conversation, scope=scope)
        counter = self._counter
        method = counter.count_method
        counts: dict[bytes, int] = {}
        history = list(messages)
        for message in adapter_for(history).to_neutral(history) if history else ():
            digest = message_digest(message)
            if digest not in counts:
                known = loaded_count(message.native, method, digest)
                counts[digest] = counter.count_message(message) if known is None else known
        if counts:
            await self._run(
                _write_counts(self._log, conversation.conversation_id, method, counts), write=True
            )
            remember_counts({method: counts}, history)
        return entries

    @property
    def engine(self) -> Engine | AsyncEngine:
        """The engine the store runs on."""
        engine = self._async_engine or self._engine
        assert engine is not None
        return engine

    # ---- ConversationStore primitives -------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        return await self._run(_read_record(conversation_id))

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        return await self._run(_read_records(scope, limit))

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        # Encoded before the transaction: a malformed marker fails the save before it writes anything.
        encoded = [_EncodedEntry.of(entry, record.conversation_id, self.serde) for entry in new_entries]
        await self._run(_write_record(self._log, record, encoded, expected_revision), write=True)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        await self._run(_delete_record(self._log.dialect, conversation_id, expected_revision), write=True)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        return await self._run(_read_entry(entry_id, self.serde))

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The entries up to `head_id`, in order (only the last `limit`), read in one query.

        Raises:
            LookupError: If `head_id` or an entry before it is not stored (a concurrent delete).
        """
        if head_id is None or limit == 0:
            return []
        return await self._run(_read_history(head_id, limit, self.serde))

    # ---- beyond the protocol ----------------------------------------------------------------

    async def transcript(self, conversation_id: str, *, scope: str | None = None) -> Transcript | None:
        """Every message the conversation ever had, in the order they were stored, with its compactions.

        That is its current history and every branch it left (saving a history that compaction
        rewrote leaves the original as a branch), each message once, where it first appeared: the
        tail a compaction kept verbatim is not repeated. A fork's transcript starts with the history
        it shares with the conversation it was forked from. Read in one query after the record.
        `None` if the store doesn't have the conversation, or has it under another `scope`.
        """
        return await self._run(_read_transcript(conversation_id, scope, self.serde))

    async def aclose(self) -> None:
        """Dispose of the engine's connections."""
        if self._async_engine is not None:
            await self._async_engine.dispose()
        elif self._engine is not None:
            self._engine.dispose()

    async def _run(self, plan: Plan[_T], *, write: bool = False) -> _T:
        """Run `plan` in one transaction: on the event loop for an asyncio engine, else in a thread."""
        if self._async_engine is not None:
            engine = self._async_engine.execution_options(historykit_write=write)
            if not self._prepared:
                try:
                    async with self._async_engine.execution_options(historykit_write=False).begin() as conn:
                        current = await conn.run_sync(schema_is_current, [CORE, CONVERSATIONS])
                    if not current:
                        async with self._async_engine.execution_options(
                            historykit_write=True
                        ).begin() as conn:
                            await conn.run_sync(prepare_database, [CORE, CONVERSATIONS])
                except sa.exc.OperationalError as exc:
                    raise unreachable_error(self._async_engine.url, exc) from None
                self._prepared = True
            async with engine.begin() as conn:
                return await run_plan_async(conn, plan)
        assert self._engine is not None
        return await anyio.to_thread.run_sync(_in_transaction, self._engine, plan, write)


def _in_transaction(engine: Engine, plan: Plan[_T], write: bool) -> _T:
    with engine.execution_options(historykit_write=write).begin() as conn:
        return run_plan(conn, plan)


def _write_counts(log: MessageLog, thread_id: str, method: str, counts: dict[bytes, int]) -> Plan[None]:
    yield from log.record_counts_plan(thread_id, {method: counts})
    if len(counts) <= CHUNK:
        # Keep the counts of the current history only (what the next load gives back), so a load
        # reads about as many counts as messages, however long the conversation was.
        yield from log.keep_counts_plan(thread_id, method, list(counts))


# ---------------------------------------------------------------------------------------------
# Messages: JSON, hashed, optionally through a serializer
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _EncodedEntry:
    """A new entry with its message serialized and, for a summary, its compaction marker."""

    entry: ConversationEntry
    hash: str
    encoding: str
    data: bytes
    marker: CompactionMarker | None

    @classmethod
    def of(
        cls, entry: ConversationEntry, conversation_id: str, serde: MessageSerializer | None
    ) -> _EncodedEntry:
        message = entry.message
        # One element of the list the adapter writes: the same JSON a whole history is read back from.
        where = f"entry {entry.id!r} of conversation {conversation_id!r}"
        try:
            payload = ModelMessagesTypeAdapter.dump_json([message])[1:-1]
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{where}: the {type(message).__name__} cannot be stored: {exc}"
            ) from None
        try:
            # What cannot be read back is refused now, not found unreadable on the next load.
            ModelMessagesTypeAdapter.validate_json(b"[" + payload + b"]")
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"{where}: the {type(message).__name__} is not a valid Pydantic AI message: {exc}"
            ) from None
        encoding, data = (JSON_ENCODING, payload) if serde is None else serde.dumps_typed(payload)
        return cls(
            entry=entry,
            hash=hashlib.sha256(payload).hexdigest(),
            encoding=encoding,
            data=data,
            marker=_marker_of(message, entry.id, conversation_id),
        )


def _marker_of(message: ModelMessage, entry_id: str, conversation_id: str) -> CompactionMarker | None:
    """The marker of the compaction that wrote `message`; `None` for an original.

    A summary carries it on its `CompactionPart` (`metadata` of the part survives Pydantic AI
    merging the summary's request with the next one; a marker on the request itself is read too);
    any other message a compaction wrote carries it in its own `metadata[EDIT_KEY]`.
    """
    holders: list[tuple[str, Any]] = []
    if isinstance(message, ModelRequest):
        summaries = [part for part in message.parts if isinstance(part, CompactionPart)]
        holders = [(COMPACTION_KEY, getattr(part, "metadata", None)) for part in summaries]
        if summaries:
            holders.append((COMPACTION_KEY, message.metadata))
    holders.append((EDIT_KEY, message.metadata))
    if isinstance(message, ModelRequest):
        # A tool return a compaction wrote carries it too (merged requests keep part metadata).
        holders.extend((EDIT_KEY, getattr(part, "metadata", None)) for part in message.parts)
    found = [(key, holder) for key, holder in holders if isinstance(holder, dict) and key in holder]
    if not found:
        return None
    key, holder = found[0]
    data = holder[key]
    where = f"the message in entry {entry_id!r} of conversation {conversation_id!r}"
    if not isinstance(data, dict):
        raise ArgumentTypeError(
            f"{where} has metadata[{key!r}] of type {type(data).__name__}, "
            "expected the dict CompactionMarker.to_dict() returns"
        )
    try:
        return CompactionMarker.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"{where} carries a malformed compaction marker: {exc}") from exc


def _written_by_compaction(message: ModelMessage) -> bool:
    """Whether a historykit compaction wrote `message` (its marker is on it), read without raising."""
    if isinstance(message.metadata, dict) and (
        EDIT_KEY in message.metadata or COMPACTION_KEY in message.metadata
    ):
        return True
    if not isinstance(message, ModelRequest):
        return False
    parts = message.parts if isinstance(message.parts, (list, tuple)) else ()  # a malformed one fails later
    return any(_part_written(part) for part in parts)


def _cipher_of(serde: MessageSerializer | None) -> Any:
    """The cipher of a LangGraph `EncryptedSerializer` (duck-typed: LangGraph stays optional)."""
    if serde is None or type(serde).__name__ != "EncryptedSerializer":
        return None
    return getattr(serde, "cipher", None)


def _payload(encoding: str, data: bytes, serde: MessageSerializer | None, where: str) -> bytes:
    cipher = _cipher_of(serde)
    if cipher is not None:
        # Strict: every row must be encrypted with this cipher. A row written without the key
        # (plain JSON, or plain bytes) is refused, and the inner serializer is never asked to
        # decode anything: the plaintext is the message's JSON itself.
        kind, encrypted, cipher_name = encoding.partition("+")
        if kind != "bytes" or not encrypted:
            raise CorruptRowError(
                f"{where} is not encrypted (encoding {encoding!r}) but the store's serializer "
                "encrypts: refused (a row written without the key is never decoded)"
            )
        try:
            payload = cipher.decrypt(cipher_name, data)
        except Exception as exc:
            raise CorruptRowError(
                f"{where} cannot be decrypted (cipher {cipher_name!r}): {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(payload, bytes):
            raise CorruptRowError(f"{where} decrypts to {type(payload).__name__}, not bytes")
        return payload
    if encoding == JSON_ENCODING:
        return data
    if encoding != "bytes" and not encoding.startswith("bytes+"):
        # Only what a serializer makes of `bytes` is handed back to it: a row claiming to be a
        # pickle, say, never reaches a serializer that would unpickle it.
        raise CorruptRowError(f"{where} has the encoding {encoding!r}, which this store never writes")
    if serde is None:
        raise CorruptRowError(
            f"{where} is stored with the encoding {encoding!r}: open the store with the serializer "
            "that wrote it (serde=...)"
        )
    payload = serde.loads_typed((encoding, data))
    if not isinstance(payload, bytes):
        raise CorruptRowError(
            f"{where} decodes to {type(payload).__name__} through the serializer, not bytes"
        )
    return payload


def _decode_messages(rows: Sequence[Any], serde: MessageSerializer | None) -> list[ModelMessage]:
    """The messages of `rows` (with `encoding`, `data`, `thread_id`, `message_seq`), validated at once."""
    payloads = [
        _payload(row.encoding, row.data, serde, _message_where(row.thread_id, row.message_seq))
        for row in rows
    ]
    try:
        return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(payloads) + b"]")
    except ValidationError as exc:
        # Say which row is bad rather than where it sits in the concatenation.
        for row, payload in zip(rows, payloads):
            try:
                ModelMessagesTypeAdapter.validate_json(b"[" + payload + b"]")
            except ValidationError as row_exc:
                where = _message_where(row.thread_id, row.message_seq)
                raise CorruptRowError(f"{where} is not a valid Pydantic AI message: {row_exc}") from row_exc
        raise CorruptRowError(f"the stored messages do not form a valid history: {exc}") from exc


def _message_where(thread_id: str, seq: int) -> str:
    return f"{_MESSAGE.name} row (thread_id={thread_id!r}, seq={seq})"


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    # SQLite keeps no offset; every timestamp is written in UTC.
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _records_from_rows(rows: Iterable[Any]) -> list[ConversationRecord]:
    """Records from rows of a conversation joined with its branches (in `idx` order)."""
    records: dict[str, ConversationRecord] = {}
    for row in rows:
        record = records.get(row.conversation_id)
        if record is None:
            record = records[row.conversation_id] = _record_from_row(row)
        if row.entry_id is not None:
            record.branches.append(row.entry_id)
    return list(records.values())


def _record_from_row(row: Any) -> ConversationRecord:
    """The record of a conversation row, without its branches."""
    try:
        usage = _USAGE.validate_python(row.usage)
        deferred = (
            None
            if row.deferred_tool_requests is None
            else _DEFERRED.validate_python(row.deferred_tool_requests)
        )
    except ValidationError as exc:
        raise CorruptRowError(
            f"{_CONVERSATION.name} row {row.conversation_id!r} cannot be decoded: {exc}"
        ) from exc
    return ConversationRecord(
        conversation_id=row.conversation_id,
        head_id=row.head_id,
        usage=usage,
        deferred_tool_requests=deferred,
        scope=row.scope,
        forked_from=row.forked_from,
        forked_at=row.forked_at,
        revision=row.revision,
        updated_at=_utc(row.updated_at),
        format_version=row.format_version,
    )


def _record_query(conversations: sa.FromClause) -> sa.Select[Any]:
    return (
        sa.select(conversations, _BRANCH.c.entry_id)
        .select_from(
            conversations.outerjoin(_BRANCH, _BRANCH.c.conversation_id == conversations.c.conversation_id)
        )
        .order_by(conversations.c.updated_at.desc(), conversations.c.conversation_id, _BRANCH.c.idx)
    )


def _read_conversation(
    log: MessageLog,
    conversation_id: str,
    scope: str | None,
    limit: int | None,
    serde: MessageSerializer | None,
) -> Plan[tuple[ConversationRecord, list[ConversationEntry], dict[str, dict[bytes, int]]] | None]:
    """What `load` reads: the record (`None` when missing or of another scope), its history (the
    last `limit` entries) and the token counts kept for the conversation."""
    record = yield from _read_record(conversation_id)
    if record is None or (scope is not None and record.scope != scope):
        return None
    entries = (
        []
        if record.head_id is None or limit == 0
        else (yield from _read_history(record.head_id, limit, serde))
    )
    counts = yield from log.read_counts_plan(conversation_id)
    return record, entries, counts


def _compile_load(log: MessageLog, serde: MessageSerializer | None) -> Plan[None]:
    """The statements `load` runs, run once on ids no conversation or entry has (`uuid4` ids,
    and a record's id is the caller's: one named by a fresh `uuid4` is nobody's)."""
    unused = f"historykit-compile-{uuid.uuid4()}"
    yield from _read_record(unused)
    yield Query(_RECORD_BRANCHES, {"id": unused})  # what a record that exists reads next
    yield from log.read_counts_plan(unused)
    for limit in (None, 1):  # the whole history, and its last `limit` messages
        with contextlib.suppress(KeyError):
            yield from _read_history(unused, limit, serde)


_RECORD_ROW = sa.select(_CONVERSATION).where(_CONVERSATION.c.conversation_id == sa.bindparam("id"))
_RECORD_BRANCHES = (
    sa.select(_BRANCH.c.entry_id)
    .where(_BRANCH.c.conversation_id == sa.bindparam("id"))
    .order_by(_BRANCH.c.idx)
)
"""Built once, so the plan runners execute them on the driver's cursor after their first use
(`_direct`); a statement built per call always takes SQLAlchemy's path."""


def _read_record(conversation_id: str) -> Plan[ConversationRecord | None]:
    # The row, then its branches: joined, the row (and its JSON) would be read once per branch,
    # and a conversation leaves one at every compaction. A save checks the revision it read, so
    # branches written between the two statements never reach the database.
    rows = yield Query(_RECORD_ROW, {"id": conversation_id})
    if not rows:
        return None
    record = _record_from_row(rows[0])
    branches = yield Query(_RECORD_BRANCHES, {"id": conversation_id})
    record.branches.extend(row.entry_id for row in branches)
    return record


def _read_records(scope: str | None, limit: int | None) -> Plan[list[ConversationRecord]]:
    chosen = sa.select(_CONVERSATION)
    if scope is not None:
        chosen = chosen.where(_CONVERSATION.c.scope == scope)
    if limit is not None:
        chosen = chosen.order_by(_CONVERSATION.c.updated_at.desc(), _CONVERSATION.c.conversation_id).limit(
            limit
        )
    return _records_from_rows((yield Query(_record_query(chosen.subquery("conversation")))))


def _record_values(record: ConversationRecord) -> dict[str, Any]:
    return {
        "head_id": record.head_id,
        "usage": _USAGE.dump_python(record.usage, mode="json"),
        "deferred_tool_requests": (
            None
            if record.deferred_tool_requests is None
            else _DEFERRED.dump_python(record.deferred_tool_requests, mode="json")
        ),
        "scope": record.scope,
        "forked_from": record.forked_from,
        "forked_at": record.forked_at,
        "revision": record.revision,
        "updated_at": _utc(record.updated_at),
        "format_version": record.format_version,
    }


def _store_lock(dialect: Dialect, *, exclusive: bool) -> Plan[None]:
    statement = dialect.store_lock(exclusive=exclusive)
    if statement is not None:
        yield Query(statement)


def _write_record(
    log: MessageLog,
    record: ConversationRecord,
    entries: Sequence[_EncodedEntry],
    expected_revision: str | None,
) -> Plan[None]:
    conversation_id = record.conversation_id
    yield from _store_lock(log.dialect, exclusive=False)
    # The record first: on PostgreSQL its row lock (or the primary key, for a new record) makes a
    # concurrent writer of the same conversation wait here, then fail the revision check.
    values = _record_values(record)
    if expected_revision is None:
        try:
            yield Query(sa.insert(_CONVERSATION).values(conversation_id=conversation_id, **values))
        except IntegrityError:
            raise ConversationConflict(conversation_id) from None
        yield from _claim_thread(conversation_id)
    else:
        updated = yield Query(
            sa.update(_CONVERSATION)
            .where(_CONVERSATION.c.conversation_id == conversation_id)
            .where(_CONVERSATION.c.revision == expected_revision)
            .values(**values)
        )
        if rows_written(updated) != 1:
            raise ConversationConflict(conversation_id)

    new_ids = {encoded.entry.id for encoded in entries}
    if (
        record.head_id is not None
        and record.head_id not in new_ids
        and not (yield from _entry_exists(record.head_id))
    ):
        raise ConversationConflict(conversation_id)
    if entries:
        yield from _insert_entries(log, conversation_id, entries)

    yield Query(sa.delete(_BRANCH).where(_BRANCH.c.conversation_id == conversation_id))
    if record.branches:
        yield Query(
            sa.insert(_BRANCH),
            [
                {"conversation_id": conversation_id, "idx": idx, "entry_id": entry_id}
                for idx, entry_id in enumerate(record.branches)
            ],
        )


def _claim_thread(thread_id: str) -> Plan[None]:
    """Make sure the conversation's thread exists and is not a LangGraph thread of the same id."""
    rows = yield Query(sa.select(_THREAD.c.framework).where(_THREAD.c.thread_id == thread_id))
    framework = rows[0][0] if rows else None
    if framework is None:
        yield Query(sa.insert(_THREAD).values(thread_id=thread_id, framework=FRAMEWORK, created_at=_now()))
    elif framework != FRAMEWORK:
        raise InvalidArgumentError(
            f"conversation id {thread_id!r} is already the id of a {framework} thread in this database; "
            "conversations and threads share the message log, so use another conversation id"
        )


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _entry_exists(entry_id: str) -> Plan[bool]:
    return bool((yield Query(sa.select(_ENTRY.c.row).where(_ENTRY.c.id == entry_id))))


def _insert_entries(log: MessageLog, thread_id: str, entries: Sequence[_EncodedEntry]) -> Plan[None]:
    """Store new entries (each after the one it points at) and the messages the thread lacks."""
    first_parent = entries[0].entry.parent_id
    position = 0
    if first_parent is not None:
        found = yield Query(sa.select(_ENTRY.c.position).where(_ENTRY.c.id == first_parent))
        if not found:
            # Released by a delete since the history was read.
            raise ConversationConflict(thread_id)
        position = found[0].position + 1

    yield from log.lock_plan(thread_id, framework=FRAMEWORK)
    logged = yield from log.find_plan(thread_id, [e.hash for e in entries])
    seqs = {digest: row.seq for digest, row in logged.items()}
    new: dict[str, LoggedMessage] = {}
    for encoded in entries:
        if encoded.hash not in seqs and encoded.hash not in new:
            new[encoded.hash] = LoggedMessage(
                hash=encoded.hash,
                kind=encoded.entry.message.kind,
                encoding=encoded.encoding,
                data=encoded.data,
                marker=encoded.marker,
            )
    stored = {digest: seqs[digest] for digest in seqs}
    appended = yield from log.append_plan(thread_id, FRAMEWORK, list(new.values()))
    seqs.update(zip(new, appended, strict=True))
    # A message stored before without its marker (another conversation's copy of a summary) gets it now.
    markers = {stored[e.hash]: e.marker for e in entries if e.marker is not None and e.hash in stored}
    yield from log.mark_plan(thread_id, FRAMEWORK, markers)

    positions: dict[str | None, int] = {first_parent: position - 1}
    rows = []
    for encoded in entries:
        entry = encoded.entry
        positions[entry.id] = positions[entry.parent_id] + 1
        rows.append(
            {
                "id": entry.id,
                "parent_id": entry.parent_id,
                "position": positions[entry.id],
                "kind": entry.kind,
                "thread_id": thread_id,
                "message_seq": seqs[encoded.hash],
            }
        )
    yield Query(sa.insert(_ENTRY), rows)


# ---------------------------------------------------------------------------------------------
# Histories, entries and transcripts: one query each
# ---------------------------------------------------------------------------------------------

_E = _ENTRY.name
_M = _MESSAGE.name
_B = _BRANCH.name
_C = _CONVERSATION.name
_K = _MARKER.name

_HISTORY_SQL = f"""
WITH RECURSIVE chain(id, parent_id, kind, thread_id, message_seq, depth) AS (
    SELECT id, parent_id, kind, thread_id, message_seq, 1 FROM {_E} WHERE id = :head_id
    UNION ALL
    SELECT e.id, e.parent_id, e.kind, e.thread_id, e.message_seq, chain.depth + 1
    FROM {_E} e JOIN chain ON e.id = chain.parent_id
    {{limit}}
)
SELECT chain.id, chain.parent_id, chain.kind, chain.thread_id, chain.message_seq, m.encoding, m.data
FROM chain LEFT JOIN {_M} m ON m.thread_id = chain.thread_id AND m.seq = chain.message_seq
ORDER BY chain.depth DESC
"""


def _history_statement(limited: bool) -> sa.TextualSelect:
    sql = _HISTORY_SQL.format(limit="WHERE chain.depth < :limit" if limited else "")
    # Its result columns named, the query is a select the plan runners run on the driver's cursor
    # (`_direct`), as the record's statements are: a bare `text()` always takes SQLAlchemy's path.
    return sa.text(sql).columns(
        sa.column("id", _ENTRY.c.id.type),
        sa.column("parent_id", _ENTRY.c.parent_id.type),
        sa.column("kind", _ENTRY.c.kind.type),
        sa.column("thread_id", _ENTRY.c.thread_id.type),
        sa.column("message_seq", _ENTRY.c.message_seq.type),
        sa.column("encoding", _MESSAGE.c.encoding.type),
        sa.column("data", _MESSAGE.c.data.type),
    )


_HISTORY = {limited: _history_statement(limited) for limited in (False, True)}
"""The history query, whole or its last `:limit` entries, built once (see `_RECORD_ROW`)."""


def _read_history(
    head_id: str, limit: int | None, serde: MessageSerializer | None
) -> Plan[list[ConversationEntry]]:
    params: dict[str, Any] = {"head_id": head_id}
    if limit is not None:
        params["limit"] = limit
    rows = yield Query(_HISTORY[limit is not None], params)
    if not rows:
        raise KeyError(head_id)
    if rows[0].parent_id is not None and (limit is None or len(rows) < limit):
        # The chain stops at an entry whose parent is gone: a concurrent delete released it.
        raise KeyError(rows[0].parent_id)
    return _entries_from_rows(rows, serde)


def _entries_from_rows(rows: Sequence[Any], serde: MessageSerializer | None) -> list[ConversationEntry]:
    messages = _decode_messages(_present(rows, lambda row: f"{_E} row {row.id!r}"), serde)
    return [
        ConversationEntry(id=row.id, parent_id=row.parent_id, message=message, kind=row.kind)
        for row, message in zip(rows, messages)
    ]


def _present(rows: Sequence[Any], referrer: Callable[[Any], str]) -> Sequence[Any]:
    """`rows`, once each is known to have found its message (`data` comes from an outer join)."""
    for row in rows:
        if row.data is None:
            raise CorruptRowError(
                f"{referrer(row)} refers to the message {_message_where(row.thread_id, row.message_seq)}, "
                "which does not exist"
            )
    return rows


def _read_entry(entry_id: str, serde: MessageSerializer | None) -> Plan[ConversationEntry]:
    query = (
        sa.select(
            _ENTRY.c.id,
            _ENTRY.c.parent_id,
            _ENTRY.c.kind,
            _ENTRY.c.thread_id,
            _ENTRY.c.message_seq,
            _MESSAGE.c.encoding,
            _MESSAGE.c.data,
        )
        .select_from(
            _ENTRY.outerjoin(
                _MESSAGE,
                sa.and_(_MESSAGE.c.thread_id == _ENTRY.c.thread_id, _MESSAGE.c.seq == _ENTRY.c.message_seq),
            )
        )
        .where(_ENTRY.c.id == entry_id)
    )
    rows = yield Query(query)
    if not rows:
        raise KeyError(entry_id)
    return _entries_from_rows(rows, serde)[0]


# Each message once, where the conversation first had it: compaction keeps a tail of messages
# verbatim, and the rewritten history that holds them again is not a second copy of them.
_TRANSCRIPT_SQL = f"""
WITH RECURSIVE reach(id, parent_id) AS (
    SELECT e.id, e.parent_id FROM {_E} e
    WHERE e.id IN (SELECT head_id FROM {_C} WHERE conversation_id = :conversation_id)
       OR e.id IN (SELECT entry_id FROM {_B} WHERE conversation_id = :conversation_id)
    UNION
    SELECT e.id, e.parent_id FROM {_E} e JOIN reach ON e.id = reach.parent_id
),
firsts(first_row, thread_id, message_seq) AS (
    SELECT MIN(e.row), e.thread_id, e.message_seq
    FROM reach JOIN {_E} e ON e.id = reach.id
    GROUP BY e.thread_id, e.message_seq
)
SELECT f.first_row, f.thread_id, f.message_seq, m.encoding, m.data,
       k.id AS marker_id, k.covered_from, k.covered_to, k.tokens_before, k.tokens_after,
       k.strategy, k.model, k.created_at, k.automatic, k.focus
FROM firsts f
LEFT JOIN {_M} m ON m.thread_id = f.thread_id AND m.seq = f.message_seq
LEFT JOIN {_K} k ON k.thread_id = f.thread_id AND k.summary_seq = f.message_seq
ORDER BY f.first_row
"""


def _read_transcript(
    conversation_id: str, scope: str | None, serde: MessageSerializer | None
) -> Plan[Transcript | None]:
    records = yield Query(
        sa.select(_CONVERSATION.c.scope, _CONVERSATION.c.head_id).where(
            _CONVERSATION.c.conversation_id == conversation_id
        )
    )
    stored = records[0] if records else None
    if stored is None or (scope is not None and stored.scope != scope):
        return None
    rows = yield Query(sa.text(_TRANSCRIPT_SQL), {"conversation_id": conversation_id})
    logged = _decode_messages(_present(rows, lambda row: f"{_E} row #{row.first_row}"), serde)
    originals: list[ModelMessage] = []
    compactions: list[StoredCompaction] = []
    seen: set[str] = set()
    for row, message in zip(rows, logged):
        if row.marker_id is not None:
            compactions.append(
                StoredCompaction(marker=_marker_from_row(row), message=message, at=len(originals))
            )
        original = _unseen_original(message, seen, written=row.marker_id is not None)
        if original is not None:
            originals.append(original)
    view = (
        []
        if stored.head_id is None
        else [entry.message for entry in (yield from _read_history(stored.head_id, None, serde))]
    )
    return Transcript(thread_id=conversation_id, messages=originals, compactions=compactions, view=view)


def _unseen_original(message: ModelMessage, seen: set[str], *, written: bool) -> ModelMessage | None:
    """The part of `message` that is original and not in an earlier original, as a message; `None`
    when there is none. Records what it returns in `seen`.

    Pydantic AI merges consecutive requests into one (when a run starts, and in what it sends), so a
    stored request can re-wrap original parts the log already holds, together with parts a
    compaction wrote, or with a user's new prompt that was never stored on its own. Each original
    part is returned once, in the first message that holds it."""
    if isinstance(message, ModelResponse):
        if written:
            return None
        key = repr(message)
        if key in seen:
            return None
        seen.add(key)
        return message
    # In a message a compaction wrote, its summary is the compaction's even when the marker is on
    # the request; elsewhere a `CompactionPart` without historykit's marker is a provider's own.
    parts = [
        part
        for part in message.parts
        if not _part_written(part) and not (written and isinstance(part, CompactionPart))
    ]
    unseen = [part for part in parts if repr(part) not in seen]
    seen.update(repr(part) for part in unseen)
    if not unseen or (written and not parts):
        return None
    if len(unseen) == len(message.parts) and not written:
        return message
    return replace(message, parts=unseen, metadata=None)


def _part_written(part: Any) -> bool:
    """Whether a historykit compaction wrote `part`: its marker is on the part (a summary, a
    cleared result), or on every item of a user prompt (a notice: the Pydantic AI adapter puts
    it on the text, which Pydantic AI's merge of requests keeps). A provider's own
    `CompactionPart` is not one."""
    metadata = getattr(part, "metadata", None)
    if isinstance(metadata, dict) and (EDIT_KEY in metadata or COMPACTION_KEY in metadata):
        return True
    items = getattr(part, "content", None)
    if not isinstance(items, list) or not items:
        return False
    holders = [getattr(item, "metadata", None) for item in items]
    return all(isinstance(holder, dict) and EDIT_KEY in holder for holder in holders)


def _marker_from_row(row: Any) -> CompactionMarker:
    created = row.created_at
    if isinstance(created, str):  # a raw SQLite text column, read through `text()`
        created = datetime.fromisoformat(created)
    return CompactionMarker(
        covered_from=row.covered_from,
        covered_to=row.covered_to,
        tokens_before=row.tokens_before,
        tokens_after=row.tokens_after,
        strategy=row.strategy,
        model=row.model,
        created_at=_utc(created),
        automatic=bool(row.automatic),
        focus=row.focus,
    )


# ---------------------------------------------------------------------------------------------
# Delete
# ---------------------------------------------------------------------------------------------

# The entries the deleted conversation reached (its history and branches) that nothing else
# reaches. Every stored entry is reached by some conversation, so one of those entries is still
# used exactly when it leads to another conversation's head or branch: when it is one, or is the
# parent of an entry outside the deleted conversation's reach (which some conversation reaches).
_RELEASED_ENTRIES_SQL = f"""
WITH RECURSIVE
candidates(id, parent_id) AS (
    SELECT e.id, e.parent_id FROM {_E} e
    WHERE e.id = :head_id OR e.id IN (SELECT entry_id FROM {_B} WHERE conversation_id = :conversation_id)
    UNION
    SELECT e.id, e.parent_id FROM {_E} e JOIN candidates c ON e.id = c.parent_id
),
boundary(id) AS (
    SELECT head_id FROM {_C} WHERE head_id IN (SELECT id FROM candidates)
    UNION
    SELECT entry_id FROM {_B}
    WHERE conversation_id <> :conversation_id AND entry_id IN (SELECT id FROM candidates)
    UNION
    SELECT parent_id FROM {_E}
    WHERE parent_id IN (SELECT id FROM candidates) AND id NOT IN (SELECT id FROM candidates)
),
kept(id, parent_id) AS (
    SELECT e.id, e.parent_id FROM {_E} e WHERE e.id IN (SELECT id FROM boundary)
    UNION
    SELECT e.id, e.parent_id FROM {_E} e JOIN kept k ON e.id = k.parent_id
)
SELECT id, thread_id FROM candidates JOIN {_E} e USING (id)
WHERE id NOT IN (SELECT id FROM kept)
"""

_DELETE_MESSAGES_SQL = f"""
DELETE FROM {_M}
WHERE thread_id = :thread_id AND framework = :framework
  AND NOT EXISTS (SELECT 1 FROM {_E} e WHERE e.thread_id = {_M}.thread_id AND e.message_seq = {_M}.seq)
"""

_DELETE_MARKERS_SQL = f"""
DELETE FROM {_K}
WHERE thread_id = :thread_id AND framework = :framework
  AND NOT EXISTS (SELECT 1 FROM {_M} m WHERE m.thread_id = {_K}.thread_id AND m.seq = {_K}.summary_seq)
"""

_DELETE_THREAD_SQL = f"""
DELETE FROM {_THREAD.name}
WHERE thread_id = :thread_id AND framework = :framework
  AND NOT EXISTS (SELECT 1 FROM {_M} WHERE thread_id = :thread_id)
  AND NOT EXISTS (SELECT 1 FROM {_C} WHERE conversation_id = :thread_id)
"""


def _delete_record(dialect: Dialect, conversation_id: str, expected_revision: str) -> Plan[None]:
    # Exclusive: no save or fork is halfway through while this decides what nobody reaches.
    yield from _store_lock(dialect, exclusive=True)
    deleted = yield Query(
        sa.delete(_CONVERSATION)
        .where(_CONVERSATION.c.conversation_id == conversation_id)
        .where(_CONVERSATION.c.revision == expected_revision)
        .returning(_CONVERSATION.c.head_id)
    )
    if not deleted:
        raise ConversationConflict(conversation_id)
    # Selected, then deleted: MySQL cannot delete from a recursive query's result.
    released = yield Query(
        sa.text(_RELEASED_ENTRIES_SQL), {"conversation_id": conversation_id, "head_id": deleted[0].head_id}
    )
    for chunk in chunks([row.id for row in released]):
        yield Query(sa.delete(_ENTRY).where(_ENTRY.c.id.in_(chunk)))
    threads = {conversation_id, *(row.thread_id for row in released)}
    yield Query(sa.delete(_BRANCH).where(_BRANCH.c.conversation_id == conversation_id))
    for thread_id in sorted(threads):
        params = {"thread_id": thread_id, "framework": FRAMEWORK}
        yield Query(sa.text(_DELETE_MESSAGES_SQL), params)
        yield Query(sa.text(_DELETE_MARKERS_SQL), params)
        yield Query(sa.text(_DELETE_THREAD_SQL), params)
    # Counts are a cache of what the deleted conversation was sent; its forks count their own.
    yield Query(sa.delete(_COUNT).where(_COUNT.c.thread_id == conversation_id))
