"""The Pydantic AI adapter: `ModelRequest` / `ModelResponse` lists to and from neutral messages.

Works with Pydantic AI 1.x and 2.x; differences between them are found by feature checks (a class or
a field that exists), never by comparing version strings.

How native messages map to neutral ones:

- A `ModelRequest` becomes one neutral message per run of parts with the same role, in order, except
  that each user prompt and each summary is a message of its own (Pydantic AI merges consecutive
  requests, so a summary or a notice written after the task shares the task's request in the next run):
  `SystemPromptPart` is `system`; `UserPromptPart`, a tool-less retry (`RetryPromptPart` without a
  tool name, 2.x `RetryFeedbackPart`) and an application summary (`CompactionPart` in a request) are
  `user`; `ToolReturnPart` and a `RetryPromptPart` that answers a tool call are `tool`. A part the
  neutral model does not know (native tool returns, 2.x instruction/tool-availability deltas, speech)
  becomes an `OtherPart` in the message of the part before it. A request with no parts at all is
  one `user` message with no parts, so that it is not lost.
- A `ModelResponse` is one `assistant` message, with the provider's usage as `ReportedUsage` and
  `provider_response_id` as the message id.
- `ModelRequest.instructions` (the system prompt of modern Pydantic AI) is shown to the neutral
  model as a `system` message at the head of the request's messages, whose `TextPart.native` is a
  `RequestInstructions` marker. Every request of an agent run carries the same instructions, but a
  provider is only sent those of the latest request, so a request shows them only where they first
  appear or change: the neutral history then counts them once, where they take effect. A request
  that answers tool calls does not show them (a system message there would sit between calls and
  their results, or inside the request the model is answering): the next request that answers
  none shows them if they still differ from the last shown. The field
  itself always round-trips untouched on the native request; editing the marker's text rewrites it.
  Dropping the marker message does not remove instructions: they belong to the framework.
- A user prompt whose content is a list gives one neutral part per item; such a part's `native` is a
  `PromptItem` (the prompt and the item's index), so an edit can be written back into the right item.

Going back, `to_native` returns the very native object for every run of untouched neutral messages
that covers all of it, rebuilds an edited one with `dataclasses.replace` (every field that was not
edited is kept, and every part that was not edited is the same object), and builds new native
messages for neutral messages that have none: consecutive `system`/`user`/`tool` ones make one
`ModelRequest` (tool results first, provider rule R3), each `assistant` one a `ModelResponse`. Two
edits write more than the edited field, because Pydantic AI requires it: edited response text drops
the part's provider `id` (OpenAI Responses would otherwise send its stored copy), and edited retry
text (`RetryPromptPart` without a tool, `RetryFeedbackPart`) becomes a plain `UserPromptPart`, since
Pydantic AI frames a retry's text when it sends it and the neutral text is what the model is to read.
A `RetryPromptPart` answering a tool call stays one.

Pinning lives in `metadata[PIN_KEY]` of messages and of the parts that have a `metadata` dict
(`ToolReturnPart`, `TextContent`; in 2.x also `SystemPromptPart` and a request's `CompactionPart`). A
part pinned where its class has no metadata pins its whole native message instead: pinning more is
safe, pinning less is not. A request shown as several neutral messages has one pin for all of them.

A summary written by a processor becomes a `CompactionPart` in a `ModelRequest` (Pydantic AI's own
convention, user-voice on every provider) with `metadata[COMPACTION_KEY]` holding the marker, when
the installed version accepts one there (2.x). Pydantic AI 1.x only accepts a provider's
`CompactionPart` in a response, so there the summary is a `UserPromptPart` holding one `TextContent`
whose `metadata[COMPACTION_KEY]` carries the marker: `TextContent.metadata` survives
`ModelMessagesTypeAdapter` serialization and is never sent to the model, and both versions read it
back as a `SummaryPart`.
"""

from __future__ import annotations

import copy
import inspect
import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Any

from pydantic import ValidationError
from pydantic_ai import messages as _pai
from pydantic_ai.usage import RequestUsage

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
from historykit.errors import ArgumentTypeError, InvalidArgumentError, UserError
from historykit.plugins._conversion_cache import ConversionCache

_CACHE = ConversionCache()
_NOT_CACHED = object()
"""The variant of an object that is no message: never looked up (`PydanticAIAdapter.to_neutral`)."""


def _metadata_state(msg: Any) -> Any:
    """What a cached conversion compares the metadata by: the live dict (`None` when empty). Pins
    live in metadata, which an application may set in place: the cache keeps a deep copy of it
    (`_kept_state`), so any change, nested ones included, is a miss."""
    return getattr(msg, "metadata", None) or None


class _Unequal:
    """Kept for metadata that cannot be copied: equal to nothing, so the conversion is made again."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def _cached(msg: Any, variant: Any, fingerprint: tuple[Any, ...]) -> tuple[Message, ...] | None:
    """The conversion of `msg` made before, when its fingerprint still compares equal."""
    try:
        return _CACHE.get(msg, variant, fingerprint)
    except Exception:  # metadata whose values do not compare (an array): converted again
        return None


def _kept_state(fingerprint: tuple[Any, ...]) -> tuple[Any, ...]:
    """`fingerprint` as the cache keeps it: its metadata (last) deep-copied."""
    metadata = fingerprint[-1]
    if metadata is None:
        return fingerprint
    try:
        kept = copy.deepcopy(metadata)
    except Exception:  # an object in metadata that cannot be copied: never a hit
        kept = _Unequal()
    return (*fingerprint[:-1], kept)


# Classes that only some versions have are looked up once; `None` means "not in this version".
_TextContent: Any = getattr(_pai, "TextContent", None)
_CachePoint: Any = getattr(_pai, "CachePoint", None)
_UploadedFile: Any = getattr(_pai, "UploadedFile", None)
_FileUrl: Any = getattr(_pai, "FileUrl", None)
_BinaryContent: Any = getattr(_pai, "BinaryContent", None)
_FilePart: Any = getattr(_pai, "FilePart", None)
_CompactionPart: Any = getattr(_pai, "CompactionPart", None)
_RetryPromptPart: Any = getattr(_pai, "RetryPromptPart", None)
_RetryFeedbackPart: Any = getattr(_pai, "RetryFeedbackPart", None)

_ERROR_OUTCOMES: frozenset[str] = frozenset(getattr(_pai, "ERROR_OUTCOMES", ("failed",)))
"""`ToolReturnPart.outcome` values a provider receives as an error (2.x adds `retried`)."""

_REDACTED_THINKING_IDS = frozenset({"redacted_thinking", "redacted_content"})
"""The `ThinkingPart.id`s Pydantic AI gives Claude's redacted thinking (Anthropic and Bedrock)."""


