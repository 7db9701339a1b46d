"""The usage a provider reports counts in the integrations: a model that reports 40,000 input tokens
on every response makes each later call's report (and so its triggers and warnings) count from
those 40,000, plus what arrived since, in both frameworks and both modes."""

from __future__ import annotations

from typing import Any

import pytest

from historykit import Pipeline, Report
from historykit._messages import Message, ReportedUsage, TextPart, ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit.processors import ClearToolResults, Trigger

REPORTED = 40_000
OUTPUT = 60
STEPS = 4
RESULT = "line of the file that is not short at all\n" * 150


def _arrived_since(reports: list[Report], counter: TokenCounter) -> None:
    """Every call after the first: within 5% of what was reported plus what arrived since (the
    response itself and the tool result, as the counter counts them)."""
    arrived = counter.count_message(
        Message("tool", (ToolResultPart("c", "read", RESULT),))
    ) + counter.count_message(Message("assistant", (ToolCallPart("c", "read", {"path": "f0"}),)))
    expected = REPORTED + arrived
    assert len(reports) == STEPS + 1
    for report in reports[1:]:
        assert abs(report.tokens_before - expected) <= 0.05 * expected, (report.tokens_before, expected)


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_pydantic_ai_reports_count_the_reported_usage(persist: bool) -> None:
    pytest.importorskip("pydantic_ai.capabilities", reason="HistoryKit needs Pydantic AI capabilities")
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from historykit.plugins.pydantic_ai import HistoryKit

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        n = sum(isinstance(m, pai.ModelResponse) for m in messages)
        usage = RequestUsage(input_tokens=REPORTED, output_tokens=OUTPUT)
        if n < STEPS:
            return pai.ModelResponse([pai.ToolCallPart("read", {"path": f"f{n}"}, f"c{n}")], usage=usage)
        return pai.ModelResponse([pai.TextPart("done")], usage=usage)

    def read(path: str) -> str:
        return RESULT

    reports: list[Report] = []
    kit = HistoryKit(Pipeline(), context_window=200_000, persist=persist, on_report=reports.append)
    Agent(FunctionModel(respond), tools=[read], capabilities=[kit]).run_sync("Read the files.")
    _arrived_since(reports, kit.pipeline.counter)


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_langchain_reports_count_the_reported_usage(persist: bool) -> None:
    pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class Reporting(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "reporting"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Reporting:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            n = sum(isinstance(m, AIMessage) for m in messages)
            usage = {"input_tokens": REPORTED, "output_tokens": OUTPUT, "total_tokens": REPORTED + OUTPUT}
            calls = [{"id": f"c{n}", "name": "read", "args": {"path": f"f{n}"}}] if n < STEPS else []
            message = AIMessage("" if calls else "done", tool_calls=calls, usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return RESULT

    reports: list[Report] = []
    from historykit.plugins.langchain import HistoryKitMiddleware

    middleware = HistoryKitMiddleware(
        Pipeline(), context_window=200_000, persist=persist, on_report=reports.append
    )
    create_agent(Reporting(), [read], middleware=[middleware]).invoke(
        {"messages": [("user", "Read the files.")]}
    )
    _arrived_since(reports, middleware.pipeline.counter)


def test_triggers_fire_on_the_reported_count_and_markers_name_every_compaction() -> None:
    """A history the counter makes small but the provider reported as large is cleared; the
    clearing is in the report's markers (one for the batch)."""
    history = [Message.user("Read the files.")]
    for n in range(6):
        history += [
            Message("assistant", (ToolCallPart(f"c{n}", "read", {"path": f"f{n}"}),)),
            Message("tool", (ToolResultPart(f"c{n}", "read", RESULT),)),
        ]
    history[-2] = Message(
        "assistant", history[-2].parts, usage=ReportedUsage(input_tokens=25_000, output_tokens=OUTPUT)
    )
    clear = ClearToolResults(keep=1, min_tokens=50, min_gain=100, trigger=Trigger(max_fraction=0.5))
    unanchored = Pipeline([clear], use_usage=False).run(history, 40_000)
    assert not unanchored.report.changed  # the counter alone sees a few thousand tokens
    anchored = Pipeline([clear]).run(history, 40_000)
    assert anchored.report.tokens_before > 25_000
    (marker,) = anchored.report.markers
    assert marker.strategy == "clear_tool_results" and marker.tokens_after < marker.tokens_before


def test_a_manual_compaction_outside_a_model_call_drops_the_anchor() -> None:
    """After `compact_conversation` (a compaction made when the history ends with an answer), that
    answer's usage measured the history before the compaction: it anchors nothing."""
    history = [
        Message.user("Read."),
        Message("assistant", (TextPart("ok"),), usage=ReportedUsage(input_tokens=50_000)),
    ]
    from dataclasses import replace

    from historykit._messages import CompactionMarker, SummaryPart

    marker = CompactionMarker(1, 3, 60_000, 2_000, "summarize", automatic=False)
    summary = Message("user", (SummaryPart("[historykit] Summary", marker),))
    compacted = [history[0], summary, replace(history[1]), Message.user("Go on.")]
    assert Pipeline().run(compacted, 100_000).report.tokens_before < 1_000
    assert Pipeline().run([*history, Message.user("Go on.")], 100_000).report.tokens_before > 50_000
