"""When a processor starts work, and how far down it works: the shared trigger.

A `Trigger` has a high-water mark (absolute tokens, a fraction of the context window, or a message
count) that starts work, and a low-water mark that work goes down to. Between the two the
processed history only grows by appending, so the provider's prompt cache keeps hitting; an edit
happens only when the high-water mark is crossed, and then it frees enough to last a while.

Example:
    ```python
    from historykit.processors.trigger import Trigger

    trigger = Trigger(max_fraction=0.8, low_water=0.5)   # start at 80% of the window, go down to 40%
    trigger.fires(tokens=90_000, messages=300, ctx=ctx)  # with a 100k window: True
    trigger.target_tokens(ctx)                           # 40_000
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

from historykit.pipeline import ProcessContext

__all__ = ["Trigger"]


@dataclass(frozen=True)
class Trigger:
    """High-water and low-water marks shared by the processors that compact."""

    max_tokens: int | None = None
    """Start work when the history is over this many tokens."""
    max_fraction: float | None = None
    """Start work when the history is over this fraction of the model's context window."""
    max_messages: int | None = None
    """Start work when the history has more than this many messages."""
    low_water: float = 0.6
    """Work goes down to this fraction of the high-water mark (0 < low_water <= 1)."""

    def __post_init__(self) -> None:
        if self.max_tokens is None and self.max_fraction is None and self.max_messages is None:
            raise ValueError("a trigger needs max_tokens, max_fraction or max_messages")
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or self.max_tokens <= 0):
            raise ValueError(f"max_tokens must be a positive int, got {self.max_tokens!r}")
        if self.max_fraction is not None and not 0 < self.max_fraction <= 1:
            raise ValueError(f"max_fraction must be in (0, 1], got {self.max_fraction!r}")
        if self.max_messages is not None and (isinstance(self.max_messages, bool) or self.max_messages <= 0):
            raise ValueError(f"max_messages must be a positive int, got {self.max_messages!r}")
        if not 0 < self.low_water <= 1:
            raise ValueError(f"low_water must be in (0, 1], got {self.low_water!r}")

    def high_tokens(self, ctx: ProcessContext) -> int | None:
        """The token high-water mark, the tighter of `max_tokens` and `max_fraction`."""
        limits = []
        if self.max_tokens is not None:
            limits.append(self.max_tokens)
        if self.max_fraction is not None:
            limits.append(int(ctx.context_window * self.max_fraction))
        return min(limits) if limits else None

    def fires(self, tokens: int, messages: int, ctx: ProcessContext) -> bool:
        """True when a history of this size crosses the high-water mark."""
        high = self.high_tokens(ctx)
        if high is not None and tokens > high:
            return True
        return self.max_messages is not None and messages > self.max_messages

    def target_tokens(self, ctx: ProcessContext) -> int | None:
        """Tokens to work down to once the trigger fired."""
        high = self.high_tokens(ctx)
        return None if high is None else int(high * self.low_water)

    def target_messages(self) -> int | None:
        """Messages to work down to once the trigger fired."""
        return None if self.max_messages is None else max(1, int(self.max_messages * self.low_water))

    def satisfied(self, tokens: int, messages: int, ctx: ProcessContext) -> bool:
        """True once a history is at or below the low-water mark(s)."""
        target = self.target_tokens(ctx)
        if target is not None and tokens > target:
            return False
        target_n = self.target_messages()
        return target_n is None or messages <= target_n
