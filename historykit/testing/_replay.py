"""What both replaying models share: the turn being answered, and what each call was sent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from historykit.errors import InvalidArgumentError
from historykit.testing._recording import Recording
from historykit.tokens import TokenCounter

CLOSING_TEXT = "[historykit demo] The recording has no answer to this call: the replay ends the turn here."
"""What a replayed model answers when a recorded turn ends without a final answer."""
DEFAULT_WINDOW = 10_000
"""The context window a replayed model declares in its profile unless told another."""

ResponseT = TypeVar("ResponseT")
"""The framework's model response type (`ModelResponse`, `AIMessage`)."""


@dataclass(frozen=True)
class Call:
    """One model call of a replay, measured where the model receives it."""

    number: int
    """1-based, over the whole replay."""
    turn: int
    """0-based turn of the recording."""
    sent: int
    """Tokens of the messages the model was sent."""
    reused: int
    """Tokens at the start of the input identical to the previous call's (what a prompt cache reuses)."""
    raw: int | None
    """Tokens the recorded history had at this call (`None` for a call the replay added)."""
    replayed: bool
    """False when the recording had no answer and the replay closed the turn (`CLOSING_TEXT`)."""


class _Meter:
    """Counts each call's input, and how much of it repeats the previous call's input from its start.

    Inputs are compared as a provider sees them: role and content of each message (neutral), not
    the framework's ids or metadata, which are not sent.
    """

    def __init__(
        self,
        recording: Recording,
        counter: TokenCounter | None,
        on_call: Callable[[Call], None] | None,
    ) -> None:
        self.counter = counter or TokenCounter()
        self.raw = recording.raw_sizes(self.counter)
        self.on_call = on_call
        self.calls: list[Call] = []
        self._previous: list[tuple[Any, ...]] = []
        self._recorded = 0  # calls answered from the recording so far: the index into `raw`

    def measure(self, messages: Sequence[Any], turn: int, replayed: bool) -> Call:
        from historykit.plugins import adapter_for

        neutral = adapter_for(messages).to_neutral(list(messages)) if messages else []
        sizes = [self.counter.count_message(m) for m in neutral]
        seen: list[tuple[Any, ...]] = [(m.role, m.parts) for m in neutral]
        reused = 0
        for old, new, size in zip(self._previous, seen, sizes):
            if old != new:
                break
            reused += size
        self._previous = seen
        raw = None
        if replayed:
            raw = self.raw[self._recorded]
            self._recorded += 1
        call = Call(len(self.calls) + 1, turn, sum(sizes), reused, raw, replayed)
        self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)
        return call


class _Replay(Generic[ResponseT]):
    """The turn a replay answers from, and the next recorded response of that turn."""

    def __init__(
        self,
        recording: Recording,
        turns: list[list[ResponseT]],
        *,
        counter: TokenCounter | None,
        on_call: Callable[[Call], None] | None,
        delay: float,
    ) -> None:
        self.recording = recording
        """The session replayed."""
        self.delay = delay
        """Seconds each model call waits, so a live display can be followed."""
        self._meter = _Meter(recording, counter, on_call)
        self._turns = turns
        self._turn = 0
        self._next = 0

    @property
    def calls(self) -> list[Call]:
        """Every model call so far."""
        return self._meter.calls

    def start_turn(self, turn: int) -> None:
        """Answer the next calls from turn `turn` of the recording."""
        if not 0 <= turn < len(self._turns):
            raise InvalidArgumentError(f"the recording has {len(self._turns)} turns, not a turn {turn}")
        self._turn, self._next = turn, 0

    def _respond(self, messages: Sequence[Any]) -> tuple[Call, ResponseT | None]:
        """Measure a call; the turn's next recorded response, `None` when the turn has no more."""
        recorded = self._turns[self._turn]
        replayed = self._next < len(recorded)
        call = self._meter.measure(messages, self._turn, replayed)
        if not replayed:
            return call, None
        response = recorded[self._next]
        self._next += 1
        return call, response
