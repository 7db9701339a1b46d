"""The LangGraph saver's statements, built once per SQL dialect (plans only bind parameters).

What differs between backends comes from the dialect (`_dialect`), the message log's statements
from `_message_log`; the rest is SQLAlchemy Core every backend reads alike, plus the one recursive
query `get_delta_channel_history` walks a checkpoint's ancestors with.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from langgraph.checkpoint.base import WRITES_IDX_MAP

from historykit.checkpointers._dialect import BINARY_RESULTS, dialect_of
from historykit.checkpointers._message_log import message_log
from historykit.checkpointers._refs import REFS_ENCODING
from historykit.checkpointers._schema import (
    CHECKPOINTS,
    CORE,
    BlobRow,
    CheckpointRow,
    CompactionRow,
    MessageRow,
    ThreadRow,
    WriteRow,
)

__all__ = ["FRAMEWORK"]


FRAMEWORK = "langgraph"
"""`framework` of the rows this saver writes in the shared tables."""

T = TypeVar("T")

_UPDATE_TASK = "__interrupt__"
"""The task path `update_state` saves its writes under (LangGraph's private `INTERRUPT` name)."""
_RUN_ENDING = ("__error__", "__interrupt__")
"""The write channels of a failed and of an interrupted task (LangGraph's `ERROR` and `INTERRUPT`,
keys of `WRITES_IDX_MAP`, private names since 1.0): a run that saved one has stopped."""

THREADS = ThreadRow.__table__  # type: ignore[attr-defined]
MESSAGES = MessageRow.__table__  # type: ignore[attr-defined]
COMPACTIONS = CompactionRow.__table__  # type: ignore[attr-defined]
CHECKPOINT_ROWS = CheckpointRow.__table__  # type: ignore[attr-defined]
BLOBS = BlobRow.__table__  # type: ignore[attr-defined]
WRITES = WriteRow.__table__  # type: ignore[attr-defined]

_COMPONENTS = (CORE, CHECKPOINTS)

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
        # What a write needs to know of the log before adding to it, in one round trip: the rows
        # holding its messages (by hash), the rows holding them in their other form (by hash
        # without the id: `_match_other_form_plan`), and the log's last number (`top`, its own row).
        # Read after the thread's lock, so the number is the one this writer may continue from.
        # Each lookup is a branch of its own: joined by OR, SQLite searches the thread's whole log
        # (one index for both), and the write's cost grows with the thread (9.7 ms a LangGraph
        # step at step 1,500, 0.2 ms at step 50). A row found by both comes back twice.
        m = MESSAGES.c
        found = (sa.literal(False).label("top"), m.seq, m.hash, m.anonymous_hash, m.native_id, m.position)
        self.find_logged = sa.union_all(
            sa.select(*found).where(m.thread_id == bp("thread_id"), m.hash.in_(bp("hashes", expanding=True))),
            sa.select(*found).where(
                m.thread_id == bp("thread_id"),
                m.framework == FRAMEWORK,
                m.anonymous_hash.in_(bp("anonymous", expanding=True)),
            ),
            sa.select(
                sa.literal(True).label("top"),
                sa.func.max(m.seq),
                sa.null(),
                sa.null(),
                sa.null(),
                sa.null(),
            ).where(m.thread_id == bp("thread_id")),
        )
        # UPDATE reserves the column names as bind names: these use their own.
        self.complete_message = (
            sa.update(MESSAGES)
            .where(MESSAGES.c.thread_id == bp("t"), MESSAGES.c.seq == bp("s"), MESSAGES.c.native_id.is_(None))
            .values(hash=bp("h"), encoding=bp("e"), data=bp("d"), native_id=bp("n"))
        )
        self.set_position = (
            sa.update(MESSAGES)
            .where(MESSAGES.c.thread_id == bp("t"), MESSAGES.c.seq == bp("s"))
            .values(position=bp("p"))
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
        self.checkpoint_exists = sa.select(c_id).where(
            c_thread == bp("thread_id"), c_ns == bp("ns"), c_id == bp("checkpoint_id")
        )
        self.latest_checkpoint_id = (
            sa.select(c_id)
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

        def a_write_of_the_checkpoint(*where: sa.ColumnElement[bool]) -> sa.Select[Any]:
            return (
                sa.select(WRITES.c.task_id)
                .where(
                    WRITES.c.thread_id == bp("thread_id"),
                    WRITES.c.checkpoint_ns == bp("ns"),
                    WRITES.c.checkpoint_id == bp("checkpoint_id"),
                    *where,
                )
                .limit(1)
            )

        # A node's writes against a checkpoint: a run is in the middle of the step after it.
        # (`update_state` saves its own writes there too, under the `__interrupt__` task path.)
        self.task_writes_exist = a_write_of_the_checkpoint(
            WRITES.c.channel.not_in(list(WRITES_IDX_MAP)), WRITES.c.task_path.not_like(f"~{_UPDATE_TASK}%")
        )
        # What ends a run early, saved as writes against its latest checkpoint: a failed or an
        # interrupted task (the single-writer guard lets a new run start on such a checkpoint).
        self.run_ending_writes = a_write_of_the_checkpoint(WRITES.c.channel.in_(_RUN_ENDING))
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
            sa.select(MESSAGES.c.seq, MESSAGES.c.encoding, MESSAGES.c.data, MESSAGES.c.position)
            .where(MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.framework == FRAMEWORK)
            .order_by(MESSAGES.c.position, MESSAGES.c.seq)
        )
        self.checkpoint_tree = sa.select(
            c_ns, c_id, CHECKPOINT_ROWS.c.parent_checkpoint_id, CHECKPOINT_ROWS.c.channel_versions
        ).where(c_thread == bp("thread_id"))
        self.message_lists = sa.select(
            BLOBS.c.checkpoint_ns, BLOBS.c.channel, BLOBS.c.version, BLOBS.c.data
        ).where(BLOBS.c.thread_id == bp("thread_id"), BLOBS.c.encoding == REFS_ENCODING)
        self.transcript_compactions = (
            sa.select(COMPACTIONS)
            .where(COMPACTIONS.c.thread_id == bp("thread_id"), COMPACTIONS.c.framework == FRAMEWORK)
            .order_by(COMPACTIONS.c.summary_seq, COMPACTIONS.c.id)
        )
        self.messages_in = (
            sa.select(MESSAGES.c.seq, MESSAGES.c.encoding, MESSAGES.c.data)
            .where(MESSAGES.c.thread_id == bp("thread_id"), MESSAGES.c.seq.in_(bp("seqs", expanding=True)))
            .execution_options(**{BINARY_RESULTS: True})  # a long thread's rows: most of a read's bytes
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
        statement = selects[0] if len(selects) == 1 else sa.union_all(*selects)
        return statement.execution_options(**{BINARY_RESULTS: True})

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
