"""The LangGraph checkpointer protocol of `SQLModelSaver`, as plans: checkpoints, writes, listing,
delta channels and deleting a thread, on the message log (`_saver_messages`) and the saver's tables.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import islice, repeat
from typing import Any, cast

import sqlalchemy as sa
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from sqlalchemy.engine import Row

from historykit.checkpointers._database import (
    CorruptRowError,
    Plan,
    Query,
)
from historykit.checkpointers._message_cache import KnownList
from historykit.checkpointers._message_log import chunks
from historykit.checkpointers._refs import (
    REFS_ENCODING,
    Refs,
    Run,
    RunValues,
    encode_refs,
    expand_runs,
    merge_runs,
    to_runs,
)
from historykit.checkpointers._saver_base import (
    SaverDatabase,
    _Transaction,
)
from historykit.checkpointers._saver_messages import (
    MessagePlans,
)
from historykit.checkpointers._saver_sql import (
    _LIST_PAGE,
    CHECKPOINT_ROWS,
)
from historykit.checkpointers._saver_values import (
    _check_json,
    _configurable,
    _ListQuery,
    _matches,
    _MessageChannel,
    _messages_written,
    _Page,
    _parse_json,
    _position,
    _thread_of,
    _written_value,
)
from historykit.checkpointers._serde import RowCodec
from historykit.checkpointers._versions import loaded_checkpoint, stored_checkpoint, stored_version
from historykit.checkpointers._writer_guard import RUN_SILENCE, has_steps_to_run, saved_within
from historykit.errors import ArgumentTypeError, ConcurrentRunError, InvalidArgumentError, WriteConflictError

__all__ = ["EXPECTED_CHECKPOINT", "CheckpointPlans", "ListPages"]

EXPECTED_CHECKPOINT = "historykit_expected_checkpoint"
"""A `configurable` key: a `put` with it is written only while the thread's latest checkpoint (in its
namespace) is the one it names, else `WriteConflictError` (`HistoryKitMiddleware.compact_thread`
sets it; other savers ignore it)."""


_RUN_KEY = "__pregel_runtime"
"""The `configurable` key LangGraph's Pregel loop adds to a run's config (`CONFIG_KEY_RUNTIME`):
a `get_tuple` with it is a run's first read, not a caller's `get_state`."""


class CheckpointPlans:
    """`BaseCheckpointSaver`'s methods, each written once as a plan that `SaverDatabase.run` or
    `.arun` drives: `put`, `put_writes`, `get_tuple`, `list`, `get_delta_channel_history`,
    `delete_thread`, on the message log (`MessagePlans`) and the saver's tables.

    Example:
        ```python
        checkpoints = CheckpointPlans(base, MessagePlans(base))
        latest = base.run(lambda txn: checkpoints.get_tuple_plan(txn, config), write=False)
        ```
    """

    def __init__(self, base: SaverDatabase, messages: MessagePlans) -> None:
        self._db = base.db
        self._sql = base.sql
        self._base = base
        self._messages = messages

    @property
    def _codec(self) -> RowCodec:
        return self._base.codec

    @contextmanager
    def guarded_put(self, config: RunnableConfig, checkpoint: Checkpoint) -> Iterator[None]:
        """Tell the single-writer guard (when on) that this checkpoint is being stored, and how it
        ended: the writes LangGraph saves for it meanwhile wait for it (`_settle`)."""
        guard = self._db.guard
        if guard is None:
            yield
            return
        thread_id, _, _ = _thread_of(config, "put")
        checkpoint_id = str(checkpoint["id"])
        guard.begin_put(checkpoint_id)
        stored = False
        try:
            yield
            stored = True
        finally:
            guard.end_put(thread_id, checkpoint_id, stored=stored)

    def put_plan(
        self,
        txn: _Transaction,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        thread_id, ns, parent_id = _thread_of(config, "put")
        yield from self._base.check_thread_plan(txn, thread_id)
        yield from self._check_writer_plan(
            txn,
            config,
            thread_id,
            ns,
            parent_id,
            checkpoint["id"],
            starts_run=metadata.get("source") == "input",
        )
        codec = self._codec
        # Versions are stored in historykit's short form (`_versions`): LangGraph was given the long one.
        checkpoint = cast(Checkpoint, stored_checkpoint(checkpoint))
        values = checkpoint["channel_values"]
        body = {key: value for key, value in checkpoint.items() if key != "channel_values"}
        if type(body.get("id")) is str:
            del body["id"]  # the `checkpoint_id` column holds it (see `CheckpointRow.checkpoint`)
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
        # A running graph's step ("loop") holds the objects of the step before, which LangGraph's
        # reducers never edit in place: they are taken by identity. An edit made between runs
        # (`update_state` after editing what `get_state` returned, a new run's input) is found by
        # comparing each object with the form it was stored in.
        verify = metadata.get("source") != "loop"
        for channel, version in new_versions.items():
            if channel not in values:
                continue
            value = values[channel]
            snapshot = isinstance(value, _DeltaSnapshot)
            inner = value.value if snapshot else value
            if type(inner) is list and inner:
                # The head LangGraph handed us last time is known to be messages: check the rest.
                known = cache.known_prefix(thread_id, (ns, channel), inner, verify=verify)
                if all(map(isinstance, islice(inner, len(known.messages), None), repeat(BaseMessage))):
                    message_channels.append(
                        _MessageChannel(channel, stored_version(version), inner, snapshot, known)
                    )
                    continue
            encoding, data = codec.dumps(value)
            blobs.append(self._blob(thread_id, ns, channel, stored_version(version), encoding, data))

        if message_channels:
            stored = yield from self._messages.store_messages_plan(
                txn, thread_id, ns, checkpoint["id"], message_channels, parent_id
            )
            yield from self._messages.record_counts_plan(txn, thread_id, message_channels)
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
    def guarded_target(config: RunnableConfig) -> tuple[str, str, str]:
        thread_id, ns, checkpoint_id = _thread_of(config, "put_writes")
        if checkpoint_id is None:
            raise InvalidArgumentError("put_writes: the config has no configurable 'checkpoint_id'")
        return thread_id, ns, checkpoint_id

    def _check_writer_plan(
        self,
        txn: _Transaction,
        config: RunnableConfig,
        thread_id: str,
        ns: str,
        parent_id: str | None,
        checkpoint_id: str,
        *,
        starts_run: bool = False,
    ) -> Plan[None]:
        """Refuse a checkpoint that does not extend the thread's latest one, when asked to: by the
        single-writer guard (`single_writer=True`: the root graph's checkpoints of one run at a
        time), or by a writer that computed it from a given checkpoint (`EXPECTED_CHECKPOINT` in the
        config: a manual compaction). Run after `SaverDatabase.check_thread_plan`, which holds the thread's
        writers off until the commit (the row lock; SQLite: the file's).

        The guard also refuses a run's first checkpoint (`starts_run`) put on a checkpoint another
        run is still in the middle of: extending the latest checkpoint is not enough when the second
        run started after the first one's step had been saved."""
        expected = _configurable(config, "put").get(EXPECTED_CHECKPOINT)
        guard = self._db.guard if ns == "" else None
        if expected is None and guard is None:
            return
        latest = yield from self._check_expected_plan(config, thread_id, ns)
        if guard is None:
            return
        why = None
        if guard.refused(parent_id) or latest not in (None, parent_id, checkpoint_id):
            why = f"a checkpoint after {parent_id} while its latest is {latest}"
        elif starts_run and parent_id is not None and latest == parent_id:
            running = yield from self._run_in_progress_plan(thread_id, ns, parent_id)
            if running:
                why = (
                    f"a new run on checkpoint {parent_id}, which has steps still to run and was saved "
                    f"less than {RUN_SILENCE:.0f} s ago by a run that neither failed nor was interrupted,"
                )
        if why is not None:
            guard.refuse(thread_id, checkpoint_id, why)
            raise self._refused(thread_id, why)

    def _run_in_progress_plan(self, thread_id: str, ns: str, checkpoint_id: str) -> Plan[bool]:
        """Whether a run is taken to be still working after `checkpoint_id`: LangGraph saved it with
        nodes still to run (`updated_channels` names a trigger), no task of it failed or was
        interrupted (what ends a run early, saved as its writes), and it is recent (a run stopped
        with its process leaves nothing else behind: after `RUN_SILENCE` it is taken as over)."""
        rows = yield Query(
            self._sql.get_checkpoint, {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        )
        if not rows:
            return False
        body = self._codec.loads(rows[0].encoding, rows[0].checkpoint, where=f"checkpoint {checkpoint_id}")
        if not isinstance(body, dict) or not has_steps_to_run(body.get("updated_channels")):
            return False
        if not saved_within(body.get("ts"), RUN_SILENCE):
            return False
        ended = yield Query(
            self._sql.run_ending_writes, {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        )
        return not ended

    def _check_expected_plan(self, config: RunnableConfig, thread_id: str, ns: str) -> Plan[str | None]:
        """The thread's latest checkpoint (in `ns`), after refusing a write computed from another
        one (`EXPECTED_CHECKPOINT`: a manual compaction), or from one a run is finishing a step
        after: its next checkpoint, whose id can be older than the update's, would be hidden."""
        expected = _configurable(config, "put").get(EXPECTED_CHECKPOINT)
        rows = yield Query(self._sql.latest_checkpoint_id, {"thread_id": thread_id, "ns": ns})
        latest: str | None = rows[0].checkpoint_id if rows else None
        if expected is None:
            return latest
        if latest != str(expected):
            raise WriteConflictError(
                f"thread {thread_id!r} moved on from checkpoint {expected} (its latest is now {latest}) "
                "while this update was computed from it: nothing was written; read the state again and retry"
            )
        busy = yield Query(
            self._sql.task_writes_exist, {"thread_id": thread_id, "ns": ns, "checkpoint_id": str(expected)}
        )
        if busy:
            raise WriteConflictError(
                f"thread {thread_id!r} is in the middle of a step after checkpoint {expected} (a run's "
                "nodes wrote against it): nothing was written; read the state again and retry"
            )
        return latest

    def refused_writes(self, config: RunnableConfig) -> ConcurrentRunError:
        """The refusal of a node's writes: its run's checkpoint was refused (LangGraph saves in the
        background, so this is often the error the run raises): it says why."""
        thread_id, _, checkpoint_id = self.guarded_target(config)
        why = self._db.guard.why_refused(thread_id, checkpoint_id) if self._db.guard else None
        return self._refused(
            thread_id, f"writes of a refused run (refused: {why or 'an earlier checkpoint of it'})"
        )

    @staticmethod
    def _refused(thread_id: str, what: str) -> ConcurrentRunError:
        return ConcurrentRunError(
            f"thread {thread_id!r} is being written by another run: {what} was refused by the saver's "
            "single-writer guard (single_writer=True), and nothing of it was stored. Wait for the other "
            "run to finish, then run again (a run forked from an older checkpoint is refused the same way)"
        )

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

    def put_writes_plan(
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
        if EXPECTED_CHECKPOINT in _configurable(config, "put_writes"):
            yield from self._check_expected_plan(config, thread_id, ns)
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
        if logged and not (yield from self._base.check_thread_plan(txn, thread_id, create=False)):
            # The thread was deleted while its run went on: the writes are kept as values, as
            # LangGraph's own savers keep them, and nothing enters the message log, so no message
            # outlives the delete.
            for row_index, _, _, _ in as_refs:
                rows[row_index]["encoding"], rows[row_index]["data"] = self._codec.dumps(writes[row_index][1])
            logged, as_refs = [], []
        if logged:
            without_id: builtins.list[bool] = []
            seqs, _ = yield from self._messages.log_plan(
                txn, thread_id, logged, positions, without_id, written_to=(ns, checkpoint_id)
            )
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

    def get_tuple_plan(self, txn: _Transaction, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        thread_id, ns, checkpoint_id = _thread_of(config, "get_tuple")
        if self._db.guard is not None and ns == "":
            # How a run starts: a run this process refused earlier is no reason to refuse its writes.
            self._db.guard.started(thread_id)
        if checkpoint_id is not None:
            rows = yield Query(
                self._sql.get_checkpoint, {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
            )
        else:
            rows = yield Query(self._sql.latest_checkpoint, {"thread_id": thread_id, "ns": ns})
        if not rows:
            return None
        # A running graph's read (its config carries the run's runtime) resumes from the objects
        # the last run ended with; any other caller (`get_state`, `update_state`) may edit what it
        # gets, and gets objects of its own.
        run = _RUN_KEY in _configurable(config, "get_tuple")
        (loaded,) = yield from self.load_plan(rows, remember="run" if run else "other")
        if thread_id not in self._db.counts_loaded:
            handed = [
                message
                for value in loaded.checkpoint["channel_values"].values()
                if type(value) is builtins.list
                for message in value
                if isinstance(message, BaseMessage)
            ]
            yield from self._messages.restore_counts_plan(txn, thread_id, handed)
        return loaded

    def list_query(
        self, config: RunnableConfig | None, filter: Any, before: RunnableConfig | None, limit: Any
    ) -> _ListQuery:
        """Validate `list`'s arguments and turn them into SQL conditions (and a Python filter for
        the values SQLite's JSON functions cannot compare)."""
        conditions: builtins.list[sa.ColumnElement[bool]] = []
        # `None`, `{}` and a config without a `configurable` list every thread, as `InMemorySaver`
        # does (LangGraph's Agent Server and the MySQL savers' suites call `list({})`).
        if config is not None and not isinstance(config, Mapping):
            raise ArgumentTypeError(
                f"list: expected a RunnableConfig dict or None, got {type(config).__name__}"
            )
        if config and config.get("configurable") is not None:
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

    def list_pages(
        self, config: RunnableConfig | None, filter: Any, before: RunnableConfig | None, limit: Any
    ) -> ListPages:
        """Where a `list` call is (its arguments checked): the sync and the async `list` only run
        the plan of each page it gives."""
        return ListPages(self, self.list_query(config, filter, before, limit))

    def list_page(
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
        loaded = (yield from self.load_plan(rows)) if rows else []
        if remaining is not None:
            loaded = loaded[:remaining]
        if not fetched:
            return loaded, cursor, False
        last = fetched[-1]
        return loaded, (last.checkpoint_id, last.thread_id, last.checkpoint_ns), len(fetched) == size

    def load_plan(
        self, rows: Sequence[Row[Any]], *, remember: str = ""
    ) -> Plan[builtins.list[CheckpointTuple]]:
        """Rebuild checkpoint tuples from checkpoint rows: their blobs, writes and messages.

        With `remember="run"` (a run's read), the channel's last list is handed out as the runs'
        own (`MessageCache.read_list`), or the list read is remembered so; with `"other"` (another
        `get_tuple`), the list read is remembered as the caller's. Either way the `put`s that
        follow recognize it without a lookup per message. Every read but a run's gets objects of
        its own, checked against the forms they were stored in (`MessageCache.lookup`).
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
            for chunk in chunks(pairs):
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
            for id_chunk in chunks([row.checkpoint_id for row in group]):
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
                decoded = self._messages.refs_of(
                    f"blob {key[2]!r}@{key[3]} of thread {key[0]!r} (historykit_blob)", data
                )
                refs[key] = decoded
                known = (
                    self._db.cache.read_list(key[0], (key[1], key[2]), decoded.runs)
                    if remember == "run"
                    else None
                )
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
                        self._messages.refs_of(where, w.data)
                    )
                    needed[thread_id].update(expand_runs(decoded.runs))
        messages, forms = (yield from self._messages.messages_plan(needed)) if needed else ({}, {})
        sliced = {thread_id: RunValues(merged, messages[thread_id]) for thread_id, merged in ranges.items()}
        cache = self._db.cache

        out: builtins.list[CheckpointTuple] = []
        for row in rows:
            thread_id, ns, checkpoint_id = row.thread_id, row.checkpoint_ns, row.checkpoint_id
            where = f"checkpoint {checkpoint_id} of thread {thread_id!r} (historykit_checkpoint)"
            body = codec.loads(row.encoding, row.checkpoint, where=where)
            if not isinstance(body, dict):
                raise CorruptRowError(f"{where} decodes to a {type(body).__name__} that is not a checkpoint")
            body.setdefault("id", checkpoint_id)
            body.setdefault("channel_versions", dict(versions[(thread_id, ns, checkpoint_id)]))
            body = loaded_checkpoint(body)
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
                                    list(values),
                                    seqs,
                                    decoded.runs,
                                    [thread_forms[seq] for seq in seqs],
                                    len(values) if remember == "run" else 0,
                                )
                                cache.remember_list(thread_id, (ns, channel), read, read=remember)
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

    def delta_history_plan(
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
                decoded = self._messages.refs_of(
                    f"blob {name!r} (seed) of thread {thread_id!r} (historykit_blob)", row.data
                )
                refs[name] = (decoded, expand_runs(decoded.runs))
        write_refs: dict[tuple[str, int, str], Refs] = {}
        for name, channel_rows in write_rows.items():
            for r in channel_rows:
                if r.encoding == REFS_ENCODING:
                    where = f"write {r.task_id}/{r.idx} on {name!r} of thread {thread_id!r}"
                    write_refs[(r.task_id, r.idx, r.checkpoint_id)] = self._messages.refs_of(where, r.data)
        needed = {seq for _, seqs in refs.values() for seq in seqs} | {
            seq for decoded in write_refs.values() for seq in expand_runs(decoded.runs)
        }
        thread_messages: dict[int, BaseMessage] = {}
        if needed:
            thread_messages = (yield from self._messages.messages_plan({thread_id: needed}))[0][thread_id]

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

    def delete_thread_plan(self, txn: _Transaction, thread_id: str) -> Plan[None]:
        if self._sql.dialect.locks_rows:
            # Waits for the writers that hold the thread (`SaverDatabase.check_thread_plan`), so none of their
            # rows is left referring to a message deleted here.
            yield Query(self._sql.lock_thread_exclusive, {"thread_id": thread_id})
        for statement in self._sql.delete_thread:
            yield Query(statement, {"thread_id": thread_id})
        txn.after_commit(lambda: self._base.forget(thread_id, deleted=True))


class ListPages:
    """A `list` call page by page: the plan of the next page (`None` once done), and what reading
    a page moves it to (`took`)."""

    def __init__(self, checkpoints: CheckpointPlans, query: _ListQuery) -> None:
        self._checkpoints = checkpoints
        self._query = query
        self._cursor: tuple[str, str, str] | None = None
        self._remaining = query.limit
        self._done = False

    def next_plan(self) -> Callable[[_Transaction], Plan[_Page]] | None:
        if self._done or (self._remaining is not None and self._remaining <= 0):
            return None
        return self._checkpoints.list_page(self._query, self._cursor, self._remaining)

    def took(self, page: _Page) -> builtins.list[CheckpointTuple]:
        """The page's tuples, after moving past them."""
        items, self._cursor, full = page
        if self._remaining is not None:
            self._remaining -= len(items)
        self._done = not full
        return items
