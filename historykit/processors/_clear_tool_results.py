"""`ClearToolResults`: replace old tool results, and the bulky arguments of old tool calls, by placeholders.

Tool output is most of an agent's history (58-99% of the content of the corpus sessions), and
almost all of it is stale after a few steps: the file was read, the tests were run, the model
moved on. Clearing it keeps the conversation's shape (every call keeps its result, every argument
object keeps its keys) and tells the model how to get the content back.

File writes and edits are the other big item: a `Write` carries the whole file as its `content`
argument, an `Edit` its `old_string` and `new_string`. With `clear_tool_inputs` those values are
cleared too, leaving the arguments a valid object with the same keys (providers and frameworks
parse them).

A placeholder keeps a compact record of what matters later, so that clearing loses the bulk and
not the facts: a cleared failure names its error line (`Bash(command='pytest') (failed: KeyError:
'user_id')`, `historykit.processors._summarizers.error_line`), and the first cleared value of a write
or edit names the longest line the change added (`historykit.processors._change_records`), which
summaries then list beside the file. Measured on the corpus and generated long sessions
(`docs/quality.md`): the latest change of every file and the error lines stay in the view.

Clearing edits old messages, which makes the provider's prompt cache miss from the first edited
message on; so it happens rarely and in batches (see `historykit.processors._batching`): only when the
history crosses the trigger's high-water mark, then down to its low-water mark and by at least
`min_gain` tokens at once. Between two batches the processed history only grows by appending.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from historykit._identity_cache import CachePolicy, IdentityCache
from historykit._messages import Message, Part, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes
from historykit._recall import check_recall_tool, placeholder_handle, recall_call
from historykit._scan_memo import common_prefix
from historykit._tokens import TokenCounter
from historykit._validate import check_instance, check_int, check_ratio, check_tool_names
from historykit.processors._batching import batch_boundary, prefix_sums
from historykit.processors._change_records import CLEARED_HEAD, CLEARED_TAIL, NEW_TEXT_KEYS, change_line
from historykit.processors._file_reads import _PATH_KEYS, FileWrite, file_accesses
from historykit.processors._summarizers import error_line
from historykit.processors._trigger import Trigger

RESULT_PLACEHOLDER = "[cleared: output of {call}, {tokens:,} tokens; call the tool again to see it]"
"""What a cleared tool result reads. It names the call so the model can repeat it."""
FAILED = "{call} (failed: {error})"
"""How a placeholder names a call whose output was an error: the error line stays in the history
(`historykit.processors._summarizers.error_line`), so what went wrong and what the agent did about
it can still be read after the output is gone."""
RECALL_PLACEHOLDER = "[cleared: output of {call}, {tokens:,} tokens; {recall} returns it]"
"""What a cleared tool result reads when the recall tool is installed (`recall_tool`): `{recall}` is
`recall(handle='3f9a0c1b2d')`, the handle being the cleared content's (`historykit.Recall`)."""
_RESULT_HEAD = "[cleared: output of "
_RESULT_TAIL = " tokens; call the tool again to see it]"
_RECALL_TAIL = re.compile(r" tokens; \w+\(handle='[0-9a-f]+'\) returns it\]\Z")

INPUT_PLACEHOLDER = (
    "[cleared from the history: {tokens:,} tokens{head}; the call was made with the full value]"
)
"""What a cleared argument value reads. A script (a `command`, `cmd`, `code` or `script` argument)
keeps its first line in `{head}` (`value_head`): the command the agent ran, often all that says
what it did."""
CHANGE_PLACEHOLDER = (
    "[cleared from the history: {tokens:,} tokens{head} of a change that added `{line}`; the call was "
    "made with the full value]"
)
"""What the first cleared value of a write or edit call reads: it keeps the record of what the
change added (`historykit.processors._change_records.change_line`), so the latest change of a file
can still be read after its text is gone."""
WRITE_PLACEHOLDER = (
    "[cleared from the history: {tokens:,} tokens{head} of a call that wrote {paths}; the call was made with "
    "the full value]"
)
"""What a cleared value reads when it held the only mention of the files the call wrote (a shell
script, a patch): the model, and `file_reads` (hence dedupe and summaries), still see the write;
`file_reads` parses the paths back from it."""
WRITE_CHANGE_PLACEHOLDER = (
    "[cleared from the history: {tokens:,} tokens{head} of a call that wrote {paths}, which added `{line}`; "
    "the call was made with the full value]"
)
"""`WRITE_PLACEHOLDER` with the record of what the write added (a heredoc's longest line), as
`CHANGE_PLACEHOLDER` keeps it."""
_HEAD_CHARS = 80
"""Characters of a cleared value's first line its placeholder keeps."""


