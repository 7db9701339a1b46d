"""LangChain / LangGraph messages (langchain-core 1.x) to and from the neutral model.

One native message becomes one neutral message:

| native | neutral |
|---|---|
| `SystemMessage` | `system` |
| `HumanMessage` | `user` (a summary, see below, is a `user` message with a `SummaryPart`) |
| `AIMessage`, `AIMessageChunk` | `assistant`; `tool_calls` are `ToolCallPart`s, `usage_metadata` the usage |
| `ToolMessage` | `tool` with one `ToolResultPart` (`status == "error"` is `is_error`) |
| `ChatMessage` | the role its `role` names; a `tool`/`function` one is an `OtherPart` |
| `FunctionMessage` (legacy) | `tool` with an `OtherPart` holding the whole message (it answers no call id) |
| `RemoveMessage` | `TypeError`: it edits graph state, it is not part of a history |

Content is a string (one `TextPart`; an empty string gives none on an `AIMessage`) or a list of
blocks, read in order: `text` is text; `reasoning` (standard, or the OpenAI Responses item with
`summary` and `encrypted_content`), Anthropic `thinking` (with its `signature`) and
`redacted_thinking` (opaque `data`, kept in `signature`) are thinking; `image`, `audio`, `video`,
`file`, `text-plain` and the provider shapes `image_url`, `input_audio`, `input_image`,
`input_file`, `document` are media; an Anthropic `tool_result` block is a `ToolResultPart`; anything
else (`server_tool_call`, `server_tool_result`, `tool_call_chunk`, `non_standard`, unknown types) is
an `OtherPart` that passes through untouched. Reasoning outside the content is read too:
`additional_kwargs["reasoning_content"]` (DeepSeek, Ollama, xAI, Groq) when the content has no
reasoning block (LangChain's own rule), and `additional_kwargs["reasoning"]` (OpenAI Responses
before output version v1).

**Tool calls appear once.** Providers repeat each call in the content (Anthropic `tool_use`,
standard `tool_call` / `tool_call_chunk`, OpenAI Responses `function_call`) as well as in
`AIMessage.tool_calls`. The neutral message has one `ToolCallPart` per call, made from `tool_calls`
(the field LangChain's provider integrations prefer when both are present) and placed where the
repeating block is in the content. That block stays in the native message, untouched, as long as
its call does; it is dropped with its call and follows an edit of it (name, arguments). A call
block that `tool_calls` does not repeat is a `ToolCallPart` of its own. `invalid_tool_calls` (a call
whose arguments are not a JSON object) become `ToolCallPart`s whose `arguments` is the raw string,
which is how the neutral model spells exactly that; without an id or name they are `OtherPart`s.

Metadata: `additional_kwargs[PIN_KEY]` is `True` for a pinned message (which pins all of its parts,
so part pins inside it are not recorded apart), or the list of the indices of its pinned parts; any
other value is not ours and is left alone. A message with `additional_kwargs[COMPACTION_KEY]` (a
`CompactionMarker.to_dict()`) or with `additional_kwargs["lc_source"] == "summarization"` (LangChain's
`SummarizationMiddleware`) is a summary: a `user` message whose first text is a `SummaryPart`.

Back to native: an untouched message is the very same object; an edited one is
`native.model_copy(update=...)` changing only what the edit changed (`id`, `name`,
`additional_kwargs`, `response_metadata`, `usage_metadata`, `artifact` and untouched blocks are
kept; a string content stays a string when the edit is text-only, several text parts joining with a
newline). A neutral `id` of `None` never clears a native id (LangGraph gives ids in place, perhaps
after the history was read). New messages get no `id` unless the neutral message has one:
LangGraph's `add_messages` gives each message without an id a fresh uuid when it enters graph
state, and an id derived from content would make two equal messages (two identical notices)
collide there, one silently replacing the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call as _make_invalid_tool_call
from langchain_core.messages.tool import tool_call as _make_tool_call
from langchain_core.messages.tool import tool_call_chunk as _make_tool_call_chunk

from historykit._messages import (
    COMPACTION_KEY,
    EDIT_KEY,
    PIN_KEY,
    PROVIDER_COMPACTION_KEY,
    CompactionMarker,
    MediaPart,
    Message,
    OtherPart,
    Part,
    ProviderCompaction,
    ReportedUsage,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    payload_digest,
)
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.plugins._conversion_cache import ConversionCache

_CACHE = ConversionCache()


def _fingerprint(native: Any) -> Any:
    """What may change in place on a message that was already read (see `ConversionCache`)."""
    content = getattr(native, "content", None)
    kwargs = getattr(native, "additional_kwargs", None) or {}
    return (
        type(native),
        getattr(native, "id", None),
        id(content),
        len(content) if isinstance(content, (str, list)) else None,
        id(getattr(native, "tool_calls", None)),
        id(getattr(native, "usage_metadata", None)),
        len(kwargs),
        repr(kwargs.get(PIN_KEY)),
        COMPACTION_KEY in kwargs,
    )


SUMMARY_SOURCE = "summarization"
"""`additional_kwargs["lc_source"]` of a summary message, as LangChain's SummarizationMiddleware writes it."""


