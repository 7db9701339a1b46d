"""What both replaying models share: the turn being answered, and what each call was sent."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from historykit._messages import Message
from historykit._tokens import TokenCounter
from historykit.errors import InvalidArgumentError
from historykit.testing._recording import Recording

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
        from historykit._frameworks import adapter_for

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


class _Replay(ABC, Generic[ResponseT]):
    """The turn a replay answers from, and the next recorded response of that turn.

    A framework's replay says how a turn's assistant messages become its responses (`_responses`)
    and builds the model, the tools and the prompts (`_build`).
    """

    def __init__(
        self,
        recording: Recording,
        *,
        window: int | None = DEFAULT_WINDOW,
        counter: TokenCounter | None = None,
        on_call: Callable[[Call], None] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Args:
        recording: The session to replay.
        window: The context window the model declares in its profile (`None`: none). Pydantic AI
            1.x profiles have no window: there, give it to `HistoryKitProcessor(context_window=...)`.
        counter: Counts the tokens of each call (a default `TokenCounter` otherwise).
        on_call: Called with each `Call` as the model receives it.
        delay: Seconds each model call waits, so a live display can be followed.
        """
        self.recording = recording
        """The session replayed."""
        self.delay = delay
        """Seconds each model call waits, so a live display can be followed."""
        self._meter = _Meter(recording, counter, on_call)
        self._turns = [self._responses(recording.messages[start:end]) for start, end in recording.turns]
        self._turn = 0
        self._next = 0
        self._build(window)

    @abstractmethod
    def _responses(self, turn: list[Message]) -> list[ResponseT]:
        """A turn's assistant messages as the framework's responses, in order."""

    @abstractmethod
    def _build(self, window: int | None) -> None:
        """Make the model (declaring `window`), the tools and the prompts."""

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
