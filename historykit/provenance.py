"""What the messages a compaction wrote replaced, for as long as they live in this process.

A run processed persistently can replace a message before any store saw it: a tool result cleared,
or a response whose thinking was dropped, on a later call of the same run. The history the run hands
back then holds only the copy. `Pipeline.run` records here, for every native message it wrote, the
native messages it stood in for, so a store saving that history can keep the originals too
(`SQLModelConversationStore.save`). Entries live as long as the written message does, and hold no
more than the messages it replaced.

Example:
    ```python
    from historykit import provenance

    result = pipeline.run(history, 32_000)
    for message in result.messages:
        provenance.originals_of(message)   # the originals it replaced, or (message,) if it is one
    ```
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["originals_of", "record", "written_runs"]

_REPLACED: dict[int, tuple[weakref.ref[Any], tuple[Any, ...]]] = {}


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
    """Record what each message of `after` that is not in `before` replaced: the messages of
    `before` between its kept neighbours (one each when a run of copies replaced as many messages)."""
    for written, replaced in written_runs(before, after):
        one_to_one = len(replaced) == len(written)
        for offset, at in enumerate(written):
            if one_to_one:
                originals = (before[replaced[offset]],)
            else:
                originals = tuple(before[i] for i in replaced) if offset == 0 else ()
            if originals:
                _remember(after[at], originals)


def originals_of(message: Any) -> tuple[Any, ...]:
    """The original messages `message` stands in for, through every compaction recorded in this
    process; `(message,)` when nothing is recorded for it (an original, or a copy from elsewhere)."""
    entry = _REPLACED.get(id(message))
    if entry is None or entry[0]() is not message:
        return (message,)
    return tuple(original for replaced in entry[1] for original in originals_of(replaced))


def _remember(message: Any, originals: tuple[Any, ...]) -> None:
    key = id(message)

    def forget(ref: weakref.ref[Any]) -> None:
        _forget(key, ref)

    try:
        ref = weakref.ref(message, forget)
    except TypeError:
        return  # a message type that cannot be referenced weakly: nothing is recorded for it
    _REPLACED[key] = (ref, originals)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    entry = _REPLACED.get(key)
    if entry is not None and entry[0] is ref:
        _REPLACED.pop(key, None)
