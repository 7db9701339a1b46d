"""LangChain message lists as JSON: what `messages_to_dict` gives and `messages_from_dict` takes.

Reading keeps the native messages next to the neutral ones, so a processed history is written
back with every field the processors did not touch (message ids, `additional_kwargs`,
`response_metadata`, usage). LangChain is imported only when such a file is read or written.

Used by `LangChainFramework.read_transcript` (`historykit.formats.read_transcript`).

Example:
    ```python
    from historykit.plugins.langchain._json import read_langchain_json, write_langchain_json

    native, neutral = read_langchain_json("thread.json")
    write_langchain_json(native, "copy.json")
    ```
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._messages import Message
from historykit.formats._detect import TranscriptFormatError


def _framework() -> tuple[Any, Any, Any]:
    try:
        from langchain_core.messages import messages_from_dict, messages_to_dict

        from historykit.plugins.langchain._adapter import LangChainAdapter
    except ImportError as exc:
        raise ImportError(
            f"reading or writing LangChain JSON needs langchain-core ({exc}): "
            "pip install 'historykit[langgraph]'"
        ) from exc
    return messages_from_dict, messages_to_dict, LangChainAdapter()


def read_langchain_json(path: str | Path) -> tuple[list[Any], list[Message]]:
    """The native messages of a LangChain JSON file and their neutral view."""
    from pydantic import ValidationError

    path = Path(path).expanduser()
    from_dict, _, adapter = _framework()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TranscriptFormatError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(data, list):
        raise TranscriptFormatError(
            f"{path}: expected a JSON list of LangChain messages, got {type(data).__name__}"
        )
    if not data:
        raise TranscriptFormatError(f"{path}: an empty list: no messages to read")
    native: list[Any] = []
    for index, item in enumerate(data):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("type"), str)
            or not isinstance(item.get("data"), dict)
        ):
            raise TranscriptFormatError(f"{path}: message {index} is not an object with 'type' and 'data'")
        try:
            native.extend(from_dict([item]))
        except (KeyError, ValueError, TypeError, ValidationError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TranscriptFormatError(
                f"{path}: message {index} (type {item['type']!r}) is not a LangChain message: {reason}"
            ) from None
    return native, adapter.to_neutral(native)


def write_langchain_json(messages: Sequence[Any], path: str | Path) -> None:
    """Write a LangChain history (native messages, or neutral ones, converted) as JSON."""
    path = Path(path).expanduser()
    _, to_dict, adapter = _framework()
    native = adapter.to_native(messages) if messages and isinstance(messages[0], Message) else list(messages)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_dict(native), ensure_ascii=False, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)