class LangChainAdapter:
    """Converts LangChain messages to neutral ones and back, keeping untouched messages as they were.

    Example:
        ```python
        from dataclasses import replace
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from historykit.plugins.langchain import LangChainAdapter

        adapter = LangChainAdapter()
        history = [
            HumanMessage("What is in setup.py?"),
            AIMessage("", tool_calls=[{"id": "c1", "name": "read", "args": {"path": "setup.py"}}]),
            ToolMessage("from setuptools import setup ...", tool_call_id="c1", name="read"),
        ]
        neutral = adapter.to_neutral(history)
        result = neutral[2].tool_results[0]
        neutral[2] = replace(neutral[2], parts=(replace(result, content="[cleared]"),))
        native = adapter.to_native(neutral)
        assert native[0] is history[0] and native[1] is history[1]
        assert native[2].content == "[cleared]" and native[2].tool_call_id == "c1"
        ```
    """

    framework = "langchain"

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        """Neutral messages for a LangChain history; `TypeError` names the index of a non-message."""
        out: list[Message] = []
        for index, native in enumerate(messages):
            fingerprint = _fingerprint(native)
            cached = _CACHE.get(native, None, fingerprint)
            if cached is None:
                reading = _read(native, index)
                message = Message.from_native(
                    reading.role,
                    reading.parts,
                    native,
                    id=native.id,
                    usage=reading.usage,
                    model=_model_of(native),
                    pinned=reading.pinned,
                    marker=_edit_marker(native),
                )
                _CACHE.put(native, None, fingerprint, (message,))
                out.append(message)
            else:
                out.append(cached[0])
        return out

    def to_native(self, messages: Sequence[Message]) -> list[BaseMessage]:
        """LangChain messages for a neutral history: untouched ones are their original objects.

        A neutral `tool` message with several results becomes one `ToolMessage` per result, and a
        new `user` message carrying tool results becomes `ToolMessage`s followed by the rest.
        """
        out: list[BaseMessage] = []
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(f"message {index} is a {_type_name(msg)}, not a historykit Message")
            native = msg.native
            if isinstance(native, BaseMessage) and msg.is_untouched and _same_metadata(msg, native):
                out.append(native)
            elif isinstance(native, BaseMessage) and not isinstance(native, RemoveMessage):
                out.extend(_with_edit(msg, built) for built in _rebuild(msg, native, index))
            else:
                # No native (the corpus, a processor) or one from another framework: build anew.
                out.extend(_with_edit(msg, built) for built in _build(msg, index))
        return out


def _with_edit(msg: Message, native: BaseMessage) -> BaseMessage:
    """`native` carrying the marker of the compaction that wrote `msg` (`EDIT_KEY`), if one did."""
    if msg.marker is None or native is msg.native:
        return native
    data = msg.marker.to_dict()
    if native.additional_kwargs.get(EDIT_KEY) == data:
        return native
    return native.model_copy(update={"additional_kwargs": {**native.additional_kwargs, EDIT_KEY: data}})


def _edit_marker(native: BaseMessage) -> CompactionMarker | None:
    """The marker of the compaction that wrote `native`; `None` for an original (or a damaged marker,
    which is unknown data: the message keeps it, and reads as an original)."""
    data = native.additional_kwargs.get(EDIT_KEY) if native.additional_kwargs else None
    if not isinstance(data, dict):
        return None
    try:
        return CompactionMarker.from_dict(data)
    except (ValueError, TypeError):
        return None


def _same_metadata(msg: Message, native: BaseMessage) -> bool:
    """`is_untouched` looks at parts and pins; an edit of the id or the usage alone counts too."""
    return not _new_id(msg, native) and msg.usage == _usage_of(native)


def _new_id(msg: Message, native: BaseMessage) -> bool:
    # An id is set, never cleared: LangGraph's add_messages (and SummarizationMiddleware) give ids to
    # messages in place, so a neutral id of None may just predate that; clearing it would make
    # add_messages append the message a second time instead of replacing it.
    return msg.id is not None and msg.id != native.id


# --- reading: native -> neutral ---------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """Where in the native message a neutral part came from (recomputed when rebuilding)."""

    where: Literal[
        "content", "string", "marker", "tool_call", "invalid_tool_call", "kwarg", "tool_result", "message"
    ]
    index: int = -1
    """Index in `content` (`content`), `tool_calls` or `invalid_tool_calls`."""
    shadow: int | None = None
    """For a tool call: the index of the content block that repeats it, if one does."""
    key: str = ""
    """For `kwarg`: the `additional_kwargs` key."""


@dataclass
class _Reading:
    role: Role
    parts: list[Part]
    slots: list[_Slot]
    pinned: bool = False
    usage: ReportedUsage | None = None
    summary: bool = False


_CALL_BLOCK_ID = {
    "tool_use": "id",
    "tool_call": "id",
    "tool_call_chunk": "id",
    "invalid_tool_call": "id",
    "function_call": "call_id",
}
"""Content blocks that repeat a call of `tool_calls`, and the key holding the call id."""

_MEDIA_TYPES = {
    "image",
    "audio",
    "video",
    "file",
    "text-plain",
    "image_url",
    "input_audio",
    "input_image",
    "input_file",
    "document",
}


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _role_of(native: BaseMessage) -> Role:
    if isinstance(native, HumanMessage):
        return "user"
    if isinstance(native, AIMessage):
        return "assistant"
    if isinstance(native, SystemMessage):
        return "system"
    if isinstance(native, (ToolMessage, FunctionMessage)):
        return "tool"
    label = (native.role if isinstance(native, ChatMessage) else native.type).lower()
    if label in ("assistant", "ai", "model"):
        return "assistant"
    if label in ("system", "developer"):
        return "system"
    if label in ("tool", "function", "ipython"):
        return "tool"
    # Someone speaking to the model who is not the model: the closest role is the user's.
    return "user"


def _read(native: Any, index: int) -> _Reading:
    if isinstance(native, RemoveMessage):
        raise ArgumentTypeError(
            f"message {index} is a RemoveMessage (id={native.id!r}): it removes a message from graph "
            "state and is not part of a history"
        )
    if not isinstance(native, BaseMessage):
        raise ArgumentTypeError(f"message {index} is a {_type_name(native)}, not a LangChain message")
    _check_shape(native, index)
    kwargs = native.additional_kwargs
    role = _role_of(native)
    reading = _Reading(role, [], [])
    if isinstance(native, ToolMessage):
        result = ToolResultPart(
            native.tool_call_id,
            native.name,
            _render(native.content, with_media=False),
            is_error=native.status == "error",
            native=native,
            media=_tool_media(native.content),
        )
        reading.parts.append(result)
        reading.slots.append(_Slot("tool_result"))
    elif role == "tool":
        # A tool answer without a call id (legacy function calling): kept whole, never matched.
        reading.parts.append(OtherPart(type(native).__name__, _render(native.content), native=native))
        reading.slots.append(_Slot("message"))
    else:
        marker = _marker(native, index)
        reading.summary = COMPACTION_KEY in kwargs or kwargs.get("lc_source") == SUMMARY_SOURCE
        if reading.summary:
            reading.role = "user"
        _read_content(native, reading, marker)
    reading.usage = _usage_of(native)
    pin = kwargs.get(PIN_KEY)
    if pin is True:
        reading.pinned = True
    elif isinstance(pin, list):
        for i in pin:
            if isinstance(i, int) and 0 <= i < len(reading.parts):
                reading.parts[i] = replace(reading.parts[i], pinned=True)
    return reading


