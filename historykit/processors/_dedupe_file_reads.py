"""`DedupeFileReads`: replace file reads that a later read of the same file supersedes.

Agents re-read the files they work on: after an edit, to check a change, or because they forgot
(up to 22 times per file in the corpus). Every copy but the latest is dead weight. This processor
replaces the result of a superseded read with a one-line notice naming the file and the tool call
whose result holds the current copy; the tool call and its result slot stay, so pairing holds.

Which reads supersede which:
- The same file: paths are normalised (`./a.py`, `a/../a.py` and `a.py` are one file); absolute
  and relative spellings meet only when a `root` is given.
- Range-aware: a later read supersedes an earlier one only when it shows every line the earlier
  one showed. A whole-file read supersedes any read; lines 1-50 do not supersede a whole read;
  lines 1-100 supersede lines 20-60; the last 50 lines supersede the last 30.
- Writes in between: a read, then an edit of that file, then a later whole-file read: the first
  read is superseded (its copy is outdated and the later one is current; the notice says the file
  was changed). After an edit, a later *partial* read does not supersede: the edit moved the lines,
  so "lines 100-150" no longer show what they showed. A read followed by an edit and no later read
  is kept: there is no current copy to point at.
- Only a read whose copy is really there supersedes: its result is in the history, is not an error,
  was not cut by the agent's harness (`[... omitted N lines ...]`), and is not itself a notice or a
  placeholder left by another processor. A notice always names the *latest* such read, so it never
  points at a copy that is gone; when that read is superseded in turn, older notices are rewritten
  to name the newer one in the same edit.
- Never replaced: a read whose result was an error, pinned results, results in the final request,
  and results shorter than the notice would be.

When (the prompt cache): replacing an old result edits the history there, so the provider's cache
misses from that point on, while a re-read that stays costs little as long as the cache serves it.
So edits wait until they are needed and come in batches (`historykit.processors._batching`): the
superseded reads are replaced only when the history is over the `trigger`'s high-water mark (by
default half the context window; `trigger=None` drops this condition) and the tokens the batch
frees reach `min_gain`. Between two batches the view only grows by appending, in both modes
(`historykit._view`).

Example:
    ```python
    from historykit.processors import DedupeFileReads

    dedupe = DedupeFileReads()                               # past half the window, >= 1,000 tokens a batch
    dedupe = DedupeFileReads(root="/testbed")                # `/testbed/a.py` and `a.py` are one file
    dedupe = DedupeFileReads(trigger=None, min_gain=4_000)   # whenever 4,000 tokens can be freed
    processed = dedupe(messages)                             # native in, native out
    ```
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from historykit._identity_cache import IdentityCache
from historykit._messages import Message, Part, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes
from historykit._recall import check_recall_tool, handle_in, recall_call, recall_handle
from historykit._scan_memo import common_prefix
from historykit._tokens import MESSAGE_OVERHEAD, PART_OVERHEAD, TokenCounter
from historykit._validate import check_instance, check_int
from historykit.errors import ArgumentTypeError
from historykit.processors._file_reads import (
    FileAccess,
    FileAccessRecogniser,
    FileKey,
    FileRead,
    FileWrite,
    read_failed,
    read_is_partial,
    shown_extent,
)
from historykit.processors._trigger import Trigger

NOTICE_PREFIX = "[Superseded file read] "
"""How every notice begins; a result that begins so is a notice, never a current copy."""

_PLACEHOLDER_MAX = 500
"""A result this short, bracketed whole (`[...]`), is another processor's placeholder."""


