"""Which message objects are already in a thread's message log, and under which number.

A checkpoint's message list is mostly the previous checkpoint's list plus a message or two, and
LangGraph hands the saver the very same message objects step after step. Remembering each stored
object's `seq` lets `put` turn the list into references without serializing or hashing the
messages it already stored; remembering the last list stored for each channel lets it skip even
the lookups for the unchanged head of the list, so a step costs the same at message 20 and at
message 2,000. The same map serves reads: a message decoded once is not decoded again at every
`get_tuple`, which is what keeps `get_state` fast on long threads.

The cache never disagrees with the database:
- each stored message has a private copy of its stored form (`Known.form`), which nobody else
  ever sees. An object is only taken for a stored message while its fields equal that form (one
  C-level dict comparison, shared strings compare by identity; for a message a read decoded, the
  form is the row's bytes, `StoredForm`, and the message packed again is compared with them): a
  message edited in place since it was stored or read is a new message to `put`, and a read hands
  out a fresh copy instead of the edited object. So an edit is written when it is `put`, older
  checkpoints keep what they had, and a caller reusing an object in another thread changes
  nothing stored;
- a running graph is the exception, by identity and without comparing: LangGraph's reducers
  replace messages and never edit them. Its steps (`known_prefix(verify=False)`) take the
  previous step's objects, and a run's first read (`read_list`) hands it the objects the last
  run of the thread ended with, copying only what that run's nodes added (their objects stay
  theirs). So a step costs what it adds, not a pass over the history. Those objects are the
  runs' alone: every other read (`get_state`, `list`, `update_state`) gets objects of its own
  (`lookup`), checked against their forms, so an edit of what it returned is stored only when
  it is given back;
- entries are per thread, and an object of one thread is never handed out for another;
- the saver checks, in each write transaction, that the thread's log still holds a number this
  cache learned (`anchor`): a thread deleted (or deleted and created again) by another process
  is forgotten before anything is written from the cache.

Objects are held strongly (an `id()` is only meaningful while its object is alive), for the most
recently used threads only.

Example:
    ```python
    cache = MessageCache(max_threads=8)
    cache.add("t1", [(5, message, snapshot(message), None, True)])
    assert cache.seqs_of("t1", [message])[0].seq == 5
    message.content = "edited in place"
    assert cache.seqs_of("t1", [message]) == [None]
    ```
"""

from __future__ import annotations

import copy
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

from historykit.checkpointers._message_form import pack_message, unpack_message
from historykit.checkpointers._refs import Run

_fields = operator.attrgetter("__dict__")
_new_tuple = tuple.__new__
_extras = operator.attrgetter("__pydantic_extra__")


def _extra(message: Any) -> Any:
    return getattr(message, "__pydantic_extra__", None) or None


_ATOMS = frozenset({str, int, float, bool, bytes, type(None)})
"""Immutable leaves: a copy shares them (as `copy.deepcopy` does)."""


