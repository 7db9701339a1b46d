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
one). A new process replays the whole conversation once.

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
from typing import Literal

from historykit._digests import MessageDigests
from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy
from historykit._messages import Message

Mode = Literal["persistent", "view"]
"""How a conversation is stored: the view itself (`persistent`), or the raw history (`view`)."""


def request_points(messages: Sequence[Message]) -> list[int]:
    """The model calls a raw history records, as prefix lengths: before each assistant message, and
    the end (the call about to be made). Ascending, the last one is always `len(messages)`."""
    points = [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]
    if not points or points[-1] != len(messages):
        points.append(len(messages))
    return points


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
            self._remember(chain[index], view)
        return view, replayed

    def remember(self, raw: Sequence[Message], view: Sequence[Message], setting: str = "") -> None:
        """Remember `view` as the view of the model call that ends `raw`, under `setting`: later
        calls under that setting continue from it. For a compaction made outside the replay (the
        integrations' compact-and-retry after a context overflow)."""
        points = request_points(raw)
        self._remember(self._chain(raw, points, setting)[-1], list(view))

    def _recall(self, key: bytes) -> tuple[Message, ...] | None:
        with self._lock:
            known = self._views.get(key)
            if known is not None:
                self._views.move_to_end(key)
            return known

    def _remember(self, key: bytes, view: list[Message]) -> None:
        with self._lock:
            self._views[key] = tuple(view)
            self._views.move_to_end(key)
            while len(self._views) > self.max_views:
                self._views.popitem(last=False)

    def __len__(self) -> int:
        return len(self._views)
