"""Pydantic AI as the core sees it (`historykit.plugins.Framework`).

Imports no Pydantic AI: ownership is decided by module name, and each method imports what it needs
when it is called, so that the core can ask about any history without importing a framework.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._frameworks import Adapter, SummarizerFn
from historykit._messages import PIN_KEY, Message
from historykit.errors import ArgumentTypeError


class PydanticAIFramework:
    """Pydantic AI's `ModelRequest` / `ModelResponse` histories, models and JSON.

    Registered when `historykit.plugins.pydantic_ai` is imported; the core asks it through
    `historykit.plugins.frameworks`.

    Example:
        ```python
        from pydantic_ai.messages import ModelRequest
        from historykit.plugins import frameworks

        [f.name for f in frameworks() if f.owns(ModelRequest)]  # ['pydantic-ai']
        ```
    """

    name = "pydantic-ai"
    title = "Pydantic AI"
    format = "pydantic-ai"

    def owns(self, cls: type) -> bool:
        return cls.__module__.startswith("pydantic_ai.")

    def adapter(self) -> Adapter:
        from historykit.plugins.pydantic_ai._adapter import PydanticAIAdapter

        return PydanticAIAdapter()

    def reported_tokens(self, message: Any) -> int | None:
        # Read directly off the native object: converting the whole history just to find the
        # usage would cost what the conversion cache saves.
        usage = getattr(message, "usage", None)
        if usage is None or getattr(message, "kind", None) != "response":
            return None
        inp = getattr(usage, "input_tokens", 0) or 0
        return inp + (getattr(usage, "output_tokens", 0) or 0) if inp else None

    def read_transcript(self, path: Path) -> tuple[list[Any], list[Message]]:
        from historykit.plugins.pydantic_ai._json import read_pydantic_ai_json

        return read_pydantic_ai_json(path)

    def write_transcript(self, messages: Sequence[Any], path: Path) -> None:
        from historykit.plugins.pydantic_ai._json import write_pydantic_ai_json

        write_pydantic_ai_json(messages, path)

    def pin(self, obj: Any) -> Any:
        if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
            raise ArgumentTypeError(
                f"cannot pin a {_type_name(obj)}: it is not a Pydantic AI message or part"
            )
        if not any(f.name == "metadata" for f in dataclasses.fields(obj)):
            raise ArgumentTypeError(
                f"cannot pin a {_type_name(obj)}: it has no metadata to carry the pin; pin the message "
                "that holds it (or, for a user prompt, give its text as pinned TextContent items)"
            )
        metadata = getattr(obj, "metadata", None)
        if metadata is not None and not isinstance(metadata, dict):
            raise ArgumentTypeError(
                f"cannot pin a {_type_name(obj)} whose metadata is a "
                f"{type(metadata).__qualname__}, not a dict"
            )
        return dataclasses.replace(obj, metadata={**(metadata or {}), PIN_KEY: True})

    def summarizer(self, model: Any, budget_tokens: int) -> SummarizerFn | None:
        from historykit.plugins.pydantic_ai._summarizer import PydanticAISummarizer, is_pydantic_ai_model

        if isinstance(model, str) or is_pydantic_ai_model(model):
            return PydanticAISummarizer(model, budget_tokens=budget_tokens)
        return None


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
