"""The public API, pinned (as httpx's `test_exported_members`): each public module's `__all__` is the
list below, and every name in it resolves. A change here is a change users see: add the name on
purpose, or deprecate it for a release before removing it (`tests/plugins/test_deprecated_paths.py`)."""

from __future__ import annotations

import importlib

import pytest

PUBLIC: dict[str, list[str]] = {
    "historykit.frameworks": [
        "Adapter",
        "BUILTIN_PACKAGES",
        "Framework",
        "NeutralAdapter",
        "NeutralFramework",
        "SummarizerFn",
        "adapter_for",
        "framework_for_format",
        "framework_of",
        "frameworks",
        "history_framework",
        "register",
    ],
    "historykit.plugins": [],
    "historykit.plugins.pydantic_ai": [
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
    ],
    "historykit.plugins.langchain": [
        "ContextOverflow",
        "HistoryKitHook",
        "HistoryKitMiddleware",
        "LangChainAdapter",
        "LangChainFramework",
        "LangChainSummarizer",
        "SUMMARY_SOURCE",
        "chat_model_binds_thinking",
        "chat_model_context_window",
        "context_overflow",
        "state_update",
        "with_provider_compaction",
    ],
    "historykit.plugins.native_compaction": [
        "ANTHROPIC_COMPACTION_BETA",
        "AnthropicCompactionSummarizer",
        "OpenAICompactionSummarizer",
        "anthropic_messages",
        "responses_input",
    ],
    "historykit.formats.pydantic_ai_json": ["read_pydantic_ai_json", "write_pydantic_ai_json"],
    "historykit.formats.langchain_json": ["read_langchain_json", "write_langchain_json"],
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_exported_members(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(PUBLIC[module_name])
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name} does not resolve"
        member = getattr(module, name)
        if hasattr(member, "__module__") and isinstance(member, type):
            # Classes are defined in the package (a private module of it), not re-exported from elsewhere.
            assert member.__module__.startswith("historykit."), f"{module_name}.{name}"
