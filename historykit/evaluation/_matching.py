"""How a probe's answer is looked for in a view: the text of a message, normalised, and the recall
handles a view names.

`normalise` makes formatting differences that do not change a fact irrelevant: case, runs of
whitespace (a summary re-flows lines), and the quotes and backticks a summary or a JSON argument
puts around a name. Everything else must match character for character. A needle is found
anywhere in a message's text (`src/a.py` is in `/repo/src/a.py`), never across two messages.

A message's text is what the model reads of it: text, thinking, summaries, tool results, and the
string values of tool-call arguments (not their JSON encoding, whose escapes would hide a quoted
error line).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from historykit._messages import (
    Message,
    OtherPart,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit._recall import HANDLE_LENGTH

_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans("", "", "`'\"")
_NAMED_HANDLE = re.compile(rf"\w+\(handle='([0-9a-f]{{{HANDLE_LENGTH}}})'\)")
"""`recall(handle='3f9a0c1b2d')`, as a placeholder names the call that returns its original
(`historykit._recall.recall_call`), whatever the recall tool is called."""


def normalise(text: str) -> str:
    """`text` case-folded, without quotes and backticks, each run of whitespace one space, stripped."""
    return _SPACE.sub(" ", text.casefold().translate(_QUOTES)).strip()


def message_text(message: Message) -> str:
    """Everything the model reads of `message`, one part a line."""
    return "\n".join(_part_texts(message))


def _part_texts(message: Message) -> Iterator[str]:
    for part in message.parts:
        if isinstance(part, (TextPart, ThinkingPart, SummaryPart)):
            yield part.text
        elif isinstance(part, ToolResultPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield part.name
            if isinstance(part.arguments, str):
                yield part.arguments
            else:
                yield from _strings(part.arguments)
        elif isinstance(part, OtherPart):
            yield part.text


def _strings(value: Any) -> Iterator[str]:
    """The strings (and numbers) inside a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def handles_named(text: str) -> list[str]:
    """The recall handles `text` names as `tool(handle='...')`, in order."""
    return _NAMED_HANDLE.findall(text)
