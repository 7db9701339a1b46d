"""`StripThinking`: drop the model's reasoning from all but the latest turns.

Old reasoning is dead weight: the model reached its conclusions and acted on them (Anthropic's
API itself ignores the thinking of earlier turns for most Claude models). But reasoning is also
the part of a history with the strictest rules (`docs/provider-rules.md`): the thinking of the current
tool-use cycle must reach Anthropic unchanged (R7), and thinking must never be replayed as plain
text (R8).

Turns, precisely: a *turn starts* at each user message in the user's own voice (a `user` message
with no tool results, a compaction summary included) and at each system message, the same
boundaries `historykit._validity.current_cycle_start` uses; the turn is that message and everything
up to the next turn start: the assistant messages answering it, their tool calls, the tool results.
An *assistant turn* is a turn with at least one assistant message, finished or in progress. The
*current tool-use cycle* is the assistant messages of the latest turn: it is never touched,
whatever `keep_turns` says. So with `keep_turns=1`, at the request that sends a new user message
the model still sees how it reasoned in its previous answer; from the next request of that turn on,
the latest assistant turn is the new one and the previous turn's thinking may go. An agent run on a
single task (one user message, then only tool calls) is one turn: all of it is the current cycle,
and its thinking is never stripped.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import compress, count
from typing import NamedTuple

from historykit._identity_cache import IdentityCache
from historykit._messages import Message, TextPart, ThinkingPart, ToolResultPart
from historykit._pipeline import (
    HistoryProcessor,
    ProcessContext,
    StepNotes,
    history_sums,
    prefix_totals,
    same_messages,
)
from historykit._scan_memo import MessageFacts
from historykit._validate import check_instance, check_int
from historykit._validity import final_request_start
from historykit.processors._batching import batch_boundary
from historykit.processors._trigger import Trigger

DEFAULT_MIN_GAIN_FRACTION = 0.02
"""`min_gain` when none is given: this fraction of the context window."""


@dataclass
class StripThinking(HistoryProcessor):
    """Drops the thinking (redacted thinking included) from all but the last `keep_turns` assistant turns.

    - The thinking of the current tool-use cycle is never touched (Anthropic rejects a changed or
      missing block there), nor pinned thinking, nor the thinking of a pinned message, nor that of
      an exchange with a pinned result: compactions keep such an exchange whole, so it can end up
      right before the final request, where the provider needs its thinking again (R7).
    - Thinking is dropped, never turned into text: the other parts of a message stay as they are.
    - An assistant message whose only content is thinking keeps it: without it the message would
      be empty, and removing the message would change the conversation's shape (two user turns in
      a row, a missing response) for a few tokens. No message is ever removed.

    When: an edit to an old message makes the provider's prompt cache miss from there on, and with
    `keep_turns` a turn becomes strippable each time a new one starts. Stripping it at once would
    edit the history at every user message; so, like every compacting processor, it waits for the
    trigger's high-water mark, then strips whole turns, oldest first, down to the low-water mark
    and by at least `min_gain` tokens at once (`historykit.processors._batching`). With
    `trigger=None` it strips everything it may at every call: the smallest history, at the price
    of a cache miss on the latest turn whenever a new turn starts. A message-count trigger counts
    all messages (stripping never lowers it); `min_gain` then sizes the batches.

    Example:
        ```python
        from historykit.processors import StripThinking
        from historykit.processors import Trigger

        strip = StripThinking(keep_turns=1, trigger=Trigger(max_fraction=0.5))
        result = strip.run(messages, context_window=200_000)   # native messages in and out
        ```
    """

    keep_turns: int = 1
    """The thinking of the last `keep_turns` assistant turns is kept (the current cycle's always is)."""
    trigger: Trigger | None = field(default_factory=lambda: Trigger(max_fraction=0.5))
    """When stripping starts and how far down it goes; `None`: strip at every call."""
    min_gain: int | None = None
    """Never strip fewer tokens than this at once; `None`: 2% of the context window."""
    _stripped_copies: IdentityCache[Message] = field(
        default_factory=IdentityCache, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        check_int("keep_turns", self.keep_turns)
        check_int("min_gain", self.min_gain, optional=True)
        check_instance("trigger", self.trigger, Trigger, "a historykit Trigger or None", optional=True)

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        notes = StepNotes()
        if not messages:
            return messages, notes
        # What this step learnt of each message on the conversation's latest call is reused for
        # the same messages (`historykit._scan_memo`): a call pays for what is new.
        memos = ctx.conversation.memory(self, _Memos)
        sizes = history_sums(messages, ctx)
        if self.trigger is not None and not self.trigger.fires(sizes[-1], len(messages), ctx):
            # Under the mark no batch is made (`batch_boundary` checks this first): nothing to strip,
            # without looking for thinking or counting the stripped copies.
            return messages, notes
        copies = memos.copies.of(messages, self._copy_of(ctx))
        if all(map(operator.is_, copies, messages)):
            return messages, notes  # no strippable thinking anywhere: nothing to replay
        kinds = memos.kinds.of(messages, _kind)
        stripped = list(copies)
        pinned_calls, turn_starts_at, assistants = memos.kinds.derived(kinds, _turn_facts)
        if pinned_calls:
            for index, msg in enumerate(messages):
                if msg.role == "assistant" and any(c.id in pinned_calls for c in msg.tool_calls):
                    stripped[index] = msg
        if same_messages(stripped, messages):
            return messages, notes  # only messages of pinned calls had thinking: nothing to replay
        # Turn starts as `historykit._validity.turn_starts` marks them: a user message in the user's
        # own voice or a system message, but none in a final request that also answers tool calls.
        final = final_request_start(messages)
        turn_starts = list(turn_starts_at)
        if any(m.role == "tool" or m.tool_results for m in messages[final:]):
            del turn_starts[bisect_left(turn_starts, final) :]
        firsts: list[int] = []  # the first assistant message of each assistant turn...
        owners: list[int] = []  # ...and where that turn starts
        for k, start in enumerate(turn_starts):
            at = bisect_left(assistants, start)
            if at < len(assistants) and (k + 1 == len(turn_starts) or assistants[at] < turn_starts[k + 1]):
                firsts.append(assistants[at])
                owners.append(start)

        def cap(point: int) -> int:
            # Never past the start of the latest turn: what follows it is the current cycle.
            latest = bisect_left(turn_starts, point) - 1
            if latest < 0:
                return 0
            limit = turn_starts[latest]
            if self.keep_turns:
                answered = bisect_left(firsts, point)
                limit = min(limit, owners[answered - self.keep_turns] if answered >= self.keep_turns else 0)
            return limit

        if self.trigger is None:
            boundary = cap(len(messages))
        else:
            min_gain = (
                self.min_gain
                if self.min_gain is not None
                else int(ctx.context_window * DEFAULT_MIN_GAIN_FRACTION)
            )
            limit = cap(len(messages))
            # Only the messages before `limit` can be stripped on this call: the stripped copies of
            # the others are not counted (after a load, each would be tokenized: a copy is new).
            boundary = batch_boundary(
                candidates=turn_starts,
                sizes=sizes,
                edited=memos.edited.derived(
                    memos.edited.of(stripped[:limit], ctx.counter.count_message, ctx.counter),
                    prefix_totals,
                ),
                limit=limit,
                trigger=self.trigger,
                ctx=ctx,
                min_gain=min_gain,
            )
        out = list(messages)
        dropped = edited = freed = 0
        reach = boundary
        if ctx.binds_thinking:
            # The model binds thinking to the history before it (R13): stripping one turn invalidates
            # every later block, the current cycle's included, so they go in the same edit.
            first = next((i for i in range(boundary) if stripped[i] is not messages[i]), None)
            reach = boundary if first is None else len(messages)
        for i in range(reach):
            if stripped[i] is messages[i]:
                continue
            out[i] = stripped[i]
            edited += 1
            dropped += len(messages[i].parts) - len(stripped[i].parts)
            freed += ctx.counter.count_message(messages[i]) - ctx.counter.count_message(stripped[i])
        if not edited:
            return messages, notes
        notes.replaced = dropped
        notes.details.append(
            f"dropped {dropped} thinking block(s) from {edited} assistant message(s) "
            + (f"before message {boundary}" if reach == boundary else "(the model binds thinking: all of it)")
            + f": {freed:,} tokens freed"
        )
        return out, notes

    def _copy_of(self, ctx: ProcessContext) -> Callable[[Message], Message]:
        """A message's copy without its droppable thinking: only an assistant message has any."""

        def copy(msg: Message) -> Message:
            return self._stripped(msg, ctx) if msg.role == "assistant" else msg

        return copy

    def _stripped(self, msg: Message, ctx: ProcessContext) -> Message:
        """`msg` without its droppable thinking (itself when there is none), cached per message:
        the same copy every call keeps the token counter's per-object cache hitting on it."""
        hit = self._stripped_copies.get(msg)
        if hit is not None:
            return hit
        return self._stripped_copies.put(msg, _strip(msg), ctx.cache_policy)


def _strip(msg: Message) -> Message:
    if msg.role != "assistant" or msg.pinned:
        return msg
    parts = tuple(p for p in msg.parts if not (isinstance(p, ThinkingPart) and not p.pinned))
    if len(parts) == len(msg.parts):
        return msg
    if all(isinstance(p, TextPart) and not p.text.strip() for p in parts):
        return msg  # only thinking (and empty text) in it: stripping would leave an empty message
    return replace(msg, parts=parts)


class _Kind(NamedTuple):
    """What `StripThinking` reads of one message besides its thinking."""

    assistant: bool
    starts_turn: bool
    """A system message or the user's own (no tool results): a turn starts there, unless it is in
    a final request that also answers tool calls."""
    pinned_calls: frozenset[str]
    """The calls its pinned results (or the results of a pinned message) answer."""


_NO_CALLS: frozenset[str] = frozenset()
_is_assistant = operator.itemgetter(0)
_starts_turn = operator.itemgetter(1)
_pinned_of = operator.itemgetter(2)


def _turn_facts(kinds: tuple[_Kind, ...]) -> tuple[frozenset[str], tuple[int, ...], tuple[int, ...]]:
    """What the kinds of a history's messages say of it as a whole: the calls its pinned results
    answer, where a turn may start (before the final request is looked at), its assistant messages."""
    return (
        frozenset().union(*map(_pinned_of, kinds)),
        tuple(compress(count(), map(_starts_turn, kinds))),
        tuple(compress(count(), map(_is_assistant, kinds))),
    )


def _kind(msg: Message) -> _Kind:
    pinned = frozenset(
        p.tool_call_id for p in msg.parts if isinstance(p, ToolResultPart) and (p.pinned or msg.pinned)
    )
    return _Kind(
        msg.role == "assistant",
        msg.role == "system" or (msg.role == "user" and not msg.tool_results),
        pinned or _NO_CALLS,
    )


@dataclass
class _Memos:
    """What one conversation's calls of a `StripThinking` remember (`historykit._scan_memo`)."""

    copies: MessageFacts[Message] = field(default_factory=MessageFacts)
    """Each message without its droppable thinking (itself when it has none)."""
    kinds: MessageFacts[_Kind] = field(default_factory=MessageFacts)
    """What the turns and the pinned results are made of."""
    edited: MessageFacts[int] = field(default_factory=MessageFacts)
    """The tokens of each message once stripped."""