def _check_shape(native: BaseMessage, index: int) -> None:
    """`ArgumentTypeError` naming the message and the field when a message built without LangChain's
    validation (`model_construct`, a hand-made dict) has a field of a shape LangChain never gives it."""
    where = f"message {index} ({type(native).__name__})"
    content = native.content
    if not isinstance(content, (str, list)):
        raise ArgumentTypeError(
            f"{where}: content must be a str or a list of content blocks, got {type(content).__name__}"
        )
    if not isinstance(native.additional_kwargs, dict):
        raise ArgumentTypeError(
            f"{where}: additional_kwargs must be a dict, got {type(native.additional_kwargs).__name__}"
        )
    if not isinstance(native, AIMessage):
        return
    for field_name in ("tool_calls", "invalid_tool_calls"):
        calls = getattr(native, field_name)
        if not isinstance(calls, list):
            raise ArgumentTypeError(f"{where}: {field_name} must be a list, got {type(calls).__name__}")
        for call in calls:
            if not isinstance(call, dict):
                raise ArgumentTypeError(
                    f"{where}: each of {field_name} must be a dict, got {type(call).__name__}"
                )
    for call in native.tool_calls:
        if not isinstance(call.get("args"), dict):
            raise ArgumentTypeError(
                f"{where}: the args of tool call {call.get('id')!r} ({call.get('name')}) must be a dict, "
                f"got {type(call.get('args')).__name__}"
            )
        if not isinstance(call.get("name"), str):
            raise ArgumentTypeError(
                f"{where}: tool call {call.get('id')!r} has no name (got {type(call.get('name')).__name__})"
            )


def _model_of(native: BaseMessage) -> str | None:
    """The model that wrote an AI message: `response_metadata` names it (`model_name` for OpenAI and
    Anthropic chat models, `model` for some others)."""
    if not isinstance(native, AIMessage):
        return None
    metadata = native.response_metadata or {}
    name = metadata.get("model_name") or metadata.get("model")
    return name if isinstance(name, str) else None


def _usage_of(native: BaseMessage) -> ReportedUsage | None:
    usage = native.usage_metadata if isinstance(native, AIMessage) else None
    if usage is None:
        return None
    return ReportedUsage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))


def _marker(native: BaseMessage, index: int) -> CompactionMarker | None:
    data = native.additional_kwargs.get(COMPACTION_KEY)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            f"message {index} ({type(native).__name__}): additional_kwargs[{COMPACTION_KEY!r}] must be "
            f"a dict from CompactionMarker.to_dict(), got a {type(data).__name__}"
        )
    try:
        return CompactionMarker.from_dict(data)
    except ValueError as exc:
        raise InvalidArgumentError(f"message {index} ({type(native).__name__}): {exc}") from None


def _read_content(native: BaseMessage, reading: _Reading, marker: CompactionMarker | None) -> None:
    parts, slots = reading.parts, reading.slots
    content = native.content
    is_ai = isinstance(native, AIMessage)
    provider = native.response_metadata.get("model_provider") if is_ai else None
    provider = provider if isinstance(provider, str) else None
    kwargs = native.additional_kwargs
    summary_pending = reading.summary
    compaction = (
        ProviderCompaction.from_dict(kwargs.get(PROVIDER_COMPACTION_KEY)) if summary_pending else None
    )

    if is_ai and isinstance(kwargs.get("reasoning"), dict):
        parts.append(_openai_reasoning(kwargs["reasoning"], kwargs["reasoning"]))
        slots.append(_Slot("kwarg", key="reasoning"))
    has_reasoning_block = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("reasoning", "thinking", "redacted_thinking")
        for b in content
    )
    reasoning_content = kwargs.get("reasoning_content")
    if is_ai and isinstance(reasoning_content, str) and reasoning_content and not has_reasoning_block:
        parts.append(ThinkingPart(reasoning_content, provider=provider, native=reasoning_content))
        slots.append(_Slot("kwarg", key="reasoning_content"))

    calls = native.tool_calls if isinstance(native, AIMessage) else []
    invalid = native.invalid_tool_calls if isinstance(native, AIMessage) else []
    call_at = {tc["id"]: i for i, tc in enumerate(calls) if tc.get("id")}
    invalid_at = {tc["id"]: i for i, tc in enumerate(invalid) if tc.get("id")}
    placed_calls: set[int] = set()
    placed_invalid: set[int] = set()

    if isinstance(content, str):
        if summary_pending:
            parts.append(SummaryPart(content, marker, native=native, provider_compaction=compaction))
            slots.append(_Slot("string"))
            summary_pending = False
        elif content or not is_ai:
            parts.append(TextPart(content, native=content))
            slots.append(_Slot("string"))
        items: list[Any] = []
    else:
        items = list(content)

    for j, item in enumerate(items):
        if summary_pending and (
            isinstance(item, str)
            or (isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str))
        ):
            text = item if isinstance(item, str) else item["text"]
            parts.append(SummaryPart(text, marker, native=native, provider_compaction=compaction))
            slots.append(_Slot("content", j))
            summary_pending = False
            continue
        block_type = item.get("type") if isinstance(item, dict) else None
        id_key = _CALL_BLOCK_ID.get(block_type) if isinstance(block_type, str) else None
        if id_key is not None:
            call_id = item.get(id_key)
            i = call_at.get(call_id) if isinstance(call_id, str) else None
            if i is not None and i not in placed_calls:
                placed_calls.add(i)
                parts.append(_call_part(calls[i]))
                slots.append(_Slot("tool_call", i, shadow=j))
                continue
            i = invalid_at.get(call_id) if isinstance(call_id, str) else None
            if i is not None and i not in placed_invalid:
                placed_invalid.add(i)
                parts.append(_invalid_call_part(invalid[i]))
                slots.append(_Slot("invalid_tool_call", i, shadow=j))
                continue
        parts.append(_block_part(item, provider))
        slots.append(_Slot("content", j))

    if summary_pending:
        # A summary whose content holds no text at all: its metadata still makes it one.
        parts.append(SummaryPart("", marker, native=native, provider_compaction=compaction))
        slots.append(_Slot("marker"))
    for i, tc in enumerate(calls):
        if i not in placed_calls:
            parts.append(_call_part(tc))
            slots.append(_Slot("tool_call", i))
    for i, itc in enumerate(invalid):
        if i not in placed_invalid:
            parts.append(_invalid_call_part(itc))
            slots.append(_Slot("invalid_tool_call", i))


