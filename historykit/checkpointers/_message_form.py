"""historykit's own stored form of a LangChain message: its fields as plain msgpack, read back
without validation.

LangGraph's serializer stores a message as a constructor call that the reader replays through
pydantic validation, which is most of what a cold read of a long thread costs. A message whose
fields are plain data (`dict` with `str` keys, `list`, `str`, `int`, `float`, `bool`, `bytes`,
`None`: every message a model or a tool returns as text or JSON) is instead stored as
`[class tag, fields, extra fields]`, and read back by filling a new instance of that
class with the decoded fields: the fields were validated when the message was built, and
msgpack gives back exactly the plain values that were written.

Nothing read executes code: the tag names one of LangChain's message classes from a fixed table
(nothing is imported or looked up by name), the payload is unpacked with no extension types, and
a row whose fields do not match its class (another LangChain version, a row edited by hand) is
validated by pydantic as LangGraph's reader would. A message holding anything else (a tuple, a
datetime, a model in `artifact`, an enum, a subclass of a plain type) is not written in this form:
the saver stores it with its serializer, as before.

Example:
    ```python
    data = pack_message(AIMessage("hi", id="m1"))
    assert data is not None and unpack_message(data) == AIMessage("hi", id="m1")
    ```
"""

from __future__ import annotations

from typing import Any

import ormsgpack
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from pydantic import BaseModel

from historykit.errors import InvalidArgumentError

__all__ = ["MESSAGE_CLASSES", "MESSAGE_ENCODING", "pack_message", "unpack_message"]

MESSAGE_ENCODING = "historykit.message"
"""The `encoding` of a message row in this form (before compression or encryption suffixes)."""

_CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (
        AIMessage,
        AIMessageChunk,
        HumanMessage,
        HumanMessageChunk,
        ToolMessage,
        ToolMessageChunk,
        SystemMessage,
        SystemMessageChunk,
        ChatMessage,
        ChatMessageChunk,
        FunctionMessage,
        FunctionMessageChunk,
        RemoveMessage,
    )
}
"""The classes this form holds, by tag: exactly these, never a subclass (its own fields, methods
or validators would be skipped)."""
_FIELDS = {name: frozenset(cls.model_fields) for name, cls in _CLASSES.items()}
MESSAGE_CLASSES: frozenset[type[BaseMessage]] = frozenset(_CLASSES.values())
"""The only classes `unpack_message` builds."""

# Anything but plain data is refused by msgpack instead of being converted (a tuple would come back
# as a list, an enum as its value, a datetime as a string): such a message keeps the serializer.
_PLAIN_ONLY = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
_set_attr = object.__setattr__
_new = object.__new__
# `BaseModel`'s slots, set through their descriptors: a cold read builds thousands of messages,
# and this skips the attribute lookup `object.__setattr__` makes for each.
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def pack_message(message: Any) -> bytes | None:
    """The message in historykit's form, or `None` when it does not fit it (not one of LangChain's
    own message classes, private attributes, or a field holding something other than plain data).

    One `packb` call: the bytes are one consistent picture of the message even if another thread
    changes it meanwhile (the call holds the interpreter lock)."""
    cls = type(message)
    name = cls.__name__
    if _CLASSES.get(name) is not cls or message.__pydantic_private__:
        return None
    try:
        return ormsgpack.packb(
            [name, message.__dict__, message.__pydantic_extra__],
            option=_PLAIN_ONLY,
        )
    except (TypeError, ValueError, OverflowError):  # not plain data: the serializer stores it
        return None


def _refuse_extension(code: int, data: bytes) -> Any:
    raise InvalidArgumentError(
        f"a stored message in historykit's form holds a msgpack extension (code {code})"
    )


def unpack_message(data: bytes) -> BaseMessage:
    """The message `pack_message` wrote, a new object sharing nothing with any other; `ValueError`
    when the bytes are not such a message."""
    parts = ormsgpack.unpackb(data, ext_hook=_refuse_extension)
    if type(parts) is not list or len(parts) != 3:
        raise InvalidArgumentError("not a message in historykit's form")
    name, fields, extra = parts
    cls = _CLASSES.get(name) if type(name) is str else None
    if cls is None:
        raise InvalidArgumentError(f"a stored message names {name!r}, not one of LangChain's message classes")
    if type(fields) is not dict or (extra is not None and type(extra) is not dict):
        raise InvalidArgumentError(f"a stored {name} has no fields")
    if fields.keys() != _FIELDS[name]:
        # Written by another LangChain version (or edited): built and validated as LangGraph would.
        return cls.model_validate({**fields, **(extra or {})})
    message = _new(cls)
    _set_attr(message, "__dict__", fields)
    _set_extra(message, extra)
    # Every field counts as set, as when LangGraph's reader builds the message from all its fields
    # (which fields were set is not stored: a message given an id later is still the same row).
    _set_fields_set(message, set(fields))
    _set_private(message, None)
    return message
