"""Hypothesis strategies for valid native Pydantic AI histories (Pydantic AI 1.x and 2.x).

`pydantic_ai_histories()` draws a `list[ModelMessage]` the way an agent run leaves it: a first
`ModelRequest` with an optional system prompt, optional `instructions` (carried by every request, as
the agent does, and changed now and then) and the user's task (plain text, or a content list with
`TextContent`, image/document URLs, binary images and cache points); then turns of a `ModelResponse`
(text, thinking signed/unsigned/redacted, single or parallel tool calls in the corpus's tool shapes
(`Read`, shell `cat`/`sed -n`, editor `view`, `Write`), now and then a native (built-in) tool call
with its return, a generated file, usage, ids, provider details) and the `ModelRequest` that answers
it: every tool call answered in the next request, tool results first (a tool return, a failed one,
a screenshot `BinaryContent` in 2.x,
a retry: `RetryPromptPart` in 1.x, `ToolReturnPart(outcome='retried')` in 2.x), then optional user
text; a response without calls is followed by the user's next prompt or by a tool-less retry
(`RetryPromptPart` without a tool name in 1.x, `RetryFeedbackPart` in 2.x). Messages, system
prompts, tool returns and `TextContent` items are sometimes pinned (`metadata[PIN_KEY]`, where the
class has metadata). The history always ends with a `ModelRequest`, the request the model is about to
answer.

Every drawn history round-trips through `ModelMessagesTypeAdapter` JSON, unless `unknown_parts=True`
adds `UnknownPart`s (a part type Pydantic AI does not know, for pass-through tests), which it cannot
serialize.

Example:
    ```python
    from hypothesis import given
    from tests.plugins.pydantic_ai_histories import pydantic_ai_histories

    @given(pydantic_ai_histories(max_turns=3))
    def test_something(history): ...
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st
from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from historykit._messages import PIN_KEY

__all__ = ["UnknownPart", "has_field", "pydantic_ai_histories"]

PATHS = ("src/app.py", "./src/app.py", "src/util/io.py", "README.md", "tests/test_app.py")
WORDS = ("def", "return", "import", "class", "self", "value", "error", "test", "path", "None", "assert", "=")
PROVIDERS = ("anthropic", "openai", "google")
START = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)

# Feature checks: what this Pydantic AI version has.
RETRY_PROMPT_DEPRECATED = getattr(pai.RetryPromptPart, "__deprecated__", None) is not None
TOOL_RETURN_FILES = hasattr(pai.ToolReturnPart, "files")
"""2.x: a tool return holds images and files itself (1.x sent them in a user prompt after it)."""
RetryFeedbackPart: Any = getattr(pai, "RetryFeedbackPart", None)
RetryInfo: Any = getattr(pai, "RetryInfo", None)
ERROR_OUTCOMES: tuple[str, ...] = tuple(getattr(pai, "ERROR_OUTCOMES", ("failed",)))


def has_field(cls: Any, name: str) -> bool:
    """Whether the dataclass `cls` has a field `name` in the installed Pydantic AI."""
    return any(f.name == name for f in dataclasses.fields(cls))


@dataclass
class UnknownPart:
    """A part of a type Pydantic AI does not know (a newer version's, or an application's own)."""

    content: str
    part_kind: str = "unknown-to-historykit"


def _text(draw: st.DrawFn, max_words: int = 12) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=max_words)))


def _metadata(draw: st.DrawFn) -> dict[str, Any] | None:
    return draw(st.sampled_from([None, None, {PIN_KEY: True}, {"app": "note"}, {"app": "x", PIN_KEY: True}]))


class _History:
    """Running state of one drawn history: clock, call ids, usage."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.clock = START
        self.ids: Iterator[int] = iter(range(1, 100_000))
        self.input_tokens = draw(st.integers(50, 500))
        self.run_id = f"run-{draw(st.integers(1, 9))}"

    def now(self) -> datetime:
        self.clock += timedelta(
            seconds=self.draw(st.integers(1, 90)), microseconds=self.draw(st.integers(0, 999))
        )
        return self.clock

    def call_id(self) -> str:
        return f"call_{next(self.ids)}"


