"""A summary's recall section: the tool outputs it replaced, each with the call that gives it back.

A summary keeps what a tool output meant (files touched, errors met, decisions), not every value
it held. With the recall tool installed (`historykit._recall`), the summary also lists the outputs it
replaced, so a value the agent needs again stays one call away instead of being lost:

    ## Tool outputs (recall by handle)
    - Read(file_path='src/app.py'): recall(handle='3f9a0c1b2d')
    - Bash(command='pytest -q'): returned `3 passed in 0.41s`

Each item is the output's call (`describe_call`) and `recall(handle=...)`, the handle being the
output's own (or, for an output already cleared, the one its placeholder names: the original's),
so the recall tool finds it where it finds a cleared output. A one-line output no longer than its
recall line is written out instead. The previous summary's items are kept (an update carries them
on), so a handle survives any number of compactions. Items are in the order the outputs came.

The section has a room (`recall_room`: about 15% of the context window): a summary that
outgrew the window's room would free too little to be used, and the conversation would be truncated
instead, losing far more. When the items do not fit, the oldest go first and the section's first
item says how many are not listed (the store's transcript still has them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from historykit._messages import Message, SummaryPart, ToolCallPart, ToolResultPart
from historykit._recall import handle_in, placeholder_handle, recall_call
from historykit.processors._clear_tool_results import describe_call
from historykit.processors._summarizers import ensure_items, parse_sections, section

RECALLABLE = "Tool outputs (recall by handle)"
"""The heading of the section."""

_UNLISTED_ITEM = "{count:,} earlier tool outputs are not listed here (the transcript keeps them)"
_UNLISTED = re.compile(r"([\d,]+) earlier tool outputs are not listed here \(the transcript keeps them\)")

_INLINE_CHARS = 60
"""An output of one line up to this long is written out: its recall line would be as long."""


ROOM_FRACTION = 0.15
"""The share of the context window a summary's recall section may take (in tokens, about 4
characters each): room for a few hundred items at 32k, and still far below what a compaction frees."""


def recall_room(window: int) -> int:
    """Characters the recall section may take in a summary for a `window`-token context."""
    return int(window * ROOM_FRACTION * 4)


def ensure_recall_section(text: str, inputs: Sequence[Message], tool: str, max_chars: int) -> str:
    """`text` (a summary of `inputs`) with the tool outputs of `inputs` in its recall section, after
    the items of the previous summary's (an LLM summarizer may leave the section out), the newest
    that fit in `max_chars`."""
    previous = [p for m in inputs for p in m.parts if isinstance(p, SummaryPart)]
    carried = section(parse_sections(previous[-1].text), RECALLABLE) if previous else []
    unlisted = 0
    if carried and (count := _UNLISTED.fullmatch(carried[0])):
        unlisted, carried = int(count[1].replace(",", "")), carried[1:]
    present = set(section(parse_sections(text), RECALLABLE))
    items = [item for item in dict.fromkeys([*carried, *_items(inputs, tool)]) if item not in present]
    room, kept = max_chars, 0
    for item in reversed(items):
        room -= len(item) + 3
        if room < 0:
            break
        kept += 1
    unlisted += len(items) - kept
    items = items[len(items) - kept :]
    if unlisted:
        items.insert(0, _UNLISTED_ITEM.format(count=unlisted))
    return ensure_items(text, RECALLABLE, items)


def _items(inputs: Sequence[Message], tool: str) -> Iterator[str]:
    calls = {p.id: p for m in inputs for p in m.parts if isinstance(p, ToolCallPart)}
    for msg in inputs:
        for part in msg.parts:
            if not isinstance(part, ToolResultPart) or not part.content.strip():
                continue
            call = calls.get(part.tool_call_id)
            label = describe_call(call) if call is not None else f"{part.name or 'tool'}()"
            content = part.content.strip()
            # A placeholder historykit wrote names the original's handle: that one is recalled.
            written = msg.marker is not None and handle_in(content, tool) is not None
            if not written and len(content) <= _INLINE_CHARS and "\n" not in content and "`" not in content:
                yield f"{label}: returned `{content}`"
            else:
                handle = placeholder_handle(part.content, tool, msg.marker is not None)
                yield f"{label}: {recall_call(tool, handle)}"
