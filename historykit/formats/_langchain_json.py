"""LangChain message lists as JSON (`messages_to_dict` / `messages_from_dict`): read and write them.

The format itself is the framework's (`historykit.plugins.Framework.read_transcript`); reading
keeps the native messages next to the neutral ones, so a processed history is written back with
every field the processors did not touch. The framework is imported only when a file is read or
written.

Example:
    ```python
    from historykit.formats._langchain_json import read_langchain_json, write_langchain_json

    native, neutral = read_langchain_json("thread.json")
    write_langchain_json(native, "copy.json")
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._frameworks import framework_for_format
from historykit._messages import Message


def read_langchain_json(path: str | Path) -> tuple[list[Any], list[Message]]:
    """The native messages of a `langchain` JSON file and their neutral view."""
    return framework_for_format("langchain").read_transcript(Path(path).expanduser())


def write_langchain_json(messages: Sequence[Any], path: str | Path) -> None:
    """Write a `langchain` history (native messages, or neutral ones, converted) as JSON."""
    framework_for_format("langchain").write_transcript(messages, Path(path).expanduser())
