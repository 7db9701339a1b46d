"""The view: the exact messages the model is sent, the same whichever way a conversation is stored.

A pipeline turns the history into the view. Between compactions the view only grows: the next call
sends the previous view, unchanged, plus what arrived since (the model's response, tool results, the
user's next message). A compaction replaces the view from some position on, rarely and in one batch.
That is what keeps the provider's prompt cache hitting and, on models that bind thinking to the
history (`historykit.BINDING_MODELS`), what keeps thinking valid.

There are two ways to store a conversation, and one view:

- **persistent**: the view *is* the stored history. Each call's input is the previous view plus the
  new messages, and the pipeline processes it once.
- **view-only**: the stored history is the raw one, every message as it arrived. The view is derived
  from it by replaying the conversation's model calls in order (`ViewReplay`): the first call sees
  the raw messages before the first response; every later call sees the view the previous call
  produced plus the raw messages since. That is exactly the persistent input, so both ways send the
  same messages and make the same summarizer calls.

Deriving is cheap after the first call: each view is remembered under a digest of the raw history
it was derived from, so a call only replays the model calls since the last one it saw (usually
one). A new process replays the whole conversation once, or continues from a view stored with it
(`Pipeline.remember_view`). A view is first remembered with the very message objects it was
derived from, and digested only when a call's history is not made of them (a new process read
it back): a call that continues the same objects, as an integration's resume does, hashes none.

Example:
    ```python
    import historykit

    pipeline = historykit.default_pipeline()
    pipeline.run(raw_messages, context_window=32_000, mode="view")      # the view of a raw history
    pipeline.run(previous_view + new, context_window=32_000)             # persistent: the same view
    ```
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Literal

from historykit._digests import MessageDigests
from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy
from historykit._messages import Message
from historykit._scan_memo import common_prefix

Mode = Literal["persistent", "view"]
"""How a conversation is stored: the view itself (`persistent`), or the raw history (`view`)."""


def request_points(messages: Sequence[Message]) -> list[int]:
    """The model calls a raw history records, as prefix lengths: before each assistant message, and
    the end (the call about to be made). Ascending, the last one is always `len(messages)`."""
    points = [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]
    if not points or points[-1] != len(messages):
        points.append(len(messages))
    return points


@dataclass(frozen=True)
class _Unkeyed:
    """A view remembered with the raw messages it was derived from, not digested yet."""

    setting: str
    raw: tuple[Message, ...]
    view: tuple[Message, ...]


_MAX_UNKEYED = 4
"""Views kept undigested at most; past it the oldest is digested (`ViewReplay._key_unkeyed`)."""


class ViewReplay:
    """Derives the view of a raw history by replaying its model calls; remembers what it derived.

    `derive` is a generator so that one piece of code serves sync and async pipelines: it yields
    each replayed call's input and is sent back that call's output, the view of that call.

    Example:
        ```python
        from historykit._plans import drive

        replay = ViewReplay()
        view, replayed = drive(replay.derive(raw), process)   # each replayed call's input -> its view
        ```
    """

    def __init__(self, max_views: int = 32, cache_policy: CachePolicy = DEFAULT_CACHE_POLICY) -> None:
        self.max_views = max_views
        """Views remembered (least recently used go first), one per model call: a warm call needs
        the latest; older ones serve a history rewound to an earlier call (a retried turn)."""
        self._views: OrderedDict[bytes, tuple[Message, ...]] = OrderedDict()
        self._lengths: dict[bytes, int] = {}
        """The length of the raw history each view of `_views` ends."""
        self._unkeyed: list[_Unkeyed] = []
        """Views not digested yet, the most recent last: found by the identity of their messages."""
        self._digests = MessageDigests(cache_policy)
        # Two calls of one conversation may run at once (a double submit from two threads).
        self._lock = threading.Lock()

    def _chain(self, raw: Sequence[Message], points: Sequence[int], setting: str) -> list[bytes]:
        """The digest of `raw[:p]` for every point `p`: a hash chain over the message digests,
        seeded with what else decides the view (the window, whether thinking binds)."""
        out: list[bytes] = []
        h = hashlib.blake2b(setting.encode(), digest_size=20)
        at = 0
        for point in points:
            for msg in raw[at:point]:
                h.update(self._digests.digest(msg))
            at = point
            out.append(h.copy().digest())
        return out

    def derive(
        self, raw: Sequence[Message], setting: str = ""
    ) -> Generator[list[Message], list[Message], tuple[list[Message], int]]:
        """Yields each model call's input from the latest remembered one on; returns the final view
        and how many calls were replayed to reach it (1 for a warm call, 0 for a history already
        derived). `setting` names what else the views depend on: views of another setting are not
        reused."""
        points = request_points(raw)
        found = self._unkeyed_hit(raw, points, setting)
        if found is not None:
            at, previous = found
            if at == len(points) - 1:
                return list(previous), 0
            # One call to replay: what it derives is remembered with its messages, as `previous` was.
            derived = yield [*previous, *raw[points[at] : points[-1]]]
            self._remember_unkeyed(_Unkeyed(setting, tuple(raw), tuple(derived)))
            return derived, 1
        self._key_unkeyed(0)
        chain = self._chain(raw, points, setting)
        view: list[Message] = []
        start, done = 0, 0
        for index in range(len(points) - 1, -1, -1):
            known = self._recall(chain[index])
            if known is not None:
                view, start, done = list(known), points[index], index + 1
                break
        if done == len(points):
            # The very same raw history as a call already derived: that call's view, once more.
            return view, 0
        replayed = 0
        for index in range(done, len(points)):
            point = points[index]
            view = yield [*view, *raw[start:point]]
            replayed += 1
            start = point
            self._remember(chain[index], view, point)
        return view, replayed

    def remember(self, raw: Sequence[Message], view: Sequence[Message], setting: str = "") -> None:
        """Remember `view` as the view of the model call that ends `raw`, under `setting`: later
        calls under that setting continue from it. For a compaction made outside the replay (the
        integrations' compact-and-retry after a context overflow)."""
        self._remember_unkeyed(_Unkeyed(setting, tuple(raw), tuple(view)))

    def _unkeyed_hit(
        self, raw: Sequence[Message], points: Sequence[int], setting: str
    ) -> tuple[int, tuple[Message, ...]] | None:
        """The index in `points` and the view of an undigested view whose messages are the very
        first messages of `raw`, when it is the furthest any remembered view reaches: at the last
        point, or at the one before with no view remembered past it. `None` otherwise (the
        digests decide)."""
        with self._lock:
            for index in range(len(self._unkeyed) - 1, -1, -1):
                entry = self._unkeyed[index]
                length = len(entry.raw)
                if entry.setting != setting or length not in (
                    points[-1],
                    points[-2] if len(points) > 1 else -1,
                ):
                    continue
                if common_prefix(entry.raw, raw) != length:
                    continue
                later = [len(other.raw) for other in self._unkeyed if other is not entry]
                later.extend(self._lengths.values())
                if length < points[-1] and any(length < other <= points[-1] for other in later):
                    return None  # a view past it may hold the same content: the digests decide
                self._unkeyed.append(self._unkeyed.pop(index))
                return points.index(length), entry.view
        return None

    def _remember_unkeyed(self, entry: _Unkeyed) -> None:
        length = len(entry.raw)
        with self._lock:
            # The same messages remembered again: the newer view replaces the older one.
            self._unkeyed = [
                other
                for other in self._unkeyed
                if not (
                    other.setting == entry.setting
                    and len(other.raw) == length
                    and common_prefix(other.raw, entry.raw) == length
                )
            ]
            self._unkeyed.append(entry)
        self._key_unkeyed(_MAX_UNKEYED)

    def _key_unkeyed(self, keep: int) -> None:
        """Digest the undigested views but the `keep` most recent, and remember them by content
        (each stays findable by its messages until it is)."""
        while True:
            with self._lock:
                if len(self._unkeyed) <= keep:
                    return
                entry = self._unkeyed[0]
            key = self._chain(entry.raw, request_points(entry.raw), entry.setting)[-1]
            with self._lock:
                if any(other is entry for other in self._unkeyed):
                    self._unkeyed = [other for other in self._unkeyed if other is not entry]
                    self._keep(key, entry.view, len(entry.raw))

    def _recall(self, key: bytes) -> tuple[Message, ...] | None:
        with self._lock:
            known = self._views.get(key)
            if known is not None:
                self._views.move_to_end(key)
            return known

    def _remember(self, key: bytes, view: list[Message], length: int) -> None:
        with self._lock:
            self._keep(key, tuple(view), length)

    def _keep(self, key: bytes, view: tuple[Message, ...], length: int) -> None:
        """Remember `view` under `key` (the lock held)."""
        self._views[key] = view
        self._lengths[key] = length
        self._views.move_to_end(key)
        while len(self._views) > self.max_views:
            old, _ = self._views.popitem(last=False)
            del self._lengths[old]

    def __len__(self) -> int:
        return len(self._views) + len(self._unkeyed)
