"""Values the LangGraph saver reads and writes: config keys, JSON metadata, transcript positions,
and the small records its plans pass each other.
"""

from __future__ import annotations

import builtins
import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
)

from historykit.checkpointers._message_cache import KnownList
from historykit.checkpointers._refs import (
    Refs,
    expand_runs,
)
from historykit.checkpointers.database import (
    CorruptRowError,
)
from historykit.checkpointers.transcript import Transcript
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
    entries: Sequence[tuple[int, BaseMessage]],
) -> builtins.list[tuple[int, BaseMessage]]:
    """`entries` with every tool result after the AI message that calls it.

    Transcript positions come from the checkpoints and writes that had each message; when a run
    stops between LangGraph's out-of-order background saves, a tool result can be logged from its
    write while the call is only logged later (from the next checkpoint, on resume), at a later
    position. The result then moves to just after its call.
    """
    caller: dict[str, int] = {}
    for i, (_, message) in enumerate(entries):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                caller.setdefault(str(call.get("id")), i)
    if not caller:
        return list(entries)
    waiting: dict[int, builtins.list[tuple[int, BaseMessage]]] = defaultdict(list)
    out: builtins.list[tuple[int, BaseMessage]] = []
    for i, entry in enumerate(entries):
        message = entry[1]
        if isinstance(message, ToolMessage) and caller.get(str(message.tool_call_id), -1) > i:
            waiting[caller[str(message.tool_call_id)]].append(entry)
            continue
        out.append(entry)
        out.extend(waiting.pop(i, ()))
    return out


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
