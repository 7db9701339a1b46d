"""Large tool outputs offloaded when they arrive, through real LangChain `create_agent` graphs with
a scripted chat model: a test run returns a 3,000-line log; the model is sent its head and tail
with a note naming a handle, never the whole log; it searches the log with `recall(grep=...)`,
reads a range of lines with `start_line`/`end_line`, and the tool never runs again. Both modes,
with the `SQLModelSaver` keeping the whole output in its transcript, and a new middleware (a new
process) reading the log from that transcript."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from historykit import Pipeline, Recall
from historykit._recall import recall_handle
from historykit.checkpointers import SQLModelSaver
from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.processors import ClearToolResults, OffloadToolOutputs, Repair
from tests.plugins.test_recall_langgraph import ScriptedChatModel, thread

FAILURE = "FAILED tests/test_auth.py::test_refresh - KeyError: 'refresh_token_7731'"
RAN: list[str] = []


def pytest_log() -> str:
    """A pytest log of 3,000 lines (about 37,000 tokens) whose one failure is in the middle."""
    lines = [f"tests/test_mod_{i // 50}.py::test_case_{i} PASSED" for i in range(3_000)]
    lines[1_500] = FAILURE
    return "\n".join(lines)


@tool
def run_tests() -> str:
    """Run the test suite."""
    RAN.append("run_tests")
    return pytest_log()


NOTE = re.compile(
    r"\[historykit: this output has 3,000 lines, [\d,]+ tokens; lines [\d,]+-[\d,]+ are left out above\. "
    r"recall\(handle='([0-9a-f]{10})'\) returns all of it; .*\]\Z"
)


class Investigator:
    """Runs the tests; reading the shortened log, greps it for the failure, then reads the lines
    around it, then answers. Keeps every run_tests output it was sent and every recall answer."""

    def __init__(self, handle: str | None = None) -> None:
        self.handle = handle
        self.seen: list[str] = []
        self.answers: list[str] = []
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        self.seen += [
            str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == "run_tests"
        ]
        latest = messages[-1]
        if isinstance(latest, ToolMessage) and latest.name == "recall":
            self.answers.append(str(latest.content))
            if len(self.answers) == 1:
                number = int(re.search(r"^\s*(\d+)\t", self.answers[0], re.MULTILINE)[1])  # type: ignore[index]
                return self._call(
                    "recall", {"handle": self.handle, "start_line": number - 1, "end_line": number + 1}
                )
            return AIMessage("Found the failure.")
        if self.handle is None:
            if not self.seen:
                return self._call("run_tests", {})
            found = NOTE.search(self.seen[-1])
            assert found, self.seen[-1][-400:]
            self.handle = found[1]
        return self._call("recall", {"handle": self.handle, "grep": "failed"})

    def _call(self, name: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage("", tool_calls=[{"id": f"call_{self.calls}", "name": name, "args": args}])


def pipeline() -> Pipeline:
    return Pipeline([OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000), ClearToolResults(), Repair()])


@pytest.fixture(autouse=True)
def _forget_runs() -> None:
    RAN.clear()


def check_the_investigation(script: Any) -> None:
    """What an investigation of either framework saw: the log only shortened, the failure found by
    `grep`, the lines around it read by range (`script` has `handle`, `seen` and `answers`)."""
    log = pytest_log()
    assert script.handle == recall_handle(log)
    # The model was never sent the whole log: the failure reached it only through recall.
    assert script.seen and all(FAILURE not in seen and len(seen) < len(log) // 10 for seen in script.seen)
    grep, lines = script.answers
    assert f"  1501\t{FAILURE}" in grep
    assert grep.endswith("1 matching line(s) shown, lines 1-3,000 of 3,000 searched; the end]")
    assert lines.split("\n")[:3] == [f"  {n}\t{log.split(chr(10))[n - 1]}" for n in (1500, 1501, 1502)]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_a_large_output_reaches_the_model_shortened_and_recall_searches_it(
    persist: bool, tmp_path: Path
) -> None:
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    script = Investigator()
    middleware = HistoryKitMiddleware(pipeline(), context_window=100_000, persist=persist, recall=True)
    agent = create_agent(
        ScriptedChatModel(respond=script), [run_tests], middleware=[middleware], checkpointer=saver
    )

    out = agent.invoke({"messages": [HumanMessage("Why do the tests fail?")]}, thread("offload"))

    assert out["messages"][-1].content == "Found the failure."
    assert RAN == ["run_tests"]  # recall never ran the tool again
    check_the_investigation(script)
    (stored,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "run_tests"]
    if persist:  # the thread holds the shortened output...
        assert NOTE.search(str(stored.content))
    else:  # ...or, view-only, the output as the tool returned it
        assert stored.content == pytest_log()
    # Either way the saver's transcript has every message as it arrived: the whole log.
    transcript = saver.transcript("offload")
    assert transcript is not None
    assert [
        m.content for m in transcript.messages if isinstance(m, ToolMessage) and m.name == "run_tests"
    ] == [pytest_log()]


async def test_a_new_middleware_searches_the_log_in_the_saver_transcript(tmp_path: Path) -> None:
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    first = Investigator()
    first.answers = ["", ""]  # it stops after seeing the note: no recall in this run

    def only_run(messages: list[BaseMessage]) -> AIMessage:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return first._call("run_tests", {})
        first.seen.append(str(messages[-1].content))
        return AIMessage("The tests ran.")

    middleware = HistoryKitMiddleware(pipeline(), context_window=100_000, persist=True, recall=True)
    agent = create_agent(
        ScriptedChatModel(respond=only_run), [run_tests], middleware=[middleware], checkpointer=saver
    )
    await agent.ainvoke({"messages": [HumanMessage("Run the tests.")]}, thread("offload"))
    found = NOTE.search(first.seen[-1])
    assert found

    second = Investigator(handle=found[1])
    fresh = HistoryKitMiddleware(pipeline(), context_window=100_000, persist=True, recall=Recall(store=saver))
    agent = create_agent(
        ScriptedChatModel(respond=second), [run_tests], middleware=[fresh], checkpointer=saver
    )
    out = await agent.ainvoke({"messages": [HumanMessage("Why did they fail?")]}, thread("offload"))

    assert out["messages"][-1].content == "Found the failure."
    assert RAN == ["run_tests"]
    check_the_investigation(second)
