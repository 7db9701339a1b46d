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
instead, losing far more. When the items do not fit, the oldest leave the section for an **index**:
a text listing them, one item a line, itself an original with a handle of its own, which the
section's first item names:

    - 1,204 earlier tool outputs are listed by recall(handle='9b41c07e2a')

The index of a later summary starts with a line naming the previous index, so every output
a summary ever replaced stays reachable through a chain of handles, however long the conversation.
The summarizing step hands the index on as an original (`StepNotes.originals`, then
`PipelineResult.originals`), in both modes: the integrations keep it with the conversation as they
keep a cleared output's original, and a view replay in a new process writes it again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from historykit._messages import Message, SummaryPart, ToolCallPart, ToolResultPart
from historykit._recall import (
    HANDLE_LENGTH,
    handle_in,
    handles_in,
    placeholder_handle,
    recall_call,
    recall_handle,
)
from historykit.processors._clear_tool_results import describe_call
from historykit.processors._summarizers import ensure_items, parse_sections, section
from historykit.processors._turns import is_truncation_notice

RECALLABLE = "Tool outputs (recall by handle)"
"""The heading of the section."""

_INDEXED_ITEM = "{count:,} earlier tool outputs are listed by {call}"
_INDEXED = re.compile(r"([\d,]+) earlier tool outputs are listed by (\w+)\(handle='([0-9a-f]+)'\)")

_INDEX_HEAD = "[historykit: {count:,} tool outputs {what}, oldest first]"
_INDEX_EARLIER = "- {count:,} earlier ones: {call}"

_INLINE_CHARS = 60
"""An output of one line up to this long is written out: its recall line would be as long."""


ROOM_FRACTION = 0.15
"""The share of the context window a summary's recall section may take (in tokens, about 4
characters each): room for a few hundred items at 32k, and still far below what a compaction frees."""


def recall_room(window: int) -> int:
    """Characters the recall section may take in a summary for a `window`-token context."""
    return int(window * ROOM_FRACTION * 4)


@dataclass(frozen=True)
class RecallSection:
    """A summary's text with its recall section, and the index of the items it had no room for."""

    text: str
    index: tuple[str, str] | None = None
    """`(handle, text)` of the index this summary's section names first, when it wrote a new one."""


def ensure_recall_section(text: str, inputs: Sequence[Message], tool: str, max_chars: int) -> RecallSection:
    """`text` (a summary of `inputs`) with the tool outputs of `inputs` in its recall section, after
    the items of the previous summary's (an LLM summarizer may leave the section out), the newest
    that fit in `max_chars`; the others go to a new index, which names the previous one."""
    previous = [p for m in inputs for p in m.parts if isinstance(p, SummaryPart)]
    carried = section(parse_sections(previous[-1].text), RECALLABLE) if previous else []
    earlier: tuple[int, str] | None = None  # (outputs listed, handle) of the previous index
    if carried and (named := _INDEXED.fullmatch(carried[0])) and named[2] == tool:
        earlier, carried = (int(named[1].replace(",", "")), named[3]), carried[1:]
    present = set(section(parse_sections(text), RECALLABLE))
    listed = [*carried, *_notice_items(inputs, tool), *_items(inputs, tool)]
    items = [item for item in dict.fromkeys(listed) if item not in present]
    room, kept = max_chars - len(_INDEXED_ITEM) - 3 * HANDLE_LENGTH, 0
    for item in reversed(items):
        room -= len(item) + 3
        if room < 0:
            break
        kept += 1
    dropped, items = items[: len(items) - kept], items[len(items) - kept :]
    index: tuple[str, str] | None = None
    if dropped:
        count = len(dropped) + (earlier[0] if earlier is not None else 0)
        lines = [_INDEX_HEAD.format(count=count, what="a summary had no room to list")]
        if earlier is not None:
            lines.append(_INDEX_EARLIER.format(count=earlier[0], call=recall_call(tool, earlier[1])))
        lines += (f"- {item}" for item in dropped)
        body = "\n".join(lines)
        index = (recall_handle(body), body)
        earlier = (count, index[0])
    if earlier is not None:
        items.insert(0, _INDEXED_ITEM.format(count=earlier[0], call=recall_call(tool, earlier[1])))
    return RecallSection(ensure_items(text, RECALLABLE, items), index)


def truncation_index(removed: Sequence[Message], tool: str) -> tuple[str, str] | None:
    """`(handle, text)` of the index of the tool outputs `removed` held (a truncation's), with the
    items of a summary among them (its own index first) and the index an earlier truncation notice
    named; `None` when they held none."""
    items: list[str] = []
    for msg in removed:
        for part in msg.parts:
            if isinstance(part, SummaryPart):
                items += section(parse_sections(part.text), RECALLABLE)
    items = list(dict.fromkeys([*items, *_notice_items(removed, tool), *_items(removed, tool)]))
    if not items:
        return None
    head = _INDEX_HEAD.format(count=len(items), what="a truncation removed (or the indexes listing them)")
    body = "\n".join([head, *(f"- {item}" for item in items)])
    return recall_handle(body), body


def _notice_items(inputs: Sequence[Message], tool: str) -> Iterator[str]:
    """An item for the index each truncation notice among `inputs` names."""
    for msg in inputs:
        if is_truncation_notice(msg):
            text = msg.parts[0].text  # type: ignore[union-attr]
            for handle in handles_in(text, tool):
                yield f"tool outputs removed earlier: {recall_call(tool, handle)}"


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
