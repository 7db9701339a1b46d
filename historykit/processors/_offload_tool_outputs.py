"""`OffloadToolOutputs`: a tool output over a size reaches the model as its head and tail, with a handle.

A test run's log, a search over a repository, a whole file: one tool output can take a large share
of the window the moment it arrives, and the model usually needs its start (the command's first
lines, the file's header) and its end (the tally, the error). `ClearToolResults` only clears
outputs once they are old, and the last resort of `PairwiseTruncate` only cuts a final request that
does not fit at all. This processor shortens every output over `max_tokens` when it arrives: the
model reads its first and last lines and a note saying what was left out and how to read it:

    [historykit: this output has 4,210 lines, 38,455 tokens; lines 61-4,180 are left out above.
    recall(handle='3f9a0c1b2d') returns all of it; with start_line=61, end_line=4180 those lines,
    with grep="text" the lines that contain a text]

With the recall tool installed (`historykit.Recall`: `recall=True` on the integrations), the note
names it and the output's handle: the tool reads ranges of lines, the lines that contain a text,
or the whole output, from the conversation's originals (the stores keep every original too).
Without it, the note says to run the tool again with a narrower range, and what was left out
stays only in the stores' transcripts.

The shortened text depends only on the output and the settings, so each call, view-only or
persistent, sends the same bytes (the prompt cache keeps hitting), and an output shortened once is
never shortened again (its note is recognised). The recall tool's own answers are never shortened
(they are at most `Recall.max_chars` characters, already a part of an output).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import ClassVar

from historykit._identity_cache import IdentityCache
from historykit._messages import Message, Part, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes
from historykit._recall import check_recall_tool, recall_call, recall_handle
from historykit._validate import check_int, check_tool_names
from historykit.errors import InvalidArgumentError
from historykit.processors._clear_tool_results import _too_short

NOTE_HEAD = "[historykit: this output has "
"""How an offload note starts: a shortened output is recognised by its last line."""
_HEAD_SHARE = 2 / 3
"""Share of what is kept that comes from the start of the output (the rest is its end)."""
_GAP = "[… {what} left out: see the note at the end …]"


@dataclass
class OffloadToolOutputs(HistoryProcessor):
    """Shortens each tool output over `max_tokens` to its head and tail, with a note naming how to
    read the rest (see the module documentation).

    What it never touches: outputs of `max_tokens` or less, pinned messages and parts, outputs of
    `exclude_tools` and of the recall tool, and outputs it already shortened. It runs on every call,
    not at a trigger: an output is shortened when it arrives, before the model first reads it, so
    the history never holds the whole of it (and the prompt cache never misses for it later).

    Example:
        ```python
        from historykit import Pipeline
        from historykit.processors import ClearToolResults, OffloadToolOutputs, Repair

        pipeline = Pipeline([OffloadToolOutputs(max_tokens=4_000), ClearToolResults(), Repair()])
        result = pipeline.run(messages, context_window=128_000)
        ```
    """

    max_tokens: int = 6_000
    """An output over this many tokens is shortened."""
    keep_tokens: int = 1_500
    """About how many tokens of a shortened output the model reads: two thirds from its start, one
    third from its end, cut at line ends (at characters when a line is longer than that)."""
    exclude_tools: Collection[str] = ()
    """Names of tools whose outputs are never shortened."""
    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one (`historykit.Recall`): the note
    then names it with the output's handle instead of saying "run the tool again"."""
    _cache: IdentityCache[tuple[Message, tuple[str, ...], Message, int, int]] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )
    _cache_key: tuple[object, ...] = field(default=(), init=False, repr=False, compare=False)

    compacts: ClassVar[bool] = False
    """Shortening an output as it arrives is no compaction: the compaction hooks are not asked about
    it, and a veto of the call's compaction leaves it (`HistoryProcessor.compacts`)."""

    def __post_init__(self) -> None:
        check_int("max_tokens", self.max_tokens)
        check_int("keep_tokens", self.keep_tokens)
        if self.keep_tokens >= self.max_tokens:
            raise InvalidArgumentError(
                f"keep_tokens ({self.keep_tokens:,}) must be less than max_tokens ({self.max_tokens:,}): "
                "a shortened output would be as long as one that is not"
            )
        check_tool_names("exclude_tools", self.exclude_tools)
        check_recall_tool(self.recall_tool)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        key = (
            ctx.counter,
            self.max_tokens,
            self.keep_tokens,
            frozenset(self.exclude_tools),
            self.recall_tool,
        )
        if key != self._cache_key:  # what a message becomes depends on the counter and the settings
            self._cache.clear()
            self._cache_key = key
        names: dict[str, str] = {}
        out: list[Message] | None = None
        freed = 0
        for index, msg in enumerate(messages):
            if msg.role == "assistant":
                names.update((call.id, call.name) for call in msg.tool_calls)
                continue
            if msg.pinned or not msg.tool_results:
                continue
            tools = tuple(names.get(p.tool_call_id) or p.name or "tool" for p in msg.tool_results)
            hit = self._cache.get(msg)
            if hit is None or hit[1] != tools:
                hit = self._cache.put(msg, (msg, tools, *self._offload(msg, tools, ctx)), ctx.cache_policy)
            _, _, new, replaced, saved = hit
            if new is not msg:
                if out is None:
                    out = list(messages)
                out[index] = new
                notes.replaced += replaced
                freed += saved
        if out is None:
            return messages, notes
        notes.details.append(
            f"shortened {notes.replaced} tool output(s) over {self.max_tokens:,} tokens: "
            f"{freed:,} tokens freed"
        )
        return out, notes

    def _offload(self, msg: Message, tools: tuple[str, ...], ctx: ProcessContext) -> tuple[Message, int, int]:
        """`msg` with its large outputs shortened (itself when none is), how many, and the tokens
        freed; `tools` names the tool of each of its results, in order."""
        skipped = {*self.exclude_tools, *([self.recall_tool] if self.recall_tool else [])}
        results = iter(tools)
        parts: list[Part] = []
        replaced = freed = 0
        for part in msg.parts:
            if isinstance(part, ToolResultPart):
                tool = next(results)
                if not part.pinned and tool not in skipped:
                    text = self._shortened(part.content, tool, ctx)
                    if text is not None:
                        freed += ctx.counter.count_text(part.content) - ctx.counter.count_text(text)
                        replaced += 1
                        part = replace(part, content=text)
            parts.append(part)
        if not replaced:
            return msg, 0, 0
        return replace(msg, parts=tuple(parts)), replaced, freed

    def _shortened(self, content: str, tool: str, ctx: ProcessContext) -> str | None:
        """`content` shortened, or `None` when it stays as it is."""
        if _too_short(content, self.max_tokens + 1) or is_offloaded(content):
            return None
        tokens = ctx.counter.count_text(content)
        if tokens <= self.max_tokens:
            return None
        text = shorten(content, tokens, self.keep_tokens, tool, self.recall_tool)
        # An output barely over a small limit: the note would cost more than it saves.
        return text if ctx.counter.count_text(text) < tokens else None