@dataclass
class DedupeFileReads(HistoryProcessor):
    """Replaces file reads that a later read of the same file supersedes with a short notice.

    See the module documentation for the rules. A notice reads, for example:
    `[Superseded file read] lines 1-80 of src/app.py was read again later: the current copy is
    in the result of tool call toolu_01A (Read).`

    Example:
        ```python
        from historykit.processors import DedupeFileReads, FileRead

        def my_tool(call):  # a file tool of your own
            if call.name == "fetch_source":
                return FileRead(call.arguments_dict()["module"].replace(".", "/") + ".py")
            return None  # everything else: the built-in shapes

        agent = Agent(model, history_processors=[DedupeFileReads(file_key=my_tool, root="/repo")])
        ```
    """

    root: str | None = None
    """Working directory the agent's relative paths are relative to: absolute paths under it are
    made relative, so `/repo/a.py` and `a.py` are one file. Without it they are two."""
    file_key: FileKey | None = None
    """Your recogniser, asked first for every tool call: return a `FileRead` (file and lines), a
    `FileWrite`, a path (a whole-file read) or `None` to leave the call to the built-in shapes.
    It must depend on the call alone (its verdicts are remembered)."""
    builtin_shapes: bool = True
    """Recognise the common tool shapes (`Read`, editor `view`, `cat`/`sed -n`/..., SWE-agent and
    OpenHands `open`); `False` uses `file_key` alone."""
    min_gain: int = 1_000
    """Replace reads only in batches that free at least this many tokens: each batch costs a
    prompt-cache miss from the oldest replaced read on. (Decisions count each notice at an
    estimate of its size; a notice re-pointed in a batch may grow by a few tokens.)"""
    trigger: Trigger | None = field(default_factory=lambda: Trigger(max_fraction=0.5))
    """Replace reads only while the history (as processed so far) is over this trigger's
    high-water mark; below it a re-read costs little, as the provider's cache serves it, while an
    edit would miss the cache. `None`: whenever `min_gain` tokens can be freed. Deduplication
    does all it can when it fires (it has no low-water mark to stop at)."""
    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one (`historykit.Recall`): a
    notice then also names the handle that gives the replaced copy back."""
    _recogniser: FileAccessRecogniser | None = field(default=None, init=False, repr=False, compare=False)
    _outputs: IdentityCache[tuple[tuple[tuple[int, str], ...], Message]] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )
    _results: IdentityCache[str] = field(default_factory=IdentityCache, init=False, repr=False, compare=False)
    _estimates: IdentityCache[tuple[ToolCallPart, TokenCounter, str | None, int]] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )
    _part_tokens: IdentityCache[tuple[TokenCounter, int]] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        check_int("min_gain", self.min_gain)
        check_instance("trigger", self.trigger, Trigger, "a historykit Trigger or None", optional=True)
        if self.file_key is not None and not callable(self.file_key):
            raise ArgumentTypeError(f"file_key must be callable, got {type(self.file_key).__qualname__}")
        check_instance("root", self.root, str, "a str or None", optional=True)
        check_recall_tool(self.recall_tool)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        reads, writes = self._scan(messages, ctx)
        if not reads:
            return messages, notes
        _first_superseded(reads, writes)
        for read in reads:
            if read.state == _NOTICE or (read.state != _PINNED and read.due < _NEVER):
                read.estimate = self._estimate(read, ctx)
        boundary = self._boundary(messages, reads, ctx)
        if boundary == 0:
            return messages, notes
        by_message: dict[int, dict[int, str]] = {}
        for read, text in _notices_at(boundary, reads, writes, self.recall_tool):
            if read.part.content == text:
                continue
            by_message.setdefault(read.msg_index, {})[read.part_index] = text
            notes.replaced += 1
            verb = "re-pointed the notice for" if read.state == _NOTICE else "replaced"
            notes.details.append(
                f"{verb} {read.access.describe()} (tool call {read.call.id}) at message {read.msg_index}"
            )
        if not by_message:
            return messages, notes
        out = list(messages)
        for index, changes in by_message.items():
            out[index] = self._edited(messages[index], changes, ctx)
        return out, notes

    def _edited(self, msg: Message, changes: dict[int, str], ctx: ProcessContext) -> Message:
        """`msg` with the given results replaced; the same edit gives the same object every call,
        so token counts cached on it (and the provider's view of it) stay put."""
        key = tuple(sorted(changes.items()))
        hit = self._outputs.get(msg)
        if hit is not None and hit[0] == key:
            return hit[1]
        parts: list[Part] = list(msg.parts)
        for part_index, text in key:
            old = parts[part_index]
            assert isinstance(old, ToolResultPart)
            parts[part_index] = replace(old, content=text)
        edited = replace(msg, parts=tuple(parts))
        self._outputs.put(msg, (key, edited), ctx.cache_policy)
        return edited

    # --- scanning ------------------------------------------------------------------------------

    def _scan(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[_Read], dict[str, list[int]]]:
        """The history's reads (with their results) and, per file, the order numbers of its writes.

        One pass over the history: every tool call located (`_pair_calls`) and recognised, its
        read or write noted. This conversation's latest call left that pass at the end of its
        history (`_Scanned`), and a call that only adds to it carries on from there: its new calls,
        and the calls that were still waiting for their results (`historykit._scan_memo`); any
        other history (an edit, another counter or recogniser) is scanned from the start."""
        recogniser = self._recognise()
        memo = ctx.conversation.memory(self, _Scanned)
        old, basis, located, open_calls, accesses, open_path, found_reads, written, settled = memo.latest
        same_basis = basis is not None and basis[0] is recogniser and basis[1] is ctx.counter
        if not (old and same_basis and common_prefix(old, messages) == len(old)):
            old, located, open_calls, accesses, open_path, found_reads, written, settled = _NOTHING_SCANNED
        new_located, new_open = _pair_calls(messages, len(old), list(located), dict(open_calls))
        new_accesses, new_path = recogniser.carry_on(
            [call for call, _ in new_located[len(accesses) :]], list(accesses), open_path, ctx.cache_policy
        )
        writes = {path: list(seqs) for path, seqs in written.items()}
        for seq in range(len(accesses), len(new_accesses)):
            access = new_accesses[seq]
            if isinstance(access, FileWrite):
                for path in access.paths:
                    writes.setdefault(path, []).append(seq)
        # The calls looked at now: the new ones, and those that had no result yet (the latest
        # assistant message's); a read found before keeps what was found of it.
        seen = list(found_reads)
        looked = sorted(open_calls.values()) if old else []
        for seq in [*looked, *range(len(accesses), len(new_accesses))]:
            found_read = self._found_read(messages, new_located[seq], new_accesses[seq], seq, ctx)
            if found_read is not None:
                seen.append(found_read)
        if looked:
            seen.sort(key=_seq_of)
        settles = _settling_points(messages, settled)
        memo.latest = (
            tuple(messages),
            (recogniser, ctx.counter),
            tuple(new_located),
            new_open,
            tuple(new_accesses),
            new_path,
            tuple(seen),
            {path: tuple(seqs) for path, seqs in writes.items()},
            tuple(settles),
        )
        reads = [
            _Read(seq, call, extent, msg_index, part_index, part, state, settles[msg_index], tokens=tokens)
            for seq, call, extent, msg_index, part_index, part, state, tokens in seen
        ]
        return reads, writes

    def _found_read(
        self,
        messages: list[Message],
        located: _Located,
        access: FileAccess | None,
        seq: int,
        ctx: ProcessContext,
    ) -> _FoundRead | None:
        """What `_scan` keeps of a read whose result is in the history; `None` for another call, a
        call without its result, or a result to leave alone."""
        call, found = located
        if not isinstance(access, FileRead) or found is None:
            return None
        msg_index, part_index = found
        msg = messages[msg_index]
        part = msg.parts[part_index]
        assert isinstance(part, ToolResultPart)
        state = self._state(msg, part, ctx)
        if state == _IGNORED:
            return None
        tokens = self._tokens(msg, part, ctx) if state in _REPLACEABLE else 0
        return seq, call, shown_extent(access, part), msg_index, part_index, part, state, tokens

    def _recognise(self) -> FileAccessRecogniser:
        recogniser = self._recogniser
        config = (self.root, self.file_key, self.builtin_shapes)
        if recogniser is None or (recogniser.root, recogniser.file_key, recogniser.builtin) != config:
            recogniser = FileAccessRecogniser(
                root=self.root, file_key=self.file_key, builtin=self.builtin_shapes
            )
            self._recogniser = recogniser
        return recogniser

    def _state(self, msg: Message, part: ToolResultPart, ctx: ProcessContext) -> str:
        # Only a message historykit wrote (it carries a marker) can hold its notice: an output that
        # merely starts like one is the file's lines, and its handle is its own.
        written = msg.marker is not None
        state = self._results.get(part, written)
        if state is None:
            state = self._results.put(part, _content_state(part, written), ctx.cache_policy, written)
        if state in (_CONTENT, _PARTIAL):
            if msg.source is not None and not msg.part_is_original(part):
                return _IGNORED  # another processor's edit: not the file's lines
            if part.pinned or msg.pinned:
                return _PINNED if state == _CONTENT else _IGNORED
        elif state == _NOTICE and (part.pinned or msg.pinned):
            return _IGNORED
        return state

    def _estimate(self, read: _Read, ctx: ProcessContext) -> int:
        """Tokens of a notice for `read`, from the read alone: naming itself, and saying the file
        changed (the longer form), so the notices actually written are rarely longer."""
        part = read.part
        tool = self.recall_tool
        hit = self._estimates.get(part)
        if hit is not None and hit[0] is read.call and hit[1] is ctx.counter and hit[2] == tool:
            return hit[3]
        estimate = PART_OVERHEAD + ctx.counter.count_text(_notice(read, read, True, tool))
        self._estimates.put(part, (read.call, ctx.counter, tool, estimate), ctx.cache_policy)
        return estimate

    def _tokens(self, msg: Message, part: ToolResultPart, ctx: ProcessContext) -> int:
        if len(msg.parts) == 1:
            return ctx.counter.count_message(msg) - MESSAGE_OVERHEAD  # cached by the shared counter
        hit = self._part_tokens.get(part)
        if hit is not None and hit[0] is ctx.counter:
            return hit[1]
        tokens = ctx.counter.count_part(part)
        self._part_tokens.put(part, (ctx.counter, tokens), ctx.cache_policy)
        return tokens

    # --- when -----------------------------------------------------------------------------------

    def _boundary(self, messages: list[Message], reads: list[_Read], ctx: ProcessContext) -> int:
        """The boundary: this call's request point when reads are replaced now, else 0.

        Reads are replaced in a batch (`historykit.processors._batching`): when those superseded
        and not yet replaced would free `min_gain` tokens and the trigger, if any, fires on the
        history's size, counting every notice already in it at a fixed estimate of its own.
        """
        due = sorted((r for r in reads if r.due < _NEVER and (r.gain > 0 or r.state == _NOTICE)), key=_due)
        if not due:
            return 0
        # This call's request point: the end, or the latest assistant message when the history
        # ends with one (its calls are still waiting for their results).
        last = len(messages) - 1
        points = [last if messages[last].role == "assistant" else len(messages)]
        notices = sorted((r for r in reads if r.state == _NOTICE), key=lambda r: r.msg_index)
        min_gain = max(self.min_gain, 1)
        trigger = self.trigger
        count = ctx.counter.count_message
        boundary = pending = freed = at = size = sized = noticed = 0
        for point in points:
            while at < len(due) and due[at].due <= point:
                if due[at].state != _NOTICE:  # a notice already freed its tokens
                    pending += due[at].gain
                at += 1
            if pending < min_gain:
                continue
            if trigger is not None:
                while sized < point:
                    size += count(messages[sized])
                    sized += 1
                while noticed < len(notices) and notices[noticed].msg_index < point:
                    size += notices[noticed].estimate - notices[noticed].tokens
                    noticed += 1
                if not trigger.fires(size - freed, point, ctx):
                    continue
            boundary, freed, pending = point, freed + pending, 0
        return boundary


# --- reads ----------------------------------------------------------------------------------

_CONTENT, _PARTIAL, _NOTICE, _PINNED, _IGNORED = "content", "partial", "notice", "pinned", "ignored"
_REPLACEABLE = frozenset({_CONTENT, _PARTIAL, _NOTICE})
"""The states of a read whose result a notice may replace (`_Read.replaceable`)."""


@dataclass(eq=False)
class _Read:
    """A recognised read and its result."""

    seq: int
    """Order of the call among all tool calls of the history."""
    call: ToolCallPart
    access: FileRead
    msg_index: int
    part_index: int
    part: ToolResultPart
    state: str
    """`content` (a current copy), `partial` (cut by the harness), `notice` (already replaced) or
    `pinned` (kept verbatim)."""
    settled: int
    """First request point at which the result is no longer part of the final request."""
    due: int = 1 << 60
    """First request point at which the read is superseded and out of the final request."""
    tokens: int = 0
    """Tokens of the result as it is."""
    estimate: int = 0
    """Tokens of a notice for this read, estimated from the read alone (whichever read it names),
    so that every call decides alike."""

    @property
    def gain(self) -> int:
        """Tokens a notice saves, by the estimate."""
        return self.tokens - self.estimate

    @property
    def is_copy(self) -> bool:
        """Can supersede others: its result holds the lines it read."""
        return self.state in (_CONTENT, _PINNED)

    @property
    def replaceable(self) -> bool:
        return self.state in _REPLACEABLE


def _due(read: _Read) -> int:
    return read.due


def _content_state(part: ToolResultPart, written: bool) -> str:
    """What a read's result holds, judged from its content and whether historykit `written` it."""
    content = part.content
    if content.startswith(NOTICE_PREFIX):
        # Unmarked, it is no file's lines and no notice of ours (a transcript re-read from a format
        # that keeps no markers, or an output made to look like one): left alone.
        return _NOTICE if written else _IGNORED
    if read_failed(part):
        return _IGNORED
    stripped = content.strip()
    if len(stripped) < _PLACEHOLDER_MAX and stripped.startswith("[") and stripped.endswith("]"):
        return _IGNORED  # another processor's placeholder, not the file's lines
    return _PARTIAL if read_is_partial(part) else _CONTENT


_Located = tuple[ToolCallPart, tuple[int, int] | None]
"""A tool call and where its result is: (message index, part index); `None` for none."""


_FoundRead = tuple[int, ToolCallPart, FileRead, int, int, ToolResultPart, str, int]
"""A read whose result is in the history, as `_scan` keeps it: its call's order number, the call,
what its result shows, the message and part of the result, its state, and its tokens (0 unless it
can be replaced); the rest of a `_Read` is worked out again at every call."""


def _seq_of(found_read: _FoundRead) -> int:
    return found_read[0]


_ScanState = tuple[
    tuple[Message, ...],
    tuple[_Located, ...],
    dict[str, int],
    tuple[FileAccess | None, ...],
    str | None,
    tuple[_FoundRead, ...],
    dict[str, tuple[int, ...]],
    tuple[int, ...],
]
_NOTHING_SCANNED: _ScanState = ((), (), {}, (), None, (), {}, ())


@dataclass
class _Scanned:
    """Where `DedupeFileReads._scan` left this conversation's latest history: its messages, what the
    pass depended on (the recogniser, the counter), the calls located and those still open
    (`_pair_calls`), what each call did to a file and the file SWE-agent's editor had open at the
    end, the reads found, the writes by file, and each message's settling point."""

    latest: tuple[Any, ...] = ((), None, *_NOTHING_SCANNED[1:])


def _pair_calls(
    messages: list[Message],
    start: int = 0,
    out: list[_Located] | None = None,
    open_calls: dict[str, int] | None = None,
) -> tuple[list[_Located], dict[str, int]]:
    """Every tool call in order, with where its result is: (message index, part index); and the
    calls of the latest assistant message still without a result (id -> position in the list).
    From `start` on, given what the messages before it gave (`out`, `open_calls`)."""
    out = [] if out is None else out
    open_calls = {} if open_calls is None else open_calls  # call id -> position in `out`
    for index in range(start, len(messages)):
        msg = messages[index]
        if msg.role == "assistant":
            open_calls = {}
            for part in msg.parts:
                if isinstance(part, ToolCallPart):
                    if part.id not in open_calls:
                        open_calls[part.id] = len(out)
                    out.append((part, None))
            continue
        for part_index, part in enumerate(msg.parts):
            if isinstance(part, ToolResultPart):
                position = open_calls.pop(part.tool_call_id, None)
                if position is not None:
                    out[position] = (out[position][0], (index, part_index))
    return out, open_calls


_NEVER = 1 << 60


def _settling_points(messages: list[Message], known: Sequence[int] = ()) -> list[int]:
    """For each message, the first request point at which it is no longer in the final request:
    one past the next assistant (or system) message after it. `known`: the points of a history
    that `messages` only adds to; those it had found stay (what follows the last assistant or
    system message of that history is worked out again)."""
    keep = known.index(_NEVER) if _NEVER in known else len(known)
    out = [*known[:keep], *[_NEVER] * (len(messages) - keep)]
    upcoming = _NEVER
    for index in range(len(messages) - 1, keep - 1, -1):
        out[index] = upcoming
        if messages[index].role in ("assistant", "system"):
            upcoming = index + 1
    return out


def _first_superseded(reads: list[_Read], writes: dict[str, list[int]]) -> None:
    """Set `due` for every read a later copy supersedes (one forward pass per file)."""
    by_path: dict[str, list[_Read]] = {}
    for read in reads:
        by_path.setdefault(read.access.path, []).append(read)
    for path, file_reads in by_path.items():
        edits = writes.get(path, ())
        fresh: list[_Read] = []  # not yet superseded, no write of the file since
        stale: list[_Read] = []  # not yet superseded, the file was written since
        e = 0
        for read in file_reads:
            while e < len(edits) and edits[e] < read.seq:
                stale.extend(fresh)
                fresh = []
                e += 1
            if read.is_copy:
                if read.access.whole:
                    for old in fresh + stale:
                        _superseded(old, read)
                    fresh, stale = [], []
                else:
                    keep = []
                    for old in fresh:
                        if read.access.covers(old.access):
                            _superseded(old, read)
                        else:
                            keep.append(old)
                    fresh = keep
            if read.replaceable:
                fresh.append(read)


def _superseded(read: _Read, by: _Read) -> None:
    read.due = max(by.msg_index + 1, read.settled)


def _notices_at(
    boundary: int, reads: list[_Read], writes: dict[str, list[int]], recall_tool: str | None
) -> list[tuple[_Read, str]]:
    """The notice text of every read replaced at `boundary`: each names the latest copy before it
    (and, with `recall_tool`, the handle of the read's own copy)."""
    out: list[tuple[_Read, str]] = []
    by_path: dict[str, list[_Read]] = {}
    for read in reads:
        if read.msg_index < boundary:
            by_path.setdefault(read.access.path, []).append(read)
    for path, file_reads in by_path.items():
        edits = writes.get(path, [])
        copies: list[_Read] = []  # later copies no later copy supersedes, latest first
        e = len(edits)
        for read in reversed(file_reads):
            while e > 0 and edits[e - 1] > read.seq:
                copies = [c for c in copies if c.access.whole]  # a write moved the lines
                e -= 1
            target = next((c for c in copies if c.access.covers(read.access)), None)
            if target is None:
                if read.is_copy:
                    copies.append(read)
                continue
            if read.replaceable and read.due <= boundary and (read.gain > 0 or read.state == _NOTICE):
                edited = bisect.bisect_right(edits, read.seq) != bisect.bisect_left(edits, target.seq)
                out.append((read, _notice(read, target, edited, recall_tool)))
    out.sort(key=lambda pair: pair[0].seq)
    return out


def _noticed_access(access: FileRead, notice: str) -> FileRead:
    """The read a notice describes (`FileRead.describe` in reverse), else the call's own."""
    described = notice[len(NOTICE_PREFIX) :].split(_NOTICE_MIDDLE, 1)[0]
    path = re.escape(access.path)
    for pattern, make in (
        (rf"lines (\d+)-(\d+) of {path}", lambda m: FileRead(access.path, int(m[1]), int(m[2]))),
        (rf"line (\d+) of {path}", lambda m: FileRead(access.path, int(m[1]), int(m[1]))),
        (rf"the last (\d+) lines of {path}", lambda m: FileRead(access.path, -int(m[1]))),
        (rf"{path} from line (\d+)", lambda m: FileRead(access.path, int(m[1]))),
        (rf"{path} \((.+)\)", lambda m: FileRead(access.path, window=m[1])),
        (path, lambda m: FileRead(access.path)),
    ):
        match = re.fullmatch(pattern, described)
        if match is None:
            continue
        try:
            found = make(match)
        except ValueError:
            continue
        if found.describe() == described:
            return found
    return access


_NOTICE_MIDDLE = " was read again later: "


def _notice(read: _Read, target: _Read, edited: bool, recall_tool: str | None = None) -> str:
    text = (
        f"{NOTICE_PREFIX}{read.access.describe()}{_NOTICE_MIDDLE}the current copy is in the result of tool "
        f"call {target.call.id} ({target.call.name})."
    )
    if edited:
        text += " The file was changed in between."
    if recall_tool is not None:
        # The handle of the copy this notice replaced. A notice being re-pointed keeps the handle it
        # names (its copy is gone from the history): every call, and both modes, write one text.
        content = read.part.content
        handle = handle_in(content, recall_tool) if read.state == _NOTICE else recall_handle(content)
        if handle is not None:
            text += f" This read's own copy: {recall_call(recall_tool, handle)}."
    return text
