"""When a processor starts work, and how far down it works: the shared trigger, and named presets.

A `Trigger` has a high-water mark (absolute tokens, a fraction of the context window, tokens kept
free below the window, or a message count) that starts work, and a low-water mark that work goes
down to. Between the two the processed history only grows by appending, so the provider's prompt
cache keeps hitting; an edit happens only when the high-water mark is crossed, and then it frees
enough to last a while.

The token mark is the tighter of `max_tokens`, `max_fraction` of the window and the window less
`reserve`, raised to `floor_fraction` of the window when that is higher. Cline's formula,
`max(window − 40k, 0.8 · window)`, is `Trigger(reserve=40_000, floor_fraction=0.8)`
(`Trigger.cline()`): 102,400 tokens at a 128,000-token window (not the 88,000 of the window less
40k), 160,000 at 200,000, 960,000 at 1,000,000.

Named presets for the whole default pipeline (where each stage starts, where usage warns) are
`historykit.processors.TRIGGER_PRESETS`.

Example:
    ```python
    from historykit.processors import Trigger

    trigger = Trigger(max_fraction=0.8, low_water=0.5)   # start at 80% of the window, go down to 40%
    trigger.fires(tokens=90_000, messages=300, ctx=ctx)  # with a 100k window: True
    trigger.target_tokens(ctx)                           # 40_000
    Trigger.cline().mark(128_000)                        # 102_400: max(128k − 40k, 0.8 · 128k)
    Trigger(reserve=16_000).mark(128_000)                # 112_000: keep 16k free
    ```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from historykit._context_window import MAX_CONTEXT_WINDOW
from historykit._pipeline import ProcessContext
from historykit._validate import check_fraction, check_instance, check_int
from historykit.errors import InvalidArgumentError


@dataclass(frozen=True)
class Trigger:
    """High-water and low-water marks shared by the processors that compact.

    Example:
        ```python
        Trigger(max_fraction=0.8)                        # 80% of the window
        Trigger(max_tokens=60_000, low_water=0.5)        # 60k tokens, down to 30k
        Trigger(reserve=40_000, floor_fraction=0.8)      # Cline: max(window − 40k, 0.8 · window)
        Trigger(max_messages=200)                        # more than 200 messages
        ```
    """

    max_tokens: int | None = None
    """Start work when the history is over this many tokens."""
    max_fraction: float | None = None
    """Start work when the history is over this fraction of the model's context window."""
    max_messages: int | None = None
    """Start work when the history has more than this many messages."""
    low_water: float = 0.6
    """Work goes down to this fraction of the high-water mark (0 < low_water <= 1)."""
    reserve: int | None = None
    """Tokens kept free: start work when the history is over the window less this many tokens."""
    floor_fraction: float | None = None
    """The token mark is never below this fraction of the window (with a `reserve` larger than a
    small window can spare, the mark would otherwise sit near zero); needs a token mark to raise."""

    def __post_init__(self) -> None:
        if (
            self.max_tokens is None
            and self.max_fraction is None
            and self.max_messages is None
            and self.reserve is None
        ):
            raise InvalidArgumentError("a trigger needs max_tokens, max_fraction, reserve or max_messages")
        for name in ("max_tokens", "max_messages", "reserve"):
            check_int(name, getattr(self, name), minimum=1, optional=True)
        for name in ("max_tokens", "reserve"):
            value = getattr(self, name)
            # Beyond any window a token count is a slip (10**30): the trigger would never fire.
            if value is not None and value > MAX_CONTEXT_WINDOW:
                raise InvalidArgumentError(
                    f"{name} must be at most {MAX_CONTEXT_WINDOW:,} tokens (the largest window), "
                    f"got {value:,}"
                )
        for name in ("max_fraction", "floor_fraction"):
            check_fraction(name, getattr(self, name), numbers_only=False, optional=True)
        token_marks = (self.max_tokens, self.max_fraction, self.reserve)
        if self.floor_fraction is not None and all(mark is None for mark in token_marks):
            raise InvalidArgumentError(
                "floor_fraction raises a token mark: give reserve, max_tokens or max_fraction"
            )
        check_fraction("low_water", self.low_water, numbers_only=False)

    @classmethod
    def cline(cls, reserve: int = 40_000, floor_fraction: float = 0.8, low_water: float = 0.5) -> Trigger:
        """Cline's window formula, `max(window − reserve, floor_fraction · window)`: 102,400 tokens at a
        128,000-token window. Cline then drops half of the conversation after the task, hence
        `low_water=0.5`."""
        return cls(reserve=reserve, floor_fraction=floor_fraction, low_water=low_water)

    def with_settings(self, **settings: float | None) -> Trigger:
        """This trigger with `settings` (its field names) applied; `None` values are left out. A
        high-water mark among them (`max_tokens`, `max_fraction`, `max_messages`, `reserve`) replaces
        this trigger's marks; `low_water` or `floor_fraction` alone keep them.

        Example:
            ```python
            Trigger(max_fraction=0.5).with_settings(low_water=0.4)   # 50% of the window, down to 40%
            Trigger(max_fraction=0.5).with_settings(max_tokens=9_000) # 9,000 tokens, no fraction
            ```
        """
        given = {name: value for name, value in settings.items() if value is not None}
        if any(name in given for name in HIGH_WATER_MARKS):
            return Trigger(**given)  # type: ignore[arg-type]  # ints for the int marks
        return replace(self, **given)  # type: ignore[arg-type]  # ints for the int marks

    def mark(self, window: int) -> int | None:
        """The token high-water mark for a context window of `window` tokens (`None`: a message
        count trigger only)."""
        limits = []
        if self.max_tokens is not None:
            limits.append(self.max_tokens)
        if self.max_fraction is not None:
            limits.append(int(window * self.max_fraction))
        if self.reserve is not None:
            limits.append(max(0, window - self.reserve))
        if not limits:
            return None
        if self.floor_fraction is not None:
            return max(min(limits), int(window * self.floor_fraction))
        return min(limits)

    def fixed(self, window: int) -> Trigger:
        """This trigger with its token mark fixed in tokens for `window` (a budget that no longer
        follows the run's window)."""
        mark = self.mark(window)
        if mark is None:
            return self
        return replace(self, max_tokens=max(1, mark), max_fraction=None, reserve=None, floor_fraction=None)

    def high_tokens(self, ctx: ProcessContext) -> int | None:
        """The token high-water mark for the run's window (see `mark`), in the counter's tokens:
        less what the provider counts that the counter does not see (`ProcessContext.reported_offset`)."""
        mark = self.mark(ctx.context_window)
        return None if mark is None else counted_mark(mark, ctx)

    def fires(self, tokens: int, messages: int, ctx: ProcessContext) -> bool:
        """True when a history of this size crosses the high-water mark."""
        high = self.high_tokens(ctx)
        if high is not None and tokens > high:
            return True
        return self.max_messages is not None and messages > self.max_messages

    def target_tokens(self, ctx: ProcessContext) -> int | None:
        """Tokens to work down to once the trigger fired (in the counter's tokens, as `high_tokens`)."""
        mark = self.mark(ctx.context_window)
        return None if mark is None else counted_mark(int(mark * self.low_water), ctx)

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


