"""Provider rules (`docs/provider-rules.md`): `check` lists the violations of a history.

`check(messages)` takes a native history of either framework (or a neutral one) and returns one
`Violation` per broken rule and place; an empty list means providers will accept the history's
structure. The `Repair` processor (`historykit.processors.Repair`) fixes what `check` finds.

Example:
    ```python
    import historykit

    for violation in historykit.check(messages):
        print(violation)   # R1 at message 7 (part 0): tool result 'call_3' answers no tool call ...
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from historykit._binding import history_binds_thinking
from historykit._digests import message_digest
from historykit._messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

RULES: dict[str, str] = {
    "R1": "every tool result answers a tool call made in the immediately preceding assistant turn",
    "R2": "every tool call has its result in the next turn (all calls of a parallel group)",
    "R3": "in the user turn after a tool call, tool results come before any text",
    "R4": "the first non-system message is from the user",
    "R5": "roles alternate; consecutive same-role turns are merged",
    "R6": "no empty text content",
    "R7": "the last assistant turn of a tool-use cycle keeps its thinking blocks first, unmodified",
    "R8": "thinking is not replayed with an empty signature",
    "R9": "an OpenAI Responses reasoning item travels with the item that follows it",
    "R10": "at most 4 cache breakpoints in one request",
    "R11": "the system prompt and the final request are kept",
    "R12": "tool-call ids are unique across the whole request",
    "R13": "on a model that binds thinking, a replayed thinking block follows exactly the history it was "
    "produced under",
}
"""Rule id -> the rule, as `docs/provider-rules.md` states it."""

MAX_CACHE_BREAKPOINTS = 4


@dataclass(frozen=True)
class Violation:
    """One broken rule at one place of a history."""

    rule: str
    """Rule id (`R1` ... `R13`), see `RULES`."""
    index: int
    """Index of the offending message in the history as given (native index for native lists)."""
    part: int | None
    """Index of the offending part within the neutral message, when one part is at fault."""
    detail: str
    """What is wrong, in words."""

    def __str__(self) -> str:
        where = f"message {self.index}" + (f" (part {self.part})" if self.part is not None else "")
        return f"{self.rule} at {where}: {self.detail} [{RULES[self.rule]}]"


def check(
    messages: Sequence[Any],
    *,
    strict_alternation: bool = False,
    sent_before: Sequence[Any] | None = None,
    binds_thinking: bool | None = None,
) -> list[Violation]:
    """The provider-rule violations of a native (Pydantic AI, LangChain) or neutral history.

    - `strict_alternation` also reports consecutive user messages (for providers and open models
      that reject them; Pydantic AI and LangChain merge them for Anthropic, so it is off by default).
    - `sent_before`: the history sent on the previous call (the previous view), of the same
      framework. With it, R13 is checked: on a model that binds thinking, a thinking block after the
      first place where `messages` differs from `sent_before` is reported (its prefix changed).
    - `binds_thinking`: whether the model binds thinking (`historykit.BINDING_MODELS`); `None`: from the
      model name on the latest assistant message.

    Raises `ArgumentTypeError` (a `TypeError`) naming the index and type of an item that is not a message.
    """
    from historykit._frameworks import adapter_for

    adapter = adapter_for(messages)
    neutral = adapter.to_neutral(messages)
    before = adapter_for(sent_before).to_neutral(sent_before) if sent_before is not None else None
    return check_neutral(
        neutral,
        strict_alternation=strict_alternation,
        native_index=_native_indices(neutral),
        sent_before=before,
        binds_thinking=binds_thinking,
    )


def _native_indices(neutral: Sequence[Message]) -> list[int]:
    """For each neutral message, the index of the native message it came from.

    Adapters may split one native message (a Pydantic AI request with a system prompt and a user
    prompt) into several neutral ones; consecutive neutral messages sharing a native are one.
    """
    out: list[int] = []
    index = -1
    previous: object = None
    for msg in neutral:
        if msg.native is None or msg.native is not previous:
            index += 1
        previous = msg.native
        out.append(index)
    return out


def _is_user_text(msg: Message) -> bool:
    """A message in the user's own voice (not tool results)."""
    return msg.role == "user" and not msg.tool_results


def final_request_start(messages: Sequence[Message]) -> int:
    """Index where the final request begins: the trailing run of user-voice (user/tool) messages.

    Returns `len(messages)` when the history ends with an assistant or system message.
    """
    start = len(messages)
    while start > 0 and messages[start - 1].role in ("user", "tool"):
        start -= 1
    return start


