"""Search over a conversation's own transcript: what the model saw before, found by what it contained.

A compaction keeps the conversation in the window by replacing what is old: outputs cleared,
turns summarized. A handle gives one output back when the model knows which; the search finds it
when the model only knows what was in it ("the port the server was started on", "where
`refresh_token` was first read"). It reads every message the conversation had (its originals, not
the compacted view): what the user and the model wrote, the tools called with their arguments (so
file paths and commands are found), and what the tools returned.

A query is one or more words; a line matches when it contains every word (case-insensitive, plain
text: no pattern a model writes can make a search take exponential time). Each matching part is
one hit, newest first, with what it was (the user's words, the model's, a tool call and its
arguments, a tool's output), up to `LINES_PER_HIT` of its matching lines, numbered, and for a
tool output the recall call that returns it (`historykit._recall`). Hits come in pages of
`HITS_PER_PAGE`; a page ends with a note naming the call for the next one.

Example:
    ```python
    from historykit._transcript_search import find, render

    hits = find(messages, "refresh_token")
    render(hits, "refresh_token", page=1, tool="search_history", recall_tool="recall")
    ```
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._reading import shown
from historykit._recall import content_handle, recall_call
from historykit.errors import InvalidArgumentError

HITS_PER_PAGE = 10
"""Hits one answer shows."""
LINES_PER_HIT = 3
"""Matching lines one hit shows (a count says how many more the part has)."""
MAX_QUERY = 200
"""Characters a query may have."""
_LINE_CHARS = 240
"""Characters of one matching line shown."""


@dataclass(frozen=True)
class Hit:
    """One part of the transcript that matches."""

    what: str
    """What the part is: `user`, `assistant`, `tool call Bash(...)`, `output of Bash(...)`."""
    lines: tuple[tuple[int, str], ...]
    """Its matching lines, numbered from 1 (at most `LINES_PER_HIT`)."""
    more: int = 0
    """How many more of its lines match."""
    handle: str | None = None
    """For a tool output, its recall handle."""

    def to_json(self) -> list[object]:
        """The hit as JSON-safe data (what a durable unit returns)."""
        return [self.what, [list(line) for line in self.lines], self.more, self.handle]

    @classmethod
    def from_json(cls, data: object) -> Hit:
        """A hit `to_json` made; `InvalidArgumentError` naming it when `data` is not one."""
        if isinstance(data, list) and len(data) == 4:
            what, lines, more, handle = data
            if (
                isinstance(what, str)
                and isinstance(lines, list)
                and all(_is_line(line) for line in lines)
                and isinstance(more, int)
                and (handle is None or isinstance(handle, str))
            ):
                return cls(what, tuple((n, text) for n, text in lines), more, handle)
        raise InvalidArgumentError(f"not a search hit: {shown(data)}")


def _is_line(line: object) -> bool:
    return isinstance(line, list) and len(line) == 2 and isinstance(line[0], int) and isinstance(line[1], str)


def check_query(query: object, page: object) -> str | None:
    """What is wrong with the tool's arguments, as the `[search: ...]` answer says it; `None`: nothing."""
    if not isinstance(query, str) or not query.split() or len(query) > MAX_QUERY:
        return (
            f"[search: query must be one or more words, at most {MAX_QUERY} characters; got {shown(query)}]"
        )
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        return f"[search: page must be a page number (1 or more), got {shown(page)}]"
    return None


def find(messages: Sequence[Message], query: str) -> list[Hit]:
    """Every part of `messages` with a line that contains each word of `query`, newest first.
    Messages a compaction wrote (summaries, notices, placeholders: they carry a marker) are not
    searched: the originals they stand for are."""
    words = [word.casefold() for word in query.split()]
    calls = {call.id: call for msg in messages for call in msg.tool_calls}
    hits: list[Hit] = []
    for msg in messages:
        if msg.marker is not None:
            continue
        for what, text, handle in _searchable(msg, calls):
            matching = [
                (number, line)
                for number, line in enumerate(text.split("\n"), start=1)
                if all(word in line.casefold() for word in words)
            ]
            if matching:
                shown_lines = tuple((n, _cut(line)) for n, line in matching[:LINES_PER_HIT])
                hits.append(Hit(what, shown_lines, len(matching) - len(shown_lines), handle))
    hits.reverse()
    return hits


def merged(*groups: Sequence[Hit]) -> list[Hit]:
    """The hits of every group, in order, each once (the same part found in two sources, a
    framework's history and a store's transcript, is one hit)."""
    return list(dict.fromkeys(hit for group in groups for hit in group))


def render(hits: Sequence[Hit], query: str, page: int, tool: str, recall_tool: str | None) -> str:
    """Page `page` of `hits`, as the tool answers."""
    if not hits:
        return f"[search: no message of this conversation has a line with {shown(query)}]"
    pages = -(-len(hits) // HITS_PER_PAGE)
    if page > pages:
        return f"[search: {len(hits):,} hits make {pages:,} page(s); page {page:,} is past the end]"
    blocks = []
    for hit in hits[(page - 1) * HITS_PER_PAGE : page * HITS_PER_PAGE]:
        lines = [f"{number:>6}\t{line}" for number, line in hit.lines]
        if hit.more:
            lines.append(f"        (and {hit.more:,} more matching line(s))")
        if hit.handle is not None and recall_tool is not None:
            lines.append(f"        {recall_call(recall_tool, hit.handle)} returns this output")
        blocks.append("\n".join([f"- {hit.what}:", *lines]))
    first, last = (page - 1) * HITS_PER_PAGE + 1, min(page * HITS_PER_PAGE, len(hits))
    note = f"[search: hits {first:,}-{last:,} of {len(hits):,}, newest first"
    if page < pages:
        note += f"; {tool}(query={query!r}, page={page + 1}) shows the next page]"
    else:
        note += "; the end]"
    return "\n".join([*blocks, note])


def _searchable(msg: Message, calls: dict[str, ToolCallPart]) -> Iterator[tuple[str, str, str | None]]:
    """What of `msg` is searched: (what it is, its text, a tool output's handle)."""
    for part in msg.parts:
        if isinstance(part, TextPart) and msg.role in ("user", "assistant"):
            yield msg.role, part.text, None
        elif isinstance(part, ToolCallPart):
            arguments = (
                part.arguments
                if isinstance(part.arguments, str)
                else json.dumps(part.arguments, ensure_ascii=False)
            )
            yield f"tool call {_described(part)}", f"{part.name} {arguments}", None
        elif isinstance(part, ToolResultPart):
            call = calls.get(part.tool_call_id)
            what = (
                f"output of {_described(call)}" if call is not None else f"output of {part.name or 'a tool'}"
            )
            yield what, part.content, content_handle(part.content)


def _described(call: ToolCallPart) -> str:
    # The processors import the recall module, which imports this one on first use.
    from historykit.processors._clear_tool_results import describe_call

    return describe_call(call)


def _cut(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _LINE_CHARS else f"{line[:_LINE_CHARS]}…"
