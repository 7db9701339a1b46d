"""Moved: the Pydantic AI integration is `historykit.plugins.pydantic_ai`.

Every name this module had is importable from here, with a `DeprecationWarning`, for one release.

A package, not a module, only so that version control sees the old module as moved (merges
follow the move); it holds nothing but the deprecated names.
"""

from __future__ import annotations

from historykit._exports import moved_attributes

__all__: list[str] = []

__getattr__ = moved_attributes(
    __name__,
    dict.fromkeys(
        [
            "HistoryKit",
            "HistoryKitProcessor",
            "model_binds_thinking_blocks",
            "model_context_window",
            "with_provider_compaction",
        ],
        "historykit.plugins.pydantic_ai",
    ),
)