@dataclass(frozen=True, eq=False)
class RequestInstructions:
    """The `native` of the `TextPart` that shows a `ModelRequest`'s `instructions` to the neutral model.

    Example:
        ```python
        from pydantic_ai.messages import ModelRequest, UserPromptPart
        from historykit.plugins.pydantic_ai import PydanticAIAdapter, RequestInstructions

        request = ModelRequest([UserPromptPart("hi")], instructions="Be brief.")
        system, user = PydanticAIAdapter().to_neutral([request])
        assert isinstance(system.parts[0].native, RequestInstructions)
        assert system.parts[0].native.request is request
        ```
    """

    request: Any
    """The `ModelRequest` whose `instructions` the part shows."""


@dataclass(frozen=True, eq=False)
class PromptItem:
    """The `native` of a neutral part made from one item of a `UserPromptPart` whose content is a list.

    Example:
        ```python
        from pydantic_ai.messages import ImageUrl, ModelRequest, UserPromptPart
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        prompt = UserPromptPart(["Describe this:", ImageUrl("https://example.com/cat.png")])
        (user,) = PydanticAIAdapter().to_neutral([ModelRequest([prompt])])
        assert user.parts[1].native.item is prompt.content[1]
        ```
    """

    prompt: Any
    """The `UserPromptPart` the item belongs to."""
    index: int
    """The item's position in `prompt.content`."""

    @property
    def item(self) -> Any:
        return self.prompt.content[self.index]


class PydanticAIAdapter:
    """Converts Pydantic AI message histories to neutral messages and back.

    Example:
        ```python
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        history = [ModelRequest([UserPromptPart("hi")]), ModelResponse([TextPart("hello")])]
        adapter = PydanticAIAdapter()
        neutral = adapter.to_neutral(history)
        assert [m.role for m in neutral] == ["user", "assistant"]
        assert all(a is b for a, b in zip(adapter.to_native(neutral), history))
        ```
    """

    framework = "pydantic-ai"

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        """Neutral messages for a Pydantic AI history; `TypeError` names the index of a non-message,
        and a malformed message (parts that are not a list, a part whose content cannot be read) is
        an `ArgumentTypeError` / `InvalidArgumentError` naming its index."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise ArgumentTypeError(f"expected a list of Pydantic AI messages, got a {_type_name(messages)}")
        result: list[Message] = []
        effective_instructions: str | None = None
        # The cached conversions are looked up here, in one loop (`_read_message` does the same
        # lookup for a miss): a warm call finds nearly every message of its history there.
        entries = _CACHE.entries
        extend = result.extend
        request_class, response_class = _pai.ModelRequest, _pai.ModelResponse
        for index, msg in enumerate(messages):
            cls = type(msg)
            # The variant and the fingerprint's middle as `_read_message` makes them: whether a
            # request shows its instructions, and its instructions; a response's usage.
            if cls is request_class:
                instructions = msg.instructions or None
                shown = (
                    instructions is not None
                    and instructions != effective_instructions
                    and not any(_answers_tool_call(p) for p in msg.parts)
                )
                variant, middle = shown, instructions
            elif cls is response_class:
                shown, variant, middle = False, None, id(msg.usage)
            else:
                variant = _NOT_CACHED
            hit = entries.get((id(msg), variant)) if variant is not _NOT_CACHED else None
            try:
                if (
                    hit is not None
                    and hit[0] is msg
                    and type(msg.parts) is list
                    and hit[1] == (tuple(map(id, msg.parts)), middle, msg.metadata or None)
                ):
                    if shown:
                        effective_instructions = instructions
                    extend(hit[2])
                    continue
            except Exception:  # metadata whose values do not compare: converted below
                pass
            if not isinstance(msg, (_pai.ModelRequest, _pai.ModelResponse)):
                raise ArgumentTypeError(
                    f"message {index} is a {_type_name(msg)}, not a ModelRequest or ModelResponse"
                )
            parts = msg.parts
            # A list, nearly always: the ABC check (slow, per message of every call) only otherwise.
            if type(parts) is not list and (
                isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence)
            ):
                raise ArgumentTypeError(
                    f"message {index} ({type(msg).__name__}): parts must be a list of parts, "
                    f"got {type(msg.parts).__name__}"
                )
            try:
                effective_instructions = _read_message(msg, result, effective_instructions)
            except UserError as exc:
                # The part's own check says what is wrong; this says where.
                raise type(exc)(f"message {index} ({type(msg).__name__}): {exc}") from None
        return result

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        """A Pydantic AI history: untouched messages are their original objects, edited ones are rebuilt."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise ArgumentTypeError(f"expected a list of historykit Messages, got a {_type_name(messages)}")
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(f"message {index} is a {_type_name(msg)}, not a historykit Message")
        emitted = {id(msg.native) for msg in messages if msg.native is not None}
        result: list[Any] = []
        start = 0
        while start < len(messages):
            first = messages[start]
            native = first.native
            end = start + 1
            if native is None:
                if first.role == "assistant":
                    result.append(_Builder(start, emitted).new_response(first))
                    start = end
                    continue
                while (
                    end < len(messages) and messages[end].native is None and messages[end].role != "assistant"
                ):
                    end += 1
                result.append(_Builder(start, emitted).new_request(messages[start:end]))
            else:
                while end < len(messages) and messages[end].native is native:
                    end += 1
                run = messages[start:end]
                if isinstance(native, _pai.ModelRequest) and native.parts and _only_instructions(run, native):
                    # Only the instructions of a request with parts: a processor put a message between
                    # them and the parts (which then carry the request, instructions and all), or
                    # dropped the parts. Alone they would make an empty request; and instructions
                    # reach a provider only from the latest request, which has its own.
                    start = end
                    continue
                if isinstance(native, _pai.ModelRequest):
                    result.append(_Builder(start, emitted).request_from_run(native, run))
                elif isinstance(native, _pai.ModelResponse):
                    result.append(_Builder(start, emitted).response_from_run(native, run))
                else:
                    raise ArgumentTypeError(
                        f"message {start} was made from a {_type_name(native)}, "
                        "not a Pydantic AI ModelRequest or ModelResponse"
                    )
            start = end
        return result


