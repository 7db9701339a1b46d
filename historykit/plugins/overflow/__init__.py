"""Moved: compact-and-retry is shared glue of the integrations (`historykit.plugins._overflow`).

`context_overflow` and `ContextOverflow` are public in `historykit.plugins.pydantic_ai` and
`historykit.plugins.langchain`. Every name this module had is importable from here, with a
`DeprecationWarning`, for one release.

A package, not a module, only so that version control sees the old module as moved (merges
follow the move); it holds nothing but the deprecated names.
"""

from __future__ import annotations

from historykit._exports import moved_attributes

__all__: list[str] = []

__getattr__ = moved_attributes(
    __name__,
    {
        "ContextOverflow": "historykit.plugins.pydantic_ai",
        "context_overflow": "historykit.plugins.pydantic_ai",
        **dict.fromkeys(
            ["RETRY_FRACTION", "RETRY_STEP", "RETRY_WINDOW_SOURCE", "retry_window"],
            "historykit.plugins._overflow",
        ),
    },
)
