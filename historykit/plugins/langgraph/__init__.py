"""Moved: the LangChain / LangGraph integration is `historykit.plugins.langchain`.

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
            "HistoryKitHook",
            "HistoryKitMiddleware",
            "chat_model_binds_thinking",
            "chat_model_context_window",
            "state_update",
            "with_provider_compaction",
        ],
        "historykit.plugins.langchain",
    ),
)
