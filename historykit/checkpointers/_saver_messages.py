"""The LangGraph saver's side of the message log: LangChain messages in, numbers out, and back."""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from langchain_core.messages import BaseMessage
from sqlalchemy.engine import Row

from historykit._messages import COMPACTION_KEY, EDIT_KEY, CompactionMarker
from historykit._tokens import counts_noted_since, remember_counts
from historykit.checkpointers._database import (
    CorruptRowError,
    Plan,
    Query,
)
from historykit.checkpointers._message_cache import KnownList, StoredForm, snapshot
from historykit.checkpointers._message_form import MESSAGE_CLASSES
from historykit.checkpointers._message_log import LoggedMessage, LogTop, chunks
from historykit.checkpointers._refs import (
    Refs,
    Run,
    decode_refs,
    extend_runs,
    to_runs,
)
from historykit.checkpointers._saver_base import (
    SaverDatabase,
    _exists,
    _Transaction,
)
from historykit.checkpointers._saver_sql import (
    _MAX_RUNS_PER_QUERY,
    FRAMEWORK,
)
from historykit.checkpointers._saver_values import (
    _calls_before_results,
    _Checkpoint,
    _Found,
    _MessageChannel,
    _parse_json,
    _Pending,
    _position,
    _transcript_order,
)
from historykit.checkpointers._schema import CompactionRow
from historykit.checkpointers._serde import RowCodec
from historykit.checkpointers._transcript import StoredCompaction, Transcript
from historykit.errors import InvalidArgumentError

__all__ = ["MessagePlans"]


