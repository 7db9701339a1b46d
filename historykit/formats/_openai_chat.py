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

from historykit._messages import (
    MediaPart,
    Message,
    OtherPart,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.errors import ArgumentTypeError, TranscriptFormatError

_ROLES = ("system", "user", "assistant", "tool")


def chat_record_to_message(record: dict[str, Any], where: str = "record") -> Message:
    """One chat record as a neutral message; `TranscriptFormatError` naming `where` and the bad field."""
    role = record.get("role")
    if role not in _ROLES:
        raise TranscriptFormatError(f"{where}: unknown role {role!r} (expected one of {', '.join(_ROLES)})")
    content = record.get("content") or ""
    if not isinstance(content, str):
        raise TranscriptFormatError(f"{where}: 'content' must be a string, got {type(content).__name__}")
    if role == "tool":
        call_id = record.get("tool_call_id")
        if not call_id:
            raise TranscriptFormatError(f"{where}: a tool message needs a 'tool_call_id'")
        return Message("tool", (ToolResultPart(call_id, record.get("name"), content),))
    parts: list[Part] = []
    if role == "assistant" and record.get("reasoning"):
        parts.append(ThinkingPart(record["reasoning"]))
    if content:
        parts.append(TextPart(content))
    for n, call in enumerate(record.get("tool_calls") or ()):
        if not call.get("id") or not call.get("name"):
            raise TranscriptFormatError(f"{where}: tool call {n} needs an 'id' and a 'name'")
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
    """Read a corpus-format JSONL file; `TranscriptFormatError` names the line that is not valid."""
    path = Path(path)
    return list(_read_lines(path.read_text(encoding="utf-8").splitlines(), str(path)))


def _read_lines(lines: Iterable[str], name: str) -> Iterable[Message]:
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptFormatError(f"{name}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise TranscriptFormatError(
                f"{name}:{lineno}: expected a JSON object, got {type(record).__name__}"
            )
        yield chat_record_to_message(record, f"{name}:{lineno}")


def message_to_chat_records(message: Message) -> list[dict[str, Any]]:
    """The chat records of one neutral message: the inverse of `chat_record_to_message`.

    Tool results become one `tool` record each (placed first: they answer the previous assistant
    message); the other parts form one record of the message's role, whose `content` joins its
    text, summaries and the text renderings of parts the format cannot hold (media, unknown parts)
    with blank lines. Thinking becomes `reasoning` on assistant records.
    """
    records: list[dict[str, Any]] = [
        {"role": "tool", "content": p.content, "tool_call_id": p.tool_call_id, "name": p.name}
        for p in message.parts
        if isinstance(p, ToolResultPart)
    ]
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, (TextPart, SummaryPart)):
            texts.append(part.text)
        elif isinstance(part, ThinkingPart):
            if part.text:
                reasoning.append(part.text)
        elif isinstance(part, ToolCallPart):
            calls.append({"id": part.id, "name": part.name, "arguments": part.arguments_text()})
        elif isinstance(part, MediaPart):
            texts.append(f"[{part.media_type}{': ' + part.source if part.source else ''}]")
        elif isinstance(part, OtherPart) and part.text:
            texts.append(part.text)
    role = "user" if message.role == "tool" else message.role
    if message.role == "assistant":
        record: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
        if calls:
            record["tool_calls"] = calls
        if reasoning:
            record["reasoning"] = "\n\n".join(reasoning)
        records.append(record)
    elif texts or not records:
        records.append({"role": role, "content": "\n\n".join(texts)})
    return records


def write_chat_jsonl(messages: Iterable[Message], path: str | Path) -> None:
    """Write neutral messages as a corpus-format JSONL file (written whole, then moved into place)."""
    path = Path(path)
    lines: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise ArgumentTypeError(
                f"message {index} is a {type(message).__name__}, not a historykit Message"
            )
        lines.extend(
            json.dumps(record, ensure_ascii=False) + "\n" for record in message_to_chat_records(message)
        )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8", newline="\n")
    tmp.replace(path)
