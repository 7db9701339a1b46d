"""Content digests of neutral messages: what tells two messages apart by what the model reads.

Used wherever a history must be recognised by content across calls, when the objects are new each
time (a checkpoint read back, an adapter that converts again): `Summarize` keys its summaries by the
span they cover, the view replay keys the views it derived by the raw history they came from.

Example:
    ```python
    from historykit._digests import MessageDigests

    digests = MessageDigests()
    digests.key(messages)       # one hex digest for the whole list
    digests.digest(messages[0]) # 20 bytes for one message, remembered per message object
    ```
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy, IdentityCache
from historykit._messages import (
    MediaPart,
    Message,
    OtherPart,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)


class MessageDigests:
    """Content digests of messages, remembered per message (or per native message, for adapters
    that make new neutral objects on every call): a view-only replay hashes each message once.

    `cache_policy` bounds what is remembered (the pipeline's, `historykit._identity_cache`)."""

    def __init__(self, cache_policy: CachePolicy = DEFAULT_CACHE_POLICY) -> None:
        self.cache_policy = cache_policy
        self._cache: IdentityCache[bytes] = IdentityCache()

    def key(self, messages: Sequence[Message]) -> str:
        """Identity of a summarizer input by content."""
        h = hashlib.blake2b(digest_size=20)
        for msg in messages:
            h.update(self.digest(msg))
        return h.hexdigest()

    def digest(self, msg: Message) -> bytes:
        anchor: object = msg.native if msg.is_untouched else msg
        # One native message may give several neutral ones (a request's system prompt and user
        # prompt): the role and the part kinds tell them apart.
        variant = (msg.role, tuple(p.kind for p in msg.parts))
        digest = self._cache.get(anchor, variant)
        if digest is None:
            digest = self._cache.put(anchor, message_digest(msg), self.cache_policy, variant)
        return digest


def message_digest(msg: Message) -> bytes:
    """20 bytes that change whenever anything the model reads of `msg` (or its pin state) changes:
    every byte of it, media payloads included (`MediaPart.digest`, else the native part). Each field
    is length-prefixed, so no text can pass for a boundary between two parts."""
    h = hashlib.blake2b(digest_size=20)
    _fields(h, "message", msg.role, int(msg.pinned))
    for part in msg.parts:
        _fields(h, part.kind, int(part.pinned))
        if isinstance(part, (TextPart, SummaryPart)):
            _fields(h, part.text)
        elif isinstance(part, ThinkingPart):
            _fields(h, part.text, part.signature, part.id, part.redacted)
        elif isinstance(part, ToolCallPart):
            _fields(h, part.id, part.name, part.arguments_text())
        elif isinstance(part, ToolResultPart):
            _fields(h, part.tool_call_id, part.name, part.is_error, part.content)
            for item in part.media:  # none in most results: their digest is what it always was
                _fields(h, item.kind)
                if isinstance(item, MediaPart):
                    _media_fields(h, item)
                else:
                    _fields(h, item.text)
        elif isinstance(part, MediaPart):
            _media_fields(h, part)
        elif isinstance(part, OtherPart):
            # `text` is only a rendering for counting: the native object is what the model gets.
            _fields(h, part.type_name, part.text, "" if part.native is None else repr(part.native))
    return h.digest()


def _media_fields(h: Any, part: MediaPart) -> None:
    _fields(h, part.media_type, part.source, part.size, part.digest)
    if not part.digest and part.native is not None:
        _fields(h, repr(part.native))


def _fields(h: Any, *values: object) -> None:
    """Each value's text, length-prefixed. A native part goes in by its `repr` (every field and
    payload of a dataclass, a content block's dict); an object whose `repr` names only its address
    hashes as unique to itself, which at worst misses a cache, never merges two contents."""
    for value in values:
        if value is None:
            h.update(b"\xff" * 8)  # no length is this: `None` is not the text "None"
            continue
        data = str(value).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