def _user_content(draw: st.DrawFn) -> str | list[Any]:
    if draw(st.booleans()):
        return _text(draw, 20)
    items: list[Any] = [_text(draw)]
    for kind in draw(
        st.lists(st.sampled_from(("text", "content", "image", "doc", "binary", "cache")), max_size=4)
    ):
        if kind == "text":
            items.append(_text(draw))
        elif kind == "content":
            items.append(pai.TextContent(_text(draw), metadata=_metadata(draw)))
        elif kind == "image":
            items.append(pai.ImageUrl(f"https://example.com/{draw(st.integers(1, 99))}.png"))
        elif kind == "doc":
            items.append(pai.DocumentUrl(f"https://example.com/spec-{draw(st.integers(1, 99))}.pdf"))
        elif kind == "binary":
            items.append(pai.BinaryContent(draw(st.binary(min_size=1, max_size=64)), media_type="image/png"))
        else:
            items.append(pai.CachePoint())
    return items


def _system_prompt(draw: st.DrawFn, h: _History) -> Any:
    extra: dict[str, Any] = {}
    if has_field(pai.SystemPromptPart, "metadata"):
        extra["metadata"] = _metadata(draw)
    return pai.SystemPromptPart(_text(draw, 30), timestamp=h.now(), **extra)


def _tool_call(draw: st.DrawFn, h: _History) -> Any:
    path = draw(st.sampled_from(PATHS))
    shape = draw(st.sampled_from(("read", "cat", "sed", "view", "write", "string-args", "raw-args")))
    call_id = h.call_id()
    if shape == "read":
        name, args = "Read", {"file_path": path}
    elif shape == "cat":
        name, args = "bash", {"command": f"cat {path}"}
    elif shape == "sed":
        start = draw(st.integers(1, 50))
        name, args = "bash", {"command": f"sed -n '{start},{start + 30}p' {path}"}
    elif shape == "view":
        name, args = "str_replace_editor", {"command": "view", "path": path}
    elif shape == "write":
        name, args = "Write", {"file_path": path, "content": _text(draw, 30)}
    elif shape == "string-args":
        # Models that stream arguments leave them as a JSON string.
        name, args = "Read", f'{{"file_path": "{path}"}}'
    else:
        # Malformed arguments (not a JSON object) are kept as the model sent them.
        name, args = "bash", f"cat {path}"
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra = {
            "id": f"fc_{call_id}",
            "provider_name": "openai",
            "provider_details": {"status": "completed"},
        }
    return pai.ToolCallPart(name, args, call_id, **extra)


def _response(draw: st.DrawFn, h: _History, *, calls: bool, unknown_parts: bool) -> Any:
    provider = draw(st.sampled_from(PROVIDERS))
    parts: list[Any] = []
    thinking = draw(st.sampled_from(("none", "none", "unsigned", "signed", "redacted")))
    if thinking == "unsigned":
        parts.append(pai.ThinkingPart(_text(draw, 30)))
    elif thinking == "signed":
        signature = f"sig-{draw(st.integers(1, 10**9))}"
        parts.append(pai.ThinkingPart(_text(draw, 30), signature=signature, provider_name=provider))
    elif thinking == "redacted":
        parts.append(
            pai.ThinkingPart("", id="redacted_thinking", signature="opaque-data", provider_name="anthropic")
        )
    if draw(st.integers(0, 9)) == 0:
        call_id = h.call_id()
        parts.append(
            pai.NativeToolCallPart("web_search", {"query": _text(draw, 4)}, call_id, provider_name=provider)
        )
        parts.append(
            pai.NativeToolReturnPart(
                "web_search", [{"title": _text(draw, 4)}], call_id, provider_name=provider
            )
        )
    if not calls or draw(st.booleans()):
        text_extra: dict[str, Any] = {}
        if draw(st.booleans()):
            text_extra = {"id": f"msg_{next(h.ids)}", "provider_name": provider, "provider_details": {"k": 1}}
        parts.append(pai.TextPart(_text(draw, 30), **text_extra))
    if draw(st.integers(0, 14)) == 0:
        parts.append(pai.FilePart(pai.BinaryContent(b"\x89PNG...", media_type="image/png")))
    if unknown_parts and draw(st.integers(0, 3)) == 0:
        parts.append(UnknownPart(_text(draw, 4)))
    if calls:
        parts.extend(_tool_call(draw, h) for _ in range(draw(st.integers(1, 3))))
    output_tokens = draw(st.integers(0, 400))
    reported = draw(st.integers(0, 9)) > 0
    usage = (
        RequestUsage(input_tokens=h.input_tokens, output_tokens=output_tokens) if reported else RequestUsage()
    )
    h.input_tokens += output_tokens + draw(st.integers(10, 2000))
    return pai.ModelResponse(
        parts=parts,
        usage=usage,
        model_name=f"{provider}-model",
        timestamp=h.now(),
        provider_name=provider,
        provider_details=draw(st.sampled_from([None, {"finish": "stop"}])),
        provider_response_id=draw(st.sampled_from([None, f"resp_{next(h.ids)}"])),
        finish_reason="tool_call" if calls else "stop",
        run_id=h.run_id,
        metadata=_metadata(draw),
    )


