"""Where the summary goes when it fires in the middle of a tool loop, through real agents: before
what is kept of the current turn, so the last thing in the user's voice the model reads is still
the user's request (Claude Code and LangChain place their summaries the same way). A model that
answers the last user-voice message then never answers the summary."""

from __future__ import annotations

from typing import Any

import pytest

from historykit import Pipeline
from historykit.processors import Repair, Summarize, Trigger

REQUEST = "Now fix the failing test in tests/test_io.py."
READS = 14
OUTPUT = "a line of the module that is long enough to count\n" * 40


def pipeline() -> Pipeline:
    return Pipeline([Summarize(trigger=Trigger(max_tokens=5_000), keep_last=3, min_gain=200), Repair()])


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_pydantic_ai_the_last_user_voice_is_the_request(persist: bool) -> None:
    pytest.importorskip("pydantic_ai.capabilities", reason="HistoryKit needs Pydantic AI capabilities")
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from historykit.plugins.pydantic_ai import HistoryKit

    last_voices: list[str] = []

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        voices = [
            str(p.content)
            for m in messages
            if isinstance(m, pai.ModelRequest)
            for p in m.parts
            if isinstance(p, pai.UserPromptPart) or type(p).__name__ == "CompactionPart"
        ]
        last_voices.append(voices[-1])
        reads = len(last_voices) - 2  # calls of the second run before this one (compaction drops results)
        if voices[-1] != REQUEST:
            return pai.ModelResponse([pai.TextPart("Answering the summary.")])
        if reads < READS:
            return pai.ModelResponse(
                [pai.ToolCallPart("read", {"path": f"f{reads}"}, f"c{len(last_voices)}")]
            )
        return pai.ModelResponse([pai.TextPart("Fixed.")])

    def read(path: str) -> str:
        return OUTPUT

    kit = HistoryKit(pipeline(), context_window=100_000, persist=persist)
    agent = Agent(FunctionModel(respond), tools=[read], capabilities=[kit])
    first = agent.run_sync("Find the bug in src/.")
    agent.run_sync(REQUEST, message_history=first.all_messages())
    assert any(m.strategy == "summarize" for m in kit.last_report.markers) or len(last_voices) > READS
    assert last_voices[1:] == [REQUEST] * (len(last_voices) - 1), last_voices


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_langchain_the_last_user_voice_is_the_request(persist: bool) -> None:
    pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    last_voices: list[str] = []

    class Answering(BaseChatModel):
        """Answers the last human message it is sent."""

        @property
        def _llm_type(self) -> str:
            return "answering"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Answering:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            voice = str([m for m in messages if isinstance(m, HumanMessage)][-1].content)
            last_voices.append(voice)
            reads = len(last_voices) - 2  # calls of the second run before this one
            if voice != REQUEST:
                message = AIMessage("Answering the summary.")
            elif reads < READS:
                message = AIMessage(
                    "", tool_calls=[{"id": f"c{len(last_voices)}", "name": "read", "args": {}}]
                )
            else:
                message = AIMessage("Fixed.")
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read() -> str:
        """Read the next file."""
        return OUTPUT

    middleware = HistoryKitMiddleware(pipeline(), context_window=100_000, persist=persist)
    agent = create_agent(Answering(), [read], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    agent.invoke({"messages": [("user", "Find the bug in src/.")]}, config)
    agent.invoke({"messages": [("user", REQUEST)]}, config)
    assert middleware.last_report is not None
    assert last_voices[1:] == [REQUEST] * (len(last_voices) - 1), last_voices
