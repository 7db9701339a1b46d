"""What the messages a compaction wrote replaced, for as long as they live in this process.

A run processed persistently can replace a message before any store saw it: a tool result cleared,
or a response whose thinking was dropped, on a later call of the same run. The history the run hands
back then holds only the copy. `Pipeline.run` records here, for every native message it wrote, the
native messages it stood in for, and for every message it kept, the messages dropped just before it
with nothing written in their place (a truncation, a pinned message a summary kept ahead of itself),
so a store saving that history can keep the originals too (`SQLModelConversationStore.save`), however
many calls and runs later. Each record is kept on the message's parts too: a framework that rebuilds a
message around the same parts (Pydantic AI merges consecutive requests when a run starts) loses the
message's record, not its parts'. Such a rebuilt message is given a record of its own when a call first
sees it (before the call records anything new), made of what its parts stand for: so a later
compaction that replaces it still leads back to every original. Entries live as long as the message
(or part) does, and hold no more than the messages it stands for.

Example:
    ```python
    from historykit import _provenance as provenance

    result = pipeline.run(history, 32_000)
    for message in result.messages:
        provenance.originals_of(message)   # the originals it replaced, or (message,) if it is one
    ```
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

_REPLACED: dict[int, tuple[weakref.ref[Any], tuple[Any, ...], bool]] = {}
"""Per message, and per part of a message made of parts (by id): a weak reference to it, the
messages it stands in for, and whether it stands for itself too (a kept original that messages
dropped before it are recorded on)."""


def written_runs(before: Sequence[Any], after: Sequence[Any]) -> Iterator[tuple[range, range]]:
    """The runs of messages of `after` that are not objects of `before` (a step or a call wrote
    them), each with the range of `before` they stand in for: what lies between their kept
    neighbours. One pass over both lists, by object identity."""
    position = {id(m): i for i, m in enumerate(before)}
    index, previous_kept = 0, -1
    while index < len(after):
        if id(after[index]) in position:
            previous_kept = position[id(after[index])]
            index += 1
            continue
        end = index
        while end < len(after) and id(after[end]) not in position:
            end += 1
        next_kept = position[id(after[end])] if end < len(after) else len(before)
        yield range(index, end), range(previous_kept + 1, next_kept)
        index = end


def record(before: Sequence[Any], after: Sequence[Any]) -> None:
    """Record what each message of `after` stands in for.

    A message that is not in `before` replaced the messages of `before` between its kept neighbours
    (one each when a run of copies replaced as many messages). A message kept from `before` stands
    for itself and for the messages of `before` dropped just before it with nothing written in
    their place: a truncation, or a summary that kept a pinned message ahead of itself (the pinned
    message moves up, and what lay between it and the message before it is gone from `after`).

    A message of `before` that a framework rebuilt around recorded parts is first given a record of
    its own (`_adopt`), so what this call records on it leads back through its parts' originals."""
    for message in before:
        _adopt(message)
    position = {id(m): i for i, m in enumerate(before)}
    previous_kept = -1
    for at, message in enumerate(after):
        kept = position.get(id(message))
        if kept is None:
            continue
        if kept > previous_kept + 1 and not _written_before(after, at, position):
            _remember(message, tuple(before[previous_kept + 1 : kept]), itself=True)
        previous_kept = max(previous_kept, kept)
    for written, replaced in written_runs(before, after):
        one_to_one = len(replaced) == len(written)
        for offset, at in enumerate(written):
            if one_to_one:
                originals = (before[replaced[offset]],)
            else:
                # The first of the run stands for them all; the others for nothing more.
                originals = tuple(before[i] for i in replaced) if offset == 0 else ()
            _remember(after[at], originals, itself=False)


def _written_before(after: Sequence[Any], at: int, position: dict[int, int]) -> bool:
    """Whether the message of `after` just before `at` was written (it stands in for the gap)."""
    return at > 0 and id(after[at - 1]) not in position


def originals_of(message: Any) -> tuple[Any, ...]:
    """The original messages `message` stands in for, through every compaction recorded in this
    process, in order; `(message,)` when nothing is recorded for it (an original, or a copy from
    elsewhere)."""
    return _expanded((message,))


def expand(message: Any) -> tuple[Any, ...]:
    """`originals_of(message)`, and for a message a framework rebuilt around recorded parts that no
    call has seen yet (Pydantic AI merges consecutive requests when a run starts), what its parts
    stand for: the originals of each recorded part's message, and messages of its own parts where
    they were (`SQLModelConversationStore.save` expands a history it saves with this)."""
    if _entry(message) is not None:
        return originals_of(message)
    pieces = _split(message)
    if pieces is None:
        return (message,)
    return tuple(original for piece in pieces for original in originals_of(piece))


