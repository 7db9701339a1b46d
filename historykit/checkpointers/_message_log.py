"""The message log both stores write: each message once per thread, its number, its markers, its
token counts.

`SQLModelSaver` (LangGraph) and `SQLModelConversationStore` (Pydantic AI) keep their messages in
the same tables (`schema.MessageRow`, `CompactionRow`, `TokenCountRow`) and write them the same
way, through a `MessageLog`:

- a writer first locks the thread (`lock_plan`): on a server, its row in `historykit_thread`, held
  until the commit, so writers of one thread take turns numbering messages and a delete waits for
  them; SQLite writers hold the whole file (`BEGIN IMMEDIATE`);
- a message is found by the SHA-256 of its serialized form (`find_plan`); the new ones are
  numbered after the thread's highest number, a new log starting at the current time in
  microseconds (`append_plan`), so a deleted and re-created thread never reuses a number;
- a message a compaction wrote gets a marker row keyed by its number (`mark_plan`), once;
- token counts are kept by message content and counting method (`record_counts_plan`,
  `read_counts_plan`), so a cold load gives them back to `historykit._tokens.remember_counts`.

Every method is a `Plan`: both stores run them inside their own plans. (The saver's first
statement of a write also checks what its cache knows of the thread; it takes the same lock,
through `Dialect.lock_for_writer`.)

Example:
    ```python
    from historykit.checkpointers._message_log import LoggedMessage, message_log
    from historykit.checkpointers._database import run_plan

    log = message_log("sqlite")
    message = LoggedMessage(hash=digest, kind="human", encoding="json", data=payload)
    with engine.begin() as conn:
        run_plan(conn, log.lock_plan("t1", framework="langgraph"))
        found = run_plan(conn, log.find_plan("t1", [digest]))
        if digest not in found:
            (seq,) = run_plan(conn, log.append_plan("t1", "langgraph", [message]))
    ```
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from historykit._messages import CompactionMarker
from historykit.checkpointers._database import Plan, Query
from historykit.checkpointers._dialect import Dialect, dialect_of
from historykit.checkpointers._schema import (
    HASH_CHARS,
    CompactionRow,
    MessageRow,
    ThreadRow,
    TokenCountRow,
    utcnow,
)

__all__ = ["CHUNK", "LogTop", "LoggedMessage", "MessageLog", "chunks", "message_log"]

THREADS: sa.Table = ThreadRow.__table__  # type: ignore[attr-defined]
MESSAGES: sa.Table = MessageRow.__table__  # type: ignore[attr-defined]
COMPACTIONS: sa.Table = CompactionRow.__table__  # type: ignore[attr-defined]
COUNTS: sa.Table = TokenCountRow.__table__  # type: ignore[attr-defined]

CHUNK = 500
"""Bound parameters per `IN (...)` list: well under every backend's limit."""

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A message to add to a thread's log, serialized."""

    hash: str
    """Hex SHA-256 of its serialized (unencrypted) form, or its first `HASH_CHARS` characters (what
    the log keeps): its address in the thread."""
    kind: str
    """The native message type (`MessageRow.kind`)."""
    encoding: str
    """The serializer's type tag for `data`."""
    data: bytes
    """The stored form (encrypted, when the store's serializer encrypts)."""
    native_id: str | None = None
    """The framework's own message id, if it has one."""
    position: str | None = None
    """Its transcript sort key, for a store whose logging order is not conversation order."""
    anonymous_hash: str | None = None
    """The hash of the message without its id (`MessageRow.anonymous_hash`)."""
    marker: CompactionMarker | None = None
    """The marker of the compaction that wrote it; `None` for an original."""


@dataclass(slots=True)
class LogTop:
    """The last number of a thread's log, as read by a writer holding the thread."""

    seq: int | None
    """`None`: the log is empty."""