def turn_starts(messages: Sequence[Message]) -> list[bool]:
    """For each message, whether it starts a turn: a system message, or the user's own message,
    except in a final request that also carries tool results (Pydantic AI sends a new prompt in the
    request holding the results): the provider gets one user turn with the results, so the tool-use
    cycle they answer is still the current one, and its thinking must stay (R7)."""
    final = final_request_start(messages)
    answers_calls = any(m.role == "tool" or m.tool_results for m in messages[final:])
    return [
        m.role == "system" or (_is_user_text(m) and not (answers_calls and i >= final))
        for i, m in enumerate(messages)
    ]


def current_cycle_start(messages: Sequence[Message]) -> int:
    """Index of the first assistant message of the current tool-use cycle.

    The cycle is what follows the user's latest own message: the assistant turns and tool results
    since then. Their thinking must reach the provider unmodified (R7). `len(messages)` when
    there is no assistant message after the latest user message.
    """
    starts = turn_starts(messages)
    for index in range(len(messages) - 1, -1, -1):
        if starts[index]:
            for later in range(index + 1, len(messages)):
                if messages[later].role == "assistant":
                    return later
            return len(messages)
    for index, msg in enumerate(messages):
        if msg.role == "assistant":
            return index
    return len(messages)


def check_neutral(
    messages: Sequence[Message],
    *,
    strict_alternation: bool = False,
    native_index: Sequence[int] | None = None,
    sent_before: Sequence[Message] | None = None,
    binds_thinking: bool | None = None,
) -> list[Violation]:
    """`check` on a neutral history; `native_index` maps neutral to reported indices."""
    where = native_index if native_index is not None else range(len(messages))
    found: list[Violation] = []

    def report(rule: str, i: int, part: int | None, detail: str) -> None:
        found.append(Violation(rule, where[i], part, detail))

    _check_tool_pairing(messages, report)
    _check_order_and_content(messages, report, strict_alternation)
    _check_thinking(messages, report)
    _check_cache_breakpoints(messages, report)
    _check_unique_call_ids(messages, report)
    if sent_before is not None:
        binds = history_binds_thinking(messages) if binds_thinking is None else binds_thinking
        if binds:
            _check_binding(messages, sent_before, report)
    found.sort(key=lambda v: (v.index, v.part if v.part is not None else -1, v.rule))
    return found


def _check_tool_pairing(messages: Sequence[Message], report: Any) -> None:
    open_calls: dict[str, str] = {}  # id -> name, calls of the latest assistant message
    answered: set[str] = set()
    caller = -1  # index of the latest assistant message
    seen_text_after_calls = False

    def close(before: int) -> None:
        missing = [cid for cid in open_calls if cid not in answered]
        # A final call still waiting for its result is how every agent loop looks mid-step.
        waiting = caller == len(messages) - 1
        if missing and not waiting:
            for cid in missing:
                part = next(
                    j
                    for j, p in enumerate(messages[caller].parts)
                    if isinstance(p, ToolCallPart) and p.id == cid
                )
                report(
                    "R2",
                    caller,
                    part,
                    f"tool call {cid!r} ({open_calls[cid]}) has no result before message {before}",
                )

    for i, msg in enumerate(messages):
        if msg.role == "assistant":
            close(i)
            open_calls = {p.id: p.name for p in msg.tool_calls}
            answered = set()
            caller = i
            seen_text_after_calls = False
            continue
        for j, part in enumerate(msg.parts):
            if isinstance(part, ToolResultPart):
                if part.tool_call_id not in open_calls:
                    detail = (
                        f"tool result {part.tool_call_id!r} answers no tool call of the preceding assistant "
                        "message"
                        if caller >= 0
                        else f"tool result {part.tool_call_id!r} comes before any assistant message"
                    )
                    report("R1", i, j, detail)
                elif part.tool_call_id in answered:
                    report("R1", i, j, f"tool call {part.tool_call_id!r} is answered twice")
                else:
                    answered.add(part.tool_call_id)
                    if seen_text_after_calls:
                        report(
                            "R3",
                            i,
                            j,
                            f"tool result {part.tool_call_id!r} comes after user text in the same turn",
                        )
            elif (
                isinstance(part, TextPart)
                and msg.role == "user"
                and any(cid not in answered for cid in open_calls)
            ):
                seen_text_after_calls = True
    close(len(messages))


