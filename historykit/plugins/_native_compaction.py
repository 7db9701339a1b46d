"""Provider-native compaction summarizers (`historykit.plugins.native_compaction`): the implementation."""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit._messages import (
    Message,
    ProviderCompaction,
    SummaryPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.processors._summarizers import ExtractiveSummarizer, NativeSummary

ANTHROPIC_COMPACTION_BETA = "compact-2026-09-04"
"""The beta of Anthropic's `compaction` parameter, needed too on every request that sends its block."""

_PREFACE = "[historykit] The conversation so far:"
"""Opens a compaction request whose messages would otherwise start with the assistant."""


# --- neutral messages on the wire ------------------------------------------------------------------


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Messages API `messages` for a compaction request over `messages`.

    Text, tool calls and tool results go as the API takes them (consecutive same-role messages
    merged, tool results first in their turn); thinking, media and parts historykit does not know are
    left out (reasoning is never shown to a summarizer; the compaction keeps no images anyway). An
    earlier summary goes as user text. A tool result whose call is not in the turn before, and the
    calls of a trailing turn with no results yet, become text, so the request keeps the pairing rules.
    """
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for msg in messages:
        if msg.role == "system":
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _anthropic_blocks(msg)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out: list[dict[str, Any]] = []
    offered: set[str] = set()
    for index, (role, blocks) in enumerate(turns):
        if role == "user":
            results = [b for b in blocks if b["type"] == "tool_result" and b["tool_use_id"] in offered]
            rest = [_as_text(b) if b["type"] == "tool_result" else b for b in blocks if b not in results]
            blocks = [*results, *rest]
            offered = set()
        else:
            answered = _answered_ids(turns[index + 1][1]) if index + 1 < len(turns) else set()
            blocks = [
                _as_text(b) if b["type"] == "tool_use" and b["id"] not in answered else b for b in blocks
            ]
            offered = {b["id"] for b in blocks if b["type"] == "tool_use"}
        out.append({"role": role, "content": blocks})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": _PREFACE}]})
    return out


def _anthropic_blocks(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in msg.parts:
        if isinstance(part, (TextPart, SummaryPart)) and part.text.strip():
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart) and msg.role == "assistant":
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments_dict()}
            )
        elif isinstance(part, ToolResultPart):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id,
                "content": part.content or "(empty)",
            }
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
    return blocks


def _answered_ids(blocks: list[dict[str, Any]]) -> set[str]:
    return {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}


def _as_text(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "tool_use":
        text = f"[call of {block['name']}] {json.dumps(block['input'], sort_keys=True)}"
    else:
        text = f"[tool result] {block['content']}"
    return {"type": "text", "text": text}


def responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Responses API `input` items for a compaction over `messages`.

    Messages as `message` items (user `input_text`, assistant `output_text`), tool calls as
    `function_call` items and their results as `function_call_output`; thinking, media and unknown
    parts left out. An earlier summary OpenAI wrote goes as its own compaction item (its text is only
    historykit's stand-in), any other as user text. A result without its call, and a call without
    its result, become text (the endpoint refuses both).
    """
    items: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            continue
        for part in msg.parts:
            if isinstance(part, SummaryPart) and _is_openai(part.provider_compaction):
                assert part.provider_compaction is not None
                items.append(_compaction_item(part.provider_compaction.block_dict()))
            elif isinstance(part, (TextPart, SummaryPart)) and part.text.strip():
                assistant = msg.role == "assistant"
                kind = "output_text" if assistant else "input_text"
                items.append(
                    {
                        "type": "message",
                        "role": "assistant" if assistant else "user",
                        "content": [{"type": kind, "text": part.text}],
                    }
                )
            elif isinstance(part, ToolCallPart) and msg.role == "assistant":
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part.id,
                        "name": part.name,
                        "arguments": part.arguments_text(),
                    }
                )
            elif isinstance(part, ToolResultPart):
                items.append(
                    {"type": "function_call_output", "call_id": part.tool_call_id, "output": part.content}
                )
    calls = {i["call_id"] for i in items if i["type"] == "function_call"}
    outputs = {i["call_id"] for i in items if i["type"] == "function_call_output"}
    fixed: list[dict[str, Any]] = []
    for item in items:
        if item["type"] == "function_call" and item["call_id"] not in outputs:
            item = _user_text(f"[call of {item['name']}] {item['arguments']}")
        elif item["type"] == "function_call_output" and item["call_id"] not in calls:
            item = _user_text(f"[tool result] {item['output']}")
        fixed.append(item)
    return fixed


