"""Recall through real Pydantic AI agents (FunctionModel, 1.x and 2.x): the model reads files, an
old result is cleared, and the model calls the `recall` tool with the handle it read in the
placeholder and gets the file back, without the file tool running again. View-only (the run's
history has the original), persistent (the capability kept it), and a new capability reading it
from a `SQLModelConversationStore`; an unknown handle and a long output paged by `offset`."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from historykit import Pipeline
from historykit._recall import Recall, recall_handle
from historykit.processors import ClearToolResults, DedupeFileReads, Repair, Summarize, Trigger

pytestmark = pytest.mark.pydantic_ai

_PAI2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")
WINDOW = 6_000
READS = 6
NO_LIMIT = UsageLimits(request_limit=None)
PLACEHOLDER = re.compile(
    r"\[cleared: output of read_file\(path='([^']+)'\), [\d,]+ tokens; "
    r"recall\(handle='([0-9a-f]+)'\) returns it\]"
)
NEXT_PART = re.compile(r"recall\(handle='([0-9a-f]+)', offset=(\d+)\) returns the next part")


def file_content(path: str) -> str:
    """About 600 tokens of a source file, different for every path."""
    return "\n".join(
        f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})  # step {i}" for i in range(30)
    )


def pipeline() -> Pipeline:
    """Clears every result but the latest once the history passes 2,000 tokens."""
    clear = ClearToolResults(keep=1, min_tokens=50, min_gain=100, trigger=Trigger(max_tokens=2_000))
    return Pipeline([DedupeFileReads(), clear, Repair()])


def tool_returns(messages: list[pai.ModelMessage], name: str | None = None) -> list[pai.ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart) and (name is None or p.tool_name == name)
    ]


@dataclass
class RecallingModel:
    """Reads `reads` files, then recalls the first cleared one by the handle its placeholder names
    (following `offset=` notes for a long one), then answers. It keeps what it saw."""

    reads: int = READS
    handle: str | None = None
    """Recall this handle instead of one read from a placeholder."""
    recalls: bool = True
    """`False`: only read (and note the placeholders it sees)."""
    placeholders: list[tuple[str, str]] = field(default_factory=list)
    recalled: list[str] = field(default_factory=list)
    tools_offered: set[str] = field(default_factory=set)
    calls: int = 0

    def respond(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls += 1
        self.tools_offered |= {t.name for t in info.function_tools}
        latest = messages[-1]
        if isinstance(latest, pai.ModelRequest):
            for part in latest.parts:
                if isinstance(part, pai.ToolReturnPart) and part.tool_name == "recall":
                    self.recalled.append(str(part.content))
                    more = NEXT_PART.search(str(part.content))
                    if more:
                        return self._call("recall", {"handle": more[1], "offset": int(more[2])})
                    return pai.ModelResponse([pai.TextPart("Recalled it.")])
        if self.handle is not None and not self.recalled:
            return self._call("recall", {"handle": self.handle})
        for part in tool_returns(messages, "read_file"):
            found = PLACEHOLDER.fullmatch(str(part.content))
            if found and (found[1], found[2]) not in self.placeholders:
                self.placeholders.append((found[1], found[2]))
            if found and self.recalls:
                return self._call("recall", {"handle": found[2]})
        done = len(tool_returns(messages, "read_file"))
        if done < self.reads:
            return self._call("read_file", {"path": f"src/f{done}.py"})
        return pai.ModelResponse(
            [pai.TextPart("Read them all." if self.placeholders else "Nothing was cleared.")]
        )

    def _call(self, tool: str, args: dict[str, Any]) -> pai.ModelResponse:
        return pai.ModelResponse([pai.ToolCallPart(tool, args, tool_call_id=f"call_{self.calls}")])


def make_agent(model: RecallingModel, kit: Any, ran: list[str]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model.respond), capabilities=[kit])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        ran.append(path)
        return file_content(path)

    return agent


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_recalls_a_cleared_result_by_its_handle(persist: bool) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    model, ran = RecallingModel(), []
    kit = HistoryKit(pipeline(), context_window=WINDOW, persist=persist, recall=True)
    agent = make_agent(model, kit, ran)

    result = agent.run_sync("Read the files under src/.", usage_limits=NO_LIMIT)

    assert result.output == "Recalled it."
    assert "recall" in model.tools_offered
    path, handle = model.placeholders[0]
    # The model got the file back, the very text the tool returned, and the tool did not run again.
    assert model.recalled == [file_content(path)]
    assert handle == recall_handle(file_content(path))
    assert ran == [f"src/f{i}.py" for i in range(len(ran))] and len(set(ran)) == len(ran)
    (recall_return,) = tool_returns(result.all_messages(), "recall")
    assert recall_return.content == file_content(path)
    stored = tool_returns(result.all_messages(), "read_file")
    if persist:  # the run's history holds the placeholder; the capability kept the original
        assert any(PLACEHOLDER.fullmatch(str(p.content)) for p in stored)
    else:  # the run's history holds every result as the tool returned it
        assert {str(p.content) for p in stored} == {file_content(p) for p in ran}


def test_an_unknown_handle_is_answered_not_raised() -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    model = RecallingModel(handle="0123456789")
    agent = make_agent(model, HistoryKit(pipeline(), context_window=WINDOW, recall=True), [])

    result = agent.run_sync("Recall something.", usage_limits=NO_LIMIT)

    assert result.output == "Recalled it."
    (answer,) = model.recalled
    assert answer.startswith("[recall: no cleared output has the handle '0123456789'")


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_a_long_output_comes_back_in_pages(persist: bool) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    model, ran = RecallingModel(), []
    kit = HistoryKit(pipeline(), context_window=WINDOW, persist=persist, recall=Recall(max_chars=700))
    agent = make_agent(model, kit, ran)

    assert agent.run_sync("Read the files under src/.", usage_limits=NO_LIMIT).output == "Recalled it."

    path, _ = model.placeholders[0]
    original = file_content(path)
    pages = model.recalled
    assert len(pages) == -(-len(original) // 700) > 1
    texts = [page.rsplit("\n[recall: characters ", 1)[0] for page in pages]
    assert all(len(text) <= 700 for text in texts)
    assert "".join(texts) == original
    assert pages[-1].endswith("; the end]")


@pytest.mark.skipif(not _PAI2, reason="the conversation store needs Pydantic AI 2.x")
async def test_a_new_capability_recalls_from_the_conversation_store(tmp_path: Path) -> None:
    """Persistent mode across runs: the store saved the history before it was cleared; a new
    capability (a new process: nothing in memory) finds the original in the store's transcript."""
    from pydantic_ai.conversation import Conversation

    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    ran: list[str] = []
    first = RecallingModel(reads=2)
    kit = HistoryKit(pipeline(), context_window=WINDOW, recall=True)
    agent = make_agent(first, kit, ran)
    result = await agent.run("Read two files.", conversation=Conversation(conversation_id="c1"))
    await store.save(result)
    assert first.placeholders == []  # nothing cleared yet: the store has every file as read

    second = RecallingModel(reads=READS, recalls=False)
    conversation = await store.load("c1")
    agent = make_agent(second, kit, ran)
    result = await agent.run("Read more.", conversation=conversation, usage_limits=NO_LIMIT)
    await store.save(result)
    assert result.output == "Read them all."
    path, handle = second.placeholders[0]
    assert path in ("src/f0.py", "src/f1.py")  # a file of the first run, cleared in the second

    third = RecallingModel(handle=handle)
    fresh = HistoryKit(pipeline(), context_window=WINDOW, recall=Recall(store=store))
    agent = make_agent(third, fresh, ran)
    # The conversation as the second run left it: the processed history, placeholders only.
    conversation = Conversation(conversation_id="c1", messages=result.all_messages())
    history = tool_returns(list(conversation.messages), "read_file")
    assert not any(p.content == file_content(path) for p in history)
    result = await agent.run("What was in it?", conversation=conversation, usage_limits=NO_LIMIT)

    assert result.output == "Recalled it."
    assert third.recalled == [file_content(path)]
    assert ran.count(path) == 1