def counted_mark(tokens: int, ctx: ProcessContext) -> int:
    """A mark in the provider's tokens, in the counter's: less `ctx.reported_offset`, but never below
    a quarter of it (tool definitions that fill the window leave nothing to compact towards)."""
    return max(tokens - ctx.reported_offset, tokens // 4, 1)


DEFAULT_FRACTION = 0.8
"""The default trigger's high-water mark, as a fraction of the window."""
HIGH_WATER_MARKS = ("max_tokens", "max_fraction", "max_messages", "reserve")
"""The `Trigger` fields that set a high-water mark (the others say how far down work goes)."""

DEFAULT_TRIGGER = Trigger(max_fraction=DEFAULT_FRACTION)
"""The trigger of `Summarize` and `PairwiseTruncate` when none is given: over 80% of the window,
down to 60% of that (`Trigger.low_water`'s default)."""


@dataclass
class TriggerField:
    """The `trigger` field of the processors that compact (`Summarize`, `PairwiseTruncate`): a
    subclass's `__post_init__` calls this one, which checks it."""

    trigger: Trigger = field(default_factory=lambda: DEFAULT_TRIGGER)
    """When work starts (the high-water mark) and how far down it goes (the low-water mark); see
    `Trigger`. Default: over 80% of the window, down to 60% of that."""

    def __post_init__(self) -> None:
        """Raises `ArgumentTypeError` when `trigger` is not a `Trigger`."""
        check_instance("trigger", self.trigger, Trigger, "a historykit Trigger")
