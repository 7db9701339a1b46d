"""Pruning, copying and garbage collection of the LangGraph saver's checkpoints."""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sqlalchemy.engine import Row

from historykit.checkpointers._database import (
    Plan,
    Query,
)
from historykit.checkpointers._message_log import chunks
from historykit.checkpointers._saver_base import (
    SaverDatabase,
    _Transaction,
)
from historykit.checkpointers._saver_sql import (
    FRAMEWORK,
)
from historykit.checkpointers._saver_values import (
    _key,
    _parse_json,
)
from historykit.checkpointers._schema import (
    utcnow,
)
from historykit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["MaintenancePlans", "PruneStrategy"]


PruneStrategy = Literal["keep_latest", "keep_last", "delete", "delete_all"]
"""What `prune` keeps of each thread (`delete_all`, LangGraph's Agent Server's name, is `delete`)."""


class MaintenancePlans:
    """The extended operations: `copy_thread`, `delete_for_runs` and `prune`, and the garbage
    collection of the blobs only deleted checkpoints used. Messages stay in the log.

    Example:
        ```python
        maintenance = MaintenancePlans(base)
        base.run(lambda txn: maintenance.prune_plan("t1", keep=10), write=True)
        ```
    """

    def __init__(self, base: SaverDatabase) -> None:
        self._sql = base.sql

    def copy_thread_plan(self, txn: _Transaction, source: str, target: str) -> Plan[None]:
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

    @staticmethod
    def run_ids(run_ids: Sequence[str]) -> builtins.list[str]:
        if isinstance(run_ids, (str, bytes)):
            raise ArgumentTypeError("delete_for_runs expects a sequence of run ids, not a single string")
        return [str(run_id) for run_id in run_ids]

    def delete_for_runs_plan(self, run_ids: builtins.list[str]) -> Plan[None]:
        doomed: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
        for chunk in chunks(run_ids):
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
        for chunk in chunks(ids):
            params = {"thread_id": thread_id, "ns": ns, "ids": list(chunk)}
            yield Query(self._sql.delete_writes_of, params)
            yield Query(self._sql.delete_checkpoints_of, params)
        kept_rows = yield Query(self._sql.ns_checkpoints, {"thread_id": thread_id, "ns": ns})
        yield from self._collect_garbage_plan(thread_id, ns, deleted, kept_rows)

    def _collect_garbage_plan(
        self, thread_id: str, ns: str, deleted: Mapping[str, Mapping[str, str]], kept_rows: Sequence[Row[Any]]
    ) -> Plan[None]:
        orphans = [row.checkpoint_id for row in kept_rows if row.parent_checkpoint_id in deleted]
        for chunk in chunks(orphans):
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
            for chunk in chunks(sorted(versions)):
                yield Query(
                    self._sql.delete_blobs_of,
                    {"thread_id": thread_id, "ns": ns, "channel": channel, "versions": list(chunk)},
                )

    @staticmethod
    def prune_args(
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
        elif strategy in ("delete", "delete_all"):
            if keep_last is not None:
                raise InvalidArgumentError(
                    f"prune(strategy={strategy!r}) deletes every checkpoint; keep_last does not apply"
                )
            keep = None
        else:
            raise InvalidArgumentError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest', 'keep_last', 'delete' "
                "or 'delete_all'"
            )
        return keep, list(dict.fromkeys(_key(t, "thread id", "prune") for t in thread_ids))

    def prune_plan(self, thread_id: str, keep: int | None) -> Plan[None]:
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
            for chunk in chunks(sorted(deleted)):
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
