"""LangChain as the core sees it (`historykit.plugins.Framework`).

Imports no LangChain: ownership is decided by module name, and each method imports what it needs
when it is called, so that the core can ask about any history without importing a framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from historykit._frameworks import Adapter, SummarizerFn
from historykit._messages import PIN_KEY, Message
from historykit.errors import ArgumentTypeError


class LangChainFramework:
    """LangChain (and LangGraph) `BaseMessage` histories, chat models and JSON.

    Registered when `historykit.plugins.langchain` is imported; the core asks it through
    `historykit.plugins.frameworks`.

    Example:
        ```python
        from langchain_core.messages import HumanMessage
        from historykit.plugins import frameworks

        [f.name for f in frameworks() if f.owns(HumanMessage)]  # ['langchain']
        ```
    """

    name = "langchain"
    title = "LangChain"
    format = "langchain"

    def owns(self, cls: type) -> bool:
        return cls.__module__.startswith(("langchain_core.", "langchain."))

    def adapter(self) -> Adapter:
        from historykit.plugins.langchain._adapter import LangChainAdapter

        return LangChainAdapter()

    def reported_tokens(self, message: Any) -> int | None:
        # Read directly off the native object: converting the whole history just to find the
        # usage would cost what the conversion cache saves.
        usage = getattr(message, "usage_metadata", None)
        if not usage:
            return None
        inp = usage.get("input_tokens", 0) or 0
        return inp + (usage.get("output_tokens", 0) or 0) if inp else None

    def read_transcript(self, path: Path) -> tuple[list[Any], list[Message]]:
        from historykit.plugins.langchain._json import read_langchain_json

        return read_langchain_json(path)

    def write_transcript(self, messages: Sequence[Any], path: Path) -> None:
        from historykit.plugins.langchain._json import write_langchain_json

        write_langchain_json(messages, path)

    def pin(self, obj: Any) -> Any:
        from langchain_core.messages import BaseMessage, RemoveMessage

        if not isinstance(obj, BaseMessage) or isinstance(obj, RemoveMessage):
            raise ArgumentTypeError(f"cannot pin a {_type_name(obj)}: only a LangChain message can be pinned")
        kwargs = {**(obj.additional_kwargs or {}), PIN_KEY: True}
        return obj.model_copy(update={"additional_kwargs": kwargs})

    def summarizer(self, model: Any, budget_tokens: int) -> SummarizerFn | None:
        names = (c.__module__ for c in type(model).__mro__)
        if any(n.startswith("langchain") for n in names) and hasattr(model, "ainvoke"):
            from historykit.plugins.langchain._summarizer import LangChainSummarizer

            return LangChainSummarizer(model, budget_tokens=budget_tokens)
        return None


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
