"""Edits in batches: how far a processor that edits old messages goes on this call, if at all.

A processor that edits old messages (clears tool results, strips thinking) makes the provider's
prompt cache miss from the first edited message on, and on a model that binds thinking it costs
every thinking block after it (`historykit.BINDING_MODELS`). So it edits rarely and in batches: nothing
until the history crosses the trigger's high-water mark, then enough at once to bring it down to
the low-water mark, and at least `min_gain` tokens, or nothing at all. With a `rewrite_ratio`, a
batch must also pay for the cache write it causes: every message from the first one it edits to
the end is written to the cache again (1.25 a token instead of 0.1 read), so a batch that frees
little behind a long intact tail costs more than it ever saves.

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
    rewrite_ratio: float = 0.0,
) -> int:
    """The boundary (a message index) before which a processor edits on this call; 0 for no edit.

    - `candidates`: the message indices a boundary may sit at, ascending (the starts of the units
      the processor edits as a whole: tool-call units, turns).
    - `sizes` / `edited`: prefix sums (`len(messages) + 1` entries) of the message sizes as given
      and as they would be once edited. An edit never makes a message bigger; what an earlier
      batch already edited counts the same in both, so it frees nothing again. `edited` is read
      up to `limit` only, so it may stop there (`limit + 1` entries): what lies past it is never
      edited on this call, and need not be sized.
    - `limit`: the furthest boundary allowed (what must stay intact: the last results, the last
      turns, the current tool-use cycle).
    - `min_gain`: a batch that frees fewer tokens than this is not made (no trickling).
    - `rewrite_ratio`: a batch must free at least this many times the tokens the provider writes
      to its cache again because of it: the edited history from the first message it edits to the
      end (0: no such condition; none either for a history over the window, which cannot be sent
      as it is).

    The smallest boundary that reaches the low-water mark and frees `min_gain` (and pays for its
    rewrite), else the furthest allowed when that does, else 0.
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
    # The first message an edit changes (what an earlier batch edited frees nothing: it is not it);
    # the cache misses from there on whatever the boundary.
    first = _first_edit(sizes, edited, furthest)
    # A history over the window is edited whatever the rewrite costs: the call cannot go out as it is.
    ratio = rewrite_ratio if size <= ctx.context_window else 0.0

    def pays(at: int) -> bool:
        freed = gain(at)
        return freed >= ratio * (size - sizes[first] - freed)

    if not pays(furthest):
        return 0
    # Every condition only turns from False to True as the boundary moves on (the gain grows, the
    # rewritten tail shrinks): a binary search.
    a, b = 0, allowed
    while a < b:
        mid = (a + b) // 2
        at = candidates[mid]
        left = size - gain(at)
        if gain(at) >= need and pays(at) and trigger.satisfied(left, end - at, ctx):
            b = mid
        else:
            a = mid + 1
    return candidates[a] if a < allowed else furthest


def _first_edit(sizes: Sequence[int], edited: Sequence[int], at: int) -> int:
    """The index of the first message before `at` that an edit makes smaller (`at` frees something)."""
    a, b = 0, at
    while a < b:  # the gain of a prefix never shrinks as it grows
        mid = (a + b) // 2
        if sizes[mid + 1] - edited[mid + 1] > 0:
            b = mid
        else:
            a = mid + 1
    return a
