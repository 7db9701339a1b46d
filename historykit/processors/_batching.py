"""Edits in batches: how far a processor that edits old messages goes on this call, if at all.

A processor that edits old messages (clears tool results, strips thinking) makes the provider's
prompt cache miss from the first edited message on, and on a model that binds thinking it costs
every thinking block after it (`historykit.BINDING_MODELS`). So it edits rarely and in batches: nothing
until the history crosses the trigger's high-water mark, then enough at once to bring it down to
the low-water mark, and at least `min_gain` tokens, or nothing at all.

The edit is described by a *boundary*: every message before it is edited, every message after it
is left alone. A processor decides it for the call at hand only; that the history stays
append-only between batches follows from each call's input being the previous call's view plus
what arrived since, in both modes (`historykit._view`, the one replay of a conversation's calls).

Example:
    ```python
    boundary = batch_boundary(
        candidates=unit_starts,          # where a boundary may sit, ascending
        sizes=prefix_sums(original),     # tokens of messages[:i], as given
        edited=prefix_sums(processed),   # tokens of messages[:i], each one edited
        limit=furthest_allowed,          # what must stay intact: the last results, the current cycle
        trigger=Trigger(max_fraction=0.5),
        ctx=ctx,
        min_gain=2_000,
    )
    ```
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate

from historykit._pipeline import ProcessContext
from historykit.processors._trigger import Trigger


def prefix_sums(values: Iterable[int]) -> list[int]:
    """`[0, v0, v0 + v1, ...]`: entry `i` is the total of the first `i` values."""
    return list(accumulate(values, initial=0))


def batch_boundary(
    *,
    candidates: Sequence[int],
    sizes: Sequence[int],
    edited: Sequence[int],
    limit: int,
    trigger: Trigger,
    ctx: ProcessContext,
    min_gain: int,
) -> int:
    """The boundary (a message index) before which a processor edits on this call; 0 for no edit.

    - `candidates`: the message indices a boundary may sit at, ascending (the starts of the units
      the processor edits as a whole: tool-call units, turns).
    - `sizes` / `edited`: prefix sums (`len(messages) + 1` entries) of the message sizes as given
      and as they would be once edited. An edit never makes a message bigger; what an earlier
      batch already edited counts the same in both, so it frees nothing again.
    - `limit`: the furthest boundary allowed (what must stay intact: the last results, the last
      turns, the current tool-use cycle).
    - `min_gain`: a batch that frees fewer tokens than this is not made (no trickling).

    The smallest boundary that reaches the low-water mark and frees `min_gain`, else the furthest
    allowed when that frees `min_gain`, else 0.
    """
    end = len(sizes) - 1
    size = sizes[end]
    if not trigger.fires(size, end, ctx):
        return 0
    allowed = bisect_right(candidates, limit)
    if not allowed:
        return 0
    furthest = candidates[allowed - 1]
    need = max(min_gain, 1)

    def gain(at: int) -> int:
        return sizes[at] - edited[at]

    if gain(furthest) < need:
        return 0
    # Both conditions only turn from False to True as the boundary moves on: a binary search.
    a, b = 0, allowed
    while a < b:
        mid = (a + b) // 2
        at = candidates[mid]
        left = size - gain(at)
        if gain(at) >= need and trigger.satisfied(left, end - at, ctx):
            b = mid
        else:
            a = mid + 1
    return candidates[a] if a < allowed else furthest