def _call_part(tc: Any) -> ToolCallPart:
    return ToolCallPart(tc.get("id") or "", tc["name"], tc["args"], native=tc)


def _invalid_call_part(itc: Any) -> Part:
    call_id, name, args = itc.get("id"), itc.get("name"), itc.get("args")
    # An empty id is still an id: LangChain answers the call with `ToolMessage(tool_call_id="")`,
    # and the pair must stay a pair (a lone result would be repaired into a user message).
    if isinstance(call_id, str) and (name is None or isinstance(name, str)):
        # LangChain's agent answers a nameless one as the tool "unknown" (`_invalid_tool_call_message`).
        return ToolCallPart(call_id, name or "unknown", args if isinstance(args, str) else "", native=itc)
    return OtherPart("invalid_tool_call", args if isinstance(args, str) else "", native=itc)


def _parsed_arguments(raw: Any) -> dict[str, Any] | str:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return ""
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _block_part(item: Any, provider: str | None) -> Part:
    if isinstance(item, str):
        return TextPart(item, native=item)
    if not isinstance(item, dict):
        return OtherPart(type(item).__name__, str(item), native=item)
    block_type = item.get("type")
    if block_type == "text" and isinstance(item.get("text"), str):
        return TextPart(item["text"], native=item)
    thinking = _thinking_part(item, item, provider)
    if thinking is not None:
        return thinking
    if block_type in _MEDIA_TYPES:
        return _media_part(item)
    if (
        block_type == "tool_use"
        and _has_call_fields(item, "id", "name")
        and isinstance(item.get("input"), dict)
    ):
        return ToolCallPart(item["id"], item["name"], item["input"], native=item)
    if (
        block_type == "tool_call"
        and _has_call_fields(item, "id", "name")
        and isinstance(item.get("args"), dict)
    ):
        return ToolCallPart(item["id"], item["name"], item["args"], native=item)
    if block_type == "function_call" and _has_call_fields(item, "call_id", "name"):
        return ToolCallPart(
            item["call_id"], item["name"], _parsed_arguments(item.get("arguments")), native=item
        )
    if block_type == "tool_result" and isinstance(item.get("tool_use_id"), str):
        return ToolResultPart(
            item["tool_use_id"],
            None,
            _render(item.get("content", "")),
            is_error=bool(item.get("is_error", False)),
            native=item,
        )
    name = str(block_type) if block_type is not None else "untyped block"
    if block_type == "non_standard" and isinstance(item.get("value"), dict):
        name = f"non_standard:{item['value'].get('type')}"
    return OtherPart(name, _rough_text(item), native=item)


def _has_call_fields(block: dict[str, Any], id_key: str, name_key: str) -> bool:
    return (
        bool(block.get(id_key))
        and isinstance(block.get(id_key), str)
        and isinstance(block.get(name_key), str)
    )


def _thinking_part(block: dict[str, Any], native: Any, provider: str | None) -> ThinkingPart | None:
    block_type = block.get("type")
    if block_type == "non_standard" and isinstance(block.get("value"), dict):
        return _thinking_part(block["value"], native, provider)
    if block_type == "thinking" and isinstance(block.get("thinking", ""), str):
        signature = block.get("signature")
        return ThinkingPart(
            block.get("thinking", ""),
            signature=signature if isinstance(signature, str) else None,
            provider="anthropic",
            native=native,
        )
    if block_type == "redacted_thinking" and isinstance(block.get("data"), str):
        return ThinkingPart("", signature=block["data"], provider="anthropic", redacted=True, native=native)
    if block_type == "reasoning":
        if isinstance(block.get("summary"), list):
            return _openai_reasoning(block, native)
        text = block.get("reasoning", "")
        extras = block.get("extras")
        signature = extras.get("signature") if isinstance(extras, dict) else None
        block_id = block.get("id")
        return ThinkingPart(
            text if isinstance(text, str) else "",
            signature=signature if isinstance(signature, str) else None,
            id=block_id if isinstance(block_id, str) else None,
            provider=provider,
            native=native,
        )
    return None


def _openai_reasoning(item: dict[str, Any], native: Any) -> ThinkingPart:
    summary = item.get("summary") or []
    text = "\n\n".join(s["text"] for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str))
    encrypted, item_id = item.get("encrypted_content"), item.get("id")
    return ThinkingPart(
        text,
        signature=encrypted if isinstance(encrypted, str) else None,
        id=item_id if isinstance(item_id, str) else None,
        provider="openai",
        native=native,
    )


def _media_part(block: dict[str, Any]) -> MediaPart:
    block_type = str(block.get("type"))
    source: dict[str, Any] = block["source"] if isinstance(block.get("source"), dict) else {}
    nested: dict[str, Any] = next(
        (block[k] for k in ("image_url", "input_audio", "file") if isinstance(block.get(k), dict)), {}
    )
    url = block.get("url") or source.get("url") or nested.get("url") or block.get("file_url")
    if block_type in ("image_url", "input_image") and isinstance(block.get("image_url"), str):
        url = block["image_url"]
    data = (
        block.get("base64")
        or (block.get("data") if block.get("source_type", "base64") == "base64" else None)
        or (source.get("data") if source.get("type") in ("base64", "text", None) else None)
        or nested.get("data")
        or nested.get("file_data")
        or block.get("file_data")
        or (block.get("text") if block_type == "text-plain" else None)
    )
    mime = block.get("mime_type") or source.get("media_type") or block.get("media_type")
    if isinstance(url, str) and url.startswith("data:"):
        header, _, payload = url.partition(",")
        mime = mime or header[5:].split(";")[0] or None
        data, url = payload, None
    if isinstance(data, str) and data.startswith("data:"):
        header, _, data = data.partition(",")
        mime = mime or header[5:].split(";")[0] or None
    if not mime and block_type == "input_audio":
        audio_format = nested.get("format")
        mime = f"audio/{audio_format}" if isinstance(audio_format, str) else None
    if not mime and block_type == "text-plain":
        mime = "text/plain"
    file_id = block.get("file_id") or source.get("file_id") or nested.get("file_id")
    if file_id is None and block.get("source_type") == "id":
        file_id = block.get("id")
    where = url if isinstance(url, str) else (f"file_id:{file_id}" if isinstance(file_id, str) else "")
    size = 0
    if isinstance(data, str):
        is_text = block_type == "text-plain" or source.get("type") == "text"
        size = len(data.encode()) if is_text else _decoded_size(data)
    kind = {"image_url": "image", "input_image": "image", "input_audio": "audio", "input_file": "file"}
    return MediaPart(
        mime if isinstance(mime, str) else kind.get(block_type, block_type),
        where,
        size,
        native=block,
        digest=payload_digest(data) if isinstance(data, str) else "",
    )