def request_texts(messages: list[pai.ModelMessage]) -> Iterator[str]:
    """The text of each part of the requests: a summary is one (Pydantic AI 2.x: a `CompactionPart`;
    1.x: a user prompt whose content is a list of text items)."""
    for message in messages:
        for part in message.parts if isinstance(message, pai.ModelRequest) else ():
            content = getattr(part, "content", "")
            items = content if isinstance(content, list) else [content]
            yield "\n".join(str(getattr(item, "content", item)) for item in items)


SUMMARY_ITEM = re.compile(r"^- read_file\(path='([^']+)'\): recall\(handle='([0-9a-f]+)'\)$", re.MULTILINE)


@dataclass
class _RecallingModel:
    """What the recalling models share: the texts the recall tool returned to them, and their calls."""

    recalled: list[str] = field(default_factory=list)
    calls: int = 0

    def _step(self, messages: list[pai.ModelMessage]) -> bool:
        """Count the call; whether the last request answered a recall (its text is kept)."""
        self.calls += 1
        returns = tool_returns(messages[-1:], "recall")
        if returns:
            self.recalled.append(str(returns[0].content))
        return bool(returns)

    def _call(self, tool: str, args: dict[str, Any]) -> pai.ModelResponse:
        return pai.ModelResponse([pai.ToolCallPart(tool, args, tool_call_id=f"call_{self.calls}")])


