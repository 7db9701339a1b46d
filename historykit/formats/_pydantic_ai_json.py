"""Pydantic AI message histories as JSON (`ModelMessagesTypeAdapter`): read and write them.

The format itself is the framework's (`historykit.plugins.Framework.read_transcript`); reading
keeps the native messages next to the neutral ones, so a processed history is written back with
every field the processors did not touch. The framework is imported only when a file is read or
written.

Example:
    ```python
    from historykit.formats._pydantic_ai_json import read_pydantic_ai_json, write_pydantic_ai_json

    native, neutral = read_pydantic_ai_json("conversation.json")
    write_pydantic_ai_json(native, "copy.json")
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._frameworks import framework_for_format
from historykit._messages import Message


def read_pydantic_ai_json(path: str | Path) -> tuple[list[Any], list[Message]]:
    """The native messages of a `pydantic-ai` JSON file and their neutral view."""
    return framework_for_format("pydantic-ai").read_transcript(Path(path).expanduser())


def write_pydantic_ai_json(messages: Sequence[Any], path: str | Path) -> None:
    """Write a `pydantic-ai` history (native messages, or neutral ones, converted) as JSON."""
    framework_for_format("pydantic-ai").write_transcript(messages, Path(path).expanduser())
