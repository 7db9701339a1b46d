"""Values the LangGraph saver reads and writes: config keys, JSON metadata, transcript positions,
and the small records its plans pass each other.
"""

from __future__ import annotations

import bisect
import builtins
import json
import math
from collections import defaultdict
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
)

from historykit.checkpointers._database import (
    CorruptRowError,
)
from historykit.checkpointers._message_cache import KnownList
from historykit.checkpointers._refs import (
    Refs,
    Run,
    expand_runs,
)
from historykit.checkpointers._transcript import Transcript
from historykit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = []


# ---------------------------------------------------------------------------------------------
# Value helpers
# ---------------------------------------------------------------------------------------------


def _messages_written(value: Any) -> list[BaseMessage]:
    """The messages a write carries (a message or a list of them), `RemoveMessage`s excepted."""
    if isinstance(value, BaseMessage):
        return [] if isinstance(value, RemoveMessage) else [value]
    if type(value) is list and value and all(isinstance(m, BaseMessage) for m in value):
        return [m for m in value if not isinstance(m, RemoveMessage)]
    return []


def _written_value(refs: Refs, messages: Mapping[int, BaseMessage]) -> Any:
    """The value of a write stored as references: one message, or the list of them, as written
    (the messages that had no id then have none now)."""
    values = [messages[seq] for seq in expand_runs(refs.runs)]
    for i in refs.without_id:
        if values[i].id is not None:
            values[i] = values[i].model_copy(update={"id": None})
    return values[0] if refs.single else values


def _configurable(config: RunnableConfig | None, what: str) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise ArgumentTypeError(f"{what}: expected a RunnableConfig dict, got {type(config).__name__}")
    configurable = config.get("configurable")
    if not isinstance(configurable, Mapping):
        raise InvalidArgumentError(f"{what}: the config has no 'configurable' dict")
    return configurable


_MAX_KEY_BYTES = 1000
"""The longest thread id, namespace or checkpoint id (UTF-8 bytes): PostgreSQL's index entries
hold a few kilobytes at most, and every backend takes the same ids."""


