"""Hypothesis strategies for valid LangChain (langchain-core 1.x) message histories.

`langchain_histories()` draws a list of real langchain-core messages shaped the way LangChain's
provider integrations produce them, and valid for every provider (the rules of
`docs/provider-rules.md`):

- an optional `SystemMessage` first (a string, or text blocks with an Anthropic `cache_control`);
- user turns: a `HumanMessage` with a string, or with text plus media blocks (standard `image` /
  `file` / `text-plain` blocks, OpenAI `image_url`, Anthropic `image` with a `source`);
- inside a user turn, tool cycles: an `AIMessage` making one call or a parallel group of calls,
  followed right away by one `ToolMessage` per call, in call order (content a string or a list,
  `status="error"` sometimes, an `artifact` sometimes);
- a final `AIMessage` answer closing each turn (the last turn may instead stop after its tool
  results, or right after the user message: the model's turn);
- assistant messages in one of the `AI_STYLES`: `openai` (string content, `tool_calls`),
  `anthropic` (signed `thinking` / `redacted_thinking`, `text` and `tool_use` blocks repeating
  `tool_calls`), `v1` (standard `reasoning`, `text` and `tool_call` blocks), `deepseek`
  (`additional_kwargs["reasoning_content"]`), `responses` (`additional_kwargs["reasoning"]`, an OpenAI
  Responses reasoning item with summary and encrypted content);
- `usage_metadata` and message `id`s on some messages (ids unique within a history, tool call ids
  unique too), `response_metadata` naming the provider, and, when `unknown_blocks=True`, the
  occasional block of a type nobody knows (which must pass through untouched).

Every text is non-empty and not only whitespace. Example:

    ```python
    from hypothesis import given
    from tests.plugins.langchain_histories import langchain_histories

    @given(langchain_histories(max_turns=3))
    def test_something(history):
        ...
    ```
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["AI_STYLES", "TOOL_NAMES", "langchain_histories", "texts"]

AI_STYLES = ("openai", "anthropic", "v1", "deepseek", "responses")
"""The shapes an assistant message can take (see the module docstring)."""

TOOL_NAMES = ("read_file", "bash", "grep", "edit_file")
"""Tool names the generated calls use."""

_UNKNOWN_BLOCKS = (
    {"type": "x-vendor-annotation", "payload": {"score": 0.5}},
    {"type": "citations_delta", "citation": {"cited_text": "see above"}},
    {"type": "custom", "value": [1, 2, 3]},
)

_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
_PDF = base64.b64encode(b"%PDF-1.4\n% generated for a test\n").decode()


def texts(max_size: int = 60) -> st.SearchStrategy[str]:
    """Non-empty text with some non-whitespace (providers reject empty text blocks)."""
    alphabet = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), include_characters="\n\t")
    return st.text(alphabet, min_size=1, max_size=max_size).filter(lambda s: bool(s.strip()))


def _arguments() -> st.SearchStrategy[dict[str, Any]]:
    values = st.one_of(st.integers(-1000, 1000), st.booleans(), texts(20), st.none())
    return st.dictionaries(
        st.sampled_from(["path", "command", "pattern", "line", "limit"]), values, max_size=3
    )


def _usage() -> st.SearchStrategy[dict[str, Any] | None]:
    def build(pair: tuple[int, int]) -> dict[str, Any]:
        return {"input_tokens": pair[0], "output_tokens": pair[1], "total_tokens": pair[0] + pair[1]}

    return st.none() | st.tuples(st.integers(0, 200_000), st.integers(0, 8_000)).map(build)


class _Ids:
    """Counters that keep message and call ids unique within one history."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def message(self, draw: st.DrawFn, prefix: str) -> str | None:
        return f"{prefix}{next(self._next):04d}" if draw(st.booleans()) else None

    def call(self, style: str) -> str:
        prefix = {"anthropic": "toolu_", "responses": "call_", "openai": "call_"}.get(style, "tc_")
        return f"{prefix}{next(self._next):05d}"


def _media_block(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(["image-url", "image-b64", "image_url", "anthropic-image", "file", "text-plain"])
    )
    if kind == "image-url":
        return {"type": "image", "url": f"https://example.com/{draw(st.integers(0, 99))}.png"}
    if kind == "image-b64":
        return {"type": "image", "base64": _PNG, "mime_type": "image/png"}
    if kind == "image_url":
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_PNG}"}}
    if kind == "anthropic-image":
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG}}
    if kind == "file":
        return {
            "type": "file",
            "base64": _PDF,
            "mime_type": "application/pdf",
            "extras": {"filename": "a.pdf"},
        }
    return {"type": "text-plain", "text": draw(texts()), "mime_type": "text/plain"}


def _human(draw: st.DrawFn, ids: _Ids, unknown: bool) -> HumanMessage:
    text = draw(texts(120))
    message_id = ids.message(draw, "human-")
    if not draw(st.booleans()):
        return HumanMessage(content=text, id=message_id)
    blocks: list[Any] = [{"type": "text", "text": text}]
    blocks += [_media_block(draw) for _ in range(draw(st.integers(0, 2)))]
    if unknown and draw(st.integers(0, 4)) == 0:
        blocks.append(dict(draw(st.sampled_from(_UNKNOWN_BLOCKS))))
    return HumanMessage(content=blocks, id=message_id)


