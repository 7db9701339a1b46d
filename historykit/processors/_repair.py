"""`Repair`: make a history satisfy the provider rules that `historykit.check` reports."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple

from historykit._identity_cache import CachePolicy, IdentityCache
from historykit._messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes, same_messages
from historykit._scan_memo import common_prefix
from historykit._validity import (
    MAX_CACHE_BREAKPOINTS,
    check_neutral,
    current_cycle_start,
    final_request_start,
    has_cache_marker,
)

MISSING_RESULT = "[no result: the output of this {name} call is no longer in the history]"
CONTINUATION = "[The conversation continues from an earlier part that is not shown here.]"
EMPTY_TEXT = "(empty message)"


@dataclass
class Repair(HistoryProcessor):
    """Fixes provider-rule violations; the last stage of every built-in pipeline.

    - a tool-call id used before in the history (R12) is made unique (`<id>__2`, ...), in the call and
      in the result that answers it, so the pairing stays as it was;
    - a tool result that answers no call of the preceding assistant message (R1) is removed, or,
      inside the final request, turned into user text so the request keeps its content;
    - a tool call without a result (R2) gets a short synthetic result saying the output is gone
      (a final call still waiting for its result is left alone);
    - tool results that follow user text in the same turn are moved before it (R3);
    - a history whose first non-system message is not the user's gets a one-line user notice (R4);
    - consecutive assistant messages are merged (R5); with `strict_alternation`, user ones too;
    - empty text is removed, and a message left empty with it (R6);
    - thinking with an empty signature (R8) and a reasoning item left without its following item
      (R9) are removed, outside the current tool-use cycle.

    It never drops a system message or the final request, and never edits the thinking of the
    current tool-use cycle. What it could not fix is listed in its notes.

    In a pipeline it runs after every other step, and its edits reach the request the model is sent
    only (`PipelineResult.messages`): the history an integration keeps (`PipelineResult.history`:
    Pydantic AI's `all_messages()`, a LangGraph state, the stores) carries the compaction edits
    alone, so a framework's own history is never rewritten by a repair of it.

    Example:
        ```python
        from historykit.processors import Repair

        fixed = Repair()(messages)   # native messages in, native messages out
        ```
    """

    repairs_request: ClassVar[bool] = True

    strict_alternation: bool = False
    """Also merge consecutive user messages, for providers that require strict alternation."""
    _shapes: IdentityCache[_Shape] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        if not self.strict_alternation and self._plainly_valid(messages, ctx):
            # Every fix below would return its input and the check would find nothing: the same
            # answer, from one pass over what each message's shape says (remembered per message).
            return messages, notes
        out = _fix_duplicate_ids(messages, notes)
        out = _fix_pairing(out, notes)
        out = _fix_result_order(out, notes)
        out = _drop_empty_text(out, notes)
        out = _fix_invalid_thinking(out, notes)
        out = _merge_same_role(out, notes, self.strict_alternation)
        out = _fix_first_message(out, notes)
        left = check_neutral(out, strict_alternation=self.strict_alternation)
        notes.details.extend(f"not repaired: {v}" for v in left)
        return (messages if same_messages(out, messages) else out), notes

    def _plainly_valid(self, messages: list[Message], ctx: ProcessContext) -> bool:
        """True only when no fix of `process` changes anything and `check_neutral` finds nothing.

        Stricter than both, so a history it cannot vouch for takes the full path: a message with
        empty or blank text, unsendable or misplaced thinking (any role, anywhere), a tool-call id
        seen before, consecutive assistant messages, a first message not the user's, a result
        that answers no open call or comes after user text since its call, a call left without a
        result (but for the last message's), too many cache breakpoints."""
        # The check is one pass that carries a few sets from message to message: this
        # conversation's latest call left it at the end of its history (`_Pass`), and a call that
        # only adds to that history carries on from there (`historykit._scan_memo`).
        memo = ctx.conversation.memory(self, _PassMemo)
        old, done, failed_at = memo.latest
        same = common_prefix(old, messages)
        if failed_at is not None and same > failed_at:
            return False  # the very messages that failed it are still there
        state = done.copy() if done is not None and same == len(old) else _Pass()
        failed_at = state.run(messages, state.at, self._shapes, ctx.cache_policy)
        memo.latest = (tuple(messages), state if failed_at is None else None, failed_at)
        if failed_at is not None:
            return False
        # The last message's calls are waiting for their results; any other call must have them.
        if state.previous != "assistant" and len(state.answered) != len(state.open_calls):
            return False
        return state.markers <= MAX_CACHE_BREAKPOINTS


@dataclass
class _Pass:
    """Where `Repair._plainly_valid`'s pass over a history stands after its first `at` messages."""

    at: int = 0
    seen: set[str] = field(default_factory=set)
    """Every tool-call id so far."""
    open_calls: frozenset[str] = frozenset()
    """The calls of the latest assistant message."""
    answered: set[str] = field(default_factory=set)
    """Those of them answered since."""
    after_user: bool = False
    """User text (or a user message without results) since the latest call."""
    started: bool = False
    """A message other than a system one came."""
    previous: str = ""
    """The role of the latest message."""
    markers: int = 0
    """Cache breakpoints so far."""

    def copy(self) -> _Pass:
        return replace(self, seen=set(self.seen), answered=set(self.answered))

    def run(
        self, messages: list[Message], start: int, shapes: IdentityCache[_Shape], policy: CachePolicy
    ) -> int | None:
        """Carry the pass on over `messages[start:]`; the index of the message that fails it, else `None`."""
        seen, answered = self.seen, self.answered
        open_calls, after_user, started = self.open_calls, self.after_user, self.started
        previous, markers = self.previous, self.markers
        failed: int | None = None
        for index in range(start, len(messages)):
            msg = messages[index]
            shape = shapes.get(msg)
            if shape is None:
                shape = shapes.put(msg, _shape(msg), policy)
            if not shape.sendable:
                failed = index
                break
            markers += shape.markers
            role = msg.role
            if not started and role != "system":
                if role != "user":
                    failed = index
                    break
                started = True
            if role == "assistant":
                if previous == "assistant" or len(answered) != len(open_calls):
                    failed = index
                    break
                if any(call_id in seen for call_id in shape.calls) or len(set(shape.calls)) != len(
                    shape.calls
                ):
                    failed = index
                    break
                seen.update(shape.calls)
                open_calls, answered, after_user = frozenset(shape.calls), set(), False
            else:
                for result_id in shape.results:
                    if after_user or result_id not in open_calls or result_id in answered:
                        failed = index
                        break
                    answered.add(result_id)
                if failed is not None:
                    break
                if shape.user_text:
                    after_user = True
            previous = role
        self.at = len(messages)
        self.answered, self.open_calls, self.after_user = answered, open_calls, after_user
        self.started, self.previous, self.markers = started, previous, markers
        return failed


@dataclass
class _PassMemo:
    """The pass over one conversation's latest history: its messages, where the pass stood at
    their end (`None` when it failed), and the index of the message that failed it."""

    latest: tuple[tuple[Message, ...], _Pass | None, int | None] = ((), None, None)


class _Shape(NamedTuple):
    """What `Repair._plainly_valid` reads of one message."""

    sendable: bool
    """Content, no blank text, thinking only ahead of everything else and signed, no reasoning
    item last, no user text ahead of a result in the message itself."""
    calls: tuple[str, ...]
    """The ids of its tool calls (an assistant message's), in order."""
    results: tuple[str, ...]
    """The call ids its tool results answer (another role's), in order."""
    user_text: bool
    """A user message with text, or without results: results after it would follow user text."""
    markers: int
    """Cache breakpoints on its parts."""


def _shape(msg: Message) -> _Shape:
    parts = msg.parts
    sendable = bool(parts)
    calls: list[str] = []
    results: list[str] = []
    text = False
    other = False  # a part that is not thinking came before
    markers = 0
    for j, part in enumerate(parts):
        if has_cache_marker(part.native):
            markers += 1
        if isinstance(part, ThinkingPart):
            if (
                other
                or part.signature == ""
                or (part.id is not None and part.id.startswith("rs_") and j == len(parts) - 1)
            ):
                sendable = False
            continue
        other = True
        if isinstance(part, TextPart):
            if not part.text.strip():
                sendable = False
            text = True
        elif isinstance(part, ToolCallPart):
            if msg.role != "assistant":
                sendable = False  # a call outside a response
            calls.append(part.id)
        elif isinstance(part, ToolResultPart):
            if msg.role == "assistant" or (msg.role == "user" and text):
                sendable = False  # a result in a response, or after the user's text in one message
            results.append(part.tool_call_id)
    user_text = msg.role == "user" and (text or not results)
    return _Shape(sendable, tuple(calls), tuple(results), user_text, markers)


def _fix_duplicate_ids(messages: list[Message], notes: StepNotes) -> list[Message]:
    """R12: each tool-call id once in the whole request. A repeated id gets a fresh one, and the
    results after that assistant message follow it: the n-th result for an id answers the n-th call
    that had it, as the provider pairs them."""
    seen: set[str] = set()
    renamed: dict[str, list[str]] = {}  # old id -> new ids of the latest assistant message, in order
    out: list[Message] | None = None
    for index, msg in enumerate(messages):
        new_parts: list[Part] | None = None
        if msg.role == "assistant":
            renamed = {}
            for j, part in enumerate(msg.parts):
                if not isinstance(part, ToolCallPart):
                    continue
                new_id = part.id
                if part.id in seen:
                    n = 2
                    while f"{part.id}__{n}" in seen:
                        n += 1
                    new_id = f"{part.id}__{n}"
                    if new_parts is None:
                        new_parts = list(msg.parts)
                    new_parts[j] = replace(part, id=new_id)
                    notes.details.append(f"tool call id {part.id!r} used before: renamed {new_id!r}")
                renamed.setdefault(part.id, []).append(new_id)
                seen.add(new_id)
        elif msg.tool_results and any(new != old for old, ids in renamed.items() for new in ids):
            queues = {old: list(ids) for old, ids in renamed.items()}
            for j, part in enumerate(msg.parts):
                if isinstance(part, ToolResultPart) and queues.get(part.tool_call_id):
                    new_id = queues[part.tool_call_id].pop(0)
                    if new_id != part.tool_call_id:
                        if new_parts is None:
                            new_parts = list(msg.parts)
                        new_parts[j] = replace(part, tool_call_id=new_id)
            renamed = {old: ids for old, ids in queues.items() if ids}
        if new_parts is not None:
            if out is None:
                out = list(messages)
            out[index] = replace(msg, parts=tuple(new_parts))
            notes.replaced += 1
    return messages if out is None else out


def _fix_pairing(messages: list[Message], notes: StepNotes) -> list[Message]:
    final_start = final_request_start(messages)
    out: list[Message] = []
    calls: dict[str, str] = {}  # id -> name, of the latest assistant message
    answered: set[str] = set()
    caller_pos = -1  # index in `out` of the latest assistant message

    def add_missing() -> None:
        missing = [(cid, name) for cid, name in calls.items() if cid not in answered]
        if not missing:
            return
        results = tuple(ToolResultPart(cid, name, MISSING_RESULT.format(name=name)) for cid, name in missing)
        # After the caller's existing results, so the answers stay in one user turn.
        at = caller_pos + 1
        while at < len(out) and out[at].role == "tool":
            at += 1
        out.insert(at, Message("tool", results))
        notes.added += 1
        notes.details.append(
            f"added results for {len(missing)} unanswered tool call(s): {', '.join(c for c, _ in missing)}"
        )

    for index, msg in enumerate(messages):
        if msg.role == "assistant":
            add_missing()
            calls = {p.id: p.name for p in msg.tool_calls}
            answered = set()
            caller_pos = len(out)
            out.append(msg)
            continue
        if not msg.tool_results:
            out.append(msg)
            continue
        kept: list[Part] = []
        orphans: list[ToolResultPart] = []
        for part in msg.parts:
            if isinstance(part, ToolResultPart) and (
                part.tool_call_id not in calls or part.tool_call_id in answered
            ):
                orphans.append(part)
                continue
            if isinstance(part, ToolResultPart):
                answered.add(part.tool_call_id)
            kept.append(part)
        if not orphans:
            out.append(msg)
            continue
        notes.replaced += len(orphans)
        if kept:
            out.append(replace(msg, parts=tuple(kept)))
        else:
            notes.removed += 1
        if index >= final_start:
            # The final request is never lost: its orphan results become user text.
            text = "\n\n".join(
                f"Result of {p.name or 'a tool'} (call {p.tool_call_id}):\n{p.content}" for p in orphans
            )
            out.append(Message("user", (TextPart(text),)))
            notes.added += 1
            notes.details.append(
                f"turned {len(orphans)} orphan tool result(s) of the final request into user text"
            )
        else:
            notes.details.append(
                f"removed {len(orphans)} tool result(s) answering no call: "
                + ", ".join(p.tool_call_id for p in orphans)
            )
    # A last assistant message whose calls are unanswered is waiting for them: leave it.
    if caller_pos != len(out) - 1:
        add_missing()
    return out


def _fix_result_order(messages: list[Message], notes: StepNotes) -> list[Message]:
    out = list(messages)
    i = 0
    while i < len(out):
        if out[i].role != "assistant" or not out[i].tool_calls:
            i += 1
            continue
        end = i + 1
        while end < len(out) and out[end].role in ("user", "tool"):
            end += 1
        block = out[i + 1 : end]
        last_result = max((k for k, m in enumerate(block) if m.tool_results), default=None)
        if last_result is not None and any(
            m.role == "user" and not m.tool_results for m in block[:last_result]
        ):
            reordered = [m for m in block if m.tool_results] + [m for m in block if not m.tool_results]
            out[i + 1 : end] = reordered
            notes.details.append(f"moved tool results before user text after message {i}")
        i = end
    return out


def _drop_empty_text(messages: list[Message], notes: StepNotes) -> list[Message]:
    final_start = final_request_start(messages)
    out: list[Message] = []
    for index, msg in enumerate(messages):
        parts = tuple(p for p in msg.parts if not (isinstance(p, TextPart) and not p.text.strip()))
        if parts == msg.parts and msg.parts:
            out.append(msg)
            continue
        if msg.role == "assistant" and parts:
            out.append(msg)  # an empty text block beside other content is dropped by providers
            continue
        if parts:
            out.append(replace(msg, parts=parts))
            notes.replaced += len(msg.parts) - len(parts)
        elif msg.role == "system" or msg.pinned or index >= final_start:
            out.append(replace(msg, parts=(TextPart(EMPTY_TEXT),)))
            notes.replaced += 1
        else:
            notes.removed += 1
            notes.details.append(f"removed an empty {msg.role} message")
    return out


def _fix_invalid_thinking(messages: list[Message], notes: StepNotes) -> list[Message]:
    cycle = current_cycle_start(messages)
    out = list(messages)
    for index, msg in enumerate(messages[:cycle]):
        if msg.role != "assistant":
            continue
        parts = msg.parts
        keep = tuple(
            p
            for j, p in enumerate(parts)
            if not (
                isinstance(p, ThinkingPart)
                and (
                    p.signature == "" or (p.id is not None and p.id.startswith("rs_") and j == len(parts) - 1)
                )
            )
        )
        if len(keep) != len(parts):
            notes.replaced += len(parts) - len(keep)
            notes.details.append(
                f"removed {len(parts) - len(keep)} unsendable thinking block(s) from message {index}"
            )
            out[index] = replace(msg, parts=keep or (TextPart(EMPTY_TEXT),))
    return out


def _merge_same_role(messages: list[Message], notes: StepNotes, strict: bool) -> list[Message]:
    out: list[Message] = []
    for msg in messages:
        prev = out[-1] if out else None
        same = prev is not None and prev.role == msg.role
        mergeable = same and (
            msg.role == "assistant"
            or (strict and msg.role == "user" and not msg.tool_results and not prev.tool_results)  # type: ignore[union-attr]
        )
        if prev is not None and mergeable:
            out[-1] = _merged(prev, msg)
            notes.removed += 1
            notes.details.append(f"merged two consecutive {msg.role} messages")
        else:
            out.append(msg)
    return out


def _merged(first: Message, second: Message) -> Message:
    parts = first.parts + second.parts
    if first.role == "assistant":
        # Thinking leads a response; tool calls close it.
        thinking = tuple(p for p in parts if isinstance(p, ThinkingPart))
        calls = tuple(p for p in parts if isinstance(p, ToolCallPart))
        rest = tuple(p for p in parts if not isinstance(p, (ThinkingPart, ToolCallPart)))
        parts = thinking + rest + calls
    return replace(
        first, parts=parts, pinned=first.pinned or second.pinned, usage=second.usage or first.usage
    )


def _fix_first_message(messages: list[Message], notes: StepNotes) -> list[Message]:
    first = next((i for i, m in enumerate(messages) if m.role != "system"), None)
    if first is None or messages[first].role == "user":
        return messages
    notes.added += 1
    notes.details.append(f"added a user notice before the leading {messages[first].role} message")
    return [*messages[:first], Message("user", (TextPart(CONTINUATION),)), *messages[first:]]
