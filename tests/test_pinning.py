"""`historykit.pin`: neutral, LangChain and Pydantic AI messages and parts; the pin survives
serialization and every processor keeps pinned content verbatim."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, pin
from historykit._messages import (
    PIN_KEY,
    MediaPart,
    Message,
    OtherPart,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from historykit.processors import (
    ClearMedia,
    ClearToolResults,
    OffloadToolOutputs,
    PairwiseTruncate,
    Repair,
    StripThinking,
    Summarize,
)
from historykit.processors._trigger import Trigger
from tests.strategies import examples, neutral_histories


def squeeze() -> Pipeline:
    """Every processor that removes or replaces content, with budgets that always fire."""
    return Pipeline(
        [
            ClearMedia(keep=0, max_bytes=0, batch=1),
            OffloadToolOutputs(max_tokens=2, keep_tokens=1),
            ClearToolResults(keep=0, min_tokens=1, min_gain=0, trigger=Trigger(max_tokens=1)),
            StripThinking(keep_turns=0, trigger=None),
            Summarize(trigger=Trigger(max_tokens=200), keep_last=0, min_gain=0),
            PairwiseTruncate(trigger=Trigger(max_tokens=200)),
            Repair(),
        ]
    )


# --- neutral -------------------------------------------------------------------------------------


NEUTRAL_PARTS = [
    TextPart("Never push to main."),
    ThinkingPart("hmm", signature="sig"),
    ToolCallPart("c1", "Read", {"file_path": "a.py"}),
    ToolResultPart("c1", "Read", "print(1)"),
    MediaPart("image/png", size=10),
    SummaryPart("## Task"),
    OtherPart("Custom", "x"),
]


@pytest.mark.parametrize("part", NEUTRAL_PARTS, ids=lambda p: type(p).__name__)
def test_a_neutral_part_is_pinned_in_a_copy(part: Any) -> None:
    pinned = pin(part)
    assert pinned.pinned and not part.pinned
    assert dataclasses.replace(pinned, pinned=False) == part


def test_a_neutral_message_is_pinned_in_a_copy() -> None:
    msg = Message.user("Only use the standard library.")
    pinned = pin(msg)
    assert pinned.pinned and not msg.pinned and pinned.parts is msg.parts


@pytest.mark.parametrize("obj", ["text", {"role": "user"}, 42, None, [Message.user("x")], Message])
def test_anything_else_is_a_type_error_naming_it(obj: Any) -> None:
    with pytest.raises(TypeError, match="cannot pin a"):
        pin(obj)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=4), st.data())
def test_a_pinned_message_survives_every_processor(history: list[Message], data: st.DataObject) -> None:
    index = data.draw(st.sampled_from([i for i, m in enumerate(history) if m.role == "user"]))
    history = [pin(m) if i == index else m for i, m in enumerate(history)]
    out = squeeze().run(history, context_window=400).messages
    assert history[index] in out


# --- LangChain -----------------------------------------------------------------------------------


def test_a_langchain_message_is_pinned_in_a_copy_with_the_same_id() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    from historykit.plugins.langchain import LangChainAdapter

    for original in [
        lc.HumanMessage("Never modify tests/.", id="h1", additional_kwargs={"source": "ui"}),
        lc.SystemMessage("You are careful.", id="s1"),
        lc.AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "read", "args": {"path": "a.py"}}]),
        lc.ToolMessage("print(1)", tool_call_id="c1", id="t1"),
    ]:
        pinned = pin(original)
        assert type(pinned) is type(original) and pinned.id == original.id
        assert pinned.additional_kwargs == {**original.additional_kwargs, PIN_KEY: True}
        assert PIN_KEY not in original.additional_kwargs
        assert pinned.content == original.content
        (neutral,) = LangChainAdapter().to_neutral([pinned])
        assert neutral.pinned
        (loaded,) = lc.messages_from_dict(lc.messages_to_dict([pinned]))
        assert loaded.additional_kwargs[PIN_KEY] is True and loaded.id == original.id


def test_a_langchain_remove_message_cannot_be_pinned() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    with pytest.raises(TypeError, match="only a LangChain message"):
        pin(lc.RemoveMessage(id="x"))


def test_a_pinned_langchain_message_survives_the_processors() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    history: list[Any] = [lc.HumanMessage("Fix the bug in app.py.", id="task")]
    for n in range(30):
        history.append(lc.AIMessage("", id=f"a{n}", tool_calls=[{"id": f"c{n}", "name": "read", "args": {}}]))
        history.append(lc.ToolMessage("line\n" * 300, tool_call_id=f"c{n}", id=f"t{n}"))
        if n == 3:
            history.append(pin(lc.HumanMessage("Never modify tests/ - this is a hard rule.", id="rule")))
            history.append(lc.AIMessage("Understood.", id="ack"))
    history.append(lc.HumanMessage("Go on.", id="last"))
    out = squeeze().run(history, context_window=2_000).messages
    assert len(out) < len(history) // 4
    rule = [m for m in out if m.id == "rule"]
    assert rule and rule[0] is history[9]


# --- Pydantic AI ---------------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_pydantic_ai_messages_and_parts_with_metadata_are_pinned_in_a_copy() -> None:
    pai = pytest.importorskip("pydantic_ai.messages")
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    ret = pai.ToolReturnPart("read", "print(1)", "c1", metadata={"mine": 1})
    request = pai.ModelRequest([pai.UserPromptPart("Fix it.")])
    response = pai.ModelResponse([pai.TextPart("ok")])
    text = pai.TextContent("Only use the standard library.")
    for original in (ret, request, response, text):
        pinned = pin(original)
        assert type(pinned) is type(original) and pinned is not original
        assert pinned.metadata == {**(original.metadata or {}), PIN_KEY: True}
        assert not (original.metadata or {}).get(PIN_KEY)
    history = [
        pin(request),
        pin(response),
        pai.ModelRequest([pin(ret)]),
        pai.ModelRequest([pai.UserPromptPart([pin(text)])]),
    ]
    loaded = pai.ModelMessagesTypeAdapter.validate_json(pai.ModelMessagesTypeAdapter.dump_json(history))
    neutral = PydanticAIAdapter().to_neutral(loaded)
    assert neutral[0].pinned and neutral[1].pinned
    assert neutral[2].parts[0].pinned and neutral[3].parts[0].pinned


@pytest.mark.pydantic_ai
def test_pydantic_ai_parts_without_metadata_are_a_clear_type_error() -> None:
    pai = pytest.importorskip("pydantic_ai.messages")
    for part in (pai.UserPromptPart("x"), pai.TextPart("x"), pai.ToolCallPart("read", {}, "c1")):
        with pytest.raises(TypeError, match="no metadata to carry the pin"):
            pin(part)
    odd = pai.ToolReturnPart("read", "x", "c1")
    odd.metadata = ["not", "a", "dict"]
    with pytest.raises(TypeError, match="metadata is a list"):
        pin(odd)


@pytest.mark.pydantic_ai
def test_a_pinned_pydantic_ai_tool_return_survives_the_processors() -> None:
    pai = pytest.importorskip("pydantic_ai.messages")
    history: list[Any] = [pai.ModelRequest([pai.UserPromptPart("Fix the bug in app.py.")])]
    for n in range(30):
        history.append(pai.ModelResponse([pai.ToolCallPart("read", {"path": f"f{n}.py"}, f"c{n}")]))
        result = pai.ToolReturnPart("read", "line\n" * 300, f"c{n}")
        history.append(pai.ModelRequest([pin(result) if n == 2 else result]))
    out = squeeze().run(history, context_window=2_000).messages
    assert len(out) < len(history) // 4
    kept = [
        p
        for m in out
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if getattr(p, "tool_call_id", "") == "c2"
    ]
    assert kept and kept[0] is history[6].parts[0]
    # Its call is kept with it: a tool result never loses its call.
    assert any(p.tool_call_id == "c2" for m in out if isinstance(m, pai.ModelResponse) for p in m.parts)
