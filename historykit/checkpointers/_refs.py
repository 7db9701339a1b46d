"""The stored form of a message list: runs of message-log numbers, not the messages again.

A LangGraph message channel holds the whole conversation, and a checkpoint is written at every
step. Its messages are numbered (`MessageRow.seq`) in the order the thread first saw them, so the
list at any step is almost always a few contiguous runs of those numbers: one run for a plain
conversation, two after a compaction (the summary, then the kept tail), a few more after a fork
or an edit. A run is stored as `[first, length]`, so a checkpoint's reference blob stays a few
bytes whatever the length of the conversation, and reading it back is one range query.

Example:
    ```python
    data = encode_refs(to_runs([7, 8, 9, 10, 42]), snapshot=False)
    refs = decode_refs(data)
    assert expand_runs(refs.runs) == [7, 8, 9, 10, 42] and not refs.snapshot
    ```
"""

from __future__ import annotations

import json
import operator
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Generic, NamedTuple, TypeVar

from historykit.errors import CorruptRowError

REFS_ENCODING = "historykit.refs"
"""`BlobRow.encoding` of a message list stored as references into the message log."""

_FORMAT = 2
"""Runs stored as `[first, length, gap, length, ...]`, each `gap` from the end of the run before."""
_MAX_MESSAGES = 1_000_000
"""The most messages a reference blob may refer to: far beyond any conversation, and a bound
that keeps a crafted run length from allocating the machine's memory."""
_MAX_SEQ = 2**63 - 1
"""Message numbers are 64-bit integers in the database."""
_FORMAT_ABSOLUTE = 1
"""Runs stored as `[first, length, first, length, ...]`: the first development versions wrote
it, and it is still read."""


Run = tuple[int, int]
"""`(first, length)`: the numbers `first, first + 1, ..., first + length - 1`."""


def to_runs(seqs: Iterable[int]) -> list[Run]:
    """Runs of consecutive numbers, in order (`[3, 4, 5, 9]` -> `[(3, 3), (9, 1)]`)."""
    return extend_runs([], seqs)


def extend_runs(runs: Sequence[Run], seqs: Iterable[int]) -> list[Run]:
    """`to_runs(expanded(runs) + seqs)`, in time proportional to `seqs` only."""
    out = list(runs)
    first, length = out.pop() if out else (None, 0)
    for seq in seqs:
        if first is not None and seq == first + length:
            length += 1
        else:
            if first is not None:
                out.append((first, length))
            first, length = seq, 1
    if first is not None:
        out.append((first, length))
    return out


class Refs(NamedTuple):
    """A decoded reference blob."""

    runs: list[Run]
    snapshot: bool = False
    """The value is a LangGraph `_DeltaSnapshot` of the list."""
    single: bool = False
    """The value is the one message, not a list (a write of a single message)."""
    without_id: tuple[int, ...] = ()
    """Indexes (in the value) of messages that had no id when written: read back without one."""


def encode_refs(
    runs: Sequence[Run], *, snapshot: bool = False, single: bool = False, without_id: Sequence[int] = ()
) -> bytes:
    """The blob of a message list (`snapshot`: wrapped in a `_DeltaSnapshot`; `single`: one
    message; `without_id`: indexes of messages to read back without their id)."""
    flat: list[int] = []
    end = 0
    for first, length in runs:
        flat.append(first - end)
        flat.append(length)
        end = first + length
    doc: dict[str, object] = {"v": _FORMAT, "runs": flat}
    if snapshot:
        doc["snapshot"] = True
    if single:
        doc["single"] = True
    if without_id:
        doc["without_id"] = list(without_id)
    return json.dumps(doc, separators=(",", ":")).encode()


def expand_runs(runs: Iterable[Run]) -> list[int]:
    seqs: list[int] = []
    for first, length in runs:
        seqs.extend(range(first, first + length))
    return seqs


def merge_runs(runs: Iterable[Run]) -> list[Run]:
    """The union of `runs`, as sorted runs that neither overlap nor touch.

    The lists of a thread's checkpoints are mostly prefixes of one another: their union is a few
    runs however many lists there are.
    """
    out: list[Run] = []
    for first, length in sorted(set(runs)):  # lists share most of their runs: sort each once
        if out and first <= out[-1][0] + out[-1][1]:
            start, size = out[-1]
            out[-1] = (start, max(size, first + length - start))
        else:
            out.append((first, length))
    return out