def _key(value: object, name: str, what: str) -> str:
    text = str(value)
    if "\x00" in text:
        raise InvalidArgumentError(
            f"{what}: the {name} {text!r} contains a NUL character, which databases cannot store"
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > _MAX_KEY_BYTES:
        raise InvalidArgumentError(
            f"{what}: the {name} is {size:,} bytes long ({text[:40]!r}...); "
            f"at most {_MAX_KEY_BYTES:,} are stored"
        )
    return text


def _thread_of(config: RunnableConfig, what: str) -> tuple[str, str, str | None]:
    configurable = _configurable(config, what)
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidArgumentError(f"{what}: the config has no configurable 'thread_id'")
    ns = configurable.get("checkpoint_ns") or ""
    checkpoint_id = configurable.get("checkpoint_id")
    return (
        _key(thread_id, "thread id", what),
        _key(ns, "checkpoint namespace", what),
        _key(checkpoint_id, "checkpoint id", what) if checkpoint_id else None,
    )


def _check_json(value: Any, path: str) -> None:
    """Raise `TypeError` naming `path` unless `value` is plain JSON."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{path} is {value!r}, which JSON cannot hold")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgumentTypeError(
                    f"{path} has a key of type {type(key).__name__}; JSON keys are strings"
                )
            _check_json(item, f"{path}[{key!r}]")
        return
    raise ArgumentTypeError(
        f"{path} is a {type(value).__name__}, which is not JSON (str, number, bool, None, list, dict)"
    )


def _parse_json(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise CorruptRowError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CorruptRowError(f"{where} is a JSON {type(value).__name__}, expected an object")
    return value


def _matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """`InMemorySaver`'s metadata filter: each value equals the metadata's (Python equality: a
    missing key is `None`, `1 == True == 1.0`, a dict or list equals only an equal one)."""
    return all(_json_equal(metadata.get(key), value) for key, value in filter.items())


def _json_equal(actual: Any, expected: Any) -> bool:
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(map(_json_equal, actual, expected))
        )
    if isinstance(expected, Mapping):
        return (
            isinstance(actual, Mapping)
            and actual.keys() == expected.keys()
            and all(_json_equal(actual[key], value) for key, value in expected.items())
        )
    return bool(actual == expected)


def _with_view(transcript: Transcript, latest: CheckpointTuple | None) -> Transcript:
    """`transcript` with its view: the root graph's `messages` channel at the latest checkpoint; in
    view-only mode (`HistoryKitMiddleware` keeps the view last sent beside the raw messages) that
    view and the messages that arrived after it."""
    values = latest.checkpoint.get("channel_values", {}) if latest is not None else {}
    messages = values.get("messages")
    if not isinstance(messages, list):
        return replace(transcript, view=None)
    sent, of = values.get("historykit_view"), values.get("historykit_view_of")
    if isinstance(sent, list) and isinstance(of, int) and 0 < of <= len(messages):
        return replace(transcript, view=[*sent, *messages[of:]])
    return replace(transcript, view=list(messages))


def _calls_before_results(
    entries: Sequence[tuple[int, BaseMessage]], written: Container[int] = ()
) -> builtins.list[tuple[int, BaseMessage]]:
    """`entries` with every tool result after the AI message that calls it, and without the
    results whose call the log does not hold.

    Transcript positions come from the checkpoints and writes that had each message; when a run
    stops between LangGraph's out-of-order background saves, a tool result can be logged from its
    write while the call is only logged later (from the next checkpoint, on resume), or not yet:
    the result moves to just after its call, or waits until the call is logged. A result answers
    the nearest call of its id before it (subgraphs reuse ids), else the first one after it. A call
    answered twice keeps its last original answer: a run killed after its tool's write was saved,
    but before the checkpoint it was written against, is re-run from the checkpoint before, and a
    deterministic model calls the tool again under the same id; the first answer belongs to a
    checkpoint that never existed. (`written`: the numbers of the messages a compaction wrote;
    their copies of a result are kept, and split from the originals afterwards.)
    """
    callers: dict[str, builtins.list[int]] = defaultdict(list)
    for i, (_, message) in enumerate(entries):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                callers[str(call.get("id"))].append(i)
    moved: dict[int, builtins.list[int]] = defaultdict(list)  # caller -> results moved after it
    answered_by: dict[int, int] = {}  # result -> the caller it answers
    last_answer: dict[tuple[int, str], int] = {}  # (caller, call id) -> its last original result
    for i, (seq, message) in enumerate(entries):
        if not isinstance(message, ToolMessage):
            continue
        places = callers.get(str(message.tool_call_id))
        if not places:
            continue  # held back: its call is not logged (yet)
        before = bisect.bisect_left(places, i) - 1
        caller = places[before] if before >= 0 else places[0]
        answered_by[i] = caller
        if caller > i:
            moved[caller].append(i)
        if seq not in written:
            last_answer[(caller, str(message.tool_call_id))] = i
    out: builtins.list[tuple[int, BaseMessage]] = []

    def kept(i: int) -> bool:
        seq, message = entries[i]
        call_id = str(getattr(message, "tool_call_id", ""))
        return seq in written or last_answer.get((answered_by[i], call_id)) == i

    for i, entry in enumerate(entries):
        if isinstance(entry[1], ToolMessage):
            if i in answered_by and answered_by[i] < i and kept(i):
                out.append(entry)
            continue
        out.append(entry)
        out.extend(entries[j] for j in moved.get(i, ()) if kept(j))
    return out


class _Checkpoint(NamedTuple):
    """What the transcript's order needs of a checkpoint: where it is in the tree, and the message
    lists of its state (`(namespace, channel, version)` of each reference blob it holds)."""

    checkpoint_id: str
    parent_id: str | None
    lists: builtins.list[tuple[str, str, str]]
    namespace: str = ""


def _transcript_order(
    checkpoints: Sequence[_Checkpoint], lists: Mapping[tuple[str, str, str], Sequence[Run]]
) -> Callable[[int, str | None], tuple[Any, ...]]:
    """A sort key for the thread's messages (`key(seq, position)`) that keeps each branch of its
    checkpoints together, in conversation order.

    The checkpoints are walked depth first (children by id, so one run's checkpoints are in the
    order they were made), and a message sorts at its transcript position (`_position`: the state of
    the checkpoint that first had it, or the writes saved after a checkpoint) taken in that walk.
    Checkpoint ids grow with time, so a single run reads as it did. Two runs of one thread at once
    (a double submit) write two branches from one checkpoint, whose ids interleave: the walk keeps
    each run's turns in one piece. A write saved after a checkpoint sorts where the state after it
    took it in (with its branch: each run's user message), or after the checkpoint if none did. A root
    checkpoint of the root graph starts a tree of its own (two runs on an empty thread); any other
    checkpoint without a stored parent (a subgraph's, one whose parent was deleted) hangs under the
    checkpoint before it by id, and so does a position whose checkpoint is gone: where it was in
    time."""
    ids = sorted(checkpoint.checkpoint_id for checkpoint in checkpoints)
    by_id = {checkpoint.checkpoint_id: checkpoint for checkpoint in checkpoints}
    children: dict[str | None, builtins.list[str]] = defaultdict(list)
    for index, checkpoint_id in enumerate(ids):
        checkpoint = by_id[checkpoint_id]
        parent = checkpoint.parent_id
        if parent not in by_id or parent == checkpoint_id:
            # The root graph's first checkpoint of a run on an empty thread is a root of its own
            # (two such runs at once make two trees); anything else hangs where it was in time.
            rooted = checkpoint.namespace == "" and parent is None
            parent = ids[index - 1] if index and not rooted else None
        children[parent].append(checkpoint_id)
    rank: dict[str, int] = {}
    stack = list(reversed(children[None]))
    while stack:
        checkpoint_id = stack.pop()
        if checkpoint_id in rank:
            continue
        rank[checkpoint_id] = len(rank)
        stack.extend(reversed(children[checkpoint_id]))

    def place_in(checkpoint_id: str, seq: int) -> str | None:
        """Where the state of `checkpoint_id` holds message `seq`, as a position's tail (the one
        `_position` gives a state's message), or `None`."""
        for ns, channel, version in by_id[checkpoint_id].lists:
            index = 0
            for first, length in lists.get((ns, channel, version), ()):
                if first <= seq < first + length:
                    return f"000000000|{ns}|{channel}|{index + seq - first:09d}"
                index += length
        return None

    def order(seq: int, position: str | None) -> tuple[Any, ...]:
        if position is None:
            return (-1, 0, "")
        checkpoint_id, _, rest = position.partition("|")
        at = rank.get(checkpoint_id)
        if at is None:
            before = bisect.bisect_left(ids, checkpoint_id) - 1
            return (rank[ids[before]] if before >= 0 else -1, 2, position)
        if rest.startswith("000000001|"):
            # A write saved after a checkpoint sorts where the next state took it in: with the
            # branch that did, after what that state already held (a run that went on after its
            # thread was deleted brings the older messages back in that state).
            for child in children.get(checkpoint_id, ()):
                place = place_in(child, seq)
                if place is not None:
                    return (rank[child], 0, place)
            return (at, 1, rest)
        return (at, 0, rest)

    return order


_Page = tuple[list[CheckpointTuple], tuple[str, str, str] | None, bool]
"""A page of `list`: its tuples, the cursor after it, and whether more rows may follow."""


class _Pending(NamedTuple):
    """A message to find in the log or add to it."""

    encoding: str
    data: bytes
    message: BaseMessage
    message_id: str | None
    """The id it was serialized with (the object may have been given one since)."""
    position: str
    """Its transcript position, if it is new (see `_position`)."""
    anonymous: str
    """The hash of the message without its id (its own hash when it has none)."""


class _Found(NamedTuple):
    """Where a message is in the log."""

    seq: int
    position: str | None
    same: bool = True
    """The row holds this very form of the message (not the form with the id it lacks)."""


def _position(checkpoint_id: str, *key: object) -> str:
    """A transcript position: messages in the order of the checkpoints that first had them.

    Messages of a checkpoint's state sort under its id (then `0`); messages of the writes saved
    after it (the next step's node outputs) after them (then `1`), in LangGraph's write order. The
    positions do not depend on when a row was saved: LangGraph saves writes and checkpoints from
    several threads at once, so saving order is not conversation order.
    """
    parts = [f"{part:09d}" if isinstance(part, int) else str(part) for part in key]
    return "|".join([checkpoint_id, *parts])


@dataclass(frozen=True, slots=True)
class _MessageChannel:
    """A channel of a `put` whose value is a list of LangChain messages."""

    channel: str
    version: str
    messages: list[BaseMessage]
    snapshot: bool
    """The value is a `DeltaChannel`'s `_DeltaSnapshot` of the list."""
    known: KnownList
    """The head of the list already stored under this channel by the last `put` or `get_tuple`."""


@dataclass
class _ListQuery:
    """A validated `list` request."""

    conditions: list[sa.ColumnElement[bool]]
    python_filter: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None


class _Done:
    """What `setup()` returns: already done, and awaitable (`await saver.setup()`)."""

    __slots__ = ()

    def __await__(self) -> Iterator[None]:
        return iter(())