def _only_instructions(run: Sequence[Message], request: Any) -> bool:
    """Whether `run` only shows `request`'s instructions, unedited."""
    return all(
        isinstance(part, TextPart)
        and isinstance(part.native, RequestInstructions)
        and part.native.request is request
        and part.text == request.instructions
        for msg in run
        for part in msg.parts
    ) and any(msg.parts for msg in run)


# --- native -> neutral -------------------------------------------------------------------------


def _read_message(msg: Any, result: list[Message], effective_instructions: str | None) -> str | None:
    """Append the neutral messages of `msg` to `result`; the instructions in effect after it."""
    if isinstance(msg, _pai.ModelRequest):
        instructions = msg.instructions or None
        # Never between tool calls and their results, nor inside the request the model is
        # answering: a request that answers tool calls leaves new instructions to the next.
        shown = (
            instructions is not None
            and instructions != effective_instructions
            and not any(_answers_tool_call(p) for p in msg.parts)
        )
        if shown:
            effective_instructions = instructions
        fingerprint: tuple[Any, ...] = (tuple(map(id, msg.parts)), instructions, _metadata_state(msg))
        cached = _cached(msg, shown, fingerprint)
        if cached is None:
            cached = tuple(_request_to_neutral(msg, show_instructions=shown))
            _CACHE.put(msg, shown, _kept_state(fingerprint), cached)
    else:
        fingerprint = (tuple(map(id, msg.parts)), id(msg.usage), _metadata_state(msg))
        cached = _cached(msg, None, fingerprint)
        if cached is None:
            cached = (_response_to_neutral(msg),)
            _CACHE.put(msg, None, _kept_state(fingerprint), cached)
    result.extend(cached)
    return effective_instructions


def _request_to_neutral(request: Any, *, show_instructions: bool) -> list[Message]:
    groups: list[tuple[Role, list[Part]]] = []
    if show_instructions:
        groups.append(("system", [TextPart(request.instructions, native=RequestInstructions(request))]))
    leading: list[Part] = []
    for part in request.parts:
        role, parts = _request_part_to_neutral(part)
        if role is None:
            # A part the neutral model does not know stays next to the part before it, so that it
            # never splits a group of tool results or a user turn in two.
            if groups:
                groups[-1][1].extend(parts)
            else:
                leading.extend(parts)
        elif groups and groups[-1][0] == role and not _own_message(part, groups[-1][1]):
            groups[-1][1].extend(parts)
        else:
            groups.append((role, leading + parts))
            leading = []
    if leading or not groups:
        groups.append(("user", leading))
    pinned = _is_pinned(request.metadata)
    marker = _marker_of(request.metadata, EDIT_KEY)
    return [
        Message.from_native(role, parts, request, pinned=pinned, marker=marker or _group_edit(parts))
        for role, parts in groups
    ]


def _group_edit(parts: Sequence[Part]) -> CompactionMarker | None:
    """The marker a user prompt a compaction wrote carries on its items, when Pydantic AI merged
    its request into another (which keeps no request's metadata): the group is that prompt."""
    prompts = {id(p.native.prompt): p.native.prompt for p in parts if isinstance(p.native, PromptItem)}
    if len(prompts) != 1:
        return None
    (prompt,) = prompts.values()
    return _prompt_edit(prompt) if len(parts) == len(prompt.content) else None


def _own_message(part: Any, group: list[Part]) -> bool:
    """Whether `part` starts a neutral message of its own rather than joining the group before it.

    Each user prompt and each summary is one: Pydantic AI merges consecutive requests when a run
    starts (and before each request it sends), so a request holding the task, a summary and a
    notice is what a processed history becomes on the next run; read as one message, the summary
    would no longer be told apart from the task (nor a notice from the user's words).
    """
    return (
        isinstance(part, _pai.UserPromptPart)
        or _isinstance(part, _CompactionPart)
        or any(isinstance(p, SummaryPart) for p in group)
    )


def _request_part_to_neutral(part: Any) -> tuple[Role | None, list[Part]]:
    """The role and the neutral parts of one request part; role `None` for an `OtherPart`."""
    if isinstance(part, _pai.SystemPromptPart):
        return "system", [
            TextPart(part.content, pinned=_is_pinned(getattr(part, "metadata", None)), native=part)
        ]
    if isinstance(part, _pai.UserPromptPart):
        return "user", _user_content_to_neutral(part)
    if isinstance(part, _pai.ToolReturnPart):
        return "tool", [_tool_return_to_neutral(part)]
    if _isinstance(part, _RetryPromptPart):
        if part.tool_name is not None:
            result = ToolResultPart(
                part.tool_call_id, part.tool_name, part.model_response(), is_error=True, native=part
            )
            return "tool", [result]
        return "user", [TextPart(part.model_response(), native=part)]
    if _isinstance(part, _RetryFeedbackPart):
        return "user", [TextPart(part.model_response(), native=part)]
    if _isinstance(part, _CompactionPart):
        return "user", [_compaction_to_summary(part)]
    return None, [_other(part)]


def _tool_return_to_neutral(part: Any) -> ToolResultPart:
    is_error = getattr(part, "outcome", "success") in _ERROR_OUTCOMES
    return ToolResultPart(
        part.tool_call_id,
        part.tool_name,
        _tool_return_text(part),
        is_error=is_error,
        pinned=_is_pinned(part.metadata),
        native=part,
        media=_tool_return_media(part),
    )


