"""Hysteresis without state: where a processor's edits reach, found by replaying its trigger.

A processor that edits old messages (clears tool results, strips thinking) must edit rarely and in
batches, or every call misses the provider's prompt cache. It must also be a pure function of the
history, because it runs in two modes: persistent (its output is the next call's input) and
view-only (every call sees the raw, ever-growing history). `replay_boundary` gives both.

The edit is described by a *boundary*: every message before it is edited (its tool results
cleared, its thinking stripped), every message after it is left alone. The boundary is found by
walking the request points of the history (the positions just before each assistant message, and
the end) from the start, tracking the size the processed prefix would have had at that request;
whenever that size crosses the trigger's high-water mark, the boundary moves forward far enough to
bring the prefix down to the low-water mark, and by at least `min_gain` tokens, or not at all. The
final boundary is the answer.

Why the two modes agree: a persistent input is the raw history with some earlier boundary `b0`
already applied, so its size with boundary `b` is the raw size with boundary `max(b, b0)`. The
replay on it therefore fires where the raw replay fires; a move that stays below `b0` frees
nothing and is refused by `min_gain`, and past `b0` both replays search the same sizes. Between two
moves the output only grows by appending, which is what keeps the prompt cache hitting.

Example:
    ```python
    boundary = replay_boundary(
        points=[i for i, m in enumerate(messages) if m.role == "assistant"] + [len(messages)],
        candidates=unit_starts,          # where a boundary may sit, ascending
        sizes=prefix_sums(original),     # tokens of messages[:i], as given
        edited=prefix_sums(processed),   # tokens of messages[:i], each one edited
        cap=lambda p: furthest_allowed(p),
        trigger=Trigger(max_fraction=0.5),
        ctx=ctx,
        min_gain=2_000,
    )
    ```
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate

from historykit.pipeline import ProcessContext
from historykit.processors.trigger import Trigger

__all__ = ["prefix_sums", "replay_boundary"]


def prefix_sums(values: Iterable[int]) -> list[int]:
    """`[0, v0, v0 + v1, ...]`: entry `i` is the total of the first `i` values."""
    return list(accumulate(values, initial=0))


def replay_boundary(
    *,
    points: Sequence[int],
    candidates: Sequence[int],
    sizes: Sequence[int],
    edited: Sequence[int],
    cap: Callable[[int], int],
    trigger: Trigger,
    ctx: ProcessContext,
    min_gain: int,
) -> int:
    """The boundary (a message index) before which a processor edits, replayed along the history.

    - `points`: the request points, ascending: prefix lengths at which a model call was made.
    - `candidates`: the message indices a boundary may sit at, ascending (the starts of the units
      the processor edits as a whole: tool-call units, turns).
    - `sizes` / `edited`: prefix sums (`len(messages) + 1` entries) of the message sizes as given
      and as they would be once edited. An edit never makes a message bigger.
    - `cap(p)`: the furthest boundary allowed at request point `p` (what must stay intact there:
      the last results, the last turns, the current tool-use cycle). It never decreases with `p`.
    - `min_gain`: a move that frees fewer tokens than this is not made (no trickling).

    Returns 0 when the trigger never fires or no move was worth making.
    """
    boundary = 0
    need = max(min_gain, 1)

    def furthest(point: int) -> int:
        """The furthest candidate allowed at `point` (or `boundary` when none is past it)."""
        below = bisect_right(candidates, cap(point))
        return candidates[below - 1] if below and candidates[below - 1] > boundary else boundary

    def gain(at: int) -> int:
        return (sizes[at] - sizes[boundary]) - (edited[at] - edited[boundary])

    def moves_at(point: int) -> bool:
        """True when a call at `point` would move the boundary: the trigger fires and enough can go."""
        size = edited[boundary] + sizes[point] - sizes[boundary]
        return trigger.fires(size, point, ctx) and gain(furthest(point)) >= need

    # With the boundary fixed, `moves_at` only turns from False to True along the points (sizes
    # grow, the cap never moves back), so the next move is found by a galloping search, not by
    # visiting every request point: the replay costs a few steps per batch, not one per call.
    first = 0
    while first < len(points):
        lo, step = first, 1
        while lo + step - 1 < len(points) and not moves_at(points[lo + step - 1]):
            lo, step = lo + step, step * 2
        hi = min(lo + step - 1, len(points))
        while lo < hi:
            mid = (lo + hi) // 2
            if moves_at(points[mid]):
                hi = mid
            else:
                lo = mid + 1
        if lo == len(points):
            break
        point = points[lo]
        size = edited[boundary] + sizes[point] - sizes[boundary]
        last = furthest(point)
        # The smallest move that reaches the low-water mark and frees enough (a condition that
        # also only turns from False to True as the boundary moves on), else all that is allowed.
        a, b = bisect_right(candidates, boundary), bisect_right(candidates, last)
        while a < b:
            mid = (a + b) // 2
            at = candidates[mid]
            left = edited[at] + sizes[point] - sizes[at]
            if size - left >= need and trigger.satisfied(left, point - at, ctx):
                b = mid
            else:
                a = mid + 1
        boundary = candidates[a] if a < bisect_right(candidates, last) else last
        first = lo + 1
    return boundary
