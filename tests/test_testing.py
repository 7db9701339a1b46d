"""`historykit.testing`: the replay models, through real agents.

A short transcript (two turns, one tool call each) is replayed by a Pydantic AI `Agent` and by a
LangChain `create_agent` graph. What is checked:

- the answers come back in the recorded order, each tool answering with its recorded result;
- a turn whose answers have run out is closed with `CLOSING_TEXT` (a call the replay added, not
  replayed); a recorded tool called with a call id the recording has no result for raises
  `ReplayMismatchError`; a turn the recording does not have, or a transcript with nothing to
  replay, raises `InvalidArgumentError` / `ArgumentTypeError`;
- importing `historykit.testing` imports neither framework;
- `CountingSummarizer` records every call a pipeline makes.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import historykit
from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit.errors import ArgumentTypeError, InvalidArgumentError, ReplayMismatchError
from historykit.testing import CLOSING_TEXT, CountingSummarizer, Recording

REPO = Path(__file__).resolve().parent.parent
ANSWERS = ["notes.txt says: buy milk.", "todo.txt says: walk the dog."]


def read(call_id: str, path: str) -> Message:
    return Message.assistant(tool_calls=[ToolCallPart(call_id, "read_file", {"path": path})])


def result(call_id: str, content: str) -> Message:
    return Message("tool", (ToolResultPart(call_id, "read_file", content),))


def transcript(*, dangling: bool = False) -> list[Message]:
    """Two turns, each reading a file and answering; `dangling`: the first read has no recorded result."""
    return [
        Message.system("You read files for the user."),
        Message.user("What is in notes.txt?"),
        read("call-1", "notes.txt"),
        *([] if dangling else [result("call-1", "buy milk")]),
        Message.assistant(ANSWERS[0]),
        Message.user("And in todo.txt?"),
        read("call-2", "todo.txt"),
        result("call-2", "walk the dog"),
        Message.assistant(ANSWERS[1]),
    ]


@pytest.fixture
def recording() -> Recording:
    return Recording.of(transcript(), name="two-turns")


def test_a_recording_is_cut_into_turns(recording: Recording) -> None:
    assert recording.turns == [(1, 5), (5, 9)]
    assert recording.model_calls == 4
    assert recording.system_prompts == ["You read files for the user."]
    assert recording.prompts(1) == ["And in todo.txt?"]
    assert recording.tool_names == ["read_file"]
    assert recording.tool_results() == {"call-1": "buy milk", "call-2": "walk the dog"}


@pytest.mark.parametrize(
    ("messages", "error", "fragment"),
    [
        ([], InvalidArgumentError, "no user message"),
        ([Message.user("hello")], InvalidArgumentError, "no assistant message"),
        ([Message.assistant("hi"), Message.user("hello")], InvalidArgumentError, "comes before"),
        (["hello"], ArgumentTypeError, "not a historykit Message"),
    ],
)
def test_a_transcript_with_nothing_to_replay_is_refused(
    messages: list[Any], error: type, fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        Recording.of(messages)


# ---------------------------------------------------------------------------------------------
# Pydantic AI: a FunctionModel in an Agent
# ---------------------------------------------------------------------------------------------


@pytest.mark.pydantic_ai
async def test_pydantic_ai_answers_in_the_recorded_order(recording: Recording) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolReturnPart

    from historykit.testing import PydanticAIReplay

    replay = PydanticAIReplay(recording)
    agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts)
    first = await agent.run(replay.prompts[0])
    assert first.output == ANSWERS[0]
    returns = [p for m in first.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(r.tool_call_id, r.content) for r in returns] == [("call-1", "buy milk")]
    replay.start_turn(1)
    second = await agent.run(replay.prompts[1], message_history=first.all_messages())
    assert second.output == ANSWERS[1]
    assert [c.number for c in replay.calls] == [1, 2, 3, 4] and all(c.replayed for c in replay.calls)
    assert [c.turn for c in replay.calls] == [0, 0, 1, 1]
    assert [c.raw for c in replay.calls] == recording.raw_sizes(historykit.TokenCounter())
    assert replay.calls[3].reused == replay.calls[2].sent  # the history only grew


@pytest.mark.pydantic_ai
async def test_pydantic_ai_closes_a_turn_whose_answers_ran_out(recording: Recording) -> None:
    from pydantic_ai import Agent

    from historykit.testing import PydanticAIReplay

    replay = PydanticAIReplay(recording)
    agent = Agent(replay.model, tools=replay.tools)
    await agent.run(replay.prompts[0])
    again = await agent.run(replay.prompts[0])  # turn 0 again, without start_turn(0)
    assert again.output == CLOSING_TEXT
    assert not replay.calls[-1].replayed and replay.calls[-1].raw is None
    with pytest.raises(InvalidArgumentError, match="has 2 turns, not a turn 2"):
        replay.start_turn(2)


@pytest.mark.pydantic_ai
async def test_pydantic_ai_tool_without_a_recorded_result_raises() -> None:
    from pydantic_ai import Agent

    from historykit.testing import PydanticAIReplay

    replay = PydanticAIReplay(Recording.of(transcript(dangling=True)))
    agent = Agent(replay.model, tools=replay.tools)
    with pytest.raises(ReplayMismatchError, match="no result for read_file call 'call-1'"):
        await agent.run(replay.prompts[0])


@pytest.mark.pydantic_ai
def test_pydantic_ai_model_declares_the_window(recording: Recording) -> None:
    """In its profile on Pydantic AI 2.x; 1.x profiles have no window, so none is stated there."""
    from pydantic_ai.profiles import ModelProfile

    from historykit.plugins.pydantic_ai import model_context_window
    from historykit.testing import PydanticAIReplay

    stated = model_context_window(PydanticAIReplay(recording, window=2_000).model)
    if "context_window" in get_type_hints(ModelProfile):
        assert stated is not None and (stated.tokens, stated.source) == (2_000, "model profile")
    else:
        assert stated is None or stated.source != "model profile"


# ---------------------------------------------------------------------------------------------
# LangChain: a chat model in a create_agent graph
# ---------------------------------------------------------------------------------------------


def langchain_agent(replay: Any) -> Any:
    pytest.importorskip("langchain.agents", reason="needs LangChain v1")
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    return create_agent(
        replay.model, replay.tools, system_prompt=replay.system_prompt, checkpointer=InMemorySaver()
    )


def test_langchain_answers_in_the_recorded_order(recording: Recording) -> None:
    from langchain_core.messages import ToolMessage

    from historykit.testing import LangChainReplay

    replay = LangChainReplay(recording)
    agent = langchain_agent(replay)
    config: Any = {"configurable": {"thread_id": "t"}}
    state = agent.invoke({"messages": replay.prompts[0]}, config)
    assert state["messages"][-1].text == ANSWERS[0]
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in tools] == [("call-1", "buy milk")]
    replay.start_turn(1)
    state = agent.invoke({"messages": replay.prompts[1]}, config)
    assert state["messages"][-1].text == ANSWERS[1]
    assert [c.turn for c in replay.calls] == [0, 0, 1, 1] and all(c.replayed for c in replay.calls)
    assert [c.raw for c in replay.calls] == recording.raw_sizes(historykit.TokenCounter())
    usage = state["messages"][-1].usage_metadata
    assert usage is not None and usage["input_tokens"] == replay.calls[-1].sent


def test_langchain_closes_a_turn_whose_answers_ran_out(recording: Recording) -> None:
    from historykit.testing import LangChainReplay

    replay = LangChainReplay(recording)
    agent = langchain_agent(replay)
    agent.invoke({"messages": replay.prompts[0]}, {"configurable": {"thread_id": "a"}})
    state = agent.invoke({"messages": replay.prompts[0]}, {"configurable": {"thread_id": "b"}})
    assert state["messages"][-1].text == CLOSING_TEXT
    assert not replay.calls[-1].replayed
    with pytest.raises(InvalidArgumentError, match="has 2 turns, not a turn -1"):
        replay.start_turn(-1)


def test_langchain_tool_without_a_recorded_result_raises() -> None:
    from historykit.testing import LangChainReplay

    replay = LangChainReplay(Recording.of(transcript(dangling=True)))
    agent = langchain_agent(replay)
    with pytest.raises(ReplayMismatchError, match="no result for read_file call 'call-1'"):
        agent.invoke({"messages": replay.prompts[0]}, {"configurable": {"thread_id": "t"}})


def test_langchain_model_declares_the_window(recording: Recording) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel

    from historykit.testing import LangChainReplay

    model = LangChainReplay(recording, window=2_000).model
    assert isinstance(model, BaseChatModel) and model.profile == {"max_input_tokens": 2_000}


# ---------------------------------------------------------------------------------------------
# The summarizer double, lazy imports, the old names
# ---------------------------------------------------------------------------------------------


def test_the_counting_summarizer_records_every_call() -> None:
    summarizer = CountingSummarizer()
    pipeline = historykit.default_pipeline(summarizer=summarizer)
    out = pipeline.run(Recording.load().messages, context_window=10_000)
    summaries = [m for m in out.report.markers if m.strategy == "summarize"]
    assert summaries and len(summarizer.calls) == len(summaries)
    assert summarizer.focuses == [None] * len(summarizer.calls)


def test_the_counting_summarizer_records_the_focus_of_a_manual_compaction() -> None:
    from historykit.processors import Summarize

    summarizer = CountingSummarizer()
    Summarize(summarizer=summarizer).compact(Recording.load().messages, 128_000, focus="the tests")
    assert summarizer.focuses == ["the tests"] and len(summarizer.calls) == 1


def test_importing_it_imports_no_framework() -> None:
    code = (
        "import sys, historykit.testing\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('pydantic_ai', 'langchain', "
        "'langchain_core', 'langgraph')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_demo_names_that_stay_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from historykit.demo import DEFAULT_WINDOW, THREAD_IDS, ReplayRun, main

    assert DEFAULT_WINDOW == 10_000 and THREAD_IDS and ReplayRun and main
    import historykit.demo

    with pytest.raises(AttributeError, match="no_such_name"):
        historykit.demo.no_such_name  # noqa: B018