def _tool_return_media(part: Any) -> tuple[MediaPart, ...]:
    """The files of a tool return (2.x tools return images as `BinaryContent`), each with the item
    itself as its `native`; none on 1.x, where a returned file travels in a user prompt instead."""
    files = getattr(part, "files", None)
    if not files:
        return ()
    return tuple(media for item in files if (media := _file_media(item, item)) is not None)


def _file_media(item: Any, native: Any) -> MediaPart | None:
    """The neutral form of a file item (an image, a document, ...); `None` for anything else."""
    if _isinstance(item, _FileUrl):
        return MediaPart(_url_media_type(item), source=item.url, native=native)
    if _isinstance(item, _BinaryContent):
        return MediaPart(
            item.media_type, size=len(item.data), native=native, digest=payload_digest(item.data)
        )
    if _isinstance(item, _UploadedFile):
        return MediaPart(item.media_type, source=item.file_id, native=native)
    return None


def _tool_return_text(part: Any) -> str:
    # The error-ness travels in `is_error`, so the text is the content without 2.x's `{"error": ...}`
    # wrapper (what a provider with a native error channel, like Anthropic, receives).
    try:
        if _takes_keyword(type(part), "model_response_str", "wrap_if_error"):
            return str(part.model_response_str(wrap_if_error=False))
        return str(part.model_response_str())
    except (TypeError, ValueError) as exc:
        # Pydantic AI could not send it either (its model request serializes the same way).
        raise ArgumentTypeError(
            f"the return of tool {part.tool_name!r} (call {part.tool_call_id!r}) holds a value of type "
            f"{type(part.content).__name__} that Pydantic AI cannot serialize: {' '.join(str(exc).split())}"
        ) from None


def _compaction_to_summary(part: Any) -> SummaryPart:
    metadata = getattr(part, "metadata", None)
    return SummaryPart(
        part.content or "",
        marker=_marker_of(metadata),
        pinned=_is_pinned(metadata),
        native=part,
        provider_compaction=_provider_compaction_of(metadata),
    )


def _user_content_to_neutral(prompt: Any) -> list[Part]:
    content = prompt.content
    if isinstance(content, str):
        return [TextPart(content, native=prompt)]
    if isinstance(content, bytes) or not isinstance(content, Sequence):
        raise ArgumentTypeError(
            f"{type(prompt).__name__}.content must be a str or a list of user content, "
            f"got {type(content).__name__}"
        )
    if not content:
        # An empty content list has no item to carry it; this keeps the prompt in the history.
        return [OtherPart(type(prompt).__name__, native=prompt)]
    return [_content_item_to_neutral(item, PromptItem(prompt, index)) for index, item in enumerate(content)]


def _content_item_to_neutral(item: Any, ref: PromptItem) -> Part:
    if isinstance(item, str):
        return TextPart(item, native=ref)
    if _isinstance(item, _TextContent):
        metadata = item.metadata if isinstance(item.metadata, dict) else None
        pinned = _is_pinned(metadata)
        if metadata is not None and COMPACTION_KEY in metadata:
            return SummaryPart(
                item.content,
                marker=_marker_of(metadata),
                pinned=pinned,
                native=ref,
                provider_compaction=_provider_compaction_of(metadata),
            )
        return TextPart(item.content, pinned=pinned, native=ref)
    media = _file_media(item, ref)
    return media if media is not None else OtherPart(type(item).__name__, native=ref)


def _url_media_type(item: Any) -> str:
    try:
        return str(item.media_type)
    except ValueError:
        # No media type given and none inferable from the URL: the coarse kind (`image`, `document`).
        return str(item.kind).removesuffix("-url")


def _response_to_neutral(response: Any) -> Message:
    parts = [_response_part_to_neutral(part) for part in response.parts]
    return Message.from_native(
        "assistant",
        parts,
        response,
        id=response.provider_response_id,
        usage=_reported_usage(response.usage),
        model=response.model_name if isinstance(response.model_name, str) else None,
        pinned=_is_pinned(response.metadata),
        marker=_marker_of(response.metadata, EDIT_KEY),
    )


def _response_part_to_neutral(part: Any) -> Part:
    if isinstance(part, _pai.TextPart):
        return TextPart(part.content, native=part)
    if isinstance(part, _pai.ThinkingPart):
        return ThinkingPart(
            part.content,
            signature=part.signature,
            id=part.id,
            provider=part.provider_name,
            redacted=part.id in _REDACTED_THINKING_IDS,
            native=part,
        )
    if isinstance(part, _pai.ToolCallPart):
        return ToolCallPart(part.tool_call_id, part.tool_name, _arguments(part.args), native=part)
    if _isinstance(part, _FilePart):
        return MediaPart(
            part.content.media_type,
            size=len(part.content.data),
            native=part,
            digest=payload_digest(part.content.data),
        )
    return _other(part)


def _arguments(args: Any) -> dict[str, Any] | str:
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    if not isinstance(args, (str, bytes)):
        # Pydantic AI's `args` are a dict or its JSON text; a list is no tool's arguments.
        raise ArgumentTypeError(
            f"tool call arguments must be a dict or a JSON string, got {type(args).__name__}"
        )
    try:
        parsed = json.loads(args) if args else None
    except ValueError:
        return str(args)
    return parsed if isinstance(parsed, dict) else str(args)


def _reported_usage(usage: Any) -> ReportedUsage | None:
    input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
    output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
    if not input_tokens and not output_tokens:
        return None
    return ReportedUsage(input_tokens, output_tokens)


def _other(part: Any) -> OtherPart:
    return OtherPart(
        type(part).__name__,
        _other_text(part),
        pinned=_is_pinned(getattr(part, "metadata", None)),
        native=part,
    )


