"""Caches keyed by object identity, and the one policy that bounds them all.

An agent sends its whole history on every model call and the history only grows, so work done on
a message object (its verdict as a file read, its edited copy, a token count) is remembered on
that object and the next call pays only for what is new. Every such cache in the processors is an
`IdentityCache`; how large any of them may grow, and what goes when one is full, is one
`CachePolicy`, held by the `Pipeline` (`Pipeline(cache_policy=...)`) and handed to each processor
in its `ProcessContext`. A processor run outside a pipeline gets `DEFAULT_CACHE_POLICY`.

An entry keeps a reference to its object, so the object's `id` cannot be reused by another while
the entry lives: a hit is always the same object.

Example:
    ```python
    from historykit import Pipeline
    from historykit._identity_cache import CachePolicy

    pipeline = Pipeline(processors, cache_policy=CachePolicy(max_entries=20_000))  # a smaller bound
    ```
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from historykit._validate import check_int
from historykit.errors import InvalidArgumentError

_V = TypeVar("_V")


@dataclass(frozen=True)
class CachePolicy:
    """How large each identity cache may grow, and what it drops when full.

    Example:
        ```python
        CachePolicy()                                      # 200,000 entries a cache, oldest half dropped
        CachePolicy(max_entries=10_000, eviction="clear")  # small, and emptied when full
        ```
    """

    max_entries: int = 200_000
    """Entries one cache holds before it evicts (each processor has a few caches; a long
    conversation adds about one entry per message or tool call to each)."""
    eviction: Literal["oldest_half", "clear"] = "oldest_half"
    """What a full cache drops: `oldest_half`, the older half of its entries (the recent history,
    which the next call asks about again, stays); `clear`, everything (the next call refills it)."""
    max_conversations: int = 1_024
    """Conversations whose state a pipeline keeps (`historykit._conversations`: their views, summaries,
    recall originals); the least recently used is forgotten first, and starts over as in a new process."""

    def __post_init__(self) -> None:
        check_int("max_entries", self.max_entries, minimum=1)
        check_int("max_conversations", self.max_conversations, minimum=1)
        if self.eviction not in ("oldest_half", "clear"):
            raise InvalidArgumentError(f"eviction must be 'oldest_half' or 'clear', got {self.eviction!r}")


DEFAULT_CACHE_POLICY = CachePolicy()
"""The policy of a pipeline built without one, and of a processor run outside a pipeline."""


class IdentityCache(Generic[_V]):
    """Values remembered per object (and, optionally, per a variant of it), bounded by a
    `CachePolicy` given at each `put`.

    Example:
        ```python
        verdicts: IdentityCache[Verdict] = IdentityCache()
        verdict = verdicts.get(call)
        if verdict is None:
            verdict = verdicts.put(call, judge(call), ctx.cache_policy)
        ```
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[object, _V]] = {}

    def get(self, obj: object, variant: Hashable = None) -> _V | None:
        """The value remembered for this very object (and variant); `None` when there is none."""
        hit = self._entries.get((id(obj), variant))
        if hit is not None and hit[0] is obj:
            return hit[1]
        return None

    def put(self, obj: object, value: _V, policy: CachePolicy, variant: Hashable = None) -> _V:
        """Remember `value` for `obj` (evicting as `policy` says when full); returns `value`."""
        entries = self._entries
        if len(entries) >= policy.max_entries:
            if policy.eviction == "clear":
                entries.clear()
            else:
                # Insertion order is age: drop the older half in one go rather than one per call.
                # `pop`, not `del`: another thread serving another conversation may evict too.
                for key in list(entries)[: len(entries) // 2]:
                    entries.pop(key, None)
        entries[(id(obj), variant)] = (obj, value)
        return value

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