def _check_order_and_content(messages: Sequence[Message], report: Any, strict_alternation: bool) -> None:
    first = next((i for i, m in enumerate(messages) if m.role != "system"), None)
    if first is not None and messages[first].role != "user":
        report("R4", first, None, f"the first non-system message is a {messages[first].role} message")
    for i, msg in enumerate(messages):
        if not msg.parts:
            report("R6", i, None, f"the {msg.role} message has no content")
        for j, part in enumerate(msg.parts):
            if isinstance(part, TextPart) and not part.text.strip():
                if msg.role == "assistant" and len(msg.parts) > 1:
                    continue  # providers drop an empty text block next to other content of a response
                report("R6", i, j, f"empty text in a {msg.role} message")
        if i == 0:
            continue
        prev = messages[i - 1]
        if msg.role == "assistant" and prev.role == "assistant":
            report("R5", i, None, "two assistant messages in a row")
        elif strict_alternation and _is_user_text(msg) and _is_user_text(prev):
            report("R5", i, None, "two user messages in a row")


def _check_thinking(messages: Sequence[Message], report: Any) -> None:
    cycle = current_cycle_start(messages)
    for i, msg in enumerate(messages):
        if msg.role != "assistant":
            continue
        seen_other = False
        parts = msg.parts
        for j, part in enumerate(parts):
            if not isinstance(part, ThinkingPart):
                # Whitespace-only text is no content: Anthropic refuses such blocks ("text content
                # blocks must contain non-whitespace text"), so clients drop them before sending, and
                # Claude Code logs a "\n\n" block before the thinking of accepted requests.
                if not (isinstance(part, TextPart) and not part.text.strip()):
                    seen_other = True
                continue
            if part.signature == "":
                report("R8", i, j, "thinking with an empty signature")
            if i >= cycle and seen_other and part.signature:
                report("R7", i, j, "signed thinking after other content in the current tool-use cycle")
            if part.id and part.id.startswith("rs_") and j == len(parts) - 1:
                report("R9", i, j, f"reasoning item {part.id!r} is not followed by the item it belongs to")


def _check_unique_call_ids(messages: Sequence[Message], report: Any) -> None:
    seen: dict[str, int] = {}
    for i, msg in enumerate(messages):
        if msg.role != "assistant":
            continue
        for j, part in enumerate(msg.parts):
            if not isinstance(part, ToolCallPart):
                continue
            if part.id in seen:
                first = seen[part.id]
                where = "earlier in this message" if first == i else f"at message {first}"
                report("R12", i, j, f"tool call id {part.id!r} is used {where} too")
            else:
                seen[part.id] = i


def _check_binding(messages: Sequence[Message], sent_before: Sequence[Message], report: Any) -> None:
    """R13, given the previous call's history: everything up to its end was sent before, and the
    response to it was produced under exactly that. An edit at k leaves no thinking valid after k."""
    edit = len(sent_before)
    for k, (old, new) in enumerate(zip(sent_before, messages)):
        if old is not new and message_digest(old) != message_digest(new):
            edit = k
            break
    if edit == len(sent_before) or edit >= len(messages):
        return
    for i in range(edit, len(messages)):
        msg = messages[i]
        if msg.role != "assistant":
            continue
        for j, part in enumerate(msg.parts):
            if isinstance(part, ThinkingPart) and (part.signature or part.redacted):
                report(
                    "R13",
                    i,
                    j,
                    f"thinking replayed after an edit at message {edit}: it is bound to the history it was "
                    "produced under, which changed",
                )


def _check_cache_breakpoints(messages: Sequence[Message], report: Any) -> None:
    marked: list[int] = []
    for i, msg in enumerate(messages):
        marked.extend(i for part in msg.parts if has_cache_marker(part.native))
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        report(
            "R10",
            marked[MAX_CACHE_BREAKPOINTS],
            None,
            f"{len(marked)} cache breakpoints in one request (at most {MAX_CACHE_BREAKPOINTS})",
        )


def has_cache_marker(native: Any) -> bool:
    """Whether a native part carries a provider cache breakpoint (R10)."""
    if native is None:
        return False
    if isinstance(native, dict):
        return "cache_control" in native
    return getattr(native, "kind", None) == "cache-point"
