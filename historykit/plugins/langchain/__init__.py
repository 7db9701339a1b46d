"""historykit for LangChain and LangGraph: the message adapter, the agent integrations, the summarizer.

- `HistoryKitMiddleware`: agent middleware (`create_agent(..., middleware=[...])`) that runs a
  pipeline before every model call, compacts and retries after a context overflow, compacts on
  request (`compact`, `compact_thread`) and can add the recall tool.
- `HistoryKitState`: the agent state the middleware adds to (the view last sent, in view-only mode,
  and a window shrunk after an overflow), so a resumed thread continues where it stopped.
- `HistoryKitHook`: the same as a graph node (`create_react_agent(..., pre_model_hook=...)`).
- `LangChainAdapter`: `BaseMessage` lists to and from neutral messages.
- `LangChainSummarizer`: summarizes with a LangChain chat model.
- `state_update`: the `add_messages` update that turns a state's messages into processed ones.
- `chat_model_context_window`, `chat_model_binds_thinking`: what a chat model states about itself.
- `with_provider_compaction`: a model request with provider compaction blocks put back in place.
- `hide_private_state`: the agent with the middleware's private state keys left out of what
  `get_state` and LangGraph's Agent Server return (`private_state_keys`: which keys).
- `context_overflow`, `ContextOverflow`: recognise a provider's context-length error.

Importing this package does not import LangChain; each name imports it when first used.

Example:
    ```python
    from langchain.agents import create_agent
    from historykit import default_pipeline
    from historykit.plugins.langchain import HistoryKitMiddleware

    agent = create_agent(model, tools, middleware=[HistoryKitMiddleware(default_pipeline())])
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from historykit._exports import lazy_attributes as _lazy_attributes
from historykit._frameworks import register as _register
from historykit.plugins.langchain._framework import LangChainFramework

if TYPE_CHECKING:
    from historykit.plugins._overflow import ContextOverflow, context_overflow
    from historykit.plugins.langchain._adapter import SUMMARY_SOURCE, LangChainAdapter
    from historykit.plugins.langchain._middleware import (
        HistoryKitHook,
        HistoryKitMiddleware,
        HistoryKitState,
        chat_model_binds_thinking,
        chat_model_context_window,
        state_update,
        with_provider_compaction,
    )
    from historykit.plugins.langchain._server import hide_private_state, private_state_keys
    from historykit.plugins.langchain._summarizer import LangChainSummarizer

__all__ = [
    "SUMMARY_SOURCE",
    "ContextOverflow",
    "HistoryKitHook",
    "HistoryKitMiddleware",
    "HistoryKitState",
    "LangChainAdapter",
    "LangChainFramework",
    "LangChainSummarizer",
    "chat_model_binds_thinking",
    "chat_model_context_window",
    "context_overflow",
    "hide_private_state",
    "private_state_keys",
    "state_update",
    "with_provider_compaction",
]

_register(LangChainFramework())

__getattr__ = _lazy_attributes(
    __name__,
    {
        "ContextOverflow": "historykit.plugins._overflow",
        "context_overflow": "historykit.plugins._overflow",
        "SUMMARY_SOURCE": f"{__name__}._adapter",
        "LangChainAdapter": f"{__name__}._adapter",
        "HistoryKitHook": f"{__name__}._middleware",
        "HistoryKitMiddleware": f"{__name__}._middleware",
        "HistoryKitState": f"{__name__}._middleware",
        "chat_model_binds_thinking": f"{__name__}._middleware",
        "chat_model_context_window": f"{__name__}._middleware",
        "state_update": f"{__name__}._middleware",
        "hide_private_state": f"{__name__}._server",
        "private_state_keys": f"{__name__}._server",
        "with_provider_compaction": f"{__name__}._middleware",
        "LangChainSummarizer": f"{__name__}._summarizer",
    },
)
