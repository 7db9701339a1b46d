"""Framework adapters: native Pydantic AI / LangChain message lists to and from the neutral model.

`adapter_for(messages)` picks the adapter for a native history without importing any framework
that the history does not use. Each adapter keeps the contract of `docs/architecture.md` (section 2):
untouched messages come back as the very same native objects, edited ones keep every field that
was not edited, and unknown parts pass through as `OtherPart`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from historykit.messages import Message

__all__ = ["Adapter", "NeutralAdapter", "adapter_for"]


class Adapter(Protocol):
    """Converts one framework's native messages to neutral ones and back."""

    framework: str
    """Short name shown in reports and errors: `pydantic-ai`, `langchain` or `neutral`."""

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        """Neutral messages for a native history; `TypeError` naming the index of a non-message."""
        ...

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        """A native history; untouched messages are returned as their original objects."""
        ...


class NeutralAdapter:
    """The identity adapter, for histories that are already neutral."""

    framework = "neutral"

    def to_neutral(self, messages: Sequence[Any]) -> list[Message]:
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise TypeError(
                    f"message {index} is a {_type_name(msg)}, but message 0 is a historykit Message: "
                    "a history must come from one framework"
                )
        return list(messages)

    def to_native(self, messages: Sequence[Message]) -> list[Any]:
        return list(messages)


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


_FRAMEWORK_OF_TYPE: dict[type, str | None] = {}


def _framework_of(cls: type) -> str | None:
    # Looked up once per type: this runs for every message of every history counted or processed.
    try:
        return _FRAMEWORK_OF_TYPE[cls]
    except KeyError:
        framework = _FRAMEWORK_OF_TYPE[cls] = _framework_by_module(cls)
        return framework


def _framework_by_module(cls: type) -> str | None:
    # Decided by module name so that a framework that is not installed is never imported.
    if issubclass(cls, Message):
        return "neutral"
    module = cls.__module__
    if module.startswith("pydantic_ai."):
        return "pydantic-ai"
    if module.startswith(("langchain_core.", "langchain.")):
        return "langchain"
    return None


def adapter_for(messages: Sequence[Any]) -> Adapter:
    """The adapter for `messages`; `TypeError` names the first item that does not fit."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"expected a list of messages, got a {_type_name(messages)}")
    first: str | None = None
    for index, msg in enumerate(messages):
        framework = _framework_of(type(msg))
        if framework is None:
            raise TypeError(
                f"message {index} is a {_type_name(msg)}, not a Pydantic AI, LangChain or historykit message"
            )
        if first is None:
            first = framework
        elif framework != first:
            raise TypeError(
                f"message {index} is a {_type_name(msg)} ({framework}), but message 0 is a {first} "
                "message: a history must come from one framework"
            )
    if first == "pydantic-ai":
        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        return PydanticAIAdapter()
    if first == "langchain":
        from historykit.plugins.langchain import LangChainAdapter

        return LangChainAdapter()
    return NeutralAdapter()
