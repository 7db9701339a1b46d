"""The agent-framework integrations: one package per framework.

- `historykit.plugins.pydantic_ai`: the Pydantic AI message adapter, the `HistoryKit` capability
  (2.x), `HistoryKitProcessor` (1.x), the conversation-store glue and the Pydantic AI summarizer.
- `historykit.plugins.langchain`: the LangChain message adapter, `HistoryKitMiddleware` and
  `HistoryKitHook` for LangChain / LangGraph agents, and the chat-model summarizer.
- `historykit.plugins.native_compaction`: provider compaction (Anthropic, OpenAI) as a summarizer.

Each framework package registers itself with the core (`register`) when it is imported and
imports its framework only when one of its names is used. The framework seam is here too: the
`Framework` protocol, `register` and `frameworks()`, the message `Adapter` (`NeutralAdapter` for
neutral messages) and `adapter_for`.
"""

from __future__ import annotations

from historykit._frameworks import (
    Adapter,
    Framework,
    NeutralAdapter,
    NeutralFramework,
    SummarizerFn,
    adapter_for,
    frameworks,
    register,
)

__all__ = [
    "Adapter",
    "Framework",
    "NeutralAdapter",
    "NeutralFramework",
    "SummarizerFn",
    "adapter_for",
    "frameworks",
    "register",
]
