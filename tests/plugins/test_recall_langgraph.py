"""Recall through real LangChain `create_agent` graphs with a scripted chat model: the model reads
files, an old result is cleared, and the model calls the middleware's `recall` tool with the handle
it read in the placeholder and gets the file back, without the file tool running again. View-only
(the graph state has the original), persistent (the middleware kept it), and a new middleware
reading it from the `SQLModelSaver`'s transcript; sync and async; an unknown handle."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from historykit import Pipeline
from historykit._recall import Recall, recall_handle
from historykit.checkpointers import SQLModelSaver
from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.processors import ClearToolResults, DedupeFileReads, Repair, Summarize, Trigger

WINDOW = 6_000
READS = 6
PLACEHOLDER = re.compile(
    r"\[cleared: output of read_file\(path='([^']+)'\), [\d,]+ tokens; "
    r"recall\(handle='([0-9a-f]+)'\) returns it\]"
)
RAN: list[str] = []


def file_content(path: str) -> str:
    """About 600 tokens of a source file, different for every path."""
    return "\n".join(
        f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})  # step {i}" for i in range(30)
    )


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    RAN.append(path)
    return file_content(path)


def pipeline() -> Pipeline:
    """Clears every result but the latest once the history passes 2,000 tokens."""
    clear = ClearToolResults(keep=1, min_tokens=50, min_gain=100, trigger=Trigger(max_tokens=2_000))
    return Pipeline([DedupeFileReads(), clear, Repair()])


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer is a function of the messages it is sent; it records the tools it
    was given and every input."""

    respond: Callable[[list[BaseMessage]], AIMessage]
    tools_offered: set[str] = Field(default_factory=set)
    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        self.tools_offered |= {t.name for t in tools}
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.inputs.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.respond(messages))])


def answered_recall(messages: list[BaseMessage], recalled: list[str]) -> AIMessage | None:
    """The answer to the recall tool's result, when that is the latest message (kept in `recalled`)."""
    latest = messages[-1]
    if isinstance(latest, ToolMessage) and latest.name == "recall":
        recalled.append(str(latest.content))
        return AIMessage("Recalled it.")
    return None


class Recaller:
    """Reads `reads` files, then (when `recalls`) recalls the first cleared one by the handle its
    placeholder names, then answers; or recalls `handle` straight away."""

    def __init__(self, reads: int = READS, *, recalls: bool = True, handle: str | None = None) -> None:
        self.reads, self.recalls, self.handle = reads, recalls, handle
        self.placeholders: list[tuple[str, str]] = []
        self.recalled: list[str] = []
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        if (answer := answered_recall(messages, self.recalled)) is not None:
            return answer
        if self.handle is not None and not self.recalled:
            return self._call("recall", {"handle": self.handle})
        reads = [m for m in messages if isinstance(m, ToolMessage) and m.name == "read_file"]
        for message in reads:
            found = PLACEHOLDER.fullmatch(str(message.content))
            if found and (found[1], found[2]) not in self.placeholders:
                self.placeholders.append((found[1], found[2]))
            if found and self.recalls:
                return self._call("recall", {"handle": found[2]})
        if len(reads) < self.reads:
            return self._call("read_file", {"path": f"src/f{len(reads)}.py"})
        return AIMessage("Read them all." if self.placeholders else "Nothing was cleared.")

    def _call(self, name: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage("", tool_calls=[{"id": f"call_{self.calls}", "name": name, "args": args}])


def thread(name: str) -> dict[str, Any]:
    return {"recursion_limit": 200, "configurable": {"thread_id": name}}


@pytest.fixture(autouse=True)
def _forget_runs() -> None:
    RAN.clear()


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_recalls_a_cleared_result_by_its_handle(persist: bool) -> None:
    script = Recaller()
    model = ScriptedChatModel(respond=script)
    middleware = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=persist, recall=True)
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())

    out = agent.invoke({"messages": [HumanMessage("Read the files under src/.")]}, thread("t1"))

    assert out["messages"][-1].content == "Recalled it."
    assert "recall" in model.tools_offered
    path, handle = script.placeholders[0]
    assert script.recalled == [file_content(path)]
    assert handle == recall_handle(file_content(path))
    assert RAN.count(path) == 1 and len(set(RAN)) == len(RAN)  # no file was read twice
    state = out["messages"]
    reads = [m for m in state if isinstance(m, ToolMessage) and m.name == "read_file"]
    if persist:  # the state holds the placeholder; the middleware kept the original
        assert any(PLACEHOLDER.fullmatch(str(m.content)) for m in reads)
    else:  # the state holds every result as the tool returned it
        assert [m.content for m in reads] == [file_content(p) for p in RAN]
    (answer,) = [m for m in state if isinstance(m, ToolMessage) and m.name == "recall"]
    assert answer.content == file_content(path)


