"""Which message objects are already in a thread's message log, and under which number.

A checkpoint's message list is mostly the previous checkpoint's list plus a message or two, and
LangGraph hands the saver the very same message objects step after step. Remembering each stored
object's `seq` lets `put` turn the list into references without serializing or hashing the
messages it already stored; remembering the last list stored for each channel lets it skip even
the lookups for the unchanged head of the list (one identity comparison per message, in C), so a
step costs the same at message 20 and at message 2,000. The same map serves reads: a message
decoded once is handed out again instead of being decoded at every `get_tuple`, which is what
keeps `get_state` fast on long threads.

Objects are held strongly (an `id()` is only meaningful while its object is alive), for the most
recently used threads only. Messages are shared, not copied, between the checkpoints that
contain them: like LangGraph's own channels, the saver treats state messages as immutable.

Example:
    ```python
    cache = MessageCache(max_threads=8)
    cache.add("t1", [(5, message, message.id, None, True)])
    assert cache.seqs_of("t1", [message]) == [(5, None, message.id)]
    ```
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, NamedTuple

from historykit.checkpointers._refs import Run


class KnownList(NamedTuple):
    """The last message list stored (or read) under a key, with its numbers and runs."""

    messages: list[Any]
    seqs: list[int]
    runs: list[Run]


_NOTHING_KNOWN = KnownList([], [], [])


class _ThreadMessages:
    __slots__ = ("by_obj", "by_seq", "lists")

    def __init__(self) -> None:
        self.by_seq: dict[int, Any] = {}
        self.by_obj: dict[int, tuple[Any, int, str | None, str | None]] = {}
        """`id(message) -> (message, seq, message.id as stored, transcript position if known)`."""
        self.lists: dict[Hashable, KnownList] = {}


class MessageCache:
    """Per-thread maps `seq -> message` and `message -> seq`, for the most recent threads."""

    def __init__(self, max_threads: int) -> None:
        self.max_threads = max_threads
        self._threads: OrderedDict[str, _ThreadMessages] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, thread_id: str, create: bool) -> _ThreadMessages | None:
        entry = self._threads.get(thread_id)
        if entry is not None:
            self._threads.move_to_end(thread_id)
            return entry
        if not create or self.max_threads <= 0:
            return None
        entry = self._threads[thread_id] = _ThreadMessages()
        while len(self._threads) > self.max_threads:
            self._threads.popitem(last=False)
        return entry

    def seqs_of(
        self, thread_id: str, messages: Sequence[Any]
    ) -> list[tuple[int, str | None, str | None] | None]:
        """`(seq, position, message id)` of each message object already stored in `thread_id`,
        `None` for the others (including an object given an id since it was stored: it is no
        longer that message)."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            if entry is None:
                return [None] * len(messages)
            by_obj = entry.by_obj
            out: list[tuple[int, str | None, str | None] | None] = []
            for message in messages:
                hit = by_obj.get(id(message))
                if hit is not None and hit[0] is message and hit[2] == message.id:
                    out.append((hit[1], hit[3], hit[2]))
                else:
                    out.append(None)
            return out

    def known_prefix(self, thread_id: str, key: Hashable, messages: Sequence[Any]) -> KnownList:
        """The last list remembered under `key` when `messages` starts with its very objects,
        else an empty one: its messages need no lookup at all."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            known = entry.lists.get(key) if entry is not None else None
        if known is None or len(known.messages) > len(messages):
            return _NOTHING_KNOWN
        if all(map(operator.is_, messages, known.messages)):  # stops at the shorter: the prefix
            return known
        return _NOTHING_KNOWN

    def known_list(self, thread_id: str, key: Hashable) -> KnownList | None:
        """The last list remembered under `key`."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            return entry.lists.get(key) if entry is not None else None

    def remember_list(self, thread_id: str, key: Hashable, known: KnownList) -> None:
        with self._lock:
            entry = self._get(thread_id, create=True)
            if entry is not None:
                entry.lists[key] = known

    def lookup(self, thread_id: str, seqs: set[int]) -> tuple[dict[int, Any], set[int]]:
        """A `seq -> message` map holding every known one of `seqs`, and the unknown ones.

        The map may be the cache's own (read it, do not change it).
        """
        with self._lock:
            entry = self._get(thread_id, create=False)
            if entry is None:
                return {}, set(seqs)
            return entry.by_seq, seqs.difference(entry.by_seq.keys())

    def add(self, thread_id: str, stored: Iterable[tuple[int, Any, str | None, str | None, bool]]) -> None:
        """Remember that each message object is stored in `thread_id` under its `seq`, as it was
        when serialized (with that message id), at that transcript position (`None`: unknown);
        and, when the row holds that very form of it (last flag), that it is the row's message."""
        with self._lock:
            entry = self._get(thread_id, create=True)
            if entry is None:
                return
            for seq, message, message_id, position, same_form in stored:
                if same_form:
                    entry.by_seq[seq] = message
                entry.by_obj[id(message)] = (message, seq, message_id, position)

    def forget(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)

    def copy(self, source: str, target: str) -> None:
        """After `copy_thread`: the target's log holds the same messages under the same numbers."""
        with self._lock:
            entry = self._threads.get(source)
            if entry is None:
                return
            clone = self._get(target, create=True)
            if clone is None:
                return
            clone.by_seq.update(entry.by_seq)
            clone.by_obj.update(entry.by_obj)
            clone.lists.update(entry.lists)