def _adopt(message: Any) -> None:
    """Give a rebuilt message (`expand`) a record of its own, once: the records on its parts can
    change afterwards (a copy of the message shares its parts), its own cannot."""
    if _entry(message) is not None:
        return
    pieces = _split(message)
    if pieces is not None:
        _remember_one(message, pieces, itself=False)


def _split(message: Any) -> tuple[Any, ...] | None:
    """What a message rebuilt around recorded parts stands for, by part, in order: the messages
    each recorded part's message stood for (each message once, where it first comes), and a copy of
    the message holding its own parts where they were. `None` when it is not such a message: it has
    no recorded part, it is not a dataclass of parts (nothing to rebuild pieces with), or a part's
    record leads back to the message itself (an original whose parts a copy of it shares)."""
    parts = getattr(message, "parts", None)
    if (
        not isinstance(parts, (list, tuple))
        or not dataclasses.is_dataclass(message)
        or isinstance(message, type)
    ):
        return None
    records = [_entry(part) for part in parts]
    if not any(record is not None for record in records):
        return None
    for record in records:
        if record is not None and any(original is message for original in _expanded(record[0])):
            return None
    names = {f.name for f in dataclasses.fields(message)}

    def piece(own: list[Any]) -> Any:
        # The rebuilt message's metadata is the merge's (a compaction's marker among it): a piece
        # is plain content.
        changes: dict[str, Any] = {"parts": own}
        if "metadata" in names:
            changes["metadata"] = None
        return dataclasses.replace(message, **changes)

    out: list[Any] = []
    own: list[Any] = []
    placed: set[int] = set()
    for part, record in zip(parts, records):
        # Parts of one recorded message share its originals (its first part may stand for more,
        # the messages dropped before it): each original goes in once, where it first comes.
        new = [original for original in record[0] if id(original) not in placed] if record else []
        if new:
            placed.update(map(id, new))
            if own:
                out.append(piece(own))
                own = []
            out.extend(new)
        if record is None or record[1]:
            own.append(part)
    if own:
        out.append(piece(own))
    return tuple(out)


class _Itself(tuple[Any]):
    """On `_expanded`'s stack: a recorded message that stands for itself too, after its originals."""


def _expanded(items: Sequence[Any]) -> tuple[Any, ...]:
    """The originals of `items`, in order: each through every record, depth first. Walked with a
    stack, not recursion: a long conversation compacted persistently chains a record per summary
    (a summary replacing the previous one), thousands deep."""
    out: list[Any] = []
    stack: list[Any] = list(reversed(items))
    while stack:
        item = stack.pop()
        if type(item) is _Itself:
            out.append(item[0])
            continue
        entry = _entry(item)
        if entry is None:
            out.append(item)
            continue
        originals, itself = entry
        if itself:
            stack.append(_Itself((item,)))
        stack.extend(reversed(originals))
    return tuple(out)


def _entry(item: Any) -> tuple[tuple[Any, ...], bool] | None:
    """The record on `item` as it was made (its originals not expanded), or `None`."""
    entry = _REPLACED.get(id(item))
    if entry is None or entry[0]() is not item:
        return None
    return entry[1], entry[2]


def _remember(message: Any, originals: tuple[Any, ...], *, itself: bool) -> None:
    """Record `originals` on `message` and on each of its parts (a list or tuple `parts`, as
    Pydantic AI's messages have), which outlive the message when a framework rebuilds it.

    A part a written copy shares with the message it copies takes the copy's record in place of
    its own: the copy's originals lead back through that message to everything the part stood for
    before (keeping both would count those twice). A kept message stands for the messages dropped
    just before it, so only its first part does: its other parts stay what they were (original
    content, or what an earlier compaction wrote), and a rebuilt message holding them is split
    where each belongs."""
    parts = getattr(message, "parts", None)
    parts = list(parts) if isinstance(parts, (list, tuple)) else []
    _remember_one(message, originals, itself)
    for part in parts[:1] if itself else parts:
        _remember_one(part, originals, itself, keep=itself)


def _remember_one(item: Any, originals: tuple[Any, ...], itself: bool, *, keep: bool = True) -> None:
    key = id(item)
    entry = _REPLACED.get(key)
    if keep and entry is not None and entry[0]() is item:
        # Recorded before (a copy written by an earlier call, or a message that already stood for
        # messages dropped before it): what it stood for stays, after what this call dropped.
        originals, itself = (*originals, *entry[1]), entry[2]

    def forget(ref: weakref.ref[Any]) -> None:
        _forget(key, ref)

    try:
        ref = weakref.ref(item, forget)
    except TypeError:
        return  # a type that cannot be referenced weakly: nothing is recorded for it
    _REPLACED[key] = (ref, originals, itself)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    if _REPLACED is None:  # type: ignore[comparison-overlap]  # the interpreter is shutting down
        return
    entry = _REPLACED.get(key)
    if entry is not None and entry[0] is ref:
        _REPLACED.pop(key, None)