def is_offloaded(content: str) -> bool:
    """Whether `content` is an output this processor shortened (its last line is the note)."""
    return content[content.rfind("\n") + 1 :].startswith(NOTE_HEAD)


def shorten(content: str, tokens: int, keep: int, tool: str, recall_tool: str | None) -> str:
    """`content` (`tokens` long) as its head and tail, about `keep` tokens, and the note."""
    per_token = len(content) / max(tokens, 1)
    head_chars = int(keep * _HEAD_SHARE * per_token)
    tail_chars = int(keep * (1 - _HEAD_SHARE) * per_token)
    lines = content.split("\n")
    head = _fitting(lines, head_chars)
    tail = _fitting(lines[head:][::-1], tail_chars)
    handle = recall_handle(content)
    if head and len(lines) - head - tail > 0:
        first, last = head + 1, len(lines) - tail
        gap = _GAP.format(what=f"{last - first + 1:,} lines")
        shown = [*lines[:head], gap, *lines[len(lines) - tail :]]
        left_out = f"lines {first:,}-{last:,} are left out above"
        if recall_tool is not None:
            how = (
                f"{recall_call(recall_tool, handle)} returns all of it; with start_line={first}, "
                f'end_line={last} those lines, with grep="text" the lines that contain a text'
            )
        else:
            how = f"run {tool} again with a narrower range to read them"
    else:  # a few long lines: cut at characters
        start, end = head_chars, len(content) - tail_chars
        gap = _GAP.format(what=f"{end - start:,} characters")
        shown = [content[:start], gap, content[end:]]
        left_out = f"characters {start:,}-{end:,} are left out above"
        if recall_tool is not None:
            how = (
                f"{recall_call(recall_tool, handle)} returns all of it; with offset={start} from there on, "
                'with grep="text" the lines that contain a text'
            )
        else:
            how = f"run {tool} again with a narrower range to read them"
    note = f"{NOTE_HEAD}{len(lines):,} lines, {tokens:,} tokens; {left_out}. {how}]"
    return "\n".join([*shown, note])


def _fitting(lines: list[str], chars: int) -> int:
    """How many of `lines`, from the first, fit in `chars` characters (with their line ends)."""
    used = count = 0
    for line in lines:
        used += len(line) + 1
        if used > chars:
            break
        count += 1
    return count
