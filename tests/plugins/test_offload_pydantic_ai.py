"""Large tool outputs offloaded when they arrive, through real Pydantic AI agents (FunctionModel,
1.x and 2.x): a test run returns a 3,000-line log; the model is sent its head and tail with a note
naming a handle, never the whole log; it searches the log with `recall(grep=...)`, reads a range of
lines, and the tool never runs again. Both modes; with a `SQLModelConversationStore` (2.x), whose
transcript keeps the whole output, read by a new capability (a new process)."""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from historykit import Pipeline, Recall
from historykit.processors import ClearToolResults, OffloadToolOutputs, Repair
from tests.plugins.test_offload_langgraph import NOTE, check_the_investigation, pytest_log

pytestmark = pytest.mark.pydantic_ai

_PAI2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")
NO_LIMIT = UsageLimits(request_limit=None)


def pipeline() -> Pipeline:
    return Pipeline([OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000), ClearToolResults(), Repair()])


@dataclass
class Investigator:
    """Runs the tests; reading the shortened log, greps it for the failure, then reads the lines
    around it, then answers. Keeps every run_tests output it was sent and every recall answer."""

    handle: str | None = None
    run_only: bool = False
    seen: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    calls: int = 0

    def respond(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls += 1
        returns = [
            p
            for m in messages
            if isinstance(m, pai.ModelRequest)
            for p in m.parts
            if isinstance(p, pai.ToolReturnPart)
        ]
        self.seen += [str(p.content) for p in returns if p.tool_name == "run_tests"]
        latest = returns[-1] if returns and messages[-1].parts[-1] is returns[-1] else None
        if latest is not None and latest.tool_name == "recall":
            self.answers.append(str(latest.content))
            if len(self.answers) == 1:
                number = int(re.search(r"^\s*(\d+)\t", self.answers[0], re.MULTILINE)[1])  # type: ignore[index]
                return self._call(
                    "recall", {"handle": self.handle, "start_line": number - 1, "end_line": number + 1}
                )
            return pai.ModelResponse([pai.TextPart("Found the failure.")])
        if self.handle is None:
            if not self.seen:
                return self._call("run_tests", {})
            if self.run_only:
                return pai.ModelResponse([pai.TextPart("The tests ran.")])
            found = NOTE.search(self.seen[-1])
            assert found, self.seen[-1][-400:]
            self.handle = found[1]
        return self._call("recall", {"handle": self.handle, "grep": "failed"})

    def _call(self, tool: str, args: dict[str, Any]) -> pai.ModelResponse:
        return pai.ModelResponse([pai.ToolCallPart(tool, args, tool_call_id=f"call_{self.calls}")])


def make_agent(model: Investigator, kit: Any, ran: list[str]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model.respond), capabilities=[kit])

    @agent.tool_plain
    def run_tests() -> str:
        """Run the test suite."""
        ran.append("run_tests")
        return pytest_log()

    return agent


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_a_large_output_reaches_the_model_shortened_and_recall_searches_it(persist: bool) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    model, ran = Investigator(), []
    kit = HistoryKit(pipeline(), context_window=100_000, persist=persist, recall=True)

    result = make_agent(model, kit, ran).run_sync("Why do the tests fail?", usage_limits=NO_LIMIT)

    assert result.output == "Found the failure."
    assert ran == ["run_tests"]
    check_the_investigation(model)
    (stored,) = [
        p
        for m in result.all_messages()
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart) and p.tool_name == "run_tests"
    ]
    if persist:
        assert NOTE.search(str(stored.content))
    else:
        assert stored.content == pytest_log()


@pytest.mark.skipif(not _PAI2, reason="the conversation store needs Pydantic AI 2.x")
async def test_a_new_capability_searches_the_log_in_the_conversation_store(tmp_path: Path) -> None:
    from pydantic_ai.conversation import Conversation

    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    ran: list[str] = []
    first = Investigator(run_only=True)
    kit = HistoryKit(pipeline(), context_window=100_000, recall=True)
    result = await make_agent(first, kit, ran).run(
        "Run the tests.", conversation=Conversation(conversation_id="c1")
    )
    await store.save(result)
    found = NOTE.search(first.seen[-1])
    assert found
    transcript = await store.transcript("c1")
    assert transcript is not None
    logs = [
        p.content
        for m in transcript.messages
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart) and p.tool_name == "run_tests"
    ]
    assert logs == [pytest_log()]  # the store keeps the output as it arrived

    second = Investigator(handle=found[1])
    fresh = HistoryKit(pipeline(), context_window=100_000, recall=Recall(store=store))
    conversation = Conversation(conversation_id="c1", messages=result.all_messages())
    result = await make_agent(second, fresh, ran).run(
        "Why did they fail?", conversation=conversation, usage_limits=NO_LIMIT
    )

    assert result.output == "Found the failure."
    assert ran == ["run_tests"]
    check_the_investigation(second)