def _tool_media(content: Any) -> tuple[MediaPart, ...]:
    """The media blocks of a tool message's content (a screenshot), each with its block as `native`."""
    if not isinstance(content, list):
        return ()
    return tuple(
        _media_part(item) for item in content if isinstance(item, dict) and item.get("type") in _MEDIA_TYPES
    )


def _tool_content(part: ToolResultPart) -> Any:
    """A tool message's content for `part`: its text, followed by its media when it has any."""
    if not part.media:
        return part.content
    blocks = [
        {"type": "text", "text": item.text} if isinstance(item, TextPart) else _media_block(item, -1)
        for item in part.media
    ]
    return [{"type": "text", "text": part.content}, *blocks] if part.content else blocks


def _tool_content_with(content: Any, media: Sequence[Part]) -> Any:
    """A tool message's content with each media block a processor replaced (a `TextPart` whose
    `native` is that block) swapped for a text block; every other block stays the same object."""
    texts = {id(p.native): p.text for p in media if isinstance(p, TextPart) and p.native is not None}
    if not isinstance(content, list):
        return content
    return [{"type": "text", "text": texts[id(item)]} if id(item) in texts else item for item in content]


def _decoded_size(data: str) -> int:
    """Bytes a base64 payload decodes to, without decoding it."""
    data = data.strip()
    return max(len(data) * 3 // 4 - len(data) + len(data.rstrip("=")), 0)


def _render(content: Any, *, with_media: bool = True) -> str:
    """Content as the model reads it: text as is, media as a short placeholder (left out with
    `with_media=False`: a tool message's media are its `ToolResultPart.media`), other blocks as JSON."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    pieces: list[str] = []
    for item in content:
        if isinstance(item, str):
            pieces.append(item)
        elif isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            pieces.append(item["text"])
        elif isinstance(item, dict) and item.get("type") in _MEDIA_TYPES:
            if not with_media:
                continue
            media = _media_part(item)
            pieces.append(f"[{media.media_type}{': ' + media.source if media.source else ''}]")
        else:
            pieces.append(_rough_text(item))
    return "\n".join(pieces)


def _rough_text(item: Any) -> str:
    """A best-effort text for counting an unknown block's tokens."""
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        return str(item["text"])
    try:
        return json.dumps(item, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(item)


# --- writing: neutral -> native ---------------------------------------------------------------


def _plain(part: Part) -> Part:
    return replace(part, pinned=False) if part.pinned else part


def _same(a: Part, b: Part) -> bool:
    """Equal but for pinning (which lives in the message's metadata, not in the part's block)."""
    return _plain(a) == _plain(b)


def _rebuild(msg: Message, native: BaseMessage, index: int) -> list[BaseMessage]:
    reading = _read(native, index)
    if reading.role != msg.role:
        # A processor changed who speaks: no field of the old message type can carry that.
        return _build(msg, index)
    source = msg.source[1] if msg.source is not None else ()
    if len(source) != len(reading.parts):
        source = tuple(reading.parts)
    by_identity = {id(p): (slot, p) for p, slot in zip(source, reading.slots, strict=True)}
    # An edit made with dataclasses.replace keeps the part's native: that finds its slot again. A
    # native that is a string can be the very object behind two parts of different kinds (a DeepSeek
    # reply whose reasoning_content equals its text, both "0"): the kind is part of the key.
    by_native = {
        (id(p.native), type(p)): (slot, p)
        for p, slot in zip(source, reading.slots, strict=True)
        if p.native is not None
    }
    if reading.role == "tool":
        return _rebuild_tool(msg, native, index, by_identity, by_native)
    return [_rebuild_content(msg, native, index, reading, by_identity, by_native)]


_Lookup = dict[int, tuple[_Slot, Part]]
"""Where each part of the native message came from, by the part's identity."""
_NativeLookup = dict[tuple[int, type], tuple[_Slot, Part]]
"""The same, by the identity of the part's native value and the part's kind."""


def _origin(part: Part, by_identity: _Lookup, by_native: _NativeLookup) -> tuple[_Slot | None, Part | None]:
    found = by_identity.get(id(part))
    if found is None and part.native is not None:
        found = by_native.get((id(part.native), type(part)))
    return found if found is not None else (None, None)


def _rebuild_tool(
    msg: Message, native: BaseMessage, index: int, by_identity: _Lookup, by_native: _NativeLookup
) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    results = sum(isinstance(p, ToolResultPart) for p in msg.parts)
    for part in msg.parts:
        original = _origin(part, by_identity, by_native)[1]
        if isinstance(part, ToolResultPart):
            base = part.native if isinstance(part.native, ToolMessage) else None
            if base is None:
                new: BaseMessage = _new_tool_message(part, msg.id if results == 1 else None)
            else:
                if original is None or not isinstance(original, ToolResultPart):
                    first = _read(base, index).parts[0]
                    original = first if isinstance(first, ToolResultPart) else None
                new = _edit_tool_message(base, part, original)
                if base is native and _new_id(msg, native):
                    new = new.model_copy(update={"id": msg.id})
        elif isinstance(part, OtherPart) and isinstance(part.native, BaseMessage):
            new = part.native
        else:
            raise InvalidArgumentError(
                f"message {index}: a tool message can only carry tool results, not a {part.kind} part"
            )
        out.append(_with_pins(new, index, msg.pinned, [part]))
    return out


def _edit_tool_message(
    base: ToolMessage, part: ToolResultPart, original: ToolResultPart | None
) -> BaseMessage:
    updates: dict[str, Any] = {}
    if original is None or part.content != original.content:
        # The new text, then the media the part still carries (none after a clearing).
        updates["content"] = _tool_content(part)
    elif part.media != original.media:
        updates["content"] = _tool_content_with(base.content, part.media)
    if part.tool_call_id != base.tool_call_id:
        updates["tool_call_id"] = part.tool_call_id
    if part.name != base.name:
        updates["name"] = part.name
    if part.is_error != (base.status == "error"):
        updates["status"] = "error" if part.is_error else "success"
    return base.model_copy(update=updates) if updates else base


def _new_tool_message(part: ToolResultPart, message_id: str | None) -> ToolMessage:
    return ToolMessage(
        content=_tool_content(part),
        tool_call_id=part.tool_call_id,
        name=part.name,
        status="error" if part.is_error else "success",
        id=message_id,
    )


@dataclass
class _Content:
    """The content, tool calls and metadata being rebuilt for one edited message."""

    items: list[tuple[Any, bool]]
    """Content items; the flag marks plain text that may join a string content."""
    calls: list[Any]
    invalid: list[Any]
    kwargs: dict[str, Any]
    summary: SummaryPart | None = None
    summary_original: SummaryPart | None = None
    """The summary as read from the native message, when `summary` is it or an edit of it."""


def _rebuild_content(
    msg: Message,
    native: BaseMessage,
    index: int,
    reading: _Reading,
    by_identity: _Lookup,
    by_native: _NativeLookup,
) -> BaseMessage:
    content = native.content
    native_calls: list[Any] = list(native.tool_calls) if isinstance(native, AIMessage) else []
    native_invalid: list[Any] = list(native.invalid_tool_calls) if isinstance(native, AIMessage) else []
    acc = _Content([], [], [], dict(native.additional_kwargs))
    kept_kwargs: set[str] = set()

    for part in msg.parts:
        slot, original = _origin(part, by_identity, by_native)
        unchanged = original is not None and _same(part, original)
        if isinstance(part, SummaryPart):
            if acc.summary is not None:
                raise InvalidArgumentError(
                    f"message {index}: a LangChain message can carry one summary, not several"
                )
            acc.summary = part
            acc.summary_original = original if isinstance(original, SummaryPart) else None
        if slot is None or original is None:
            _add_new_part(acc, part, native, index)
        elif slot.where == "marker":
            if isinstance(part, SummaryPart) and part.text:
                acc.items.append((part.text, True))
        elif slot.where == "string":
            acc.items.append((part.text if isinstance(part, (TextPart, SummaryPart)) else content, True))
        elif slot.where == "kwarg":
            kept_kwargs.add(slot.key)
            if not unchanged and isinstance(part, ThinkingPart):
                acc.kwargs[slot.key] = _kwarg_thinking(part, acc.kwargs.get(slot.key))
        elif slot.where in ("tool_call", "invalid_tool_call"):
            base = (native_calls if slot.where == "tool_call" else native_invalid)[slot.index]
            if unchanged or not isinstance(part, ToolCallPart):
                (acc.calls if slot.where == "tool_call" else acc.invalid).append(base)
                if slot.shadow is not None:
                    acc.items.append((cast("list[Any]", content)[slot.shadow], False))
            else:
                _add_call(acc, part, base)
                if slot.shadow is not None:
                    shadow = cast("list[Any]", content)[slot.shadow]
                    acc.items.append((_edit_call_block(shadow, part), False))
        else:  # a content block
            block = cast("list[Any]", content)[slot.index]
            acc.items.append((block if unchanged else _edit_block(block, part, index), False))

    for slot in reading.slots:
        if slot.where == "kwarg" and slot.key not in kept_kwargs:
            acc.kwargs.pop(slot.key, None)
    _set_summary_kwargs(acc, reading.summary)

    updates: dict[str, Any] = {}
    new_content = _assemble(acc.items, content)
    if not _same_content(new_content, content):
        updates["content"] = new_content
    if isinstance(native, AIMessage):
        if not _same_list(acc.calls, native_calls):
            updates["tool_calls"] = acc.calls
        if not _same_list(acc.invalid, native_invalid):
            updates["invalid_tool_calls"] = acc.invalid
        if isinstance(native, AIMessageChunk) and (
            "tool_calls" in updates or "invalid_tool_calls" in updates
        ):
            # model_copy runs no validator, so the chunks that stand for the calls follow by hand.
            updates["tool_call_chunks"] = [
                _make_tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=None)
                for c in acc.calls
            ] + [
                _make_tool_call_chunk(name=c["name"], args=c["args"], id=c["id"], index=None)
                for c in acc.invalid
            ]
        if msg.usage != reading.usage:
            updates["usage_metadata"] = _usage_metadata(msg.usage, native.usage_metadata)
    elif acc.calls or acc.invalid:
        raise InvalidArgumentError(f"message {index}: only an assistant message can make tool calls")
    if acc.kwargs != native.additional_kwargs:
        updates["additional_kwargs"] = acc.kwargs
    if _new_id(msg, native):
        updates["id"] = msg.id
    rebuilt = native.model_copy(update=updates) if updates else native
    return _with_pins(rebuilt, index, msg.pinned, msg.parts)


def _add_new_part(acc: _Content, part: Part, native: BaseMessage | None, index: int) -> None:
    """A part the native message did not have (or that moved here from another message)."""
    base = part.native if isinstance(part.native, dict) else None
    if isinstance(part, ToolCallPart):
        if native is not None and not isinstance(native, AIMessage):
            raise InvalidArgumentError(f"message {index}: only an assistant message can make tool calls")
        _add_call(acc, part, None)
    elif isinstance(part, TextPart):
        if base is not None and base.get("type") == "text":
            acc.items.append((base if base.get("text") == part.text else {**base, "text": part.text}, False))
        else:
            acc.items.append((part.text, True))
    elif isinstance(part, SummaryPart):
        acc.items.append((part.text, True))
    elif isinstance(part, ThinkingPart):
        acc.items.append((_thinking_block(part, base), False))
    elif isinstance(part, ToolResultPart):
        block = base if base is not None and base.get("type") == "tool_result" else None
        acc.items.append((_edit_tool_result_block(block, part), False))
    elif isinstance(part, MediaPart):
        acc.items.append((_media_block(part, index), False))
    elif isinstance(part.native, (dict, str)):
        acc.items.append((part.native, False))
    else:
        raise InvalidArgumentError(
            f"message {index}: an OtherPart ({part.type_name}) without its LangChain block cannot be written"
        )


def _add_call(acc: _Content, part: ToolCallPart, base: Any) -> None:
    if isinstance(part.arguments, dict):
        if (
            base is not None
            and base.get("type", "tool_call") == "tool_call"
            and base.get("id") == part.id
            and base.get("name") == part.name
            and base.get("args") == part.arguments
        ):
            acc.calls.append(base)
        else:
            acc.calls.append(_make_tool_call(name=part.name, args=part.arguments, id=part.id))
    else:
        error = base.get("error") if base is not None and base.get("type") == "invalid_tool_call" else None
        acc.invalid.append(
            _make_invalid_tool_call(name=part.name, args=part.arguments, id=part.id, error=error)
        )


def _edit_call_block(block: Any, part: ToolCallPart) -> Any:
    """The content block repeating a call, following an edit of that call."""
    if not isinstance(block, dict):
        return block
    block_type = block.get("type")
    new = dict(block)
    if block_type == "function_call":
        new.update(call_id=part.id, name=part.name, arguments=part.arguments_text())
    else:
        new.update(id=part.id, name=part.name)
        if block_type == "tool_use" and isinstance(part.arguments, dict):
            new["input"] = part.arguments
        elif block_type == "tool_call" and isinstance(part.arguments, dict):
            new["args"] = part.arguments
        elif block_type in ("tool_call_chunk", "invalid_tool_call"):
            new["args"] = part.arguments_text()
    return new if new != block else block


def _edit_block(block: Any, part: Part, index: int) -> Any:
    """A content block after an edit of the part made from it, keeping its other keys."""
    if isinstance(block, str):
        return part.text if isinstance(part, (TextPart, SummaryPart)) else block
    if not isinstance(block, dict):
        return block
    if isinstance(part, (TextPart, SummaryPart)):
        return {**block, "text": part.text} if block.get("type") == "text" else block
    if isinstance(part, ThinkingPart):
        return _thinking_block(part, block)
    if isinstance(part, ToolCallPart):
        return _edit_call_block(block, part)
    if isinstance(part, ToolResultPart):
        return _edit_tool_result_block(block, part)
    # Media and unknown blocks have nothing a processor may edit: the block stays.
    return block


def _edit_tool_result_block(block: dict[str, Any] | None, part: ToolResultPart) -> dict[str, Any]:
    if block is None:
        new: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": part.tool_call_id,
            "content": part.content,
        }
        if part.is_error:
            new["is_error"] = True
        return new
    new = dict(block)
    if _render(block.get("content", "")) != part.content:
        new["content"] = part.content
    new["tool_use_id"] = part.tool_call_id
    if bool(block.get("is_error", False)) != part.is_error:
        new["is_error"] = part.is_error
    return new if new != block else block