def _takes(method: Any, name: str) -> bool:
    """Whether an SDK method has the keyword parameter `name` (a feature check, not a version check)."""
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: assume the current SDK
        return True


def _user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _compaction_item(block: dict[str, Any]) -> dict[str, Any]:
    return {k: block[k] for k in ("type", "id", "encrypted_content") if k in block}


def _is_openai(compaction: ProviderCompaction | None) -> bool:
    return compaction is not None and compaction.provider == "openai"


def _dump(obj: Any) -> dict[str, Any]:
    """An SDK model (or a dict) as a plain dict without `None` fields."""
    if isinstance(obj, dict):
        return {k: v for k, v in obj.items() if v is not None}
    dumped = obj.model_dump(exclude_none=True, mode="json")
    assert isinstance(dumped, dict)
    return dumped


# --- the backends ---------------------------------------------------------------------------------


@dataclass
class AnthropicCompactionSummarizer:
    """Summarizes with Anthropic's on-demand compaction (`compaction={"type": "summarize"}`).

    The compaction request sends the messages to cover (see `anthropic_messages`) to `model` through
    `client.beta.messages.create` with the beta `compact-2026-09-04`; the response's signed
    `compaction` block becomes the summary's `provider_compaction`, its readable `content` the
    summary text. A request Anthropic refuses (a model without on-demand compaction, a missing
    beta) or a response without a summary raises, which `Summarize` retries and then falls back from.

    Example:
        ```python
        import anthropic
        from historykit.processors import Summarize, Trigger
        from historykit.plugins.native_compaction import AnthropicCompactionSummarizer

        native = AnthropicCompactionSummarizer(anthropic.AsyncAnthropic(), "claude-opus-5-5")
        Summarize(trigger=Trigger(max_fraction=0.8), summarizer=native)
        ```
    """

    client: Any
    """An `anthropic.Anthropic` or `anthropic.AsyncAnthropic` (the summary is awaited with the latter)."""
    model: str
    """A model with on-demand compaction; on a model that binds thinking, the conversation's own."""
    max_tokens: int = 8_192
    """Room for the summary (a summary cut short by it is no summary: the call fails)."""
    instructions: str | None = None
    """Replaces Anthropic's summarization prompt (its whole prompt: say everything it must keep)."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """More request fields, passed as they are (e.g. `{"metadata": {...}}`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise InvalidArgumentError(f"model must be a non-empty model id, got {self.model!r}")
        messages_api = getattr(getattr(getattr(self.client, "beta", None), "messages", None), "create", None)
        if not callable(messages_api):
            raise ArgumentTypeError(
                "client must be an anthropic.Anthropic or AsyncAnthropic, got a "
                f"{type(self.client).__qualname__}"
            )

    @property
    def model_name(self) -> str:
        """What the compaction marker records."""
        return f"anthropic-compaction:{self.model}"

    def __call__(self, messages: Sequence[Message]) -> Any:
        request = self._request(messages)
        create = self.client.beta.messages.create
        if not _takes(create, "compaction"):
            # An SDK from before on-demand compaction (anthropic < 2): the field goes as extra body.
            request["extra_body"] = {**request.get("extra_body", {}), "compaction": request.pop("compaction")}
        response = create(**request)
        if inspect.isawaitable(response):  # an async client: the caller awaits the summary
            return self._finish_async(response)
        return self._finish(response)

    def _request(self, messages: Sequence[Message]) -> dict[str, Any]:
        wire = anthropic_messages(messages)
        if not wire:
            raise InvalidArgumentError(
                "nothing to compact: the messages hold no text, tool call or tool result"
            )
        compaction: dict[str, Any] = {"type": "summarize"}
        if self.instructions and self.instructions.strip():
            compaction["instructions"] = self.instructions
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": wire,
            "compaction": compaction,
            "betas": [ANTHROPIC_COMPACTION_BETA],
            **({"extra_body": self.extra_body} if self.extra_body else {}),
        }

    async def _finish_async(self, pending: Any) -> NativeSummary:
        return self._finish(await pending)

    def _finish(self, response: Any) -> NativeSummary:
        blocks = [_dump(b) for b in getattr(response, "content", None) or []]
        block = next((b for b in blocks if b.get("type") == "compaction"), None)
        content = block.get("content") if block is not None else None
        if block is None or not isinstance(content, str) or not content.strip():
            stop = getattr(response, "stop_reason", None)
            raise RuntimeError(f"Anthropic returned no compaction summary (stop reason {stop!r})")
        compaction = ProviderCompaction("anthropic", self.model, json.dumps(block, sort_keys=True))
        return NativeSummary(content, compaction)


