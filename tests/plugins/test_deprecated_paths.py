"""Old import paths keep working for one release: each warns, naming the new path, and gives the
very object the new path gives. The only test that imports them."""

from __future__ import annotations

import importlib
import warnings

import pytest

MOVED = [
    ("historykit.plugins", "Adapter", "historykit.frameworks"),
    ("historykit.plugins", "NeutralAdapter", "historykit.frameworks"),
    ("historykit.plugins", "adapter_for", "historykit.frameworks"),
    ("historykit.plugins.pydantic_ai_agent", "HistoryKit", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.pydantic_ai_agent", "HistoryKitProcessor", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.pydantic_ai_agent", "model_binds_thinking_blocks", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.pydantic_ai_agent", "model_context_window", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.pydantic_ai_agent", "with_provider_compaction", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.langgraph", "HistoryKitHook", "historykit.plugins.langchain"),
    ("historykit.plugins.langgraph", "HistoryKitMiddleware", "historykit.plugins.langchain"),
    ("historykit.plugins.langgraph", "chat_model_binds_thinking", "historykit.plugins.langchain"),
    ("historykit.plugins.langgraph", "chat_model_context_window", "historykit.plugins.langchain"),
    ("historykit.plugins.langgraph", "state_update", "historykit.plugins.langchain"),
    ("historykit.plugins.langgraph", "with_provider_compaction", "historykit.plugins.langchain"),
    ("historykit.plugins.overflow", "ContextOverflow", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.overflow", "context_overflow", "historykit.plugins.pydantic_ai"),
    ("historykit.plugins.overflow", "RETRY_FRACTION", "historykit.plugins._overflow"),
    ("historykit.plugins.overflow", "RETRY_STEP", "historykit.plugins._overflow"),
    ("historykit.plugins.overflow", "RETRY_WINDOW_SOURCE", "historykit.plugins._overflow"),
    ("historykit.plugins.overflow", "retry_window", "historykit.plugins._overflow"),
    ("historykit.processors", "PydanticAISummarizer", "historykit.plugins.pydantic_ai"),
    ("historykit.processors", "LangChainSummarizer", "historykit.plugins.langchain"),
    ("historykit.processors.summarizers", "PydanticAISummarizer", "historykit.plugins.pydantic_ai"),
    ("historykit.processors.summarizers", "LangChainSummarizer", "historykit.plugins.langchain"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_an_old_path_warns_and_gives_the_same_object(old: str, name: str, new: str) -> None:
    expected = getattr(importlib.import_module(new), name)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        found = getattr(importlib.import_module(old), name)
    assert found is expected


def test_from_import_of_an_old_path_warns() -> None:
    with pytest.warns(DeprecationWarning, match="historykit.plugins.pydantic_ai.HistoryKit"):
        from historykit.plugins.pydantic_ai_agent import HistoryKit  # noqa: F401
    with pytest.warns(DeprecationWarning, match="historykit.plugins.langchain.HistoryKitMiddleware"):
        from historykit.plugins.langgraph import HistoryKitMiddleware  # noqa: F401


def test_names_of_the_old_adapter_modules_still_import_without_a_warning() -> None:
    # historykit.plugins.pydantic_ai and .langchain were modules; they are packages now, exporting
    # what the modules did.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from historykit.plugins.langchain import SUMMARY_SOURCE, LangChainAdapter  # noqa: F401
        from historykit.plugins.pydantic_ai import PromptItem, PydanticAIAdapter, RequestInstructions  # noqa: F401


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import historykit.plugins.langgraph as old

    with pytest.raises(AttributeError):
        old.NotAName  # noqa: B018
