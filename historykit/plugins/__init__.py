"""The agent-framework integrations: one package per framework.

- `historykit.plugins.pydantic_ai`: the Pydantic AI message adapter, the `HistoryKit` capability
  (2.x), `HistoryKitProcessor` (1.x), the conversation-store glue and the Pydantic AI summarizer.
- `historykit.plugins.langchain`: the LangChain message adapter, `HistoryKitMiddleware` and
  `HistoryKitHook` for LangChain / LangGraph agents, and the chat-model summarizer.
- `historykit.plugins.native_compaction`: provider compaction (Anthropic, OpenAI) as a summarizer.

Each framework package registers itself with the core (`historykit.frameworks`) when it is
imported and imports its framework only when one of its names is used. `Adapter`, `NeutralAdapter`
and `adapter_for` moved to `historykit.frameworks`; they are importable from here, with a
`DeprecationWarning`, for one release.
"""

from __future__ import annotations

from historykit._exports import moved_attributes

__all__: list[str] = []

__getattr__ = moved_attributes(
    __name__,
    {
        "Adapter": "historykit.frameworks",
        "NeutralAdapter": "historykit.frameworks",
        "adapter_for": "historykit.frameworks",
    },
)
