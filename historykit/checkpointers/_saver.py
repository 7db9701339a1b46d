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

The class is the public face of collaborators, one module each: `_saver_base` (`SaverDatabase`:
connections, caches and the plan runners), `_saver_sql` (statements per dialect),
`_saver_messages` (`MessagePlans`: the message log's LangChain side, token counts, the
transcript), `_langgraph_protocol` (`CheckpointPlans`: the checkpointer protocol) and
`_saver_maintenance` (`MaintenancePlans`: pruning, copying, garbage collection). Each public
method builds a plan from one of them and runs it, sync or async.

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

import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.engine import URL

from historykit.checkpointers._database import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
)
from historykit.checkpointers._langgraph_protocol import CheckpointPlans
from historykit.checkpointers._saver_base import SaverDatabase, _Connections
from historykit.checkpointers._saver_maintenance import MaintenancePlans, PruneStrategy
from historykit.checkpointers._saver_messages import MessagePlans
from historykit.checkpointers._saver_sql import (
    FRAMEWORK,
    _statements,
)
from historykit.checkpointers._saver_values import (
    _Done,
    _key,
    _with_view,
)
from historykit.checkpointers._serde import default_serializer
from historykit.checkpointers._transcript import Transcript
from historykit.checkpointers._versions import new_version

__all__ = ["FRAMEWORK", "PruneStrategy", "SQLModelSaver"]


