"""Property: with no budget pressure, the history a framework keeps after a run with historykit is
the one it keeps without it, in both modes.

Random histories (`pydantic_ai_histories`, `langchain_histories`), sometimes broken the ways the
frameworks' own histories break provider rules (a tool-call id used again in a later turn, an empty
system prompt, an empty response), are given to a real Pydantic AI agent and a real LangChain
`create_agent` graph with a scripted model, once without historykit and once with
`default_pipeline()` at a window nothing comes near (every image kept: `_no_pressure`). `Repair`
may fix the request the model is sent; `all_messages()` and the graph state must come out as the
framework's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, default_pipeline
from historykit.processors import ClearMedia
from tests.plugins.test_framework_parity import _pai_shape, _shape

WINDOW = 10_000_000
"""A window no drawn history comes near: nothing to compact."""


def _no_pressure() -> Pipeline:
    """`default_pipeline()` as it runs with nothing to compact. `ClearMedia`'s trigger is a count of
    images (8), not the window: a drawn history with 8 or more images is cleared whatever the window
    (by design, and then the state holds its placeholders), so here it keeps every image."""
    steps = default_pipeline().processors
    return Pipeline([ClearMedia(keep=10**6) if isinstance(s, ClearMedia) else s for s in steps])


SETTINGS = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _reuse_ids_pai(history: list[Any]) -> list[Any]:
    """Every response's tool calls named `call_0`, `call_1`, ... (their answers follow): an id is
    used again in each later turn, as scripted and some local models do."""
    from pydantic_ai import messages as pai

    out: list[Any] = []
    names: dict[str, str] = {}
    for message in history:
        if isinstance(message, pai.ModelResponse):
            calls = [p for p in message.parts if isinstance(p, pai.ToolCallPart)]
            names = {p.tool_call_id: f"call_{j}" for j, p in enumerate(calls)}
            parts = [
                dataclasses.replace(p, tool_call_id=names[p.tool_call_id])
                if isinstance(p, pai.ToolCallPart)
                else p
                for p in message.parts
            ]
            out.append(dataclasses.replace(message, parts=parts))
            continue
        parts = [
            dataclasses.replace(p, tool_call_id=names[p.tool_call_id])
            if getattr(p, "tool_call_id", None) in names and not isinstance(p, pai.NativeToolReturnPart)
            else p
            for p in message.parts
        ]
        out.append(dataclasses.replace(message, parts=parts))
    return out


def _broken_pai(history: list[Any], reuse: bool, empty_system: bool, empty_response: bool) -> list[Any]:
    from pydantic_ai import messages as pai

    if reuse:
        history = _reuse_ids_pai(history)
    if empty_system:
        first = history[0]
        history = [dataclasses.replace(first, parts=[pai.SystemPromptPart(""), *first.parts]), *history[1:]]
    if empty_response:
        at = next(
            (
                i
                for i, m in enumerate(history)
                if isinstance(m, pai.ModelResponse)
                and not any(isinstance(p, pai.ToolCallPart) for p in m.parts)
            ),
            None,
        )
        if at is not None:
            history = [*history[:at], dataclasses.replace(history[at], parts=[]), *history[at + 1 :]]
    return history


def _pai_run(capabilities: list[Any], history: list[Any]) -> tuple[list[list[Any]], list[Any]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    seen: list[list[Any]] = []

    def model(messages: list[Any], info: Any) -> Any:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model), capabilities=capabilities)
    result = agent.run_sync(message_history=list(history))
    return seen, result.all_messages()


@pytest.mark.pydantic_ai
@SETTINGS
@given(data=st.data(), reuse=st.booleans(), empty_system=st.booleans(), empty_response=st.booleans())
@pytest.mark.parametrize("persist", [False, True], ids=["view", "persistent"])
def test_pydantic_ai_keeps_its_own_history(
    persist: bool, data: Any, reuse: bool, empty_system: bool, empty_response: bool
) -> None:
    from historykit import check
    from historykit.plugins.pydantic_ai import HistoryKit
    from tests.plugins.pydantic_ai_histories import pydantic_ai_histories

    history = _broken_pai(data.draw(pydantic_ai_histories(max_turns=3)), reuse, empty_system, empty_response)
    base_seen, base = _pai_run([], history)
    kit = HistoryKit(_no_pressure(), context_window=WINDOW, persist=persist)
    seen, kept = _pai_run([kit], history)
    assert _pai_shape(kept) == _pai_shape(base)
    assert kit.last_report is not None  # nothing compacted: any marker is a repair of the request
    assert {m.strategy for m in kit.last_report.markers} <= {"repair"}
    # The request sent is the framework's own, or one that breaks no rule where the framework's broke one.
    for ours, theirs in zip(seen, base_seen):
        if _pai_shape(ours) != _pai_shape(theirs):
            assert check(theirs) != [] and check(ours) == []


def _reuse_ids_lc(history: list[Any]) -> list[Any]:
    from langchain_core.messages import AIMessage, ToolMessage

    out: list[Any] = []
    names: dict[str, str] = {}
    for message in history:
        if isinstance(message, AIMessage) and message.tool_calls:
            names = {c["id"]: f"call_{j}" for j, c in enumerate(message.tool_calls) if c["id"]}
            calls = [{**c, "id": names.get(c["id"], c["id"])} for c in message.tool_calls]
            out.append(message.model_copy(update={"tool_calls": calls}))
        elif isinstance(message, ToolMessage) and message.tool_call_id in names:
            out.append(message.model_copy(update={"tool_call_id": names[message.tool_call_id]}))
        else:
            out.append(message)
    return out


def _lc_run(middleware: list[Any], history: list[Any]) -> tuple[list[list[Any]], list[Any]]:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from tests.plugins.test_recall_langgraph import ScriptedChatModel

    model = ScriptedChatModel(respond=lambda messages: AIMessage("ok"))
    agent = create_agent(model, tools=[], middleware=middleware)
    out = agent.invoke({"messages": list(history)})
    return model.inputs, out["messages"]


@SETTINGS
@given(data=st.data(), reuse=st.booleans())
@pytest.mark.parametrize("persist", [False, True], ids=["view", "persistent"])
def test_langchain_keeps_its_own_state(persist: bool, data: Any, reuse: bool) -> None:
    from langchain_core.messages import AIMessage, SystemMessage

    from historykit.plugins.langchain import HistoryKitMiddleware
    from tests.plugins.langchain_histories import langchain_histories

    history = data.draw(langchain_histories(max_turns=3, unknown_blocks=False))
    # create_agent takes the history as its input: it ends with what the model answers next.
    history = [m for m in history if not isinstance(m, SystemMessage)]
    while history and isinstance(history[-1], AIMessage):
        history.pop()
    if reuse:
        history = _reuse_ids_lc(history)
    if not history:
        return
    _, base = _lc_run([], history)
    kit = HistoryKitMiddleware(_no_pressure(), context_window=WINDOW, persist=persist)
    _, state = _lc_run([kit], history)
    assert _shape(state) == _shape(base)
    assert kit.last_report is not None
    assert {m.strategy for m in kit.last_report.markers} <= {"repair"}


@pytest.mark.parametrize("persist", [False, True], ids=["view", "persistent"])
def test_a_reused_tool_call_id_gives_no_older_exchange_the_current_cycles_thinking(persist: bool) -> None:
    """Found by the property above: two exchanges calling `call_0`, the second with DeepSeek's
    `reasoning_content`. Nothing is compacted, yet the kept history gave the first exchange the
    second's thinking (the same id made it look like the current cycle's): the state must stay
    LangChain's own; the request alone is repaired."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from historykit.plugins.langchain import HistoryKitMiddleware

    meta = {"model_provider": "deepseek", "model_name": "deepseek-reasoner"}

    def exchange(reasoning: dict[str, Any]) -> list[Any]:
        call = {"name": "read_file", "args": {}, "id": "call_0", "type": "tool_call"}
        return [
            AIMessage("", additional_kwargs=reasoning, response_metadata=meta, tool_calls=[call]),
            ToolMessage("0", name="read_file", tool_call_id="call_0", status="error"),
        ]

    history = [HumanMessage("go"), *exchange({}), *exchange({"reasoning_content": "0"})]
    _, base = _lc_run([], history)
    kit = HistoryKitMiddleware(_no_pressure(), context_window=WINDOW, persist=persist)
    sent, state = _lc_run([kit], history)
    assert _shape(state) == _shape(base)
    assert [m.additional_kwargs.get("reasoning_content") for m in state if isinstance(m, AIMessage)][:2] == [
        None,
        "0",
    ]
    assert sent[0][-1].tool_call_id != sent[0][-3].tool_call_id  # the request's ids were repaired