def _tree_copy(value: Any) -> Any:
    """A copy of a JSON-like value: new dicts and lists, shared immutable leaves; anything else is
    `copy.deepcopy`'d."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _tree_copy(item) for key, item in value.items()}
    if kind is list:
        return [_tree_copy(item) for item in value]
    return copy.deepcopy(value)


def private_copy(message: Any) -> Any:
    """A copy of `message` that shares nothing mutable with it, as `copy.deepcopy` makes, at a
    third of its cost for a pydantic model: the model's own shallow copy (its fields, extras and
    set fields), then new containers for its JSON-like fields, without `deepcopy`'s memo and
    dispatch for every string (a decoded message's strings are shared, never copied)."""
    if getattr(message, "__pydantic_private__", None) or not hasattr(message, "__pydantic_fields_set__"):
        return copy.deepcopy(message)
    copied = copy.copy(message)
    for fields in (copied.__dict__, copied.__pydantic_extra__ or {}):
        for key, value in fields.items():
            if type(value) not in _ATOMS:
                fields[key] = _tree_copy(value)
    return copied


class StoredForm:
    """The private form of a message a read decoded: the row's bytes and the way to decode them.

    A cold read decodes each message once, and the forms are never decoded: whatever compares a
    message with its form (a `put`, an `update_state`, the next read checking that what the last
    one handed out was not edited in place) packs the message again and compares the bytes with
    the row's, which costs less than decoding the form (but about 1.8x a comparison with a decoded
    one). A row in the serializer's form is decoded at its first comparison. A new copy (`fresh`)
    is decoded from the bytes, which costs less than copying an object and works for any message
    the row decodes to (a copy may fail on an artifact that refuses copying). The bytes never
    change, and nothing decoded from them is shared with anyone."""

    __slots__ = ("_decode", "_payload", "_value", "id")

    def __init__(self, decode: Callable[[bytes], Any] | None, payload: bytes, message_id: str | None) -> None:
        self._decode = decode
        """How the serializer decodes the row; `None`: the row is in historykit's own form."""
        self._payload = payload
        self._value: Any = None
        self.id = message_id
        """The message's id as stored (what `Known.message_id` records)."""

    def fresh(self) -> Any:
        """A new object equal to the form, shared with nobody."""
        if self._decode is None:
            return unpack_message(self._payload)
        return self._decode(self._payload)

    def holds(self, message: Any) -> bool:
        """`message` holds exactly what the row holds (as `same` compares a message with a form)."""
        if self._decode is None:
            # Historykit's own form: the same plain data packs to the row's bytes exactly, anything
            # else differently or not at all (an edit that only changes a type, 1 to 1.0, counts).
            return pack_message(message) == self._payload
        form = self._value
        if form is None:  # two threads may decode it at once: equal objects, one is kept
            form = self._value = self.fresh()
        return bool(message.__dict__ == form.__dict__) and _extra(message) == _extra(form)


def fresh_copy(form: Any) -> Any:
    """A new object equal to a cached form, shared with nobody."""
    return form.fresh() if type(form) is StoredForm else private_copy(form)


def snapshot(message: Any) -> Any | None:
    """A private copy of `message` as it is now (`private_copy`; `None` when it cannot be
    copied: such a message is never cached, so it is serialized at every `put`)."""
    try:
        return private_copy(message)
    except Exception:  # an artifact that refuses to be copied: correctness over speed
        return None


def same(message: Any, form: Any) -> bool:
    """`message` holds exactly what `form` holds (its fields compared deeply)."""
    if type(form) is StoredForm:
        return form.holds(message)
    return bool(message.__dict__ == form.__dict__) and _extra(message) == _extra(form)


def _all_same(messages: Sequence[Any], forms: Sequence[Any]) -> int:
    """How many leading `messages` equal their `forms`: all of them in two C-level comparisons
    when nothing changed (the dicts share their strings with the forms, compared by identity)."""
    count = len(messages)
    forms = forms[:count]
    if any(type(form) is StoredForm for form in forms):  # compared one by one, as bytes mostly
        return next((i for i, pair in enumerate(zip(messages, forms)) if not same(*pair)), count)
    if list(map(_fields, messages)) == list(map(_fields, forms)) and list(map(_extras, messages)) == list(
        map(_extras, forms)
    ):
        return count
    for i, (message, form) in enumerate(zip(messages, forms)):
        if not same(message, form):
            return i
    return len(messages)


class Known(NamedTuple):
    """A message object known to be stored under `seq`, and the private copy of that form."""

    message: Any
    seq: int
    form: Any
    message_id: str | None
    position: str | None
    """Its transcript position, if known."""


class KnownList(NamedTuple):
    """The last message list stored (or read) under a key, with its numbers, runs and forms."""

    messages: list[Any]
    seqs: list[int]
    runs: list[Run]
    forms: list[Any]
    shared: int = 0
    """How many leading `messages` are objects a run's read handed out (`read_list`: the runs'
    own, taken by identity); the others are a writer's, never handed to a read."""


_NOTHING_KNOWN = KnownList([], [], [], [])


def _cut_runs(runs: Sequence[Run], count: int) -> list[Run]:
    out: list[Run] = []
    for first, length in runs:
        if count <= 0:
            break
        out.append((first, min(length, count)))
        count -= length
    return out


class _Row(NamedTuple):
    form: Any
    """The private copy of the row's message."""
    handed: Any
    """The object last handed out for the row, handed out again while it is unchanged; `None`
    until a read asks for it (a written message is the writer's object, never handed out)."""


class _ThreadMessages:
    __slots__ = ("anchor", "by_obj", "by_seq", "lists", "read_lists")

    def __init__(self) -> None:
        self.by_seq: dict[int, _Row] = {}
        self.by_obj: dict[int, Known] = {}
        self.lists: dict[Hashable, KnownList] = {}
        """The last list stored, or handed out by a run's read, per channel."""
        self.read_lists: dict[Hashable, KnownList] = {}
        """The last list another read handed out, per channel (the objects its caller may edit
        and give back, through `update_state`)."""
        self.anchor: int | None = None
        """A number of the thread's log this cache learned: while the log holds it, the thread was
        not deleted since (numbers are never reused, see `MessageRow.seq`)."""


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

    def anchor(self, thread_id: str) -> int | None:
        """A number the thread's log must still hold for this cache's knowledge of it to be valid."""
        with self._lock:
            entry = self._threads.get(thread_id)
            return entry.anchor if entry is not None else None

    def seqs_of(self, thread_id: str, messages: Sequence[Any]) -> list[Known | None]:
        """What is known of each message object already stored in `thread_id` and unchanged
        since, `None` for the others (edited in place, or given an id since)."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            if entry is None:
                return [None] * len(messages)
            hits = list(map(entry.by_obj.get, map(id, messages)))
        return [
            hit if hit is not None and hit.message is message and same(message, hit.form) else None
            for message, hit in zip(messages, hits)
        ]

    def known_prefix(
        self, thread_id: str, key: Hashable, messages: Sequence[Any], *, verify: bool = True
    ) -> KnownList:
        """The part of the last list remembered under `key` that `messages` starts with, as the
        very objects, unchanged: those messages need no lookup at all.

        The objects a run's read handed out are taken by identity; so are the others without
        `verify` (a running graph's step, whose messages LangGraph's reducers replace and never
        edit in place): a step costs what it adds, not a pass over the history. With `verify`,
        a writer's objects are compared with their forms (an edit made between two `put`s)."""
        if not messages:
            return _NOTHING_KNOWN
        with self._lock:
            entry = self._get(thread_id, create=False)
            if entry is None:
                return _NOTHING_KNOWN
            known = entry.lists.get(key)
            if known is None or not known.messages or known.messages[0] is not messages[0]:
                known = entry.read_lists.get(key)
        if known is None or not known.messages:
            return _NOTHING_KNOWN
        count = min(len(known.messages), len(messages))
        head = messages[:count]
        if not all(map(operator.is_, head, known.messages)):
            count = next(i for i, (a, b) in enumerate(zip(head, known.messages)) if a is not b)
            head = head[:count]
        shared = min(known.shared, count)
        if verify and count > shared:
            count = shared + _all_same(head[shared:], known.forms[shared:])
        if count == len(known.messages):
            return known
        if count == 0:
            return _NOTHING_KNOWN
        return KnownList(
            list(known.messages[:count]),
            known.seqs[:count],
            _cut_runs(known.runs, count),
            known.forms[:count],
            min(known.shared, count),
        )

    def read_list(self, thread_id: str, key: Hashable, runs: Sequence[Run]) -> list[Any] | None:
        """A run's read: the messages of the last list remembered under `key`, when it has these
        runs (`None`: not remembered, or a message of it not known as its row holds it).

        The objects a run's read handed out before are handed out again as they are; the
        writer's (what the last run's nodes added, as they made them) are fresh copies of their
        forms, and the list read is remembered as the runs' own: the next run's read copies what
        this one adds, instead of the history."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            known = entry.lists.get(key) if entry is not None else None
            if entry is None or known is None or known.runs != runs:
                return None
            shared = known.shared
            if shared == len(known.messages):
                return list(known.messages)
            tail = known.seqs[shared:]
            rows = [row for row in map(entry.by_seq.get, tail) if row is not None]
            if len(rows) < len(tail):  # the row holds another form of it (`_Found.same`): read it
                return None
            fresh = [fresh_copy(row.form) for row in rows]
            out = known.messages[:shared] + fresh
            forms = known.forms[:shared] + [row.form for row in rows]
            entry.lists[key] = KnownList(out, known.seqs, known.runs, forms, len(out))
        return list(out)

    def remember_list(self, thread_id: str, key: Hashable, known: KnownList, *, read: str = "") -> None:
        """Remember `known` as the last list stored under `key` (`KnownList.shared`: how much of
        it a run's read handed out); `read="run"`: as the list a run's read handed out whole
        (those objects are the runs' from now on, never handed to another read); `read="other"`:
        as the list another read handed out (its objects are compared with their forms when
        they are stored again)."""
        with self._lock:
            entry = self._get(thread_id, create=True)
            if entry is None:
                return
            if read == "other":
                entry.read_lists[key] = known
                return
            entry.lists[key] = known
            if read == "run":
                handed = set(map(id, known.messages))
                for seq in known.seqs:
                    row = entry.by_seq.get(seq)
                    if row is not None and id(row.handed) in handed:
                        entry.by_seq[seq] = _Row(row.form, None)

    def lookup(self, thread_id: str, seqs: set[int]) -> tuple[dict[int, Any], dict[int, Any], set[int]]:
        """For the known ones of `seqs`: `seq -> message` to hand out (unchanged objects, or fresh
        copies of the stored form) and `seq -> form`; and the unknown ones."""
        with self._lock:
            entry = self._get(thread_id, create=False)
            if entry is None:
                return {}, {}, set(seqs)
            rows = {seq: entry.by_seq[seq] for seq in seqs if seq in entry.by_seq}
        out: dict[int, Any] = {}
        forms: dict[int, Any] = {}
        refreshed: list[tuple[int, _Row]] = []
        # A read of a long thread hands out the objects it handed out last time, mostly unchanged:
        # compared with their forms all at once (two C-level comparisons), one by one only when
        # one of them was edited.
        handed = [row for row in rows.values() if row.handed is not None]
        objects, their_forms = [row.handed for row in handed], [row.form for row in handed]
        unchanged = bool(handed) and _all_same(objects, their_forms) == len(handed)
        for seq, row in rows.items():
            forms[seq] = row.form
            if row.handed is not None and (unchanged or same(row.handed, row.form)):
                out[seq] = row.handed
            else:  # edited in place by whoever holds it: that is not what the row holds
                fresh = fresh_copy(row.form)
                out[seq] = fresh
                refreshed.append((seq, _Row(row.form, fresh)))
        if refreshed:
            with self._lock:
                entry = self._get(thread_id, create=False)
                if entry is not None:
                    entry.by_seq.update(refreshed)
        return out, forms, seqs.difference(rows)

    def add(
        self,
        thread_id: str,
        stored: Iterable[tuple[int, Any, Any, str | None, bool]],
        *,
        written: bool = False,
    ) -> None:
        """Remember that each message object is stored in `thread_id` under its `seq`, in the form
        `form` (its private copy, from `snapshot`), at that transcript position (`None`: unknown);
        and, when the row holds that very form (last flag), that it is the row's message.

        `written`: the objects are the writer's (a `put`): they are recognised when written again,
        but a read gets a copy of its own, as from the official savers, so that editing what a
        read returned never edits what the application still holds (a model's scripted message,
        another thread's state)."""
        with self._lock:
            entry = self._get(thread_id, create=True)
            if entry is None:
                return
            by_seq, by_obj = entry.by_seq, entry.by_obj
            # The tuples built directly (`tuple.__new__`): a cold read adds thousands, and the
            # named tuples' own constructors are Python functions.
            for seq, message, form, position, same_form in stored:
                if form is None:
                    continue
                if entry.anchor is None:
                    entry.anchor = seq
                if same_form:
                    by_seq[seq] = _new_tuple(_Row, (form, None if written else message))
                by_obj[id(message)] = _new_tuple(Known, (message, seq, form, form.id, position))

    def forget(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)