class MessagePlans:
    """How the LangGraph saver puts LangChain messages in the shared message log (`_message_log`)
    and reads them back: each message once, recognized without serializing it again when the cache
    knows it, its marker when a compaction wrote it, the token counts the process made of it, and
    the thread's whole transcript.

    Example:
        ```python
        messages = MessagePlans(base)
        seqs, forms = base.run(lambda txn: messages.log_plan(txn, "t1", [message], [position]), write=True)
        ```
    """

    def __init__(self, base: SaverDatabase) -> None:
        self._db = base.db
        self._sql = base.sql
        self._base = base

    @property
    def _codec(self) -> RowCodec:
        return self._base.codec

    def store_messages_plan(
        self,
        txn: _Transaction,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        channels: Sequence[_MessageChannel],
        parent_id: str | None = None,
    ) -> Plan[builtins.list[builtins.list[Run]]]:
        """Put every message of these lists in the thread's log (once); return each list's runs.

        The head of a list that is the very list stored last time costs nothing; the rest goes
        through `log_plan`. `parent_id`: the checkpoint this one follows.
        """
        cache = self._db.cache
        tail_seqs: builtins.list[tuple[builtins.list[int], builtins.list[Any]]] = []
        for item in channels:
            start = len(item.known.messages)
            tail = item.messages[start:]
            positions = [_position(checkpoint_id, 0, ns, item.channel, start + i) for i in range(len(tail))]
            tail_seqs.append(
                (yield from self.log_plan(txn, thread_id, tail, positions, parent=(ns, parent_id)))
                if tail
                else ([], [])
            )
        out: builtins.list[builtins.list[Run]] = []
        remembered: builtins.list[tuple[tuple[str, str], KnownList]] = []
        for item, (resolved, forms) in zip(channels, tail_seqs, strict=True):
            runs = extend_runs(item.known.runs, resolved)
            out.append(runs)
            if None not in forms:  # a message that cannot be copied is never taken as known
                known = KnownList(
                    list(item.messages),
                    item.known.seqs + resolved,
                    runs,
                    item.known.forms + forms,
                    item.known.shared,
                )
                remembered.append(((ns, item.channel), known))

        def remember() -> None:
            for key, known in remembered:
                cache.remember_list(thread_id, key, known)

        txn.after_commit(remember)
        return out

    def log_plan(
        self,
        txn: _Transaction,
        thread_id: str,
        messages: Sequence[BaseMessage],
        positions: Sequence[str],
        without_id: builtins.list[bool] | None = None,
        written_to: tuple[str, str] | None = None,
        parent: tuple[str, str | None] | None = None,
    ) -> Plan[tuple[builtins.list[int], builtins.list[Any]]]:
        """The log number of each message, adding to the log the ones it lacks (at `positions` of
        the transcript), with the private copy of each message's stored form (`None` for one that
        cannot be copied); `without_id` learns which messages had no id as they were stored.
        `written_to`: `(ns, checkpoint id)` of the node's writes the messages come from; without
        it, the messages are one channel's list of a checkpoint, following `parent` (`(ns, id)` of
        the checkpoint before it).

        Objects the cache knows, unchanged, cost a lookup; the others are serialized and hashed,
        and looked up in (or added to) the log.
        """
        cache = self._db.cache
        hits = cache.seqs_of(thread_id, messages)
        seqs: builtins.list[int] = [0] * len(messages)
        ids: builtins.list[str | None] = [None] * len(messages)
        forms: builtins.list[Any] = [None] * len(messages)
        pending: dict[str, _Pending] = {}
        unknown: builtins.list[tuple[int, str]] = []
        lower: dict[int, str] = {}  # seq -> an earlier position than the one it is known at
        for i, hit in enumerate(hits):
            if hit is not None:
                seqs[i], ids[i], forms[i] = hit.seq, hit.message_id, hit.form
                if hit.position is None or positions[i] < hit.position:
                    lower[seqs[i]] = min(positions[i], lower.get(seqs[i], positions[i]))
                continue
            message = messages[i]
            form, message_id, encoding, data, digest = self._serialize(message)
            ids[i], forms[i] = message_id, form
            stored = form if form is not None else message
            if digest in pending:
                pending[digest] = pending[digest]._replace(
                    position=min(pending[digest].position, positions[i])
                )
            else:
                anonymous = digest
                if message_id is not None:
                    anonymous = self._codec.message_digest(stored.model_copy(update={"id": None}))
                pending[digest] = _Pending(encoding, data, stored, message_id, positions[i], anonymous)
            unknown.append((i, digest))
        found: dict[str, _Found] = {}
        if pending:
            found = yield from self._append_to_log_plan(thread_id, pending)
            for i, digest in unknown:
                seqs[i], stored_position, _ = found[digest]
                if stored_position is None or positions[i] < stored_position:
                    lower[seqs[i]] = min(positions[i], lower.get(seqs[i], positions[i]))
        stored = [hit.position if hit is not None else None for hit in hits]  # where each is now
        for i, digest in unknown:
            stored[i] = found[digest].position
        if lower and written_to is not None:
            placed = {seq for seq, at in zip(seqs, stored, strict=True) if at is not None}
            ns, checkpoint_id = written_to
            params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
            if placed & lower.keys() and not (yield from _exists(self._sql.checkpoint_exists, params)):
                # Writes of a checkpoint that is gone: the thread was deleted under the run, and
                # the run's next checkpoint logged its state again. They move no message before it.
                lower = {seq: at for seq, at in lower.items() if seq not in placed}
        moved: dict[int, str] = {}
        if written_to is None:
            # A channel's list (the writes of a step are several lists at once) of a checkpoint
            # with no parent or whose parent is gone: the thread was deleted under the run (see
            # `_in_list_order`). After a parent that exists, the log keeps the order the thread
            # first had each message: a message edited in place is new where the edit was made,
            # after the messages it precedes.
            moved = _in_list_order(
                seqs,
                positions,
                [lower.get(seq, at) for seq, at in zip(seqs, stored, strict=True)],
                [_is_original(message) for message in messages],
            )
            if moved and parent is not None and parent[1] is not None:
                params = {"thread_id": thread_id, "ns": parent[0], "checkpoint_id": parent[1]}
                if (yield from _exists(self._sql.checkpoint_exists, params)):
                    moved = {}
        for seq in moved:
            lower.pop(seq, None)
        if lower:
            # A message first logged from a later write (they are saved concurrently) moves up to
            # the earliest place it had.
            yield Query(
                self._sql.lower_position,
                [{"t": thread_id, "s": seq, "p": position} for seq, position in lower.items()],
            )
        if moved:
            yield Query(
                self._sql.set_position, [{"t": thread_id, "s": seq, "p": at} for seq, at in moved.items()]
            )
        lower.update(moved)
        learned = [
            (seqs[i], messages[i], forms[i], lower.get(seqs[i], found[digest].position), found[digest].same)
            for i, digest in unknown
        ]
        learned += [
            (seqs[i], messages[i], forms[i], lower[seqs[i]], False)
            for i, hit in enumerate(hits)
            if hit is not None and seqs[i] in lower
        ]
        if learned:
            txn.after_commit(lambda: cache.add(thread_id, learned, written=True))
        if without_id is not None:
            without_id[:] = [message_id is None for message_id in ids]
        return seqs, forms

    def _serialize(self, message: BaseMessage) -> tuple[Any, str | None, str, bytes, str]:
        """`(form, id, encoding, data, hash)` of a message as one consistent form, `form` being a
        private copy of the message as serialized (what the cache compares it with later; `None`
        when the message cannot be copied).

        The serialized copy is the message the log holds: LangGraph may give the message an id
        (on this very object, from another thread) while we copy it, and the caller may change it
        later; the copy does not move.
        """
        packed = self._codec.dumps_message(message)
        if packed is not None:  # one picture of the message, and its form decoded from it
            form, encoding, data, digest = packed
            return form, form.id, encoding, data, digest
        form = snapshot(message)
        if form is None:  # cannot be copied: serialize the object itself, as one consistent form
            while True:
                message_id = message.id
                encoding, data, digest = self._codec.dumps_hashed(message)
                if message.id == message_id:
                    return None, message_id, encoding, data, digest
        encoding, data, digest = self._codec.dumps_hashed(form)
        return form, form.id, encoding, data, digest

    def _append_to_log_plan(self, thread_id: str, pending: Mapping[str, _Pending]) -> Plan[dict[str, _Found]]:
        """Where each hashed message is in the log, adding the ones the log lacks (with their
        markers)."""
        # Numbers are allocated per thread: on a server, concurrent writers of one thread take
        # turns on the thread row, locked by `SaverDatabase.check_thread_plan` at the start of the write.
        found: dict[str, _Found] = {}
        others: builtins.list[Row[Any]] = []
        top = LogTop(None)
        seen: set[int] = set()
        for chunk in chunks(builtins.list(pending)):
            rows = yield Query(
                self._sql.find_logged,
                {
                    "thread_id": thread_id,
                    "hashes": builtins.list(chunk),
                    "anonymous": sorted({pending[digest].anonymous for digest in chunk}),
                },
            )
            for row in rows:
                if row.top:
                    top.seq = row.seq
                    continue
                if row.seq in seen:
                    continue  # found by its hash and by its anonymous hash
                seen.add(row.seq)
                if row.hash in pending:
                    found[row.hash] = _Found(row.seq, row.position)
                others.append(row)
        new = [digest for digest in pending if digest not in found]
        inherited: dict[str, str] = {}
        if new:
            inherited = yield from self._match_other_form_plan(thread_id, pending, new, found, others)
            new = [digest for digest in new if digest not in found]
        if not new:
            return found
        logged: builtins.list[LoggedMessage] = []
        for digest in new:
            encoding, data, message, message_id, position, anonymous = pending[digest]
            logged.append(
                LoggedMessage(
                    hash=digest,
                    kind=str(message.type),
                    encoding=encoding,
                    data=data,
                    native_id=message_id,
                    position=min(position, inherited.get(digest, position)),
                    anonymous_hash=anonymous,
                    marker=self._marker_of(message, thread_id),
                )
            )
        seqs = yield from self._sql.log.append_plan(thread_id, FRAMEWORK, logged, top=top)
        for seq, entry in zip(seqs, logged, strict=True):
            found[entry.hash] = _Found(seq, entry.position)
        return found

    def _match_other_form_plan(
        self,
        thread_id: str,
        pending: Mapping[str, _Pending],
        new: Sequence[str],
        found: dict[str, _Found],
        rows: Sequence[Row[Any]],
    ) -> Plan[dict[str, str]]:
        """Find the messages logged in their other form: without the id they have now, or with
        the id they do not have yet.

        A message is logged when the write that carries it is saved, as the node returned it;
        LangGraph's `add_messages` gives an id to a message that lacks one as it enters the state,
        on the same object, while writes are saved from other threads. So a message can reach the
        log without its id first (its row is then completed in place, keeping its number and its
        earlier position), or with it first (the id-less form then refers to that row). Either
        way the transcript holds it once, and a write still reads back exactly as written: its
        references say which messages had no id (`Refs.without_id`), and those lose it on reading,
        so replaying the write gives them new ids as the original run did, and two equal messages
        of one write stay two. (The second one then gets a row of its own, at the write's
        position: returned, `{hash: position}`, for the rows to add.)
        """
        by_anonymous: dict[str, builtins.list[str]] = defaultdict(list)
        for digest in new:
            by_anonymous[pending[digest].anonymous].append(digest)
        completions: dict[str, int] = {}
        taken: set[int] = set()
        inherited: dict[str, str] = {}
        for row in sorted(rows, key=lambda r: r.seq):
            for digest in by_anonymous.get(row.anonymous_hash, ()):
                if digest in found or digest in completions:
                    continue
                # Only the race described above, not an older message that merely reads the same:
                # the row came from a later place than this form (id-less first) or an earlier one.
                later = row.position is None or row.position > pending[digest].position
                if pending[digest].message_id is None:
                    if row.native_id is not None and later:
                        found[digest] = _Found(row.seq, row.position, same=False)  # the row has the id
                elif row.native_id is None and not later:
                    if row.seq not in taken:
                        completions[digest] = row.seq
                        taken.add(row.seq)
                    elif row.position is not None:
                        inherited[digest] = min(row.position, inherited.get(digest, row.position))
        if not completions:
            return inherited
        for digest, seq in completions.items():
            encoding, data, _, message_id, _, _ = pending[digest]
            yield Query(
                self._sql.complete_message,
                {"t": thread_id, "s": seq, "h": digest, "e": encoding, "d": data, "n": message_id},
            )
        # Only rows that still had no id were completed (another writer may have been first).
        completed = yield from self._sql.log.find_plan(thread_id, list(completions))
        found.update({digest: _Found(row.seq, row.position) for digest, row in completed.items()})
        return inherited

    @staticmethod
    def _marker_of(message: BaseMessage, thread_id: str) -> CompactionMarker | None:
        """The marker of the compaction that wrote `message` (a summary's `COMPACTION_KEY`, any other
        message's `EDIT_KEY`); `None` for an original."""
        kwargs = message.additional_kwargs or {}
        key = COMPACTION_KEY if kwargs.get(COMPACTION_KEY) is not None else EDIT_KEY
        raw = kwargs.get(key)
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidArgumentError(
                f"message {message.id!r} of thread {thread_id!r}: additional_kwargs[{key!r}] is a "
                f"{type(raw).__name__}, expected the dict of CompactionMarker.to_dict()"
            )
        try:
            return CompactionMarker.from_dict(dict(raw))
        except (ValueError, TypeError) as exc:
            raise InvalidArgumentError(
                f"message {message.id!r} of thread {thread_id!r}: bad compaction marker: {exc}"
            ) from None

    def restore_counts_plan(
        self, txn: _Transaction, thread_id: str, loaded: Iterable[BaseMessage]
    ) -> Plan[None]:
        """Make the thread's stored token counts known for the messages this read hands out
        (`loaded`; `historykit._tokens.remember_counts`: for those very objects, never for another
        thread's), once per process: the first model call after a cold load then tokenizes only
        what is new."""
        by_method = yield from self._sql.log.read_counts_plan(thread_id)
        db = self._db

        def remember() -> None:
            remember_counts(by_method, loaded)
            for method, counts in by_method.items():
                db.counted[thread_id].update((method, digest) for digest in counts)
            db.counts_loaded.add(thread_id)

        txn.after_commit(remember)

    def record_counts_plan(
        self, txn: _Transaction, thread_id: str, channels: Sequence[_MessageChannel]
    ) -> Plan[None]:
        """Keep the token counts this process made (`counts_noted_since`) of the messages of a
        checkpoint that the thread does not hold yet. Nothing is tokenized here: a message no
        counter counted has no count to keep. Only the counts made since the thread's last
        checkpoint are looked at, so a step costs the same at message 20 and at message 2,000."""
        db = self._db
        position, noted = counts_noted_since(db.count_positions.get(thread_id, 0))
        if not noted:
            return
        in_checkpoint = {id(message) for item in channels for message in item.messages}
        recorded = db.counted[thread_id]
        counts: dict[str, dict[bytes, int]] = {}
        for native, method, digest, tokens in noted:
            if id(native) in in_checkpoint and (method, digest) not in recorded:
                counts.setdefault(method, {})[digest] = tokens
        if counts:
            yield from self._sql.log.record_counts_plan(thread_id, counts)

        def remember() -> None:
            recorded.update((method, digest) for method, by in counts.items() for digest in by)
            db.count_positions[thread_id] = position

        txn.after_commit(remember)

    @staticmethod
    def refs_of(where: str, data: bytes | None) -> Refs:
        """A reference list read from a row (`where` names it), or `CorruptRowError` saying why not."""
        try:
            return decode_refs(data)
        except ValueError as exc:
            raise CorruptRowError(f"{where}: {exc}") from None

    def messages_plan(
        self, needed: Mapping[str, Iterable[int]]
    ) -> Plan[tuple[dict[str, dict[int, BaseMessage]], dict[str, dict[int, Any]]]]:
        """The message objects of the given numbers, from the cache or the log (decoded once), and
        the private copies of their stored forms (for the ones that could be copied)."""
        cache = self._db.cache
        out: dict[str, dict[int, BaseMessage]] = {}
        out_forms: dict[str, dict[int, Any]] = {}
        for thread_id, seq_iter in needed.items():
            known, forms, missing_set = cache.lookup(thread_id, set(seq_iter))
            out_forms[thread_id] = forms
            if not missing_set:
                out[thread_id] = known
                continue
            missing = sorted(missing_set)
            runs = to_runs(missing)
            queries: builtins.list[Query]
            if len(runs) <= _MAX_RUNS_PER_QUERY:
                queries = [Query(self._sql.messages_by_runs(runs), {"thread_id": thread_id})]
            else:
                queries = [
                    Query(self._sql.messages_in, {"thread_id": thread_id, "seqs": list(chunk)})
                    for chunk in chunks(missing)
                ]
            fetched: builtins.list[tuple[int, BaseMessage, Any]] = []
            for query in queries:
                fetched.extend(self._decode_messages(thread_id, (yield query)))
            known.update((seq, message) for seq, message, _ in fetched)
            learned = [(seq, message, form, None, True) for seq, message, form in fetched]
            forms.update((seq, form) for seq, _, form, _, _ in learned if form is not None)
            cache.add(thread_id, learned)
            absent = [seq for seq in missing if seq not in known]
            if absent:
                raise CorruptRowError(
                    f"thread {thread_id!r} refers to {len(absent)} message(s) missing from "
                    "historykit_message "
                    f"(seq {', '.join(map(str, absent[:5]))}{', ...' if len(absent) > 5 else ''})"
                )
            out[thread_id] = known
        return out, out_forms

    def _decode_messages(
        self, thread_id: str, rows: Sequence[Row[Any]]
    ) -> builtins.list[tuple[int, BaseMessage, StoredForm]]:
        """`(seq, message, form)` of stored messages: `decode_message` of each row, in one pass."""
        if not rows:
            return []
        # Columns by position, found by name once: a `Row`'s attribute access costs more than
        # decoding a small message.
        index = rows[0]._fields.index
        seqs = builtins.list(map(itemgetter(index("seq")), rows))
        decoded = self._codec.loads_messages(
            builtins.list(map(itemgetter(index("encoding"), index("data")), rows)),
            lambda i: _where(seqs[i], thread_id),
        )
        out: builtins.list[tuple[int, BaseMessage, StoredForm]] = []
        for seq, (message, decode, payload) in zip(seqs, decoded, strict=True):
            # historykit's own form only builds LangChain's classes: `isinstance` is for the others.
            if type(message) not in MESSAGE_CLASSES and not isinstance(message, BaseMessage):
                where, kind = _where(seq, thread_id), type(message).__name__
                raise CorruptRowError(f"{where} decodes to a {kind}, not a LangChain message")
            out.append((seq, message, StoredForm(decode, payload, message.id)))
        return out

    def decode_message(self, thread_id: str, row: Row[Any]) -> tuple[BaseMessage, StoredForm]:
        """A stored message, decoded once, and its private form (`StoredForm`: decoded again from
        the row's bytes only when something compares with it)."""
        where = _where(row.seq, thread_id)
        message, decode, payload = self._codec.loads_message(row.encoding, row.data, where=where)
        if not isinstance(message, BaseMessage):
            raise CorruptRowError(f"{where} decodes to a {type(message).__name__}, not a LangChain message")
        return message, StoredForm(decode, payload, message.id)

    def _in_conversation_order(
        self, thread_id: str, rows: Sequence[Row[Any]]
    ) -> Plan[builtins.list[Row[Any]]]:
        """The thread's message rows in conversation order (`_transcript_order`): read with the
        tree of its checkpoints and the reference lists of their states."""
        tree = yield Query(self._sql.checkpoint_tree, {"thread_id": thread_id})
        blobs = yield Query(self._sql.message_lists, {"thread_id": thread_id})
        lists = {
            (row.checkpoint_ns, row.channel, row.version): self.refs_of(
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

    def transcript_plan(self, thread_id: str) -> Plan[Transcript | None]:
        """The thread's original messages in conversation order, with its compactions (`None` for
        a thread the saver does not have); the view is added by the caller (`_with_view`)."""
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
                message, form = self.decode_message(thread_id, row)
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


def _where(seq: int, thread_id: str) -> str:
    return f"message seq {seq} of thread {thread_id!r} (historykit_message)"


def _is_original(message: BaseMessage) -> bool:
    """Not written by a compaction (no marker): a summary sits where it was made, and an edited
    copy where its original is, whatever list holds them."""
    kwargs = message.additional_kwargs
    return not kwargs or (kwargs.get(COMPACTION_KEY) is None and kwargs.get(EDIT_KEY) is None)


def _in_list_order(
    seqs: Sequence[int], slots: Sequence[str], stored: Sequence[str | None], originals: Sequence[bool]
) -> dict[int, str]:
    """The originals of one list to move to their slot in it, so that the log's positions follow
    the list's order: `{seq: slot}`.

    A message logged earlier may sit before messages that precede it in this list: after a
    thread was deleted under a running graph, the run's next checkpoint logs the whole state
    again at its own positions, while a node's write of the step before (logged after the delete)
    keeps the earlier one. Each position is at most the message's slot here, and slots grow along
    the list, so moving a message that falls behind the ones before it to its slot restores the
    order without touching any other.
    """
    moved: dict[int, str] = {}
    latest: str | None = None
    seen: set[int] = set()
    for seq, slot, at, original in zip(seqs, slots, stored, originals, strict=True):
        if seq in seen or not original:  # a message twice in one list stays where it first is
            continue
        seen.add(seq)
        if at is not None and latest is not None and at < latest:
            moved[seq] = at = slot
        if at is not None:
            latest = at
    return moved
