"""Inseparable units and turns of a history: what a compacting processor keeps or drops whole.

A history is cut only between units:
- a **system** message is a unit (and always kept);
- a **request** is a message in the user's own voice (user text, not tool results); it opens a turn;
- an **exchange** is an assistant message with its tool calls (and any reasoning, which lives in the
  same message) plus every following message that carries their results, so a call is never
  separated from its result and a parallel group never split; consecutive assistant messages (an
  invalid history, or a reasoning item sent as its own message) stay in one exchange;
- a **compaction** message is one a compacting processor wrote: a summary (any message with a
  `SummaryPart`) or a truncation notice. It opens no turn: it stands for what it replaced.

A turn is a request and the units that follow it up to the next request.

Example:
    ```python
    from historykit.processors._turns import split_turns, split_units

    for unit in split_units(messages):
        print(unit.kind, messages[unit.start : unit.end])
    for turn in split_turns(messages):
        print(turn.request, len(turn.units))
    ```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from historykit._messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart

UnitKind = Literal["system", "request", "exchange", "compaction"]
"""What a unit of the history is: the system prompt, a user request, an exchange (an assistant
message with the tool results that answer it), or a compaction (a summary or a truncation notice)."""

_NOTICE = (
    "[historykit] {count} earlier {messages} of this conversation {were} removed to fit the context "
    "window. The task, pinned messages and the latest messages are kept verbatim."
)
_NOTICE_RE = re.compile(
    r"\[historykit\] (\d+) earlier messages? of this conversation (?:was|were) removed "
    r"to fit the context window\."
)


_NOTICE_INDEX = " Their tool outputs are listed by {call}."
"""With the recall tool, what the notice adds: the call returning the index of the removed tool
outputs (`historykit.processors._summary_recall.truncation_index`)."""


def truncation_notice(count: int, index_call: str | None = None) -> Message:
    """The user-voice notice a truncation leaves in place of `count` removed messages; `index_call`:
    the recall call that lists their tool outputs."""
    text = _NOTICE.format(
        count=count, messages="message" if count == 1 else "messages", were="was" if count == 1 else "were"
    )
    if index_call is not None:
        text += _NOTICE_INDEX.format(call=index_call)
    return Message("user", (TextPart(text),))


def notice_count(message: Message) -> int | None:
    """How many messages a truncation notice says were removed; `None` when it is not one."""
    if message.role != "user" or message.pinned or len(message.parts) != 1:
        return None
    part = message.parts[0]
    if not isinstance(part, TextPart) or part.pinned or not part.text.startswith("[historykit] "):
        return None
    match = _NOTICE_RE.match(part.text)
    return int(match.group(1)) if match else None


def is_truncation_notice(message: Message) -> bool:
    """A message that is historykit's notice of the messages a truncation removed."""
    return notice_count(message) is not None


def is_summary_message(message: Message) -> bool:
    """A message carrying a compaction summary (ours or one a framework or application wrote)."""
    return any(isinstance(p, SummaryPart) for p in message.parts)


def is_compaction_message(message: Message) -> bool:
    """A message that stands for compacted history: a summary, or a truncation's notice."""
    return is_summary_message(message) or is_truncation_notice(message)


def is_user_request(message: Message) -> bool:
    """A message in the user's own voice: user text that is neither tool results nor a compaction."""
    return (
        message.role == "user"
        and not any(isinstance(p, ToolResultPart) for p in message.parts)
        and not is_compaction_message(message)
    )


def head_end(messages: Sequence[Message]) -> int:
    """Index just after the first user request (the task); everything before it is always kept.

    `len(messages)` when there is no user request at all.
    """
    for index, msg in enumerate(messages):
        if is_user_request(msg):
            return index + 1
    return len(messages)


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages `start:end` of a history, kept or dropped together."""

    start: int
    end: int
    kind: UnitKind
    pinned: bool
    """A message of the unit is pinned or carries a pinned part: the unit is kept whole."""


def _kind(message: Message) -> UnitKind:
    role = message.role
    if role == "system":
        return "system"
    if role == "assistant" or role == "tool":
        return "compaction" if is_summary_message(message) else "exchange"
    if is_compaction_message(message):
        return "compaction"
    return "exchange" if any(isinstance(p, ToolResultPart) for p in message.parts) else "request"


def split_units(messages: Sequence[Message], start: int = 0, stop: int | None = None) -> list[Unit]:
    """The units of `messages[start:stop]`, in order; `start` must be a unit boundary."""
    stop = len(messages) if stop is None else stop
    units: list[Unit] = []
    i = start
    while i < stop:
        msg = messages[i]
        end = i + 1
        kind = _kind(msg)
        if kind == "exchange":
            if msg.role == "assistant":
                while (
                    end < stop and messages[end].role == "assistant" and not is_summary_message(messages[end])
                ):
                    end += 1
                end = _results_end(messages, i, end, stop)
            else:
                # Tool results with no assistant message before them (an invalid history) stay
                # together with the results that follow them.
                while (
                    end < stop
                    and messages[end].role in ("user", "tool")
                    and _kind(messages[end]) == "exchange"
                ):
                    end += 1
        pinned = False
        for m in messages[i:end]:
            if m.pinned or any(p.pinned for p in m.parts):
                pinned = True
                break
        units.append(Unit(i, end, kind, pinned))
        i = end
    return units


def _results_end(messages: Sequence[Message], first: int, end: int, stop: int) -> int:
    """End of the exchange whose assistant messages are `first:end`: past the last of its results."""
    calls = {p.id for m in messages[first:end] for p in m.parts if isinstance(p, ToolCallPart)}
    last = end
    j = end
    # Results come right after the calls; in an invalid history user text may sit between two
    # results of one call group, and the group still stays whole.
    while j < stop:
        msg = messages[j]
        if msg.role not in ("user", "tool"):
            break
        results = [p for p in msg.parts if isinstance(p, ToolResultPart)]
        if results:
            if not calls or any(r.tool_call_id in calls for r in results):
                last = j + 1
        elif msg.role == "tool":
            last = j + 1  # a tool message without results still belongs to the calls before it
        elif is_compaction_message(msg):
            break
        j += 1
    return last


@dataclass(frozen=True, slots=True)
class Turn:
    """A request and the units that answer it, up to the next request."""

    request: Unit | None
    """The user request that opens the turn; `None` for units before the first request."""
    units: tuple[Unit, ...]
    """The units after the request (system, exchange and compaction units)."""

    @property
    def start(self) -> int:
        first = self.request or self.units[0]
        return first.start

    @property
    def end(self) -> int:
        last = self.units[-1] if self.units else self.request
        assert last is not None
        return last.end


def split_turns(messages: Sequence[Message]) -> list[Turn]:
    """The turns of a history, in order (compaction messages open no turn)."""
    turns: list[Turn] = []
    request: Unit | None = None
    units: list[Unit] = []
    for unit in split_units(messages):
        if unit.kind == "request":
            if request is not None or units:
                turns.append(Turn(request, tuple(units)))
            request, units = unit, []
        else:
            units.append(unit)
    if request is not None or units:
        turns.append(Turn(request, tuple(units)))
    return turns
