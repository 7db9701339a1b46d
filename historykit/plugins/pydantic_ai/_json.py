"""Pydantic AI message histories as JSON: what `ModelMessagesTypeAdapter` dumps and loads.

This is how Pydantic AI applications persist a conversation
(`ModelMessagesTypeAdapter.dump_json(result.all_messages())`). Reading keeps the native messages
next to the neutral ones, so a processed history is written back with every field the processors
did not touch (ids, timestamps, usage, provider details). Pydantic AI is imported only when such a
file is read or written.

Used by `PydanticAIFramework.read_transcript` (`historykit.formats.read_transcript`).

Example:
    ```python
    from historykit.plugins.pydantic_ai._json import read_pydantic_ai_json, write_pydantic_ai_json

    native, neutral = read_pydantic_ai_json("conversation.json")
    write_pydantic_ai_json(native, "copy.json")
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._messages import Message
from historykit.formats._detect import TranscriptFormatError


def _framework() -> tuple[Any, Any]:
    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        from historykit.plugins.pydantic_ai._adapter import PydanticAIAdapter
    except ImportError as exc:
        raise ImportError(
            f"reading or writing Pydantic AI JSON needs pydantic-ai ({exc}): "
            "pip install 'historykit[pydantic-ai]'"
        ) from exc
    return ModelMessagesTypeAdapter, PydanticAIAdapter()


def read_pydantic_ai_json(path: str | Path) -> tuple[list[Any], list[Message]]:
    """The native messages of a Pydantic AI JSON file and their neutral view."""
    from pydantic import ValidationError

    path = Path(path).expanduser()
    type_adapter, adapter = _framework()
    data = path.read_bytes()
    try:
        native = list(type_adapter.validate_json(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise TranscriptFormatError(
            f"{path}: not a valid Pydantic AI message history: {first.get('msg')} at {where or 'the top'} "
            f"({exc.error_count()} error(s))"
        ) from None
    if not native:
        raise TranscriptFormatError(f"{path}: an empty list: no messages to read")
    return native, adapter.to_neutral(native)


def write_pydantic_ai_json(messages: Sequence[Any], path: str | Path) -> None:
    """Write a Pydantic AI history (native messages, or neutral ones, converted) as JSON."""
    path = Path(path).expanduser()
    type_adapter, adapter = _framework()
    native = adapter.to_native(messages) if messages and isinstance(messages[0], Message) else list(messages)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(type_adapter.dump_json(native, indent=2))
    tmp.replace(path)