async def test_a_new_middleware_recalls_from_the_saver_transcript(tmp_path: Path) -> None:
    """Persistent mode: the state keeps only the placeholder; a new middleware (a new process:
    nothing in memory) finds the original in the saver's transcript, every message the thread had."""
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    first = Recaller(recalls=False)
    middleware = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=True, recall=True)
    agent = create_agent(
        ScriptedChatModel(respond=first), [read_file], middleware=[middleware], checkpointer=saver
    )
    out = await agent.ainvoke({"messages": [HumanMessage("Read the files under src/.")]}, thread("t1"))
    assert out["messages"][-1].content == "Read them all."
    path, handle = first.placeholders[0]
    assert not any(m.content == file_content(path) for m in out["messages"])

    second = Recaller(handle=handle)
    fresh = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=True, recall=Recall(store=saver))
    agent = create_agent(
        ScriptedChatModel(respond=second), [read_file], middleware=[fresh], checkpointer=saver
    )
    out = await agent.ainvoke({"messages": [HumanMessage("What was in it?")]}, thread("t1"))

    assert out["messages"][-1].content == "Recalled it."
    assert second.recalled == [file_content(path)]
    assert RAN.count(path) == 1
    # The same from a sync graph: the tool reads the transcript with the saver's sync API.
    third = Recaller(handle=handle)
    fresh = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=True, recall=Recall(store=saver))
    agent = create_agent(
        ScriptedChatModel(respond=third), [read_file], middleware=[fresh], checkpointer=saver
    )
    agent.invoke({"messages": [HumanMessage("Once more?")]}, thread("t1"))
    assert third.recalled == [file_content(path)]


def test_an_unknown_handle_is_answered_not_raised() -> None:
    script = Recaller(handle="0123456789")
    middleware = HistoryKitMiddleware(pipeline(), context_window=WINDOW, recall=True)
    agent = create_agent(ScriptedChatModel(respond=script), [read_file], middleware=[middleware])

    out = agent.invoke({"messages": [HumanMessage("Recall something.")]})

    assert out["messages"][-1].content == "Recalled it."
    (answer,) = script.recalled
    assert answer.startswith("[recall: no cleared output has the handle '0123456789'")


def test_without_recall_the_placeholders_and_tools_are_as_before() -> None:
    script = Recaller(recalls=False)
    model = ScriptedChatModel(respond=script)
    agent = create_agent(
        model, [read_file], middleware=[HistoryKitMiddleware(pipeline(), context_window=WINDOW)]
    )

    out = agent.invoke({"messages": [HumanMessage("Read the files under src/.")]})

    assert model.tools_offered == {"read_file"}
    assert script.placeholders == []
    sent = [m for m in model.inputs[-1] if isinstance(m, ToolMessage)]
    assert any(str(m.content).endswith("tokens; call the tool again to see it]") for m in sent)
    assert out["messages"][-1].content == "Nothing was cleared."


SUMMARY_ITEM = re.compile(r"^- read_file\(path='([^']+)'\): recall\(handle='([0-9a-f]+)'\)$", re.MULTILINE)