class MessageLog:
    """The message log's statements for one SQL dialect, and the plans that write and read it."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        bp = sa.bindparam
        self.insert_thread = dialect.insert_ignore(THREADS, ["thread_id"])
        self.lock_thread = dialect.lock_for_writer(
            sa.select(THREADS.c.thread_id).where(THREADS.c.thread_id == bp("thread_id")), THREADS
        )
        self.lock_thread_exclusive = dialect.lock_exclusive(
            sa.select(THREADS.c.thread_id).where(THREADS.c.thread_id == bp("thread_id"))
        )
        self.find_hashes = sa.select(MESSAGES.c.seq, MESSAGES.c.hash, MESSAGES.c.position).where(
            MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.hash.in_(bp("hashes", expanding=True))
        )
        self.max_seq = sa.select(sa.func.max(MESSAGES.c.seq)).where(MESSAGES.c.thread_id == bp("thread_id"))
        self.insert_message = sa.insert(MESSAGES)
        self.insert_marker = dialect.insert_ignore(COMPACTIONS, ["thread_id", "summary_seq"])
        self.insert_count = dialect.insert_ignore(COUNTS, ["thread_id", "digest", "method"])
        self.read_counts = sa.select(COUNTS.c.digest, COUNTS.c.method, COUNTS.c.tokens).where(
            COUNTS.c.thread_id == bp("thread_id")
        )
        self.keep_counts = sa.delete(COUNTS).where(
            COUNTS.c.thread_id == bp("thread_id"),
            COUNTS.c.method == bp("method"),
            COUNTS.c.digest.not_in(bp("digests", expanding=True)),
        )
        self.delete_counts = sa.delete(COUNTS).where(COUNTS.c.thread_id == bp("thread_id"))
        target = sa.cast(bp("target"), sa.String)
        self.copy_counts = sa.insert(COUNTS).from_select(
            ["thread_id", "digest", "method", "tokens"],
            sa.select(target, COUNTS.c.digest, COUNTS.c.method, COUNTS.c.tokens).where(
                COUNTS.c.thread_id == bp("source")
            ),
        )

    # -- threads and locks ----------------------------------------------------------------------

    def lock_plan(self, thread_id: str, *, framework: str) -> Plan[bool]:
        """Make sure the thread's row exists (created for `framework`), and hold it for this writer
        until the commit; whether it existed."""
        rows = yield Query(self.lock_thread, {"thread_id": thread_id})
        if rows:
            return True
        yield Query(
            self.insert_thread, {"thread_id": thread_id, "framework": framework, "created_at": utcnow()}
        )
        if self.dialect.locks_rows:
            yield Query(self.lock_thread, {"thread_id": thread_id})
        return False

    # -- messages -------------------------------------------------------------------------------

    def find_plan(self, thread_id: str, hashes: Sequence[str]) -> Plan[dict[str, Any]]:
        """`{hash: row}` (with `seq` and `position`) of the messages among `hashes` the thread has."""
        found: dict[str, Any] = {}
        by_address = {digest[:HASH_CHARS]: digest for digest in hashes}  # the log keeps a prefix
        for chunk in chunks(sorted(by_address)):
            rows = yield Query(self.find_hashes, {"thread_id": thread_id, "hashes": list(chunk)})
            found.update({by_address[row.hash]: row for row in rows})
        return found

    def append_plan(
        self,
        thread_id: str,
        framework: str,
        messages: Sequence[LoggedMessage],
        *,
        top: LogTop | None = None,
    ) -> Plan[list[int]]:
        """Add `messages` (new to the thread, distinct) to its log with their markers; their numbers.

        Run it holding the thread (`lock_plan`): numbers are allocated per thread. `top`: the
        log's last number, read under that hold (saves asking again); it moves past the new ones.
        """
        if not messages:
            return []
        if top is None:
            (row,) = yield Query(self.max_seq, {"thread_id": thread_id})
            top = LogTop(row[0])
        # An empty log starts at the current time (µs), so a re-created thread never reuses a
        # number an earlier thread of the same id had (see `MessageRow.seq`).
        first = top.seq + 1 if top.seq is not None else time.time_ns() // 1000
        top.seq = first + len(messages) - 1
        seqs = list(range(first, first + len(messages)))
        now = utcnow()
        yield Query(
            self.insert_message,
            [
                {
                    "thread_id": thread_id,
                    "seq": seq,
                    "position": message.position,
                    "hash": message.hash[:HASH_CHARS],
                    "anonymous_hash": message.anonymous_hash and message.anonymous_hash[:HASH_CHARS],
                    "framework": framework,
                    "kind": message.kind,
                    "native_id": message.native_id,
                    "encoding": message.encoding,
                    "data": message.data,
                    "created_at": now,
                }
                for seq, message in zip(seqs, messages, strict=True)
            ],
        )
        markers = {seq: m.marker for seq, m in zip(seqs, messages, strict=True) if m.marker is not None}
        yield from self.mark_plan(thread_id, framework, markers)
        return seqs

    def mark_plan(
        self, thread_id: str, framework: str, markers: Mapping[int, CompactionMarker]
    ) -> Plan[None]:
        """Record the marker of each message (by number) a compaction wrote; a recorded one stays."""
        if markers:
            yield Query(
                self.insert_marker,
                [
                    CompactionRow.from_marker(
                        marker, thread_id=thread_id, framework=framework, summary_seq=seq
                    ).model_dump(exclude={"id"})
                    for seq, marker in sorted(markers.items())
                ],
            )

    # -- token counts ---------------------------------------------------------------------------

    def record_counts_plan(self, thread_id: str, counts: Mapping[str, Mapping[bytes, int]]) -> Plan[None]:
        """Keep `{method: {digest: tokens}}` for the thread (a count already kept stays: another
        writer counting the same message the same way got the same number)."""
        rows = [
            {"thread_id": thread_id, "digest": digest.hex(), "method": method, "tokens": tokens}
            for method, by_digest in counts.items()
            for digest, tokens in by_digest.items()
        ]
        for chunk in chunks(rows):
            yield Query(self.insert_count, list(chunk))

    def keep_counts_plan(self, thread_id: str, method: str, digests: Sequence[bytes]) -> Plan[None]:
        """Forget the thread's counts of `method` but those of `digests`."""
        yield Query(
            self.keep_counts,
            {"thread_id": thread_id, "method": method, "digests": [d.hex() for d in digests]},
        )

    def read_counts_plan(self, thread_id: str) -> Plan[dict[str, dict[bytes, int]]]:
        """The thread's kept counts, `{method: {digest: tokens}}`."""
        rows = yield Query(self.read_counts, {"thread_id": thread_id})
        by_method: dict[str, dict[bytes, int]] = {}
        for row in rows:
            by_method.setdefault(row.method, {})[bytes.fromhex(row.digest)] = row.tokens
        return by_method


@functools.cache
def message_log(dialect: str) -> MessageLog:
    """The `MessageLog` of a SQLAlchemy backend name (built once per process)."""
    return MessageLog(dialect_of(dialect))
