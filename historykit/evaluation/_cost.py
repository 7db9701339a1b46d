"""What a call's input costs when a provider's prompt cache prices it.

The longest run of leading messages identical to the previous call's input is read from the cache
(`CACHE_READ` of the base input price per token); the rest is written to it (`CACHE_WRITE`,
Anthropic's 1.25). The same prices as `benchmarks/replay.py` and `historykit demo`, so the costs
`historykit eval` prints compare with the benchmarks'.
"""

from __future__ import annotations

from collections.abc import Sequence

from historykit._messages import Message
from historykit._tokens import TokenCounter

CACHE_READ = 0.1
"""Price of an input token served from the prompt cache, in base input-token prices."""
CACHE_WRITE = 1.25
"""Price of an input token that misses the cache (written to it)."""


def call_cost(tokens: int, reused: int) -> float:
    """The price of a call sending `tokens` input tokens, `reused` of them the previous call's prefix."""
    return CACHE_READ * reused + CACHE_WRITE * (tokens - reused)


def cached_prefix(previous: Sequence[Message], view: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens of the leading messages of `view` identical to `previous`'s (what the cache serves)."""
    reused = 0
    for old, new in zip(previous, view):
        if old is not new and old != new:
            break
        reused += counter.count_message(new)
    return reused