def _other_text(part: Any) -> str:
    """Best-effort text of a part the neutral model does not know, used only to count its tokens."""
    if hasattr(part, "tool_name") and hasattr(part, "args_as_json_str"):
        return f"{part.tool_name} {part.args_as_json_str()}"
    if hasattr(part, "model_response_str"):
        try:
            return str(part.model_response_str())
        except (TypeError, ValueError):
            # Content Pydantic AI cannot serialize still passes through; it just counts as empty.
            return ""
    for attr in ("content", "transcript"):
        value = getattr(part, attr, None)
        if isinstance(value, str):
            return value
    return ""


# --- neutral -> native -------------------------------------------------------------------------


class _Builder:
    """Builds the native message for one run of neutral messages that starts at message `index`."""

    def __init__(self, index: int, emitted: set[int]) -> None:
        self.index = index
        self.emitted = emitted
        """`id`s of the native messages that some neutral message of the history still comes from."""
        self.pin_message = False
        """Set when a pinned part has no metadata of its own: its whole message is pinned instead."""
        self.instructions: str | None = None
        """The edited text of the request's instructions marker, when there is one."""

    # requests

    def request_from_run(self, request: Any, run: Sequence[Message]) -> Any:
        if all(msg.is_untouched for msg in run) and _run_keys(run) == _request_keys(request):
            return request
        self.instructions = request.instructions
        parts = [native for msg in run for native in self._request_parts(msg, request)]
        changes: dict[str, Any] = {"parts": parts}
        if self.instructions != request.instructions:
            changes["instructions"] = self.instructions
        pinned = self._message_pin(run, _is_pinned(request.metadata))
        metadata = _with_edit(_with_pin(request.metadata, pinned), run)
        if metadata != request.metadata:
            changes["metadata"] = metadata
        return replace(request, **changes)

    def new_request(self, run: Sequence[Message]) -> Any:
        parts = [native for msg in run for native in self._request_parts(msg, None)]
        # Provider rule R3: the results answering the previous turn's tool calls come first.
        parts.sort(key=lambda p: 0 if _answers_tool_call(p) else 1)
        pinned = any(msg.pinned for msg in run) or self.pin_message
        return _pai.ModelRequest(parts=parts, metadata=_with_edit({PIN_KEY: True} if pinned else None, run))

    def _request_parts(self, msg: Message, request: Any) -> Iterator[Any]:
        """The native request parts for the neutral parts of `msg`; the items of one user prompt are
        gathered back into that prompt."""
        group: list[Any] = []
        group_prompt: Any = None
        for part in msg.parts:
            ref = part.native
            if isinstance(ref, PromptItem):
                if ref.prompt is not group_prompt:
                    yield from _flush_prompt(group_prompt, group)
                    group, group_prompt = [], ref.prompt
                group.append(ref.item if msg.part_is_original(part) else self._edit_item(part, ref))
                continue
            yield from _flush_prompt(group_prompt, group)
            group, group_prompt = [], None
            if isinstance(ref, RequestInstructions):
                if ref.request is request:
                    if isinstance(part, TextPart) and part.text != (request.instructions or ""):
                        self.instructions = part.text
                    self.pin_message |= part.pinned
                elif id(ref.request) not in self.emitted:
                    # The request these instructions belong to is gone: keep them as a system prompt.
                    yield self._new_request_part(replace(part, native=None), "system")
                continue
            if msg.part_is_original(part):
                yield ref
            else:
                yield _with_part_edit(self._request_part(part, msg.role), msg)
        yield from _flush_prompt(group_prompt, group)

    def _request_part(self, part: Part, role: Role) -> Any:
        """The native request part for a neutral part that is not the adapter's own: edited, moved or new."""
        native = part.native
        if isinstance(native, PromptItem):
            return replace(native.prompt, content=[self._edit_item(part, native)])
        if not _is_native_part(native):
            return self._new_request_part(replace(part, native=None), role)
        derived_role, derived_parts = _request_part_to_neutral(native)
        derived = derived_parts[0] if len(derived_parts) == 1 else None
        if derived is None or type(derived) is not type(part):
            return self._new_request_part(replace(part, native=None), role)
        changes: dict[str, Any] = {}
        if isinstance(part, TextPart) and isinstance(derived, TextPart) and part.text != derived.text:
            if not isinstance(native, (_pai.SystemPromptPart, _pai.UserPromptPart)):
                # Pydantic AI frames a retry's text when it sends it; an edited text is what the model
                # is to read, so it becomes a plain user prompt.
                return self._new_request_part(replace(part, native=None), derived_role or role)
            changes["content"] = part.text
        elif isinstance(part, ToolResultPart) and isinstance(derived, ToolResultPart):
            if part.content != derived.content:
                # The new text, then the files the part still carries (none after a clearing).
                changes["content"] = self._tool_content(part)
            elif part.media != derived.media:
                changes["content"] = _tool_content_with(native.content, part.media)
            if part.tool_call_id != derived.tool_call_id:
                changes["tool_call_id"] = part.tool_call_id
            if part.name is not None and part.name != derived.name:
                changes["tool_name"] = part.name
            if part.is_error != derived.is_error:
                if not _has_field(native, "outcome"):
                    return self._new_request_part(replace(part, native=None), role)
                changes["outcome"] = "failed" if part.is_error else "success"
        elif isinstance(part, SummaryPart) and isinstance(derived, SummaryPart):
            if part.text != derived.text:
                changes["content"] = part.text
            if part.marker != derived.marker or part.provider_compaction != derived.provider_compaction:
                changes["metadata"] = _with_summary(getattr(native, "metadata", None), part)
        # An OtherPart passes through as it is: only its pin can change.
        self._pin_changes(part, derived, native, changes)
        return _replace(native, changes)

    def _new_request_part(self, part: Part, role: Role) -> Any:
        """A request part built from a neutral part that has no native object."""
        if isinstance(part, TextPart):
            if role == "system":
                if part.pinned and _has_field_on(_pai.SystemPromptPart, "metadata"):
                    return _pai.SystemPromptPart(part.text, metadata={PIN_KEY: True})
                self.pin_message |= part.pinned
                return _pai.SystemPromptPart(part.text)
            return _pai.UserPromptPart([self._new_item(part)] if part.pinned else part.text)
        if isinstance(part, ToolResultPart):
            return self._new_tool_return(part)
        if isinstance(part, SummaryPart):
            if _request_compaction_supported():
                metadata = _with_pin(_with_summary(None, part), part.pinned)
                return _CompactionPart(content=part.text, metadata=metadata)
            return _pai.UserPromptPart([self._new_item(part)])
        if isinstance(part, MediaPart):
            return _pai.UserPromptPart([self._new_item(part)])
        raise self._error(part, "a ModelRequest")

    def _new_tool_return(self, part: ToolResultPart) -> Any:
        fields_: dict[str, Any] = {
            "tool_name": part.name or "",
            "content": self._tool_content(part),
            "tool_call_id": part.tool_call_id,
        }
        if part.is_error and not _has_field_on(_pai.ToolReturnPart, "outcome"):
            # Before `outcome` existed, an error answering a tool call was a retry prompt.
            self.pin_message |= part.pinned
            return _RetryPromptPart(**fields_)
        if part.is_error:
            fields_["outcome"] = "failed"
        return _pai.ToolReturnPart(**fields_, metadata={PIN_KEY: True} if part.pinned else None)

    def _tool_content(self, part: ToolResultPart) -> Any:
        """A tool return's content for `part`: its text, followed by its files when it has any."""
        if not part.media:
            return part.content
        items = [
            item.text
            if isinstance(item, TextPart)
            else (item.native if _is_file_item(item.native) else self._media_item(item))
            for item in part.media
        ]
        return [part.content, *items] if part.content else items

    def _edit_item(self, part: Part, ref: PromptItem) -> Any:
        """The user prompt item for a neutral part made from `ref` and edited since."""
        item = ref.item
        derived = _content_item_to_neutral(item, ref)
        if type(derived) is not type(part):
            return self._new_item(replace(part, native=None))
        if not isinstance(part, (TextPart, SummaryPart)) or not isinstance(derived, (TextPart, SummaryPart)):
            # Media and unknown items cannot be edited through the neutral model; only pinned.
            self.pin_message |= part.pinned and not derived.pinned
            return item
        text_changed = part.text != derived.text
        marker_changed = isinstance(part, SummaryPart) and (
            part.marker != getattr(derived, "marker", None)
            or part.provider_compaction != getattr(derived, "provider_compaction", None)
        )
        pin_changed = part.pinned != derived.pinned
        if not (text_changed or marker_changed or pin_changed):
            return item
        if not _isinstance(item, _TextContent):
            return self._new_item(replace(part, native=None))
        metadata = item.metadata
        if metadata is None or isinstance(metadata, dict):
            if marker_changed and isinstance(part, SummaryPart):
                metadata = _with_summary(metadata, part)
            if pin_changed:
                metadata = _with_pin(metadata, part.pinned)
        else:
            # Application metadata of another shape is left alone; the pin goes on the message.
            self.pin_message |= part.pinned and pin_changed
        if text_changed and type(item) is not _TextContent:
            # A `StructuredContent` renders its text from a value: edited text is plain text.
            return _TextContent(content=part.text, metadata=metadata)
        return replace(item, content=part.text, metadata=metadata)

    def _new_item(self, part: Part) -> Any:
        """A user prompt item built from a neutral part that has no native object."""
        if isinstance(part, SummaryPart):
            if _TextContent is None:
                raise self._error(part, "this Pydantic AI version's user prompt")
            return _TextContent(content=part.text, metadata=_with_pin(_with_summary(None, part), part.pinned))
        if isinstance(part, TextPart):
            if part.pinned and _TextContent is not None:
                return _TextContent(content=part.text, metadata={PIN_KEY: True})
            self.pin_message |= part.pinned
            return part.text
        if isinstance(part, MediaPart):
            self.pin_message |= part.pinned
            return self._media_item(part)
        raise self._error(part, "a user prompt")

    def _media_item(self, part: MediaPart) -> Any:
        if part.source.startswith(("http://", "https://")):
            kind = part.media_type.split("/", 1)[0]
            url_class = {"image": _pai.ImageUrl, "audio": _pai.AudioUrl, "video": _pai.VideoUrl}
            media_type = part.media_type if "/" in part.media_type else None
            return url_class.get(kind, _pai.DocumentUrl)(part.source, media_type=media_type)
        raise InvalidArgumentError(
            f"message {self.index}: a MediaPart ({part.media_type}) with no native object and no http(s) "
            "URL cannot be turned into Pydantic AI content: there are no bytes to send"
        )

    # responses

    def response_from_run(self, response: Any, run: Sequence[Message]) -> Any:
        if len(run) == 1 and run[0].is_untouched:
            return response
        parts = [
            part.native if msg.part_is_original(part) else self._response_part(part)
            for msg in run
            for part in msg.parts
        ]
        changes: dict[str, Any] = {}
        if len(parts) != len(response.parts) or any(
            a is not b for a, b in zip(parts, response.parts, strict=False)
        ):
            changes["parts"] = parts
        first = run[0]
        if first.id != response.provider_response_id:
            changes["provider_response_id"] = first.id
        if first.usage != _reported_usage(response.usage):
            changes["usage"] = _usage_with(response.usage, first.usage)
        pinned = self._message_pin(run, _is_pinned(response.metadata))
        metadata = _with_edit(_with_pin(response.metadata, pinned), run)
        if metadata != response.metadata:
            changes["metadata"] = metadata
        return replace(response, **changes) if changes else response

    def new_response(self, msg: Message) -> Any:
        parts = [self._response_part(part) for part in msg.parts]
        return _pai.ModelResponse(
            parts=parts,
            usage=_usage_with(None, msg.usage),
            model_name=msg.model,
            provider_response_id=msg.id,
            metadata=_with_edit({PIN_KEY: True} if msg.pinned or self.pin_message else None, [msg]),
        )

    def _response_part(self, part: Part) -> Any:
        """The native response part for a neutral part that is not the adapter's own: edited, moved or new."""
        native = part.native
        if _is_native_part(native):
            derived = _response_part_to_neutral(native)
            if type(derived) is type(part):
                changes = _response_changes(part, derived, native)
                self._pin_changes(part, derived, native, changes)
                return _replace(native, changes)
        self.pin_message |= part.pinned
        if isinstance(part, TextPart):
            return _pai.TextPart(part.text)
        if isinstance(part, ThinkingPart):
            thinking_id = part.id or ("redacted_thinking" if part.redacted else None)
            return _pai.ThinkingPart(
                part.text, id=thinking_id, signature=part.signature, provider_name=part.provider
            )
        if isinstance(part, ToolCallPart):
            return _pai.ToolCallPart(part.name, part.arguments, part.id)
        raise self._error(part, "a ModelResponse")

    # shared

    def _pin_changes(self, part: Part, derived: Part, native: Any, changes: dict[str, Any]) -> None:
        if part.pinned == derived.pinned:
            return
        metadata = changes.get("metadata", getattr(native, "metadata", None))
        if _has_field(native, "metadata") and (metadata is None or isinstance(metadata, dict)):
            changes["metadata"] = _with_pin(metadata, part.pinned)
        else:
            self.pin_message |= part.pinned

    def _message_pin(self, run: Sequence[Message], native_pinned: bool) -> bool:
        changed = any(msg.source is None or msg.pinned != msg.source[2] for msg in run)
        pinned = any(msg.pinned for msg in run) if changed else native_pinned
        return pinned or self.pin_message

    def _error(self, part: Part, where: str) -> ValueError:
        no_native = " with no native object" if part.native is None else ""
        return ValueError(
            f"message {self.index}: a neutral {type(part).__name__}{no_native} cannot go into {where}"
        )


