"""A manual compaction (`compact` / `acompact`, the integrations' `compact()` and `compact_thread`) is
an OpenTelemetry `historykit.pipeline` span whose `historykit.compaction` event carries the focus and
`automatic=False`, as `historykit._telemetry` documents (issue 24).

Recorded with the SDK's in-memory exporter, through the fixture `tests/plugins/test_telemetry.py`
sets up once per process (the global tracer provider can be set only once).
"""

from __future__ import annotations

from typing import Any

import pytest

import historykit
from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit.processors import Repair, Summarize
from historykit.processors._trigger import Trigger
from tests.plugins.test_langgraph_agent import ToolCallingFakeModel
from tests.plugins.test_telemetry import ours, spans

__all__ = ["spans"]  # the fixture, imported for the tests below

FOCUS = "keep the details of the auth refactor"
WINDOW = 64_000  # far from any trigger: only the request compacts


def _pipeline() -> historykit.Pipeline:
    return historykit.Pipeline(
        [Summarize(trigger=Trigger(max_fraction=0.9), keep_last=1, summary_tokens=300), Repair()]
    )


def _history() -> list[Message]:
    messages = [Message("user", (TextPart("Refactor the auth module"),))]
    for n in range(6):
        messages.append(Message("assistant", (ToolCallPart(f"c{n}", "read", {"path": f"auth/{n}.py"}),)))
        messages.append(Message("tool", (ToolResultPart(f"c{n}", "read", f"def login_{n}(): ...\n" * 30),)))
    messages.append(Message("user", (TextPart("Now the billing part"),)))
    return messages


def _the_focus_event(exporter: Any) -> Any:
    mine = ours(exporter)
    assert len(mine) == 1, [s.attributes for s in mine]
    (span,) = mine
    events = [e for e in span.events if e.name == "historykit.compaction"]
    assert len(events) == 1, [e.attributes for e in span.events]
    return events[0]


def _assert_manual(event: Any) -> None:
    assert event.attributes["historykit.strategy"] == "summarize"
    assert event.attributes["historykit.focus"] == FOCUS
    assert event.attributes["historykit.automatic"] is False


def test_pipeline_compact_is_a_span_with_the_focus_event(spans: Any) -> None:
    result = _pipeline().compact(_history(), WINDOW, focus=FOCUS)
    assert [m.focus for m in result.report.markers] == [FOCUS]
    _assert_manual(_the_focus_event(spans))


async def test_pipeline_acompact_is_a_span_with_the_focus_event(spans: Any) -> None:
    await _pipeline().acompact(_history(), WINDOW, focus=FOCUS)
    _assert_manual(_the_focus_event(spans))


def test_a_processors_own_compact_is_a_span_too(spans: Any) -> None:
    Summarize(keep_last=1, summary_tokens=300).compact(_history(), WINDOW, focus=FOCUS)
    _assert_manual(_the_focus_event(spans))


async def test_pydantic_ai_compact_at_the_next_request_is_a_span_with_the_focus_event(spans: Any) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.messages import TextPart as PaiText
    from pydantic_ai.messages import ToolCallPart as PaiCall
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from historykit.plugins.pydantic_ai import HistoryKit

    replies = iter([*(PaiCall("read", {"path": f"auth/{n}.py"}, f"c{n}") for n in range(6)), PaiText("done")])

    def reading(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Six reads in the first run, then answers.
        return ModelResponse(parts=[next(replies, PaiText("done"))])

    kit = HistoryKit(_pipeline(), context_window=WINDOW)
    agent = Agent(FunctionModel(reading), capabilities=[kit])

    @agent.tool_plain
    def read(path: str) -> str:
        return f"def login(): ...  # {path}\n" * 30

    first = await agent.run("Refactor the auth module")
    spans.clear()
    kit.compact(FOCUS)
    await agent.run("Now the billing part", message_history=first.all_messages())
    _assert_manual(_the_focus_event(spans))


def test_langgraph_compact_thread_is_a_span_with_the_focus_event(spans: Any) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return f"def login(): ...  # {path}\n" * 30

    calls = [
        AIMessage("", tool_calls=[{"name": "read", "args": {"path": f"auth/{n}.py"}, "id": f"c{n}"}])
        for n in range(6)
    ]
    model = ToolCallingFakeModel(messages=iter([*calls, AIMessage("done")]))
    middleware = HistoryKitMiddleware(_pipeline(), context_window=WINDOW, persist=True)
    agent = create_agent(model, tools=[read], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [("user", "Refactor the auth module")]}, config)
    spans.clear()
    report = middleware.compact_thread(agent, config, FOCUS)
    assert [m.focus for m in report.markers] == [FOCUS]
    _assert_manual(_the_focus_event(spans))


@pytest.mark.parametrize("focus", [None, ""])
def test_without_a_focus_the_event_has_no_focus(spans: Any, focus: str | None) -> None:
    _pipeline().compact(_history(), WINDOW, focus=focus)
    (span,) = ours(spans)
    (event,) = [e for e in span.events if e.name == "historykit.compaction"]
    assert "historykit.focus" not in event.attributes
    assert event.attributes["historykit.automatic"] is False
