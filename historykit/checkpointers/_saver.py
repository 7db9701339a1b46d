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

The class is assembled from one module per concern: `_saver_base` (connections and the plan
runners), `_saver_sql` (statements per dialect), `_saver_messages` (the message log's LangChain
side, with token counts), `_langgraph_protocol` (the checkpointer protocol) and
`_saver_maintenance` (pruning, copying, garbage collection); this module adds `transcript()`.

Caveats: messages are shared, not copied, between the checkpoints (and calls) that hold them, as
LangGraph's channels share them: treat them as immutable. A run starts from the message objects
the thread's last run ended with (its output), taken by identity without comparing them with what
was stored, so a step costs what it adds: edit a copy, or what `get_state` returned (every read
but a run's gets objects of its own, checked when they are given back), and give it back through
`update_state` or a run's input. Pruning and deleting runs is meant for threads that are not
running at the same time.

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

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.engine import URL, Row

from historykit.checkpointers._database import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    CorruptRowError,
    Plan,
    Query,
)
from historykit.checkpointers._langgraph_protocol import (
    LangGraphProtocol,
)
from historykit.checkpointers._saver_base import (
    _Connections,
)
from historykit.checkpointers._saver_maintenance import (
    PruneStrategy,
    SaverMaintenance,
)
from historykit.checkpointers._saver_sql import (
    FRAMEWORK,
    _statements,
)
from historykit.checkpointers._saver_values import (
    _calls_before_results,
    _Checkpoint,
    _key,
    _parse_json,
    _transcript_order,
    _with_view,
)
from historykit.checkpointers._schema import (
    CompactionRow,
)
from historykit.checkpointers._serde import RowCodec, default_serializer
from historykit.checkpointers._transcript import StoredCompaction, Transcript

__all__ = ["FRAMEWORK", "PruneStrategy", "SQLModelSaver"]


class SQLModelSaver(LangGraphProtocol, SaverMaintenance):
    """A LangGraph checkpointer on SQLModel tables (SQLite, PostgreSQL, MySQL) that stores each message once.

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
        single_writer: bool = False,
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
        single_writer: one run per thread at a time: a checkpoint of the root graph that does not
            extend the thread's latest one (a second run started while another one writes: a
            double submit) is refused with `ConcurrentRunError`, and so is the rest of that run.
            Without it, two runs at once are both stored, as LangGraph's own savers store them,
            and the transcript keeps each run's turns together. A run forked from an older
            checkpoint (time travel) is refused too while the guard is on, and so is a run started
            on a checkpoint another run still has steps to run after (saved less than
            `RUN_SILENCE`, 10 minutes, ago, with no failed or interrupted task): a run stopped by a
            killed process or a static interrupt is resumed with `None` as input meanwhile.
        """
        super().__init__(serde=serde or default_serializer())
        self._codec_cache = RowCodec(self.serde)
        self._db = _Connections(
            url, busy_timeout, engine_kwargs or {}, cached_threads, connect_timeout, single_writer
        )
        self._sql = _statements(self._db.dialect.name)

    def __enter__(self) -> SQLModelSaver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLModelSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    def _in_conversation_order(
        self, thread_id: str, rows: Sequence[Row[Any]]
    ) -> Plan[builtins.list[Row[Any]]]:
        """The thread's message rows in conversation order (`_transcript_order`): read with the
        tree of its checkpoints and the reference lists of their states."""
        tree = yield Query(self._sql.checkpoint_tree, {"thread_id": thread_id})
        blobs = yield Query(self._sql.message_lists, {"thread_id": thread_id})
        lists = {
            (row.checkpoint_ns, row.channel, row.version): self._decode_refs(
                f"blob {row.channel!r}@{row.version} of thread {thread_id!r} (historykit_blob)", row.data
            ).runs
            for row in blobs
        }
        checkpoints = []
        for row in tree:
            where = f"channel_versions of checkpoint {row.checkpoint_id} of thread {thread_id!r}"
            versions = _parse_json(row.channel_versions, where)
            held = [
                (row.checkpoint_ns, channel, str(version)) for channel, version in sorted(versions.items())
            ]
            checkpoints.append(
                _Checkpoint(row.checkpoint_id, row.parent_checkpoint_id, held, row.checkpoint_ns)
            )
        order = _transcript_order(checkpoints, lists)
        return sorted(rows, key=lambda row: (order(row.seq, row.position), row.seq))

    def _transcript_plan(self, thread_id: str) -> Plan[Transcript | None]:
        thread = yield Query(self._sql.thread_known, {"thread_id": thread_id})
        if not thread:
            return None
        rows = yield Query(self._sql.transcript_messages, {"thread_id": thread_id})
        rows = yield from self._in_conversation_order(thread_id, rows)
        compaction_rows = yield Query(self._sql.transcript_compactions, {"thread_id": thread_id})
        cache = self._db.cache
        known, _, _ = cache.lookup(thread_id, {row.seq for row in rows})
        decoded: builtins.list[tuple[int, BaseMessage, Any, None, bool]] = []
        entries: builtins.list[tuple[int, BaseMessage]] = []
        for row in rows:
            message = known.get(row.seq)
            if message is None:
                message, form = self._decode_message(thread_id, row)
                decoded.append((row.seq, message, form, None, True))
            entries.append((row.seq, message))
        cache.add(thread_id, decoded)
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
        for seq, message in _calls_before_results(entries, markers):
            marker_row = markers.get(seq)
            if marker_row is None:
                originals.append(message)
            else:
                marker = CompactionRow.model_validate(marker_row._mapping).to_marker()
                compactions.append(StoredCompaction(marker=marker, message=message, at=len(originals)))
        return Transcript(thread_id=thread_id, messages=originals, compactions=compactions)