T = TypeVar("T")


class RunValues(Generic[T]):
    """The values of many overlapping run lists (a page of `list`), built by slicing.

    Each merged range is looked up once; a list is then cut out of it run by run, or, when it is
    a prefix of the longest list built so far (a thread's checkpoints hold growing lists, and a
    page comes newest first), copied from that list in one slice.

    Example:
        ```python
        values = RunValues(merge_runs([(3, 2), (3, 4)]), {3: "a", 4: "b", 5: "c", 6: "d"})
        assert values.get([(3, 4)]) == ["a", "b", "c", "d"]
        assert values.get([(3, 2)]) == ["a", "b"]
        ```
    """

    __slots__ = ("_bases", "_longest", "_lookup", "_ranges", "_starts")

    def __init__(self, ranges: Sequence[Run], lookup: Mapping[int, T]) -> None:
        """`ranges`: sorted disjoint runs (`merge_runs`) whose every number is in `lookup`."""
        self._ranges = list(ranges)
        self._starts = [first for first, _ in self._ranges]
        self._lookup = lookup
        self._bases: dict[int, list[T]] = {}
        self._longest: tuple[list[Run], list[T]] = ([], [])

    def get(self, runs: Sequence[Run]) -> list[T]:
        """The values of the numbers of `runs`, in order (`KeyError` for a number not known)."""
        longest_runs, longest_values = self._longest
        if runs and len(runs) <= len(longest_runs):
            last = len(runs) - 1
            first, length = runs[last]
            known_first, known_length = longest_runs[last]
            if first == known_first and length <= known_length and runs[:last] == longest_runs[:last]:
                return longest_values[: sum(map(operator.itemgetter(1), runs))]
        out: list[T] = []
        for first, length in runs:
            i = bisect_right(self._starts, first) - 1
            if i < 0 or first + length > self._ranges[i][0] + self._ranges[i][1]:
                out.extend(map(self._lookup.__getitem__, range(first, first + length)))
                continue
            base = self._bases.get(i)
            if base is None:
                start, size = self._ranges[i]
                base = self._bases[i] = list(map(self._lookup.__getitem__, range(start, start + size)))
            offset = first - self._starts[i]
            out.extend(base[offset : offset + length])
        if len(out) > len(longest_values):
            self._longest = (list(runs), out[:])
        return out


def decode_refs(data: bytes | None) -> Refs:
    """The runs and flags; `ValueError` saying what is malformed."""
    if data is None:
        raise CorruptRowError("the reference blob is empty")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptRowError(f"the reference blob is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("v") not in (_FORMAT, _FORMAT_ABSOLUTE):
        raise CorruptRowError(f"the reference blob has an unknown format: {str(doc)[:80]!r}")
    flat = doc.get("runs")
    # `type(n) is int` (checked in C): JSON gives plain ints, and a bool is not a number here.
    if (
        not isinstance(flat, list)
        or len(flat) % 2
        or not all(map(operator.is_, map(type, flat), repeat(int)))
    ):
        raise CorruptRowError("the reference blob's runs are not pairs of integers")
    lengths = flat[1::2]
    if lengths and min(lengths) <= 0:
        raise CorruptRowError(f"the reference blob has a run of length {min(lengths)}")
    total = sum(lengths)
    if total > _MAX_MESSAGES:
        raise CorruptRowError(
            f"the reference blob refers to {total} messages, more than the {_MAX_MESSAGES:,} a list may hold"
        )
    if doc["v"] == _FORMAT_ABSOLUTE:
        runs: list[Run] = list(zip(flat[0::2], lengths))
    else:
        runs = []
        end = 0
        for gap, length in zip(flat[0::2], lengths):
            runs.append((end + gap, length))
            end += gap + length
    if runs and (min(runs)[0] < 0 or max(first + length for first, length in runs) > _MAX_SEQ):
        raise CorruptRowError("the reference blob refers to message numbers outside 0..2**63-1")
    without_id = doc.get("without_id", [])
    if not isinstance(without_id, list) or not all(type(i) is int and 0 <= i < total for i in without_id):
        raise CorruptRowError("the reference blob's without_id is not a list of indexes into it")
    refs = Refs(runs, bool(doc.get("snapshot", False)), bool(doc.get("single", False)), tuple(without_id))
    if refs.single and (len(runs) != 1 or runs[0][1] != 1):
        raise CorruptRowError("the reference blob of a single message refers to more than one")
    return refs
