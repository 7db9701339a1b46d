"""What a test scripts: the next assistant turn, given the request the emulator received."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Api", "EmulatedRequest", "Script", "ToolCall", "Turn", "tool_loop"]

Api = Literal["anthropic", "openai-chat", "openai-responses", "openai-compact"]


@dataclass(frozen=True)
class ToolCall:
    """One call in a turn; several in one turn are a parallel group."""

    name: str
    """The tool to call (one of the request's tools)."""
    args: dict[str, Any] = field(default_factory=dict)
    """Its arguments, sent as the tool input (Anthropic) or JSON arguments (OpenAI)."""
    id: str | None = None
    """The call id; `None` lets the emulator number it (`toolu_…`, `call_…`)."""


@dataclass(frozen=True)
class Turn:
    """The next assistant turn.

    Example:
        ```python
        reads = [ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})]
        Turn(thinking="Two files to read.", tool_calls=reads)
        Turn(thinking=["first thought", "second thought"], text="Done.")
        ```
    """

    text: str | None = None
    """Visible answer text (after the thinking and before the tool calls)."""
    thinking: str | Sequence[str] | None = None
    """Thinking: Anthropic thinking blocks (one per string), OpenAI Responses one reasoning item whose
    summary parts are the strings; Chat Completions only counts them as reasoning tokens."""
    redacted: bool = False
    """Anthropic: send the thinking as `redacted_thinking` blocks (their `data` carries text and binding)."""
    tool_calls: Sequence[ToolCall] = ()
    """Tool calls, a parallel group when more than one."""

    def thinking_parts(self) -> list[str]:
        if self.thinking is None:
            return []
        return [self.thinking] if isinstance(self.thinking, str) else list(self.thinking)


@dataclass(frozen=True)
class EmulatedRequest:
    """A request as the emulator parsed it, handed to the script and kept by the recorder."""

    api: Api
    """Which API it was sent to."""
    path: str
    """The URL path (`/v1/messages`, `/v1/chat/completions`, `/v1/responses`)."""
    body: dict[str, Any]
    """The JSON body, parsed."""
    headers: dict[str, str]
    """Request headers, lower-cased names."""

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            if isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names

    def text(self) -> str:
        """Every string in the request body, joined: for scripts that look for a phrase."""
        return json.dumps(self.body, ensure_ascii=False)


Script = Callable[[EmulatedRequest], Turn]
"""Receives each accepted request, returns the turn to answer it with."""


def tool_loop(
    tool_turns: int,
    *,
    tool: str,
    args: Callable[[int], dict[str, Any]] = lambda i: {"n": i},
    parallel: int = 1,
    thinking: bool = True,
    final_text: str = "All done.",
    summary_marker: str | None = None,
    summary_text: str = "Summary of the work so far.",
) -> Script:
    """A script for agent runs: `tool_turns` turns of `parallel` calls to `tool`, then `final_text`.

    Stateful (it counts the turns it has played), so it survives any compaction of the history. A
    request whose text contains `summary_marker` (a summarizer's prompt) gets `summary_text` without
    counting as a turn; so does any request that offers no tools.
    """
    played = 0

    def script(request: EmulatedRequest) -> Turn:
        nonlocal played
        if (
            summary_marker is not None and summary_marker in request.text()
        ) or tool not in request.tool_names:
            return Turn(text=summary_text)
        i = played
        played += 1
        thought = f"Step {i}: I will call {tool} {parallel} time(s)." if thinking else None
        if i >= tool_turns:
            return Turn(thinking=f"Step {i}: finished." if thinking else None, text=final_text)
        calls = [ToolCall(tool, args(i * parallel + k)) for k in range(parallel)]
        return Turn(thinking=thought, tool_calls=calls)

    return script