_SCRIPT_KEYS = frozenset({"command", "cmd", "code", "script"})
"""The arguments holding a script: their placeholders keep its first line."""


def value_head(value: str) -> str:
    """` beginning `first line``: the first non-blank line of a cleared script, cut to `_HEAD_CHARS`,
    its backticks made quotes (the placeholder quotes it in backticks; a record after it is read up
    to the last one)."""
    line = next((ln.strip() for ln in value.splitlines() if ln.strip()), "")
    line = line.replace("`", "'")
    line = line if len(line) <= _HEAD_CHARS else line[:_HEAD_CHARS].rstrip() + "…"
    return f" beginning `{line}`" if line else ""


_INPUT_HEAD = CLEARED_HEAD
_CLEARED_SCRIPT_HEAD = re.compile(r"\A\[cleared from the history: [\d,]+ tokens beginning `([^`\n]*)`")
_INPUT_TAIL = CLEARED_TAIL

KEY_ARGUMENTS = (
    *_PATH_KEYS,  # the files a call names, as `file_reads` knows them
    "url",
    "pattern",
    "query",
    "command",
    "cmd",
)
"""Arguments that say what a call was about, in the order a placeholder names them."""
_SHOWN_ARGUMENTS = 2
_SHORT = 80

DEFAULT_MIN_GAIN_FRACTION = 0.05
"""`min_gain` when none is given: this fraction of the context window."""


def describe_call(call: ToolCallPart) -> str:
    """`Read(file_path='src/app.py')`: the tool and its key arguments, each cut to one short line."""
    args = call.arguments_dict()
    shown = [
        f"{key}={_quoted(_short(args[key]))}"
        for key in KEY_ARGUMENTS
        if isinstance(args.get(key), str) and args[key]
    ]
    if not shown:
        shown = [
            f"{key}={_quoted(_short(value))}"
            for key, value in args.items()
            if isinstance(value, str) and value
        ][:1]
    return f"{call.name}({', '.join(shown[:_SHOWN_ARGUMENTS])})"


def _quoted(text: str) -> str:
    """`text` in quotes as Python would write it, but its backslashes as they are: the command
    `grep "a\\|b"` reads as the agent wrote it, not doubled. Text with both kinds of quote is
    triple-quoted (`repr` escaped one kind and doubled every backslash); text with a control
    character, or that no triple quote can hold, is written as `repr` writes it."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return repr(text)
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    for quote in ("'''", '"""'):
        if quote not in text and not text.endswith(quote[0]):
            return f"{quote}{text}{quote}"
    return repr(text)


def _short(value: str) -> str:
    if value.startswith(_INPUT_HEAD) and (head := _CLEARED_SCRIPT_HEAD.search(value)) is not None:
        # A script cleared earlier is described by the line its placeholder kept, as `_short`
        # described it whole (a cleared value is always more than its first line).
        return head.group(1) if head.group(1).endswith("…") else head.group(1) + "…"
    line = value.strip().split("\n", 1)[0]
    cut = len(line) > _SHORT or "\n" in value.strip()
    return line[:_SHORT] + ("…" if cut else "")


def _is_cleared_result(content: str) -> bool:
    return (
        content.startswith(_RESULT_HEAD)
        and "\n" not in content
        and (content.endswith(_RESULT_TAIL) or _RECALL_TAIL.search(content) is not None)
    )


def _is_cleared_value(value: str) -> bool:
    return value.startswith(_INPUT_HEAD) and value.endswith(_INPUT_TAIL) and "\n" not in value


