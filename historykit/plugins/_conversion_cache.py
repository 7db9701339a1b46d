"""Neutral messages already made from a native object, reused on the next call.

An agent sends its whole history on every model call, and the history only grows; converting it
afresh each time would cost O(history) per call and would give new neutral objects every time, so
no per-message cache downstream (token counts, processors' own caches) could ever hit. An adapter
asks this cache first: a hit returns the very neutral messages it made last time.

A hit needs the same native object (kept alive by the entry, so its `id` cannot be reused) and the
same fingerprint: a cheap tuple the adapter computes from what a framework may change in place
(LangGraph's `add_messages` assigns message ids in place, for example). Mutating a part's content
in place is not detected; neither framework does that to a history it has handed out.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from historykit._messages import Message


class ConversionCache:
    """A bounded map from (native object, variant) to the neutral messages made from it."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[int, Hashable], tuple[Any, Hashable, tuple[Message, ...]]] = {}

    @property
    def entries(self) -> dict[tuple[int, Hashable], tuple[Any, Hashable, tuple[Message, ...]]]:
        """The entries by (`id` of the native object, variant): (the object, its fingerprint, its
        messages), for an adapter that reads its hits in a loop of its own (a hit is only one whose
        object is the very one asked about and whose fingerprint compares equal, as in `get`)."""
        return self._entries

    def get(self, native: Any, variant: Hashable, fingerprint: Hashable) -> tuple[Message, ...] | None:
        hit = self._entries.get((id(native), variant))
        if hit is not None and hit[0] is native and hit[1] == fingerprint:
            return hit[2]
        return None

    def put(
        self, native: Any, variant: Hashable, fingerprint: Hashable, messages: tuple[Message, ...]
    ) -> None:
        entries = self._entries
        if len(entries) >= self.max_entries:
            # Insertion order is age: drop the older half in one go rather than one per call.
            for key in list(entries)[: len(entries) // 2]:
                entries.pop(key, None)
        entries[(id(native), variant)] = (native, fingerprint, messages)

    def clear(self) -> None:
        self._entries.clear()
