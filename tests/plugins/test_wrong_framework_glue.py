"""Handing one framework's glue to the other fails with an error that names what to use instead."""

from __future__ import annotations

import pytest

from historykit.errors import ArgumentTypeError, UserError
from historykit.processors import Repair

pytestmark = pytest.mark.pydantic_ai


def test_langchain_middleware_given_to_a_pydantic_ai_agent() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from historykit.plugins.langchain import HistoryKitHook, HistoryKitMiddleware

    for glue in (HistoryKitMiddleware(Repair()), HistoryKitHook(Repair())):
        with pytest.raises(
            ArgumentTypeError, match=r"for Pydantic AI use historykit\.plugins\.pydantic_ai\.HistoryKit"
        ):
            Agent(TestModel(), capabilities=[glue]).run_sync("hi")  # type: ignore[list-item]


def test_pydantic_ai_glue_given_to_a_langchain_agent() -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from historykit.plugins.pydantic_ai import HistoryKit, HistoryKitProcessor

    for glue in (HistoryKit(Repair()), HistoryKitProcessor(Repair())):
        with pytest.raises(
            UserError, match=r"for LangChain use historykit\.plugins\.langchain\.HistoryKitMiddleware"
        ):
            create_agent(FakeListChatModel(responses=["x"]), tools=[], middleware=[glue])  # type: ignore[list-item]