class SummaryRecaller(Recaller):
    """Reads `READS` files; once a summary replaced some, recalls the first one its recall section
    names, by that handle, then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.named: list[tuple[str, str]] = []

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        if (answer := answered_recall(messages, self.recalled)) is not None:
            return answer
        for message in messages:
            if isinstance(message, HumanMessage) and (found := SUMMARY_ITEM.findall(str(message.content))):
                self.named = found
                return self._call("recall", {"handle": found[0][1]})
        reads = [m for m in messages if isinstance(m, ToolMessage) and m.name == "read_file"]
        if len(reads) < READS:
            return self._call("read_file", {"path": f"src/f{len(reads)}.py"})
        return AIMessage("Nothing was summarized.")


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_recalls_an_output_a_summary_replaced_by_the_handle_the_summary_names(
    persist: bool,
) -> None:
    script = SummaryRecaller()
    model = ScriptedChatModel(respond=script)
    summarize = Summarize(trigger=Trigger(max_tokens=2_000), keep_last=1, min_gain=100, summary_tokens=300)
    middleware = HistoryKitMiddleware(
        Pipeline([summarize, Repair()]), context_window=WINDOW, persist=persist, recall=True
    )
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())

    out = agent.invoke({"messages": [HumanMessage("Read the files under src/.")]}, thread("t-summary"))

    assert out["messages"][-1].content == "Recalled it."
    assert summarize.recall_tool == "recall"  # the middleware installed the tool on the summary too
    path, handle = script.named[0]
    assert handle == recall_handle(file_content(path))
    assert script.recalled == [file_content(path)]  # the whole output, not run again
    assert RAN.count(path) == 1


INDEX_ITEM = re.compile(r"earlier tool outputs are listed by recall\(handle='([0-9a-f]+)'\)")


def short_content(path: str) -> str:
    return f"{path}: total = compute(value, factor={len(path) * 7 % 13})  # the only line"


@tool
def read_short_file(path: str) -> str:
    """Read a small file of the repository."""
    RAN.append(path)
    return short_content(path)


class IndexFollower(Recaller):
    """Reads `files` small files; once a summary's recall section names an index of the outputs it
    had no room for, recalls that index, then the first file the index lists, then answers."""

    def __init__(self, files: int) -> None:
        super().__init__()
        self.files = files

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        latest = messages[-1]
        if isinstance(latest, ToolMessage) and latest.name == "recall":
            self.recalled.append(str(latest.content))
            if len(self.recalled) == 1:
                listed = re.findall(
                    r"^- read_short_file\(path='[^']+'\): recall\(handle='([0-9a-f]+)'\)$",
                    self.recalled[0],
                    re.MULTILINE,
                )
                return self._call("recall", {"handle": listed[0]})
            return AIMessage("Recalled it.")
        for message in messages:
            if isinstance(message, HumanMessage) and (found := INDEX_ITEM.search(str(message.content))):
                return self._call("recall", {"handle": found[1]})
        reads = [m for m in messages if isinstance(m, ToolMessage) and m.name == "read_short_file"]
        if len(reads) < self.files:
            return self._call("read_short_file", {"path": f"src/f{len(reads)}.py"})
        return AIMessage("No index was written.")


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_follows_a_summary_index_to_an_output_the_section_had_no_room_for(persist: bool) -> None:
    """Past its room a summary's recall section names an index of the older outputs: the recall tool
    returns the index (kept in the graph state in both modes), and from it the output itself."""
    script = IndexFollower(files=40)
    model = ScriptedChatModel(respond=script)
    summarize = Summarize(trigger=Trigger(max_tokens=1_500), keep_last=1, min_gain=100, summary_tokens=300)
    middleware = HistoryKitMiddleware(
        Pipeline([summarize, Repair()]), context_window=2_500, persist=persist, recall=True
    )
    agent = create_agent(model, [read_short_file], middleware=[middleware], checkpointer=InMemorySaver())

    out = agent.invoke(
        {"messages": [HumanMessage("Read the files under src/.")]}, thread(f"t-index-{persist}")
    )

    assert out["messages"][-1].content == "Recalled it."
    index, output = script.recalled
    assert index.startswith("[historykit: ") and "a summary had no room to list" in index
    assert output == short_content("src/f0.py")
    assert RAN.count("src/f0.py") == 1  # given back, not read again
