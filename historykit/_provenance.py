"""What the messages a compaction wrote replaced, for as long as they live in this process.

A run processed persistently can replace a message before any store saw it: a tool result cleared,
or a response whose thinking was dropped, on a later call of the same run. The history the run hands
back then holds only the copy. `Pipeline.run` records here, for every native message it wrote, the
native messages it stood in for, and for every message it kept, the messages dropped just before it
with nothing written in their place (a truncation, a pinned message a summary kept ahead of itself),
so a store saving that history can keep the originals too (`SQLModelConversationStore.save`), however
many calls and runs later. Each record is kept on the message's parts too: a framework that rebuilds a
message around the same parts (Pydantic AI merges consecutive requests when a run starts) loses the
message's record, not its parts'. Entries live as long as the message (or part) does, and hold no more
than the messages it stands for.

Example:
    ```python
    from historykit import _provenance as provenance

    result = pipeline.run(history, 32_000)
    for message in result.messages:
        provenance.originals_of(message)   # the originals it replaced, or (message,) if it is one
    ```
"""

from __future__ import annotations

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
    message moves up, and what lay between it and the message before it is gone from `after`)."""
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
    recorded = _recorded(message)
    if recorded is None:
        return (message,)
    expanded, itself = recorded
    return (*expanded, message) if itself else expanded


def part_originals(part: Any) -> tuple[tuple[Any, ...], bool] | None:
    """What the message that held `part` when it was recorded stands in for: the original messages,
    in order, and whether the part is original content itself. `None` when nothing is recorded.

    A framework may rebuild a message around the same parts (Pydantic AI merges consecutive
    requests when a run starts), and the rebuilt message has no record of its own: a store splits it
    by part and asks for each (`SQLModelConversationStore.save`)."""
    return _recorded(part)


def _recorded(item: Any) -> tuple[tuple[Any, ...], bool] | None:
    entry = _REPLACED.get(id(item))
    if entry is None or entry[0]() is not item:
        return None
    return tuple(original for replaced in entry[1] for original in originals_of(replaced)), entry[2]


def _remember(message: Any, originals: tuple[Any, ...], *, itself: bool) -> None:
    """Record `originals` on `message` and on each of its parts (a list or tuple `parts`, as
    Pydantic AI's messages have), which outlive the message when a framework rebuilds it."""
    parts = getattr(message, "parts", None)
    for item in (message, *(parts if isinstance(parts, (list, tuple)) else ())):
        _remember_one(item, originals, itself)


def _remember_one(item: Any, originals: tuple[Any, ...], itself: bool) -> None:
    key = id(item)
    entry = _REPLACED.get(key)
    if entry is not None and entry[0]() is item:
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