def _ai(
    draw: st.DrawFn, ids: _Ids, style: str, calls: Sequence[tuple[str, str, dict[str, Any]]], unknown: bool
) -> AIMessage:
    """One assistant message in `style`, making `calls` (id, name, args); a final answer when empty."""
    text = draw(texts(120)) if not calls or draw(st.booleans()) else ""
    tool_calls = [{"id": i, "name": n, "args": a} for i, n, a in calls]
    fields: dict[str, Any] = {"tool_calls": tool_calls, "usage_metadata": draw(_usage())}
    reasoning = draw(st.none() | texts(200))
    content: Any
    if style == "openai":
        fields["response_metadata"] = {
            "model_provider": "openai",
            "model_name": "gpt-4.1",
            "finish_reason": "stop",
        }
        fields["id"] = ids.message(draw, "chatcmpl-")
        content = text
    elif style == "deepseek":
        fields["response_metadata"] = {"model_provider": "deepseek", "model_name": "deepseek-reasoner"}
        fields["id"] = ids.message(draw, "ds-")
        if reasoning:
            fields["additional_kwargs"] = {"reasoning_content": reasoning}
        content = text
    elif style == "responses":
        fields["response_metadata"] = {"model_provider": "openai", "id": "resp_0001", "model_name": "o4-mini"}
        fields["id"] = ids.message(draw, "msg_")
        if reasoning:
            item: dict[str, Any] = {
                "id": f"rs_{draw(st.integers(0, 10**6)):07d}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reasoning}],
            }
            if draw(st.booleans()):
                item["encrypted_content"] = "gAAAA" + draw(
                    st.text("abcdef0123456789", min_size=8, max_size=24)
                )
            fields["additional_kwargs"] = {"reasoning": item}
        content = [{"type": "text", "text": text}] if text else []
    elif style == "anthropic":
        fields["response_metadata"] = {"model_provider": "anthropic", "model_name": "claude-sonnet-4-5"}
        fields["id"] = ids.message(draw, "msg_")
        content = []
        if reasoning:
            signature = "Eq" + draw(
                st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/", min_size=8, max_size=40)
            )
            content.append({"type": "thinking", "thinking": reasoning, "signature": signature})
        if draw(st.integers(0, 5)) == 0:
            content.append(
                {"type": "redacted_thinking", "data": "EmwKAhgB" + draw(st.text("abcdef", min_size=4))}
            )
        if text:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    else:  # v1: standard content blocks, the output of output_version="v1"
        fields["response_metadata"] = {"model_provider": "anthropic", "output_version": "v1"}
        fields["id"] = ids.message(draw, "lc_run--")
        content = []
        if reasoning:
            block: dict[str, Any] = {"type": "reasoning", "reasoning": reasoning}
            if draw(st.booleans()):
                block["extras"] = {"signature": "Eq" + draw(st.text("ABCDEF0123", min_size=8, max_size=20))}
            content.append(block)
        if text:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_call", "id": i, "name": n, "args": a} for i, n, a in calls]
    if unknown and isinstance(content, list) and draw(st.integers(0, 5)) == 0:
        content.insert(draw(st.integers(0, len(content))), dict(draw(st.sampled_from(_UNKNOWN_BLOCKS))))
    return AIMessage(content=content, **fields)


def _tool_result(draw: st.DrawFn, ids: _Ids, call_id: str, name: str) -> ToolMessage:
    shape = draw(st.sampled_from(["str", "str", "blocks", "image"]))
    text = draw(texts(300))
    content: Any = text
    if shape == "blocks":
        content = [{"type": "text", "text": text}]
    elif shape == "image":
        content = [
            {"type": "text", "text": text},
            {"type": "image", "base64": _PNG, "mime_type": "image/png"},
        ]
    fields: dict[str, Any] = {"tool_call_id": call_id, "name": name, "id": ids.message(draw, "tool-")}
    if draw(st.integers(0, 5)) == 0:
        fields["status"] = "error"
    if draw(st.integers(0, 5)) == 0:
        fields["artifact"] = {"exit_code": draw(st.integers(0, 2))}
    return ToolMessage(content=content, **fields)


@st.composite
def langchain_histories(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 4,
    max_tool_cycles: int = 3,
    max_parallel: int = 3,
    styles: Sequence[str] = AI_STYLES,
    system: bool | None = None,
    unknown_blocks: bool = True,
) -> list[BaseMessage]:
    """A valid LangChain history.

    Args:
        min_turns: fewest user turns.
        max_turns: most user turns.
        max_tool_cycles: most assistant tool-call messages (each with its results) in one turn.
        max_parallel: most calls in one assistant message (a parallel group when more than one).
        styles: the assistant message shapes to draw from (a subset of `AI_STYLES`); one history
            uses one style, as one provider would produce it.
        system: `True` / `False` forces a system message in or out; `None` draws.
        unknown_blocks: whether to sprinkle blocks of unknown types (they must pass through).
    """
    ids = _Ids()
    style = draw(st.sampled_from(list(styles)))
    history: list[BaseMessage] = []
    if system if system is not None else draw(st.booleans()):
        if draw(st.booleans()):
            history.append(SystemMessage(content=draw(texts(200)), id=ids.message(draw, "sys-")))
        else:
            blocks: list[Any] = [
                {"type": "text", "text": draw(texts(200)), "cache_control": {"type": "ephemeral"}}
            ]
            history.append(SystemMessage(content=blocks))
    turns = draw(st.integers(min_turns, max_turns))
    for turn in range(turns):
        history.append(_human(draw, ids, unknown_blocks))
        last = turn == turns - 1
        for _ in range(draw(st.integers(0, max_tool_cycles))):
            count = draw(st.integers(1, max_parallel))
            calls = [
                (ids.call(style), draw(st.sampled_from(TOOL_NAMES)), draw(_arguments())) for _ in range(count)
            ]
            history.append(_ai(draw, ids, style, calls, unknown_blocks))
            history.extend(_tool_result(draw, ids, call_id, name) for call_id, name, _ in calls)
        if not last or draw(st.integers(0, 3)) > 0:
            history.append(_ai(draw, ids, style, [], unknown_blocks))
    return history