def _flush_prompt(prompt: Any, items: list[Any]) -> Iterator[Any]:
    """The user prompt for `items`: the prompt itself when they are exactly its content, else a copy."""
    if prompt is None or not items:
        return
    content = prompt.content
    if len(items) == len(content) and all(a is b for a, b in zip(items, content, strict=False)):
        yield prompt
    else:
        yield replace(prompt, content=items)


def _response_changes(part: Part, derived: Part, native: Any) -> dict[str, Any]:
    """The native fields a neutral response part edits, compared with what its native gives."""
    changes: dict[str, Any] = {}
    if isinstance(part, TextPart) and isinstance(derived, TextPart) and part.text != derived.text:
        changes["content"] = part.text
        if getattr(native, "id", None) is not None:
            # As Pydantic AI asks: edited text drops its id, or OpenAI Responses sends its stored copy.
            changes["id"] = None
    elif isinstance(part, ThinkingPart) and isinstance(derived, ThinkingPart):
        for neutral_field, native_field in (
            ("text", "content"),
            ("signature", "signature"),
            ("id", "id"),
            ("provider", "provider_name"),
        ):
            if getattr(part, neutral_field) != getattr(derived, neutral_field):
                changes[native_field] = getattr(part, neutral_field)
    elif isinstance(part, ToolCallPart) and isinstance(derived, ToolCallPart):
        if part.id != derived.id:
            changes["tool_call_id"] = part.id
        if part.name != derived.name:
            changes["tool_name"] = part.name
        if part.arguments != derived.arguments:
            # Kept in the form the native had: a model that streamed a JSON string gets one back.
            as_string = isinstance(native.args, str) and isinstance(part.arguments, dict)
            changes["args"] = part.arguments_text() if as_string else part.arguments
    return changes