def _thinking_block(part: ThinkingPart, base: dict[str, Any] | None) -> dict[str, Any]:
    """Thinking as a content block: edited in the shape it had, or new in the shape that fits it."""
    if base is not None:
        base_type = base.get("type")
        if base_type == "non_standard" and isinstance(base.get("value"), dict):
            return {**base, "value": _thinking_block(part, base["value"])}
        if base_type == "thinking":
            new = {**base, "thinking": part.text}
            _set_or_drop(new, "signature", part.signature)
            return new
        if base_type == "redacted_thinking":
            return {**base, "data": part.signature or ""}
        if base_type == "reasoning" and isinstance(base.get("summary"), list):
            return _openai_reasoning_item(part, base)
        if base_type == "reasoning":
            new = {**base, "reasoning": part.text}
            _set_or_drop(new, "id", part.id)
            extras = {k: v for k, v in (base.get("extras") or {}).items() if k != "signature"}
            if part.signature is not None:
                extras["signature"] = part.signature
            _set_or_drop(new, "extras", extras or None)
            return new
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature or ""}
    if part.signature and part.provider == "openai":
        return _openai_reasoning_item(part, {"type": "reasoning"})
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    block: dict[str, Any] = {"type": "reasoning", "reasoning": part.text}
    if part.id:
        block["id"] = part.id
    return block


