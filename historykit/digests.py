"""Content digests of neutral messages: what tells two messages apart by what the model reads.

Used wherever a history must be recognised by content across calls, when the objects are new each
time (a checkpoint read back, an adapter that converts again): `Summarize` keys its summaries by the
span they cover, the view replay keys the views it derived by the raw history they came from.

Example:
    ```python
    from historykit.digests import MessageDigests

    digests = MessageDigests()
    digests.key(messages)       # one hex digest for the whole list
    digests.digest(messages[0]) # 20 bytes for one message, remembered per message object
    ```
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from historykit.identity_cache import DEFAULT_CACHE_POLICY, CachePolicy, IdentityCache
from historykit.messages import (
    MediaPart,
    Message,
    OtherPart,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["MessageDigests", "message_digest"]


class MessageDigests:
    """Content digests of messages, remembered per message (or per native message, for adapters
    that make new neutral objects on every call): a view-only replay hashes each message once.

    `cache_policy` bounds what is remembered (the pipeline's, `historykit.identity_cache`)."""

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
    """20 bytes that change whenever anything the model reads of `msg` (or its pin state) changes."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"\x1e{msg.role}\x1f{int(msg.pinned)}".encode())
    for part in msg.parts:
        h.update(f"\x1d{part.kind}\x1f{int(part.pinned)}\x1f".encode())
        if isinstance(part, (TextPart, SummaryPart)):
            h.update(part.text.encode())
        elif isinstance(part, ThinkingPart):
            h.update(f"{part.text}\x1f{part.signature}\x1f{part.id}\x1f{part.redacted}".encode())
        elif isinstance(part, ToolCallPart):
            h.update(f"{part.id}\x1f{part.name}\x1f{part.arguments_text()}".encode())
        elif isinstance(part, ToolResultPart):
            h.update(f"{part.tool_call_id}\x1f{part.name}\x1f{part.is_error}\x1f{part.content}".encode())
        elif isinstance(part, MediaPart):
            h.update(f"{part.media_type}\x1f{part.source}\x1f{part.size}".encode())
        elif isinstance(part, OtherPart):
            h.update(f"{part.type_name}\x1f{part.text}".encode())
    return h.digest()