@dataclass
class SummaryRecallingModel(_RecallingModel):
    """Reads `READS` files; once a summary replaced some, recalls the first one its recall section
    names, by that handle, then answers."""

    named: list[tuple[str, str]] = field(default_factory=list)

    def respond(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        if self._step(messages):
            return pai.ModelResponse([pai.TextPart("Recalled it.")])
        for text in request_texts(messages):
            if found := SUMMARY_ITEM.findall(text):
                self.named = found
                return self._call("recall", {"handle": found[0][1]})
        done = len(tool_returns(messages, "read_file"))
        if done < READS:
            return self._call("read_file", {"path": f"src/f{done}.py"})
        return pai.ModelResponse([pai.TextPart("Nothing was summarized.")])


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_recalls_an_output_a_summary_replaced_by_the_handle_the_summary_names(
    persist: bool,
) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    model, ran = SummaryRecallingModel(), []
    summarize = Summarize(trigger=Trigger(max_tokens=2_000), keep_last=1, min_gain=100, summary_tokens=300)
    kit = HistoryKit(Pipeline([summarize, Repair()]), context_window=WINDOW, persist=persist, recall=True)
    agent: Agent[None, str] = Agent(FunctionModel(model.respond), capabilities=[kit])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        ran.append(path)
        return file_content(path)

    result = agent.run_sync("Read the files under src/.", usage_limits=UsageLimits(request_limit=40))

    assert result.output == "Recalled it."
    assert summarize.recall_tool == "recall"  # the capability installed the tool on the summary too
    path, handle = model.named[0]
    assert handle == recall_handle(file_content(path))
    assert model.recalled == [file_content(path)]  # the whole output, and the tool did not run again
    assert ran.count(path) == 1


INDEX_ITEM = re.compile(r"earlier tool outputs are listed by recall\(handle='([0-9a-f]+)'\)")


@dataclass
class IndexFollowingModel(_RecallingModel):
    """Reads `files` small files; once a summary's recall section names an index of the outputs it
    had no room for, recalls that index, then the first file the index lists, then answers."""

    files: int = field(kw_only=True)

    def respond(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        if self._step(messages):
            if len(self.recalled) == 1:
                listed = SUMMARY_ITEM.findall(self.recalled[0])
                return self._call("recall", {"handle": listed[0][1]})
            return pai.ModelResponse([pai.TextPart("Recalled it.")])
        for text in request_texts(messages):
            if found := INDEX_ITEM.search(text):
                return self._call("recall", {"handle": found[1]})
        done = len(tool_returns(messages, "read_file"))
        if done < self.files:
            return self._call("read_file", {"path": f"src/f{done}.py"})
        return pai.ModelResponse([pai.TextPart("No index was written.")])


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_the_model_follows_a_summary_index_to_an_output_the_section_had_no_room_for(persist: bool) -> None:
    """Past its room (15% of the window) a summary's recall section names an index of the older
    outputs: the recall tool returns the index (the capability kept it with the conversation, in
    both modes), and from it the output itself."""
    from historykit.plugins.pydantic_ai import HistoryKit

    model, ran = IndexFollowingModel(files=40), []
    summarize = Summarize(trigger=Trigger(max_tokens=1_500), keep_last=1, min_gain=100, summary_tokens=300)
    kit = HistoryKit(Pipeline([summarize, Repair()]), context_window=2_500, persist=persist, recall=True)
    agent: Agent[None, str] = Agent(FunctionModel(model.respond), capabilities=[kit])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        ran.append(path)
        return f"{path}: total = compute(value, factor={len(path) * 7 % 13})  # the only line"

    result = agent.run_sync("Read the files under src/.", usage_limits=NO_LIMIT)

    assert result.output == "Recalled it."
    index, output = model.recalled
    assert index.startswith("[historykit: ") and "a summary had no room to list" in index
    assert "- read_file(path='src/f0.py'): recall(handle=" in index
    assert output == "src/f0.py: total = compute(value, factor=11)  # the only line"
    assert ran.count("src/f0.py") == 1  # given back, not read again
