"""How the recall tool reads an original: a page of characters, a range of lines, or the lines that
contain a text.

A cleared or offloaded tool output can be long (a 30,000-line log, a whole file): the model
rarely needs all of it, and all of it would take the room the compaction freed. So the recall tool
reads an original the way a model reads a file:

- `offset=`: the characters from there on (the whole output, when it fits in one answer);
- `start_line=` / `end_line=`: those lines (1-based, both included), numbered like `cat -n`;
- `grep=`: the lines that contain a text (case-insensitive, a plain text: no regular expression,
  so no pattern a model writes can make a search take exponential time), numbered, within the
  line range when one is given.

Every answer is at most `max_chars` characters and ends, when there is more, with a note naming
the call that reads on. A request that cannot be answered (a line past the end, `offset` together
with a line range) gets a short `[recall: ...]` text saying why, never an exception.

Example:
    ```python
    from historykit._reading import Reading

    reading = Reading.checked(offset=0, start_line=40, end_line=60, grep=None)
    assert isinstance(reading, Reading)
    reading.answer("recall", "3f9a0c1b2d", "line 1\\nline 2", max_chars=20_000)
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_GREP = 200
"""Characters a `grep=` text may have."""
_SHOWN = 40
"""Characters of a bad argument a `[recall: ...]` answer repeats (the model may pass megabytes)."""
_LINE_CHARS = 2_000
"""Characters of one numbered line shown (a minified file is one line of megabytes)."""


@dataclass(frozen=True)
class Reading:
    """The part of an original the model asked for (see the module documentation)."""

    offset: int = 0
    """The first character of a page (no line range, no grep)."""
    start_line: int | None = None
    """The first line to read (1-based); `None`: the first."""
    end_line: int | None = None
    """The last line to read (included); `None`: the last."""
    grep: str | None = None
    """Only the lines that contain this text (case-insensitive); `None`: every line."""

    @classmethod
    def checked(cls, offset: object, start_line: object, end_line: object, grep: object) -> Reading | str:
        """The reading the tool's arguments ask for, or the `[recall: ...]` text saying what is wrong."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            return f"[recall: offset must be a non-negative whole number, got {shown(offset)}]"
        for name, line in (("start_line", start_line), ("end_line", end_line)):
            if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 1):
                return f"[recall: {name} must be a line number (1 or more), got {shown(line)}]"
        if grep is not None and (not isinstance(grep, str) or not grep or len(grep) > MAX_GREP):
            return f"[recall: grep must be a text of 1 to {MAX_GREP} characters, got {shown(grep)}]"
        lines = start_line is not None or end_line is not None or grep is not None
        if offset and lines:
            return "[recall: pass offset (characters) or start_line/end_line/grep (lines), not both]"
        assert start_line is None or isinstance(start_line, int)
        assert end_line is None or isinstance(end_line, int)
        if start_line is not None and end_line is not None and end_line < start_line:
            return f"[recall: end_line {end_line:,} is before start_line {start_line:,}]"
        assert isinstance(offset, int) and (grep is None or isinstance(grep, str))
        return cls(offset, start_line, end_line, grep)

    @property
    def by_lines(self) -> bool:
        return self.start_line is not None or self.end_line is not None or self.grep is not None

    def answer(self, tool: str, handle: str, content: str, max_chars: int) -> str:
        """What the recall tool returns of `content` (the original `handle` names)."""
        if self.by_lines:
            return self._lines(tool, handle, content, max_chars)
        return self._page(tool, handle, content, max_chars)

    def _page(self, tool: str, handle: str, content: str, max_chars: int) -> str:
        offset = self.offset
        if offset and offset >= len(content):
            return (
                f"[recall: the output '{handle}' has {len(content):,} characters; offset {offset:,} is past "
                "its end]"
            )
        end = min(offset + max_chars, len(content))
        if offset == 0 and end == len(content):
            return content
        note = f"[recall: characters {offset:,}-{end:,} of {len(content):,}"
        if end < len(content):
            note += f"; {tool}(handle='{handle}', offset={end}) returns the next part]"
        else:
            note += "; the end]"
        return f"{content[offset:end]}\n{note}"

    def _lines(self, tool: str, handle: str, content: str, max_chars: int) -> str:
        lines = content.split("\n")
        first = self.start_line or 1
        last = min(self.end_line or len(lines), len(lines))
        if first > len(lines):
            return f"[recall: the output '{handle}' has {len(lines):,} lines; line {first:,} is past its end]"
        needle = self.grep.casefold() if self.grep is not None else None
        shown_lines: list[str] = []
        room = max_chars
        more_from = None  # the first line with something to show that did not fit
        matches = 0
        for number in range(first, last + 1):
            line = lines[number - 1]
            if needle is not None and needle not in line.casefold():
                continue
            matches += 1
            if more_from is not None:
                continue  # counting the matches left
            text = line if len(line) <= _LINE_CHARS else f"{line[:_LINE_CHARS]}… ({len(line):,} characters)"
            numbered = f"{number:>6}\t{text}"
            if shown_lines and len(numbered) + 1 > room:
                more_from = number
                if needle is None:
                    break
                continue
            shown_lines.append(numbered)
            room -= len(numbered) + 1
        span = f"lines {first:,}-{last:,} of {len(lines):,}"
        if needle is not None:
            if not shown_lines:
                return f"[recall: no line of the output '{handle}' ({span}) contains {shown(self.grep)}]"
            found = f"{len(shown_lines):,} matching line(s) shown, {span} searched"
            if more_from is not None:
                rest = matches - len(shown_lines)
                note = (
                    f"[recall: {found}; {rest:,} more from line {more_from:,}: "
                    f"{tool}(handle='{handle}', grep={self.grep!r}, start_line={more_from}) shows them]"
                )
            else:
                note = f"[recall: {found}; the end]"
        elif more_from is not None:
            note = (
                f"[recall: lines {first:,}-{more_from - 1:,} of {len(lines):,}; "
                f"{tool}(handle='{handle}', start_line={more_from}) returns the next part]"
            )
        else:
            note = f"[recall: {span}; the end]"
        return "\n".join([*shown_lines, note])


def shown(value: object) -> str:
    """`value` as a `[recall: ...]` answer repeats it: its repr, cut to a few dozen characters."""
    text = repr(value) if isinstance(value, (str, int)) else f"a {type(value).__qualname__}"
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 1]}…"
