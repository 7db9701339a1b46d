"""The corpus format: one OpenAI chat-completions style message per JSONL line.

Fields (see the corpus README): `role`, `content`, and `tool_calls` (`id`, `name`,
`arguments` as a JSON string) and `reasoning` on assistant messages, `tool_call_id` and `name` on
tool messages. The messages it yields have no native object: an adapter's `to_native` turns them
into a framework's own messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from historykit.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = ["chat_record_to_message", "read_chat_jsonl"]

_ROLES = ("system", "user", "assistant", "tool")


def chat_record_to_message(record: dict[str, Any], where: str = "record") -> Message:
    """One chat record as a neutral message; `ValueError` naming `where` and the bad field."""
    role = record.get("role")
    if role not in _ROLES:
        raise ValueError(f"{where}: unknown role {role!r} (expected one of {', '.join(_ROLES)})")
    content = record.get("content") or ""
    if not isinstance(content, str):
        raise ValueError(f"{where}: 'content' must be a string, got {type(content).__name__}")
    if role == "tool":
        call_id = record.get("tool_call_id")
        if not call_id:
            raise ValueError(f"{where}: a tool message needs a 'tool_call_id'")
        return Message("tool", (ToolResultPart(call_id, record.get("name"), content),))
    parts: list[Part] = []
    if role == "assistant" and record.get("reasoning"):
        parts.append(ThinkingPart(record["reasoning"]))
    if content:
        parts.append(TextPart(content))
    for n, call in enumerate(record.get("tool_calls") or ()):
        if not call.get("id") or not call.get("name"):
            raise ValueError(f"{where}: tool call {n} needs an 'id' and a 'name'")
        arguments = call.get("arguments", "")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else arguments
        except ValueError:
            parsed = arguments
        parts.append(
            ToolCallPart(call["id"], call["name"], parsed if isinstance(parsed, dict) else arguments)
        )
    if role != "assistant" and not parts:
        # An empty user/system message is kept (nothing is silently dropped); check() reports it.
        parts.append(TextPart(""))
    return Message(role, tuple(parts))


def read_chat_jsonl(path: str | Path) -> list[Message]:
    """Read a corpus-format JSONL file; `ValueError` names the line that is not valid."""
    path = Path(path)
    return list(_read_lines(path.read_text(encoding="utf-8").splitlines(), str(path)))


def _read_lines(lines: Iterable[str], name: str) -> Iterable[Message]:
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{name}:{lineno}: expected a JSON object, got {type(record).__name__}")
        yield chat_record_to_message(record, f"{name}:{lineno}")
