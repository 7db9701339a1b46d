"""The toy framework's own message type (what a framework library would define)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToyMessage:
    """One message: `role` is `system`, `user`, `assistant` or `tool`."""

    role: str
    text: str = ""
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    """An assistant's tool calls: (id, name, arguments)."""
    answers: str | None = None
    """A tool message: the id of the call it answers."""
    reported_tokens: int | None = None
    """Input + output tokens the provider reported for an assistant message."""
    metadata: dict[str, Any] = field(default_factory=dict)
