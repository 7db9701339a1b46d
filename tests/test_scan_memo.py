"""What the steps remember of a conversation's latest history (`historykit._scan_memo`): only what
is new is looked at again, and what is remembered is never the source of truth.

A call made under a conversation's key must give exactly what a call that remembers nothing gives
(a pipeline's call with no key): on a history that grew, on one where a message was edited (a new
object in its place, as every edit is), on one cut short, and when one pipeline serves several
conversations call by call. And what one conversation's state remembers holds only that
conversation's messages.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit._messages import (
    CompactionMarker,
    MediaPart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit._scan_memo import MessageFacts, common_prefix
from historykit._tokens import TokenCounter
from historykit.processors import Repair
from historykit.processors._default_pipeline import default_pipeline
from tests.strategies import examples, neutral_histories

WINDOW = 4_000
"""Small enough that the generated histories cross every edit mark of the default pipeline."""


EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


def timeless(marker: CompactionMarker | None) -> CompactionMarker | None:
    """`marker` without the time it was made (two runs make the same marker at two times)."""
    return None if marker is None else replace(marker, created_at=EPOCH)


def shown(messages: list[Message]) -> list[tuple[Message, object]]:
    """What a history is, as compared here: each message (its summaries' markers without their
    time) and its own marker (not part of `==`)."""
    return [
        (
            replace(
                m,
                parts=tuple(
                    replace(p, marker=timeless(p.marker)) if isinstance(p, SummaryPart) else p
                    for p in m.parts
                ),
            ),
            timeless(m.marker),
        )
        for m in messages
    ]


def same_call(keyed: Pipeline, fresh: Pipeline, history: list[Message], key: str) -> list[Message]:
    """Run `history` through `keyed` under `key` and through `fresh` with no key (nothing
    remembered); assert both give the same messages, history kept and report; return the history
    kept (`COMPACTED` counts the calls that changed it)."""
    mine = keyed.run(history, WINDOW, conversation=key)
    theirs = fresh.run(history, WINDOW)
    assert shown(mine.messages) == shown(theirs.messages)
    assert shown(mine.history) == shown(theirs.history)
    assert [(s.processor, s.tokens_before, s.tokens_after, s.notes.details) for s in mine.report.steps] == [
        (s.processor, s.tokens_before, s.tokens_after, s.notes.details) for s in theirs.report.steps
    ]
    COMPACTED[key] += mine.report.changed
    return mine.history


COMPACTED: Counter[str] = Counter()
"""Calls whose report says a step changed the history, by conversation key."""


def replay(history: list[Message]) -> Iterator[list[Message]]:
    """The model calls of `history`, each as the messages it sends: every prefix that ends at a
    request (a user or tool message followed by an assistant message, or the end)."""
    for end in range(1, len(history) + 1):
        if end == len(history) or (history[end].role == "assistant" and history[end - 1].role != "assistant"):
            yield history[:end]


def edited(message: Message, how: int) -> Message:
    """`message` edited one way or another: a new object, as every edit of a history is."""
    if how == 0:
        return replace(message, pinned=not message.pinned)
    parts = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            part = replace(part, content=part.content + "\nedited" if how == 1 else "[cleared]")
        elif isinstance(part, TextPart):
            part = replace(part, text=part.text + " (edited)" if how == 1 else "")
        elif isinstance(part, ThinkingPart):
            part = replace(part, signature="" if how == 2 else part.signature)
        elif isinstance(part, ToolCallPart) and how == 2:
            part = replace(part, id="reused")
        parts.append(part)
    return replace(message, parts=tuple(parts))


# --- the memo ------------------------------------------------------------------------------------


def test_message_facts_compute_only_what_is_new_and_again_from_an_edit() -> None:
    asked: list[int] = []

    def fact(message: Message) -> int:
        asked.append(id(message))
        return len(message.parts[0].text)  # type: ignore[union-attr]

    history = [Message("user", (TextPart("x" * n),)) for n in range(1, 9)]
    memo: MessageFacts[int] = MessageFacts()
    assert memo.of(history, fact) == tuple(range(1, 9))
    assert len(asked) == 8
    asked.clear()
    assert memo.of(list(history), fact) == tuple(range(1, 9))  # another list, the same messages
    assert asked == []
    grown = [*history, Message("user", (TextPart("y" * 20),))]
    assert memo.of(grown, fact)[-1] == 20
    assert asked == [id(grown[-1])]
    asked.clear()
    # An edited message is another object: its fact and every later one are asked again.
    changed = [*grown[:3], Message("user", (TextPart("z" * 50),)), *grown[4:]]
    assert memo.of(changed, fact) == (1, 2, 3, 50, 5, 6, 7, 8, 20)
    assert asked == [id(m) for m in changed[3:]]
    asked.clear()
    assert memo.of(changed[:5], fact) == (1, 2, 3, 50, 5)  # cut short: nothing to ask
    assert asked == []
    # Facts that depend on something else (a counter) are all asked again for another one.
    assert memo.of(changed[:5], fact, basis=object()) == (1, 2, 3, 50, 5)
    assert len(asked) == 5


def test_common_prefix_is_by_identity_not_equality() -> None:
    a, b = Message("user", (TextPart("same"),)), Message("user", (TextPart("same"),))
    assert a == b
    assert common_prefix([a, a], [a, b]) == 1
    assert common_prefix([a], [a, b]) == 1
    assert common_prefix([a, b], [a]) == 1
    assert common_prefix([], [a]) == 0


# --- a conversation's call gives what a call that remembers nothing gives -------------------------


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=6), st.data())
def test_a_conversation_call_gives_what_a_fresh_call_gives_whatever_was_edited(
    history: list[Message], data: st.DataObject
) -> None:
    """Persistent calls under one key, with now and then a message edited (a new object with other
    content: pinned, longer, emptied, an id reused), the history cut short, or a message removed:
    every call gives what a pipeline that remembers nothing gives on the same input."""
    keyed, fresh = default_pipeline(), default_pipeline()
    kept: list[Message] = []
    at = 0
    for call in replay(history):
        messages = [*kept, *call[at:]]
        at = len(call)
        if messages and data.draw(st.integers(0, 3)) == 0:
            where = data.draw(st.integers(0, len(messages) - 1))
            change = data.draw(st.integers(0, 4))
            if change <= 2:
                messages[where] = edited(messages[where], change)
            elif change == 3:
                del messages[where]
            else:
                messages = messages[: where + 1]
        kept = same_call(keyed, fresh, messages, "c")
        # The same call again: all of it remembered now.
        same_call(keyed, fresh, messages, "c")


def test_repair_repairs_an_edit_inside_a_history_it_vouched_for() -> None:
    """Repair's vouching pass carries on from the conversation's latest history: a call id used
    again by an edited message in the middle of it is repaired all the same."""
    history: list[Message] = [Message("user", (TextPart("task"),))]
    for n in range(6):
        history += [
            Message("assistant", (ToolCallPart(f"c{n}", "Read", {"file_path": f"f{n}.py"}),)),
            Message("tool", (ToolResultPart(f"c{n}", "Read", f"lines of f{n}"),)),
        ]
    pipeline = Pipeline([Repair()])
    assert pipeline.run(history, WINDOW, conversation="c").report.changed is False
    reused = list(history)
    reused[5] = Message("assistant", (ToolCallPart("c0", "Read", {"file_path": "f2.py"}),))
    reused[6] = Message("tool", (ToolResultPart("c0", "Read", "lines of f2"),))
    keyed = pipeline.run(reused, WINDOW, conversation="c")
    assert keyed.report.changed
    assert shown(keyed.messages) == shown(Pipeline([Repair()]).run(reused, WINDOW).messages)
    # Grown after the edit, from the repaired conversation's memo: still repaired.
    grown = [*reused, Message("assistant", (TextPart("done"),)), Message("user", (TextPart("more"),))]
    assert shown(pipeline.run(grown, WINDOW, conversation="c").messages) == shown(
        Pipeline([Repair()]).run(grown, WINDOW).messages
    )


# --- one pipeline, several conversations ------------------------------------------------------------


def tagged_history(tag: str, exchanges: int) -> list[Message]:
    """A history whose every message names `tag` (text, call ids, paths), so any copy a step makes
    of one of its messages names it too; file reads read again, an image, thinking."""
    history = [Message("user", (TextPart(f"{tag}: fix the bug, read the files."),))]
    for n in range(exchanges):
        path = f"{tag}/f{n % 3}.py"
        history.append(
            Message(
                "assistant",
                (
                    ThinkingPart(f"{tag} thinks about step {n}", signature=f"{tag}-sig{n}"),
                    ToolCallPart(f"{tag}-c{n}", "Read", {"file_path": path}),
                ),
            )
        )
        lines = "\n".join(f"{tag} {path}:{i}: value = compute({i})" for i in range(40))
        history.append(Message("tool", (ToolResultPart(f"{tag}-c{n}", "Read", lines),)))
        if n % 5 == 4:
            history.append(Message("assistant", (TextPart(f"{tag}: step {n} done."),)))
            history.append(
                Message(
                    "user",
                    (
                        TextPart(f"{tag}: carry on."),
                        MediaPart(
                            "image/png", source=f"https://{tag}.example/{n}.png", size=64, digest=f"{tag}-{n}"
                        ),
                    ),
                )
            )
    return history


def messages_in(value: Any, depth: int = 0) -> Iterator[Message]:
    """Every `Message` reachable from `value` through containers and the fields of the memos.

    Not through a `TokenCounter` (what the facts of counts depend on): its cache of counts by
    message object serves every conversation, as the module documentation of
    `historykit._conversations` says of the caches keyed by identity (a hit needs the very object)."""
    if depth > 6 or isinstance(value, TokenCounter):
        return
    if isinstance(value, Message):
        yield value
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from messages_in(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from messages_in(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from messages_in(getattr(value, f.name), depth + 1)
    elif isinstance(value, MessageFacts):
        yield from messages_in(value._seen, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from messages_in(vars(value), depth + 1)
    elif hasattr(value, "__slots__"):
        for name in value.__slots__:
            yield from messages_in(getattr(value, name, None), depth + 1)


def test_one_pipeline_remembers_each_conversation_apart() -> None:
    """Two conversations served call by call by one pipeline: each call gives what a pipeline that
    remembers nothing gives, and what each conversation's state remembers holds its own messages
    (and copies of them) alone."""
    shared = default_pipeline()
    histories = {tag: tagged_history(tag, 30) for tag in ("ALPHA", "BRAVO")}
    kept: dict[str, list[Message]] = {tag: [] for tag in histories}
    at = dict.fromkeys(histories, 0)
    calls = {tag: list(replay(history)) for tag, history in histories.items()}
    fresh = {tag: default_pipeline() for tag in histories}
    for step in range(max(map(len, calls.values()))):
        for tag, their_calls in calls.items():
            if step >= len(their_calls):
                continue
            call = their_calls[step]
            kept[tag] = same_call(shared, fresh[tag], [*kept[tag], *call[at[tag] :]], tag)
            at[tag] = len(call)
    for tag in histories:
        assert COMPACTED[tag] >= 3, "the steps must have edited each history for this to test anything"
        other = "BRAVO" if tag == "ALPHA" else "ALPHA"
        remembered = [
            m for _, memo in shared.conversations.get(tag)._memory.values() for m in messages_in(memo)
        ]
        assert remembered, "the steps remembered nothing for the conversation"
        assert all(other not in repr(m) for m in remembered)
        assert any(tag in repr(m) for m in remembered)


def test_a_call_without_a_key_remembers_nothing_for_the_next() -> None:
    pipeline = default_pipeline()
    history = tagged_history("SOLO", 12)
    pipeline.run(history, WINDOW)
    assert len(pipeline.conversations) == 0
    assert pipeline.conversations.get(None)._memory == {}