def _run_keys(run: Sequence[Message]) -> list[Any]:
    keys: list[Any] = []
    for msg in run:
        for part in msg.parts:
            ref = part.native
            if isinstance(ref, RequestInstructions):
                continue
            keys.append((id(ref.prompt), ref.index) if isinstance(ref, PromptItem) else id(ref))
    return keys


def _request_keys(request: Any) -> list[Any]:
    keys: list[Any] = []
    for part in request.parts:
        if isinstance(part, _pai.UserPromptPart) and not isinstance(part.content, str) and part.content:
            keys.extend((id(part), index) for index in range(len(part.content)))
        else:
            keys.append(id(part))
    return keys


def _is_file_item(item: Any) -> bool:
    return (
        _isinstance(item, _FileUrl) or _isinstance(item, _BinaryContent) or _isinstance(item, _UploadedFile)
    )


def _tool_content_with(content: Any, media: Sequence[Part]) -> Any:
    """A tool return's `content` with each file a processor replaced (a `TextPart` whose `native` is
    that file item) swapped for its text; every other item stays the very same object."""
    texts = {id(p.native): p.text for p in media if isinstance(p, TextPart) and p.native is not None}
    if not isinstance(content, list):
        return texts.get(id(content), content)
    return [texts.get(id(item), item) for item in content]


def _is_native_part(obj: Any) -> bool:
    """Whether `obj` can be a native part: not missing, not one of our markers, not a whole message."""
    return obj is not None and not isinstance(
        obj, (PromptItem, RequestInstructions, _pai.ModelRequest, _pai.ModelResponse)
    )


def _answers_tool_call(part: Any) -> bool:
    return isinstance(part, _pai.ToolReturnPart) or (
        _isinstance(part, _RetryPromptPart) and part.tool_name is not None
    )


def _usage_with(usage: Any, reported: ReportedUsage | None) -> Any:
    input_tokens = reported.input_tokens if reported else 0
    output_tokens = reported.output_tokens if reported else 0
    if isinstance(usage, RequestUsage):
        return replace(usage, input_tokens=input_tokens, output_tokens=output_tokens)
    return RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens)


def _is_pinned(metadata: Any) -> bool:
    return isinstance(metadata, dict) and metadata.get(PIN_KEY) is True


def _with_pin(metadata: dict[str, Any] | None, pinned: bool) -> dict[str, Any] | None:
    if pinned:
        return {**(metadata or {}), PIN_KEY: True}
    if not metadata or PIN_KEY not in metadata:
        return metadata
    rest = {key: value for key, value in metadata.items() if key != PIN_KEY}
    return rest or None


