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
from collections.abc import Iterable, Sequence
from typing import NamedTuple

REFS_ENCODING = "historykit.refs"
"""`BlobRow.encoding` of a message list stored as references into the message log."""

_FORMAT = 1


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
    for first, length in runs:
        flat.append(first)
        flat.append(length)
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


def decode_refs(data: bytes | None) -> Refs:
    """The runs and flags; `ValueError` saying what is malformed."""
    if data is None:
        raise ValueError("the reference blob is empty")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the reference blob is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("v") != _FORMAT:
        raise ValueError(f"the reference blob has an unknown format: {str(doc)[:80]!r}")
    flat = doc.get("runs")
    if (
        not isinstance(flat, list)
        or len(flat) % 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in flat)
    ):
        raise ValueError("the reference blob's runs are not pairs of integers")
    runs: list[Run] = []
    for i in range(0, len(flat), 2):
        first, length = flat[i], flat[i + 1]
        if length <= 0:
            raise ValueError(f"the reference blob has a run of length {length}")
        runs.append((first, length))
    without_id = doc.get("without_id", [])
    total = sum(length for _, length in runs)
    if not isinstance(without_id, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < total for i in without_id
    ):
        raise ValueError("the reference blob's without_id is not a list of indexes into it")
    refs = Refs(runs, bool(doc.get("snapshot", False)), bool(doc.get("single", False)), tuple(without_id))
    if refs.single and (len(runs) != 1 or runs[0][1] != 1):
        raise ValueError("the reference blob of a single message refers to more than one")
    return refs