@dataclass
class ClearToolResults(HistoryProcessor):
    """Replaces the content of old tool results (and the bulky arguments of old calls) by placeholders.

    A cleared result reads `[cleared: output of Read(file_path='src/app.py'), 2,311 tokens; call the
    tool again to see it]`, or, when the integration installed the recall tool (`recall_tool`),
    `[cleared: output of Read(file_path='src/app.py'), 2,311 tokens; recall(handle='3f9a0c1b2d')
    returns it]`, the handle being the cleared content's (`historykit.Recall`); a cleared argument
    value reads `[cleared from the history: 2,311 tokens beginning ...; the call was made with the full
    value]`, with the value's first line where the dots are (for a script, the command that ran).
    Placeholders depend only on the call and the cleared content, so the same history always gives
    the same output, and a placeholder is never cleared again or counted as a gain.

    What it never touches: the last `keep` tool results and their calls (and those in the last
    `keep_tokens` tokens), the results the model is about to answer (the final request), results
    and calls of `exclude_tools`, pinned messages and parts, results smaller than `min_tokens`,
    argument values that are not strings, and arguments given as a string that is not a JSON object.
    A tool call and its results are cleared together, as one unit.

    When it clears: when the history crosses the trigger's high-water mark, it clears the oldest
    units until the low-water mark is reached, in one batch of at least `min_gain` tokens that frees
    at least `rewrite_ratio` times what it makes the provider's cache write again, or not at all
    (`historykit.processors._batching`).
    A message-count trigger counts all messages (clearing never lowers it) and keeps the results of
    the last `low_water * max_messages` messages; `min_gain` is then what sizes its batches.

    Example:
        ```python
        from historykit.processors import ClearToolResults, Trigger

        clear = ClearToolResults(keep=3, exclude_tools=("TodoWrite",), trigger=Trigger(max_fraction=0.5))
        result = clear.run(messages, context_window=200_000)   # native messages in and out
        ```
    """

    keep: int = 3
    """The last `keep` tool results (with every result of their calls) are never cleared."""
    keep_tokens: int | None = None
    """Also keep intact every result in the last `keep_tokens` tokens of the history."""
    exclude_tools: Collection[str] = ()
    """Names of tools whose results and arguments are never cleared."""
    clear_tool_inputs: bool = True
    """Also clear the big argument values of old calls (file contents of writes, edit strings)."""
    min_tokens: int = 100
    """Results and argument values smaller than this many tokens are left as they are."""
    trigger: Trigger = field(default_factory=lambda: Trigger(max_fraction=0.5))
    """When clearing starts (high-water mark) and how far down it goes (low-water mark)."""
    min_gain: int | None = None
    """Never clear fewer tokens than this at once; `None`: 5% of the context window."""
    rewrite_ratio: float = 1.0
    """Clear only when a batch frees at least this many times the tokens it makes the provider
    write to its prompt cache again (the history from the first message it clears to the end):
    clearing must pay for the cache rewrite it causes. `0`: clear whatever the rewrite costs."""
    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one (`historykit.Recall`): a
    cleared result then names it with a handle instead of saying "call the tool again"."""
    _cache: IdentityCache[tuple[Message, Message | None, Message, int]] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )
    _cache_key: tuple[object, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("keep", self.keep)
        check_int("keep_tokens", self.keep_tokens, optional=True)
        check_int("min_tokens", self.min_tokens)
        check_int("min_gain", self.min_gain, optional=True)
        check_ratio("rewrite_ratio", self.rewrite_ratio)
        check_tool_names("exclude_tools", self.exclude_tools)
        check_instance("trigger", self.trigger, Trigger, "a historykit Trigger")
        check_recall_tool(self.recall_tool)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        if not messages:
            return messages, notes
        counter = ctx.counter
        key = (
            counter,
            frozenset(self.exclude_tools),
            self.clear_tool_inputs,
            self.min_tokens,
            self.recall_tool,
        )
        if key != self._cache_key:  # placeholders and sizes depend on the counter and the settings
            self._cache.clear()
            self._cache_key = key
        cache = self._cache
        # The scan below carries its lists from message to message: this conversation's latest
        # call left them at the end of its history, and a call that only adds to that history
        # carries on from there (`historykit._scan_memo`); any other history starts over.
        memo = ctx.conversation.memory(self, _Scanned)
        old, old_key, scanned = memo.latest
        begin = len(old) if old and old_key == key and common_prefix(old, messages) == len(old) else 0
        lists = [list(column) for column in scanned[:6]] if begin else [[], [], [], [], [], []]
        cleared, own, less, starts, result_at, result_unit = lists
        # `starts`: assistant messages, where units start; `result_at`: the message of each tool
        # result, and `result_unit` the unit it belongs to.
        # `cleared` and `less` (each message cleared, and its size then) may stop short of the
        # others: they are made only for the messages this call may clear (below).
        caller: Message | None = scanned[6] if begin else None
        for index in range(begin, len(messages)):
            msg = messages[index]
            if msg.role == "assistant":
                caller = msg
                starts.append(index)
                results = 0
            else:
                results = sum(isinstance(p, ToolResultPart) for p in msg.parts)
            own.append(counter.count_message(msg))
            if results:
                result_at.extend([index] * results)
                result_unit.extend([starts[-1] if starts else -1] * results)
        sizes = prefix_sums(own)

        def cap(point: int) -> int:
            # The unit answered by the final request (the latest assistant message) stays.
            latest = bisect_left(starts, point) - 1
            limit = starts[latest] if latest >= 0 else 0
            if self.keep:
                seen = bisect_left(result_at, point)
                limit = min(limit, result_unit[seen - self.keep] if seen >= self.keep else 0)
            if self.keep_tokens:
                # The latest unit start that leaves at least `keep_tokens` after it.
                at = bisect_right(sizes, sizes[point] - self.keep_tokens) - 1
                below = bisect_right(starts, at)
                limit = min(limit, starts[below - 1] if at >= 0 and below else 0)
            return max(limit, 0)

        # Only the messages before `limit` may be cleared on this call, and none under the mark
        # (`batch_boundary` reads no cleared size past the limit, and none when the trigger does not
        # fire): the cleared copies of the others (their placeholders sized, their calls' shell
        # commands read) are made when a call reaches them. After a load, this call makes them all.
        limit = cap(len(messages))
        upto = limit if self.trigger.fires(sizes[-1], len(messages), ctx) else 0
        for index in range(len(cleared), upto):
            msg = messages[index]
            unit = bisect_right(starts, index)  # the assistant message whose calls it answers, or is
            owner = messages[starts[unit - 1]] if unit else None
            hit = cache.get(msg)
            if hit is None or hit[1] is not owner:
                hit = self._entry(msg, owner, counter, ctx.cache_policy)
            cleared.append(hit[2])
            less.append(hit[3])
        memo.latest = (tuple(messages), key, (*map(tuple, lists), caller))
        edited = prefix_sums(less)
        min_gain = self.min_gain
        if min_gain is None:
            min_gain = int(ctx.context_window * DEFAULT_MIN_GAIN_FRACTION)
        boundary = batch_boundary(
            candidates=starts,
            sizes=sizes,
            edited=edited,
            limit=limit,
            trigger=self.trigger,
            ctx=ctx,
            min_gain=min_gain,
            rewrite_ratio=self.rewrite_ratio,
        )
        out = list(messages)
        results = calls = 0
        for index in range(boundary):
            new = cleared[index]
            if new is messages[index]:
                continue
            out[index] = new
            changed = sum(1 for a, b in zip(messages[index].parts, new.parts) if a is not b)
            if new.role == "assistant":
                calls += changed
            else:
                results += changed
        if not results and not calls:
            return messages, notes
        notes.replaced = results + calls
        notes.details.append(
            f"cleared {results} tool result(s) and the arguments of {calls} tool call(s) before message "
            f"{boundary}: {(sizes[boundary] - edited[boundary]):,} tokens freed"
        )
        return out, notes

    def _entry(
        self, msg: Message, caller: Message | None, counter: TokenCounter, policy: CachePolicy
    ) -> tuple[Message, Message | None, Message, int]:
        """What `process` needs to know of `msg`, cached: `msg` cleared (itself when nothing is) and
        its size then.

        `caller` is the assistant message whose calls `msg`'s tool parts belong to.
        """
        new = self._clear(msg, caller, counter)
        size = counter.count_message(msg)
        new_size = counter.count_message(new) if new is not msg else size
        if new_size >= size:  # an edit that saves nothing is not made
            new, new_size = msg, size
        # The entry holds `new` so the counter's own per-object cache keeps hitting on it.
        return self._cache.put(msg, (msg, caller, new, new_size), policy)

    def _clear(self, msg: Message, caller: Message | None, counter: TokenCounter) -> Message:
        if msg.pinned or caller is None:
            return msg
        excluded = set(self.exclude_tools)
        parts: list[Part] = []
        for part in msg.parts:
            new: Part = part
            if part.pinned:
                pass
            elif isinstance(part, ToolCallPart) and msg.role == "assistant":
                if self.clear_tool_inputs and part.name not in excluded:
                    new = self._clear_call(part, counter)
            elif isinstance(part, ToolResultPart) and msg.role != "assistant":
                call = next((c for c in caller.tool_calls if c.id == part.tool_call_id), None)
                if (
                    call is not None
                    and call.name not in excluded
                    and not _too_short(part.content, self.min_tokens)
                    and not _is_cleared_result(part.content)
                ):
                    tokens = counter.count_text(part.content)
                    text = self._placeholder(
                        call, part, tokens, msg.marker is not None, error_line(part, call)
                    )
                    if tokens >= self.min_tokens and _fewer_tokens(text, tokens, counter):
                        # The images it returned go with the output (`ClearMedia` keeps the newest).
                        new = replace(part, content=text, media=())
            parts.append(new)
        if all(a is b for a, b in zip(parts, msg.parts)):
            return msg
        return replace(msg, parts=tuple(parts))

    def _placeholder(
        self, call: ToolCallPart, part: ToolResultPart, tokens: int, written: bool, error: str | None
    ) -> str:
        named = describe_call(call)
        if error is not None:
            named = FAILED.format(call=named, error=error)
        if self.recall_tool is None:
            return RESULT_PLACEHOLDER.format(call=named, tokens=tokens)
        # Another processor's notice (a superseded read) already names the original's handle.
        recall = recall_call(self.recall_tool, placeholder_handle(part.content, self.recall_tool, written))
        return RECALL_PLACEHOLDER.format(call=named, tokens=tokens, recall=recall)

    def _clear_call(self, call: ToolCallPart, counter: TokenCounter) -> ToolCallPart:
        cleared = self._cleared_call(call, counter, None, None)
        if cleared is call:
            return call
        before = file_accesses([call])[0]
        if not isinstance(before, FileWrite):
            return cleared
        # A write whose files only the cleared values named (a shell script, a patch) keeps them
        # in its placeholder, so the model, dedupe and summaries still see what it wrote; a write
        # keeps the record of what it added, unless its arguments still show that line.
        after = file_accesses([cleared])[0]
        kept = set(after.paths) if isinstance(after, FileWrite) else set()
        lost = [path for path in before.paths if path not in kept]
        line = change_line(call)
        if line is not None and line in json.dumps(cleared.arguments_dict(), ensure_ascii=False):
            line = None
        if lost or line is not None:
            return self._cleared_call(call, counter, ", ".join(lost) or None, line)
        return cleared

    def _cleared_call(
        self, call: ToolCallPart, counter: TokenCounter, wrote: str | None, line: str | None
    ) -> ToolCallPart:
        record = [line] if line is not None else []
        if isinstance(call.arguments, dict):
            args, changed = _clear_value(call.arguments, counter, self.min_tokens, wrote, record)
            return replace(call, arguments=args) if changed else call
        try:
            parsed = json.loads(call.arguments)
        except ValueError:
            return call  # not JSON: the framework sends it as it is, and so do we
        if not isinstance(parsed, dict):
            return call
        args, changed = _clear_value(parsed, counter, self.min_tokens, wrote, record)
        return replace(call, arguments=json.dumps(args, ensure_ascii=False)) if changed else call


def _too_short(text: str, min_tokens: int) -> bool:
    """`text` is surely under `min_tokens` tokens, known without tokenizing it: no tokenizer makes
    more tokens than the text has UTF-8 bytes, and a character is at most 4 of them."""
    return len(text) * 4 < min_tokens or (len(text) < min_tokens and len(text.encode()) < min_tokens)


def _fewer_tokens(text: str, tokens: int, counter: TokenCounter) -> bool:
    """`text` (a placeholder) counts fewer than `tokens`: known without tokenizing it when it has
    fewer UTF-8 bytes than that (no tokenizer makes more tokens than bytes, as `_too_short` relies
    on). A placeholder's message is counted whole next, and a short text's count is not cached:
    tokenized here too, it was tokenized twice."""
    return len(text.encode("utf-8", "surrogatepass")) < tokens or counter.count_text(text) < tokens


def _clear_value(
    value: Any,
    counter: TokenCounter,
    min_tokens: int,
    wrote: str | None = None,
    record: list[str] | None = None,
    script: bool = False,
) -> tuple[Any, bool]:
    """`value` with every big string in it replaced by a placeholder; containers keep their shape.

    `wrote`: the files the call wrote that only its big values name; their placeholders say so.
    `record`: the line a write added, still to be written: the first placeholder made takes it.
    `script`: `value` is (in) a script argument, whose placeholders keep its first line."""
    if isinstance(value, str):
        if _too_short(value, min_tokens) or _is_cleared_value(value):
            return value, False
        tokens = counter.count_text(value)
        if tokens < min_tokens:
            return value, False
        line = record[0] if record else None
        head = value_head(value) if script else ""
        if wrote is not None:
            # `file_reads` reads the paths back from this wording.
            text = (
                WRITE_PLACEHOLDER.format(tokens=tokens, paths=wrote, head=head)
                if line is None
                else WRITE_CHANGE_PLACEHOLDER.format(tokens=tokens, paths=wrote, line=line, head=head)
            )
        elif line is not None:
            text = CHANGE_PLACEHOLDER.format(tokens=tokens, line=line, head=head)
        else:
            text = INPUT_PLACEHOLDER.format(tokens=tokens, head=head)
        if _fewer_tokens(text, tokens, counter):
            if record:
                record.clear()
            return text, True
        if line is not None:
            # Too short to carry the record: cleared without it, and a later value takes the record.
            # Left as it is, its line would be the record a second pass finds, so a second pass
            # would clear it again (found by the replay property test).
            plain = (
                INPUT_PLACEHOLDER.format(tokens=tokens, head=head)
                if wrote is None
                else WRITE_PLACEHOLDER.format(tokens=tokens, paths=wrote, head=head)
            )
            if _fewer_tokens(plain, tokens, counter):
                return plain, True
        return value, False
    if isinstance(value, dict):
        # The new text's value takes the record first (a summary reads the change from there),
        # whatever the order of the keys, which the output keeps.
        first = sorted(value, key=lambda key: key not in NEW_TEXT_KEYS)
        done = {
            key: _clear_value(value[key], counter, min_tokens, wrote, record, key in _SCRIPT_KEYS)
            for key in first
        }
        items = {key: done[key] for key in value}
        if not any(changed for _, changed in items.values()):
            return value, False
        return {key: new for key, (new, _) in items.items()}, True
    if isinstance(value, list):
        cleared = [_clear_value(item, counter, min_tokens, wrote, record, script) for item in value]
        if not any(changed for _, changed in cleared):
            return value, False
        return [new for new, _ in cleared], True
    return value, False


@dataclass
class _Scanned:
    """Where `ClearToolResults.process` left this conversation's latest history: its messages,
    the settings it was scanned with, and the scan's lists (cleared copies, sizes before and after,
    unit starts, where each result is and its unit) with the latest assistant message. The cleared
    copies and their sizes reach only as far as a call could clear."""

    latest: tuple[tuple[Message, ...], tuple[object, ...], tuple[Any, ...]] = ((), (), ())