def _with_edit(metadata: dict[str, Any] | None, run: Sequence[Message]) -> dict[str, Any] | None:
    """`metadata` carrying the marker of the compaction that wrote a message of `run` (`EDIT_KEY`):
    the stores tell what a compaction wrote from the originals by it; no model is sent it."""
    marker = next((msg.marker for msg in run if msg.marker is not None and not msg.is_untouched), None)
    if marker is None:
        return metadata
    return {**(metadata or {}), EDIT_KEY: marker.to_dict()}


def _with_part_edit(native: Any, msg: Message) -> Any:
    """A tool return or a user prompt a compaction wrote (a cleared result, a truncation notice)
    carries the marker on itself too: Pydantic AI merges consecutive requests into one and keeps the
    parts' metadata, not the requests'. A prompt has no metadata of its own; its text goes in a
    `TextContent` whose metadata holds the marker (never sent to a model)."""
    if msg.marker is None:
        return native
    data = msg.marker.to_dict()
    if isinstance(native, _pai.UserPromptPart) and _TextContent is not None:
        content = [native.content] if isinstance(native.content, str) else native.content
        items = [_item_with_edit(item, data) for item in content]
        if all(a is b for a, b in zip(items, content)) and not isinstance(native.content, str):
            return native
        return replace(native, content=items)
    if not isinstance(native, _pai.ToolReturnPart):
        return native
    if isinstance(native.metadata, dict) and native.metadata.get(EDIT_KEY) == data:
        return native
    if native.metadata is not None and not isinstance(native.metadata, dict):
        return native  # the application's own metadata, not a dict: left as it is
    return replace(native, metadata={**(native.metadata or {}), EDIT_KEY: data})


def _item_with_edit(item: Any, data: dict[str, Any]) -> Any:
    """A prompt item of a message a compaction wrote, carrying the marker (`EDIT_KEY`) where it can."""
    if isinstance(item, str):
        return _TextContent(content=item, metadata={EDIT_KEY: data})
    if type(item) is not _TextContent or (item.metadata is not None and not isinstance(item.metadata, dict)):
        return item  # media, or the application's own metadata: the message's marker is what there is
    if isinstance(item.metadata, dict) and item.metadata.get(EDIT_KEY) == data:
        return item
    return replace(item, metadata={**(item.metadata or {}), EDIT_KEY: data})


def _prompt_edit(part: Any) -> CompactionMarker | None:
    """The marker of the compaction that wrote a user prompt (`_with_part_edit`), or `None`."""
    if not isinstance(part, _pai.UserPromptPart) or isinstance(part.content, str) or not part.content:
        return None
    markers = [_marker_of(getattr(item, "metadata", None), EDIT_KEY) for item in part.content]
    return markers[0] if markers[0] is not None and all(m == markers[0] for m in markers) else None


def _with_summary(metadata: dict[str, Any] | None, part: SummaryPart) -> dict[str, Any]:
    """`metadata` with the summary's marker, and its provider compaction when it has one."""
    marker = part.marker
    out = {**(metadata or {}), COMPACTION_KEY: marker.to_dict() if marker is not None else None}
    out.pop(PROVIDER_COMPACTION_KEY, None)
    if part.provider_compaction is not None:
        out[PROVIDER_COMPACTION_KEY] = part.provider_compaction.to_dict()
    return out


def _provider_compaction_of(metadata: Any) -> ProviderCompaction | None:
    return (
        ProviderCompaction.from_dict(metadata.get(PROVIDER_COMPACTION_KEY))
        if isinstance(metadata, dict)
        else None
    )


def _marker_of(metadata: Any, key: str = COMPACTION_KEY) -> CompactionMarker | None:
    """The marker under `key` of a metadata dict: a summary's (`COMPACTION_KEY`), or that of the
    compaction that wrote a message (`EDIT_KEY`); `None` when there is none."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get(key), dict):
        return None
    try:
        return CompactionMarker.from_dict(metadata[key])
    except (ValueError, TypeError):
        # A damaged marker is unknown data: the native keeps it, and the message reads as without one.
        return None


def _replace(obj: Any, changes: dict[str, Any]) -> Any:
    if not changes:
        return obj
    if getattr(type(obj), "__deprecated__", None) is not None:
        # Rebuilding a part the history already holds (2.x `RetryPromptPart`) is not new use of it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return replace(obj, **changes)
    return replace(obj, **changes)


def _isinstance(obj: Any, cls: Any) -> bool:
    return cls is not None and isinstance(obj, cls)


def _has_field(obj: Any, name: str) -> bool:
    return _has_field_on(type(obj), name)


_FIELD_CHECKS: dict[tuple[Any, str], bool] = {}


def _has_field_on(cls: Any, name: str) -> bool:
    """Whether dataclass `cls` has the field `name` (a feature check, cached per class)."""
    key = (cls, name)
    if key not in _FIELD_CHECKS:
        try:
            _FIELD_CHECKS[key] = any(f.name == name for f in fields(cls))
        except TypeError:
            _FIELD_CHECKS[key] = False
    return _FIELD_CHECKS[key]


_KEYWORD_CHECKS: dict[tuple[Any, str, str], bool] = {}


def _takes_keyword(cls: Any, method: str, keyword: str) -> bool:
    """Whether `cls.method` takes the keyword argument `keyword` (a feature check, cached per class)."""
    key = (cls, method, keyword)
    if key not in _KEYWORD_CHECKS:
        try:
            _KEYWORD_CHECKS[key] = keyword in inspect.signature(getattr(cls, method)).parameters
        except (TypeError, ValueError, AttributeError):
            _KEYWORD_CHECKS[key] = False
    return _KEYWORD_CHECKS[key]


@cache
def _request_compaction_supported() -> bool:
    """Whether this Pydantic AI takes an application summary (`CompactionPart` with metadata) in a request."""
    if _CompactionPart is None or not _has_field_on(_CompactionPart, "metadata"):
        return False
    probe = [{"kind": "request", "parts": [{"part_kind": "compaction", "content": "probe"}]}]
    try:
        _pai.ModelMessagesTypeAdapter.validate_python(probe)
    except ValidationError:
        return False
    return True


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