def _openai_reasoning_item(part: ThinkingPart, base: dict[str, Any]) -> dict[str, Any]:
    new = {**base, "summary": [{"type": "summary_text", "text": part.text}] if part.text else []}
    _set_or_drop(new, "encrypted_content", part.signature)
    _set_or_drop(new, "id", part.id)
    return new


def _kwarg_thinking(part: ThinkingPart, value: Any) -> Any:
    if isinstance(value, dict):
        return _openai_reasoning_item(part, value)
    return part.text


def _set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def _media_block(part: MediaPart, index: int) -> Any:
    if isinstance(part.native, (dict, str)):
        return part.native
    if part.source.startswith(("http://", "https://", "gs://", "s3://")):
        major = part.media_type.split("/")[0]
        block_type = major if major in ("image", "audio", "video") else "file"
        block: dict[str, Any] = {"type": block_type, "url": part.source}
        if "/" in part.media_type:
            block["mime_type"] = part.media_type
        return block
    raise InvalidArgumentError(
        f"message {index}: a {part.media_type} media part without its LangChain block or a URL "
        "cannot be written (its bytes are not in the neutral model)"
    )


def _set_summary_kwargs(acc: _Content, was_summary: bool) -> None:
    """Summary metadata for a new or edited summary; an untouched one keeps what it had."""
    summary, original = acc.summary, acc.summary_original
    if summary is None:
        if was_summary:
            acc.kwargs.pop(COMPACTION_KEY, None)
            acc.kwargs.pop(PROVIDER_COMPACTION_KEY, None)
            if acc.kwargs.get("lc_source") == SUMMARY_SOURCE:
                del acc.kwargs["lc_source"]
        return
    if original is not None and _same(summary, original):
        return
    if not was_summary:
        acc.kwargs["lc_source"] = SUMMARY_SOURCE
    if original is None or summary.marker != original.marker:
        _set_or_drop(acc.kwargs, COMPACTION_KEY, summary.marker.to_dict() if summary.marker else None)
    if original is None or summary.provider_compaction != original.provider_compaction:
        compaction = summary.provider_compaction
        _set_or_drop(acc.kwargs, PROVIDER_COMPACTION_KEY, compaction.to_dict() if compaction else None)


