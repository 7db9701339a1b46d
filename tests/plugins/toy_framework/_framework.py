"""The toy framework's adapter and `Framework` object."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._frameworks import Adapter, SummarizerFn
from historykit._messages import PIN_KEY, Message, Part, ReportedUsage, TextPart, ToolCallPart, ToolResultPart
from tests.plugins.toy_framework._messages import ToyMessage


class ToyModel:
    """A toy framework model: summarizes by saying how many messages it read."""

    model_name = "toy-1"

    async def complete(self, messages: Sequence[Message]) -> str:
        return f"## Task\nread {len(messages)} messages"


class ToyAdapter:
    """`ToyMessage` lists to and from neutral messages; untouched ones come back as themselves."""

    framework = "toy"

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        out: list[Message] = []
        for msg in messages:
            parts: list[Part] = []
            if msg.role == "tool":
                parts.append(ToolResultPart(msg.answers or "", None, msg.text))
            elif msg.text:
                parts.append(TextPart(msg.text))
            parts += [ToolCallPart(i, n, a) for i, n, a in msg.calls]
            usage = ReportedUsage(msg.reported_tokens) if msg.reported_tokens else None
            out.append(
                Message.from_native(msg.role, parts, msg, usage=usage, pinned=bool(msg.metadata.get(PIN_KEY)))
            )
        return out

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        out: list[Any] = []
        for msg in messages:
            if msg.is_untouched:
                out.append(msg.native)
                continue
            text = "".join(getattr(p, "text", "") or getattr(p, "content", "") for p in msg.parts)
            calls = tuple((p.id, p.name, p.arguments) for p in msg.parts if isinstance(p, ToolCallPart))
            answers = next((p.tool_call_id for p in msg.parts if isinstance(p, ToolResultPart)), None)
            out.append(ToyMessage(msg.role, text, calls, answers))  # type: ignore[arg-type]
        return out


class ToyFramework:
    """The toy framework as the core sees it."""

    name = "toy"
    title = "Toy"
    format = "toy"

    def owns(self, cls: type) -> bool:
        return cls.__module__.startswith("tests.plugins.toy_framework.")

    def adapter(self) -> Adapter:
        return ToyAdapter()

    def reported_tokens(self, message: Any) -> int | None:
        return message.reported_tokens if message.role == "assistant" else None

    def read_transcript(self, path: Path) -> tuple[list[Any], list[Message]]:
        native = [ToyMessage(d["role"], d["text"]) for d in json.loads(path.read_text(encoding="utf-8"))]
        return native, ToyAdapter().to_neutral(native)

    def write_transcript(self, messages: Sequence[Any], path: Path) -> None:
        native = (
            ToyAdapter().to_native(messages) if messages and isinstance(messages[0], Message) else messages
        )
        path.write_text(json.dumps([{"role": m.role, "text": m.text} for m in native]), encoding="utf-8")

    def pin(self, obj: Any) -> Any:
        return dataclasses.replace(obj, metadata={**obj.metadata, PIN_KEY: True})

    def summarizer(self, model: Any, budget_tokens: int) -> SummarizerFn | None:
        return model.complete if isinstance(model, ToyModel) else None