def _answer(draw: st.DrawFn, h: _History, call: Any) -> Any:
    kind = draw(st.sampled_from(("ok", "ok", "ok", "json", "failed", "retry", "image")))
    timestamp = h.now()
    if kind == "retry":
        if RETRY_PROMPT_DEPRECATED:
            return pai.ToolReturnPart(
                call.tool_name, _text(draw), call.tool_call_id, timestamp=timestamp, outcome="retried"
            )
        return pai.RetryPromptPart(_text(draw), tool_name=call.tool_name, tool_call_id=call.tool_call_id)
    if kind == "image" and TOOL_RETURN_FILES:
        # A screenshot as a 2.x tool returns it: the image alone, or after a line of text.
        image = pai.BinaryContent(draw(st.binary(min_size=1, max_size=64)), media_type="image/png")
        content: Any = draw(st.sampled_from((image, [_text(draw, 10), image])))
    elif kind == "json":
        content = draw(
            st.one_of(
                st.dictionaries(st.sampled_from(WORDS), st.integers(-5, 5), max_size=3),
                st.lists(st.integers(0, 9), max_size=4),
                st.integers(0, 100),
            )
        )
    else:
        content = "\n".join(_text(draw, 10) for _ in range(draw(st.integers(1, 8))))
    extra: dict[str, Any] = {"metadata": _metadata(draw)}
    if kind == "failed":
        extra["outcome"] = "failed"
    return pai.ToolReturnPart(call.tool_name, content, call.tool_call_id, timestamp=timestamp, **extra)


def _tool_less_retry(draw: st.DrawFn, h: _History) -> Any:
    if RetryFeedbackPart is not None:
        return RetryFeedbackPart(_text(draw), retry=RetryInfo(cause="model_retry"), timestamp=h.now())
    return pai.RetryPromptPart(_text(draw), timestamp=h.now())


@st.composite
def pydantic_ai_histories(
    draw: st.DrawFn, *, min_turns: int = 0, max_turns: int = 5, unknown_parts: bool = False
) -> list[Any]:
    """A valid Pydantic AI history (see the module docstring); `unknown_parts` adds `UnknownPart`s."""
    h = _History(draw)
    instructions = draw(st.sampled_from([None, "Be brief.", "You are a careful coding agent."]))
    first: list[Any] = []
    if draw(st.booleans()):
        first.append(_system_prompt(draw, h))
    first.append(pai.UserPromptPart(_user_content(draw), timestamp=h.now()))
    messages: list[Any] = [
        pai.ModelRequest(
            first, timestamp=h.now(), instructions=instructions, run_id=h.run_id, metadata=_metadata(draw)
        )
    ]
    for _ in range(draw(st.integers(min_turns, max_turns))):
        calls = draw(st.booleans())
        response = _response(draw, h, calls=calls, unknown_parts=unknown_parts)
        messages.append(response)
        parts: list[Any] = [
            _answer(draw, h, call) for call in response.parts if isinstance(call, pai.ToolCallPart)
        ]
        if not calls and draw(st.integers(0, 4)) == 0:
            parts.append(_tool_less_retry(draw, h))
        elif not calls or draw(st.integers(0, 3)) == 0:
            parts.append(pai.UserPromptPart(_user_content(draw), timestamp=h.now()))
        if unknown_parts and draw(st.integers(0, 4)) == 0:
            parts.append(UnknownPart(_text(draw, 4)))
        if draw(st.integers(0, 9)) == 0:
            instructions = draw(st.sampled_from([None, "Be brief.", "Answer in French."]))
        messages.append(
            pai.ModelRequest(
                parts, timestamp=h.now(), instructions=instructions, run_id=h.run_id, metadata=_metadata(draw)
            )
        )
    return messages