@dataclass
class OpenAICompactionSummarizer:
    """Summarizes with OpenAI's `POST /responses/compact` (`client.responses.compact`).

    The endpoint returns the input's user messages and one encrypted `compaction` item; the item
    becomes the summary's `provider_compaction`. It cannot be read, so the summary text is
    `ExtractiveSummarizer`'s, headed by a line naming the item: what other providers and historykit's
    checks see. A refused request or an output without a compaction item raises, which `Summarize`
    retries and then falls back from.

    Example:
        ```python
        import openai
        from historykit.processors import Summarize, Trigger
        from historykit.plugins.native_compaction import OpenAICompactionSummarizer

        native = OpenAICompactionSummarizer(openai.AsyncOpenAI(), "gpt-5")
        Summarize(trigger=Trigger(max_fraction=0.8), summarizer=native)
        ```
    """

    client: Any
    """An `openai.OpenAI` or `openai.AsyncOpenAI` (the summary is awaited with the latter)."""
    model: str
    """The model that compacts (the conversation's, for its item to be read back)."""
    instructions: str | None = None
    """Instructions for the compaction request (the agent's instructions otherwise go unsaid)."""
    stand_in: ExtractiveSummarizer = field(default_factory=ExtractiveSummarizer)
    """Writes the readable text that stands for the encrypted item everywhere but at OpenAI."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise InvalidArgumentError(f"model must be a non-empty model id, got {self.model!r}")
        compact = getattr(getattr(self.client, "responses", None), "compact", None)
        if not callable(compact):
            raise ArgumentTypeError(
                f"client must be an openai.OpenAI or AsyncOpenAI with responses.compact, got a "
                f"{type(self.client).__qualname__}"
            )

    @property
    def model_name(self) -> str:
        """What the compaction marker records."""
        return f"openai-compaction:{self.model}"

    def __call__(self, messages: Sequence[Message]) -> Any:
        items = responses_input(messages)
        if not items:
            raise InvalidArgumentError(
                "nothing to compact: the messages hold no text, tool call or tool result"
            )
        request: dict[str, Any] = {"model": self.model, "input": items}
        if self.instructions:
            request["instructions"] = self.instructions
        response = self.client.responses.compact(**request)
        if inspect.isawaitable(response):  # an async client: the caller awaits the summary
            return self._finish_async(response, messages)
        return self._finish(response, messages)

    async def _finish_async(self, pending: Any, messages: Sequence[Message]) -> NativeSummary:
        return self._finish(await pending, messages)

    def _finish(self, response: Any, messages: Sequence[Message]) -> NativeSummary:
        output = getattr(response, "output", None) or []
        # Only the last item is the compaction; the user messages before it are the input's own.
        item = _dump(output[-1]) if output else None
        if item is None or item.get("type") != "compaction" or not item.get("encrypted_content"):
            found = item.get("type") if item is not None else "nothing"
            raise RuntimeError(
                f"OpenAI's compaction returned no compaction item (the output ends in {found})"
            )
        compaction = ProviderCompaction(
            "openai", self.model, json.dumps(_compaction_item(item), sort_keys=True)
        )
        head = (
            f"OpenAI holds the full summary in its encrypted compaction item {item.get('id', '')} "
            f"({self.model}); this is historykit's extractive summary of the same messages."
        )
        return NativeSummary(f"{head}\n\n{self.stand_in(messages)}", compaction)