def _assemble(items: list[tuple[Any, bool]], original: Any) -> Any:
    if isinstance(original, str) and all(plain for _, plain in items):
        return "\n".join(value for value, _ in items)
    return [{"type": "text", "text": value} if plain else value for value, plain in items]


def _same_content(new: Any, old: Any) -> bool:
    if isinstance(new, str) or isinstance(old, str):
        return isinstance(new, str) and isinstance(old, str) and new == old
    return _same_list(new, old)


def _same_list(new: list[Any], old: list[Any]) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True))


def _usage_metadata(usage: ReportedUsage | None, old: Any) -> Any:
    if usage is None:
        return None
    total = usage.input_tokens + usage.output_tokens
    return {
        **(old or {}),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": total,
    }


def _with_pins(native: BaseMessage, index: int, pinned: bool, parts: Sequence[Part]) -> BaseMessage:
    """`native` with `additional_kwargs[PIN_KEY]` saying what is pinned (a foreign value is left alone).

    `parts` are the neutral parts `native` was written from, in order; their pins become indices
    into the parts `native` reads back as.
    """
    have = native.additional_kwargs.get(PIN_KEY)
    want: bool | list[int] | None = None
    if pinned:
        want = True
    elif any(p.pinned for p in parts):
        want = _pinned_indices(native, index, parts)
    if want is None and not (have is True or isinstance(have, list)):
        return native
    if (want is True and have is True) or (isinstance(want, list) and want == have):
        return native
    kwargs = dict(native.additional_kwargs)
    _set_or_drop(kwargs, PIN_KEY, want)
    return native.model_copy(update={"additional_kwargs": kwargs})


def _pinned_indices(native: BaseMessage, index: int, parts: Sequence[Part]) -> list[int] | Literal[True]:
    fresh = [_plain(p) for p in _read(native, index).parts]
    found: list[int] = []
    start = 0
    # In order, so that of two equal parts (the same image twice) the right one is pinned.
    for part in parts:
        plain = _plain(part)
        j = next((j for j in range(start, len(fresh)) if fresh[j] == plain), None)
        if j is None:
            j = next((j for j in range(len(fresh)) if j not in found and fresh[j] == plain), None)
        if j is None:
            if part.pinned:
                # The part cannot be found again after the rebuild: pinning the whole message keeps it.
                return True
            continue
        if part.pinned:
            found.append(j)
        start = j + 1
    return sorted(found)


def _build(msg: Message, index: int) -> list[BaseMessage]:
    """Native messages for a neutral message that has none."""
    parts = list(msg.parts)
    if msg.role == "tool" or (msg.role == "user" and any(isinstance(p, ToolResultPart) for p in parts)):
        # LangChain carries tool results only in ToolMessages; they come first (before any text).
        results = [p for p in parts if isinstance(p, ToolResultPart)]
        rest = [p for p in parts if not isinstance(p, ToolResultPart)]
        out: list[BaseMessage] = []
        for p in results:
            made = _new_tool_message(p, msg.id if len(results) == 1 and not rest else None)
            out.append(_with_pins(made, index, msg.pinned, [p]))
        if rest and msg.role == "tool":
            others = [p for p in rest if not (isinstance(p, OtherPart) and isinstance(p.native, BaseMessage))]
            if others:
                kind = others[0].kind
                raise InvalidArgumentError(
                    f"message {index}: a tool message can only carry tool results, not a {kind} part"
                )
            out.extend(cast(BaseMessage, p.native) for p in rest)
        elif rest:
            out.append(_build_one(replace(msg, parts=tuple(rest)), index, msg.id if not results else None))
        return out
    return [_build_one(msg, index, msg.id)]


def _build_one(msg: Message, index: int, message_id: str | None) -> BaseMessage:
    acc = _Content([], [], [], {})
    for part in msg.parts:
        if isinstance(part, SummaryPart):
            if acc.summary is not None:
                raise InvalidArgumentError(
                    f"message {index}: a LangChain message can carry one summary, not several"
                )
            acc.summary = part
        if isinstance(part, ToolResultPart):
            raise InvalidArgumentError(f"message {index}: a {msg.role} message cannot carry a tool result")
        if isinstance(part, ToolCallPart) and msg.role != "assistant":
            raise InvalidArgumentError(f"message {index}: only an assistant message can make tool calls")
        _add_new_part(acc, part, None, index)
    if acc.summary is not None and (acc.calls or acc.invalid):
        raise InvalidArgumentError(
            f"message {index}: a summary is written in the user's voice and cannot make tool calls"
        )
    _set_summary_kwargs(acc, False)
    plain = [value for value, is_plain in acc.items if is_plain]
    if len(acc.items) == 1 and len(plain) == 1:
        content: Any = plain[0]
    elif not acc.items:
        content = ""
    else:
        content = [{"type": "text", "text": value} if is_plain else value for value, is_plain in acc.items]
    native: BaseMessage
    if acc.summary is not None:
        # A summary speaks in the user's voice, whoever asked for it (LangChain's own convention).
        native = HumanMessage(content=content, additional_kwargs=acc.kwargs, id=message_id)
    elif msg.role == "system":
        native = SystemMessage(content=content, id=message_id)
    elif msg.role == "assistant":
        native = AIMessage(
            content=content,
            tool_calls=acc.calls,
            invalid_tool_calls=acc.invalid,
            usage_metadata=_usage_metadata(msg.usage, None),
            id=message_id,
        )
    else:
        native = HumanMessage(content=content, id=message_id)
    return _with_pins(native, index, msg.pinned, msg.parts)