class SQLModelSaver(BaseCheckpointSaver[str]):
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
        self._db = _Connections(
            url, busy_timeout, engine_kwargs or {}, cached_threads, connect_timeout, single_writer
        )
        self._assemble()

    def _assemble(self) -> None:
        """Build the collaborators on this instance's connections; each follows this instance's
        `serde` (a `with_allowlist` clone gets its own, sharing the connections and caches)."""
        self._base = SaverDatabase(self._db, _statements(self._db.dialect.name), lambda: self.serde)
        self._messages = MessagePlans(self._base)
        self._checkpoints = CheckpointPlans(self._base, self._messages)
        self._maintenance = MaintenancePlans(self._base)

    def __copy__(self) -> SQLModelSaver:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._assemble()
        return clone

    def __enter__(self) -> SQLModelSaver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SQLModelSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """`"<counter>.<random>"`: ordered, and distinct on two branches forked from one checkpoint.

        Zero-padded to the official savers' width (32 digits), which LangGraph's Agent Server
        writes too, so versions of either compare as strings; stored shortened (`_versions`).
        """
        if current is None:
            counter = 0
        elif isinstance(current, (int, float)):
            counter = int(current)
        else:
            counter = int(str(current).split(".")[0])
        return new_version(counter + 1, random.getrandbits(32))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with self._checkpoints.guarded_put(config, checkpoint):
            return self._base.run(
                lambda txn: self._checkpoints.put_plan(txn, config, checkpoint, metadata, new_versions),
                write=True,
                thread_id=_writing(config),
            )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with self._checkpoints.guarded_put(config, checkpoint):
            return await self._base.arun(
                lambda txn: self._checkpoints.put_plan(txn, config, checkpoint, metadata, new_versions),
                write=True,
                thread_id=_writing(config),
            )

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        if writes:
            if self._db.guard is not None and not self._base.settle(
                *self._checkpoints.guarded_target(config)
            ):
                raise self._checkpoints.refused_writes(config)
            self._base.run(
                lambda txn: self._checkpoints.put_writes_plan(txn, config, writes, task_id, task_path),
                write=True,
                thread_id=_writing(config),
            )

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        if writes:
            if self._db.guard is not None and not await self._base.asettle(
                *self._checkpoints.guarded_target(config)
            ):
                raise self._checkpoints.refused_writes(config)
            await self._base.arun(
                lambda txn: self._checkpoints.put_writes_plan(txn, config, writes, task_id, task_path),
                write=True,
                thread_id=_writing(config),
            )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._base.run(lambda txn: self._checkpoints.get_tuple_plan(txn, config), write=False)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._base.arun(lambda txn: self._checkpoints.get_tuple_plan(txn, config), write=False)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        pages = self._checkpoints.list_pages(config, filter, before, limit)
        while (build := pages.next_plan()) is not None:
            yield from pages.took(self._base.run(build, write=False))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self._checkpoints.list_pages(config, filter, before, limit)
        while (build := pages.next_plan()) is not None:
            for item in pages.took(await self._base.arun(build, write=False)):
                yield item

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._base.run(lambda txn: self._checkpoints.delta_history_plan(config, channels), write=False)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return await self._base.arun(
            lambda txn: self._checkpoints.delta_history_plan(config, channels), write=False
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes, blobs, messages and compaction markers."""
        self._base.run(
            lambda txn: self._checkpoints.delete_thread_plan(
                txn, _key(thread_id, "thread id", "delete_thread")
            ),
            write=True,
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self._base.arun(
            lambda txn: self._checkpoints.delete_thread_plan(
                txn, _key(thread_id, "thread id", "delete_thread")
            ),
            write=True,
        )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob, the message log and the markers to a new thread."""
        self._base.run(
            lambda txn: self._maintenance.copy_thread_plan(txn, str(source_thread_id), str(target_thread_id)),
            write=True,
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._base.arun(
            lambda txn: self._maintenance.copy_thread_plan(txn, str(source_thread_id), str(target_thread_id)),
            write=True,
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) made by these runs; messages stay in the log."""
        ids = self._maintenance.run_ids(run_ids)
        if ids:
            self._base.run(lambda txn: self._maintenance.delete_for_runs_plan(ids), write=True)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = self._maintenance.run_ids(run_ids)
        if ids:
            await self._base.arun(lambda txn: self._maintenance.delete_for_runs_plan(ids), write=True)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        """Delete old checkpoints of these threads; their messages stay in the log (`transcript`).

        Strategies: `keep_latest` keeps the newest checkpoint of each namespace; `keep_last` keeps
        the `keep_last` newest; `delete` (or `delete_all`, what LangGraph's Agent Server asks for)
        removes every checkpoint, write and blob. With a
        `DeltaChannel`, the ancestors (and writes) a kept checkpoint needs to rebuild its state,
        back to the nearest stored snapshot, are kept too.
        """
        keep, ids = self._maintenance.prune_args(thread_ids, strategy, keep_last)
        for thread_id in ids:
            self._base.run(lambda txn, t=thread_id: self._maintenance.prune_plan(t, keep), write=True)  # type: ignore[misc]

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        keep, ids = self._maintenance.prune_args(thread_ids, strategy, keep_last)
        for thread_id in ids:
            await self._base.arun(lambda txn, t=thread_id: self._maintenance.prune_plan(t, keep), write=True)  # type: ignore[misc]

    def transcript(self, thread_id: str) -> Transcript | None:
        """The thread's original messages in first-seen order, every compaction made over them (with
        the message it wrote), and the view: the `messages` of its latest checkpoint (`Transcript`).
        `None` for a thread the saver does not have, as `SQLModelConversationStore.transcript`."""
        key = _key(thread_id, "thread id", "transcript")
        transcript = self._base.run(lambda txn: self._messages.transcript_plan(key), write=False)
        if transcript is None:
            return None
        return _with_view(transcript, self.get_tuple({"configurable": {"thread_id": key}}))

    async def atranscript(self, thread_id: str) -> Transcript | None:
        key = _key(thread_id, "thread id", "transcript")
        transcript = await self._base.arun(lambda txn: self._messages.transcript_plan(key), write=False)
        if transcript is None:
            return None
        return _with_view(transcript, await self.aget_tuple({"configurable": {"thread_id": key}}))


def _writing(config: RunnableConfig) -> str | None:
    """The thread a `put` or `put_writes` writes to, for its turn among the thread's writers
    (`_write_order`); `None` when the config names none (the write then fails, saying so)."""
    thread_id = (config.get("configurable") or {}).get("thread_id")
    return None if thread_id is None else str(thread_id)
