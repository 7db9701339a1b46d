"""historykit for Pydantic AI (1.x and 2.x): the message adapter, the agent integrations, the summarizer.

- `HistoryKit`: a capability (`Agent(capabilities=[HistoryKit(pipeline)])`) that runs a pipeline
  before every model request, compacts and retries after a context overflow, compacts on request
  (`compact`, `compact_conversation` for a stored `Conversation`) and can add the recall tool.
- `HistoryKitProcessor`: the same as a 1.x history processor (`Agent(history_processors=[...])`).
- `PydanticAIAdapter`: `ModelRequest` / `ModelResponse` lists to and from neutral messages.
- `PydanticAISummarizer`: summarizes with a Pydantic AI model name, `Model` or `Agent`.
- `model_context_window`, `model_binds_thinking_blocks`: what a model states about itself.
- `with_provider_compaction`: a history with provider compaction blocks put back in place.
- `context_overflow`, `ContextOverflow`: recognise a provider's context-length error.

Importing this package does not import Pydantic AI; each name imports it when first used.

Example:
    ```python
    from pydantic_ai import Agent
    from historykit import default_pipeline
    from historykit.plugins.pydantic_ai import HistoryKit

    agent = Agent("anthropic:claude-sonnet-4-5", capabilities=[HistoryKit(default_pipeline())])
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from historykit._exports import lazy_attributes as _lazy_attributes
from historykit._frameworks import register as _register
from historykit.plugins.pydantic_ai._framework import PydanticAIFramework

if TYPE_CHECKING:
    from historykit.plugins._overflow import ContextOverflow, context_overflow
    from historykit.plugins.pydantic_ai._adapter import PromptItem, PydanticAIAdapter, RequestInstructions
    from historykit.plugins.pydantic_ai._agent import (
        HistoryKit,
        HistoryKitProcessor,
        model_binds_thinking_blocks,
        model_context_window,
        with_provider_compaction,
    )
    from historykit.plugins.pydantic_ai._summarizer import PydanticAISummarizer

__all__ = [
    "ContextOverflow",
    "HistoryKit",
    "HistoryKitProcessor",
    "PromptItem",
    "PydanticAIAdapter",
    "PydanticAIFramework",
    "PydanticAISummarizer",
    "RequestInstructions",
    "context_overflow",
    "model_binds_thinking_blocks",
    "model_context_window",
    "with_provider_compaction",
]

_register(PydanticAIFramework())

__getattr__ = _lazy_attributes(
    __name__,
    {
        "ContextOverflow": "historykit.plugins._overflow",
        "context_overflow": "historykit.plugins._overflow",
        "PromptItem": f"{__name__}._adapter",
        "PydanticAIAdapter": f"{__name__}._adapter",
        "RequestInstructions": f"{__name__}._adapter",
        "HistoryKit": f"{__name__}._agent",
        "HistoryKitProcessor": f"{__name__}._agent",
        "model_binds_thinking_blocks": f"{__name__}._agent",
        "model_context_window": f"{__name__}._agent",
        "with_provider_compaction": f"{__name__}._agent",
        "PydanticAISummarizer": f"{__name__}._summarizer",
    },
)
