"""Races and crashes on one thread: two runs at once, a manual compaction racing a run, a crash
between LangGraph's background saves, a delete racing a writer. Whatever happens, the transcript
passes `historykit.check()`, holds each message once, and loses no turn that LangGraph's own savers
keep; the opt-in single-writer guard refuses a second run with a clear error.

Every test runs on SQLite, PostgreSQL and MariaDB (`database_url`).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint

import historykit
from historykit.checkpointers import SQLModelSaver, _langgraph_protocol
from historykit.errors import ConcurrentRunError, WriteConflictError
from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.testing import CountingSummarizer
from tests.plugins.test_langgraph_agent import ToolCallingFakeModel, read_file

REPO = Path(__file__).resolve().parents[2]


def _script(worker: int, calls: int) -> Iterator[AIMessage]:
    for n in range(calls):
        call = {"id": f"call_{worker}_{n}", "name": "read_file", "args": {"path": f"src/w{worker}_{n}.py"}}
        yield AIMessage(f"Worker {worker} reads file {n}.", tool_calls=[call])
    yield AIMessage(f"Worker {worker} is done.")


def _agent(saver: Any, worker: int, calls: int, middleware: Any = None) -> Any:
    model = ToolCallingFakeModel(messages=_script(worker, calls))
    return create_agent(model, [read_file], checkpointer=saver, middleware=[middleware] if middleware else [])


def _no_duplicates(messages: list[BaseMessage]) -> None:
    ids = Counter(m.id for m in messages)
    assert not [i for i, n in ids.items() if n > 1], "a message is in the transcript twice"
    texts = Counter((m.type, str(m.content)) for m in messages if isinstance(m, HumanMessage))
    assert not [t for t, n in texts.items() if n > 1], "a user's message is in the transcript twice"


# ---- two runs at once -----------------------------------------------------------------------


def _concurrent_runs(url: str, workers: int, calls: int, **saver_options: Any) -> list[Any]:
    """`workers` runs of one thread started together, each with its own saver (as separate
    server workers have); each run's final state, or the exception it raised. Each run reads the
    thread before any of them writes (a double submit): a barrier holds every run after its first
    read, however slowly the machine starts them."""
    SQLModelSaver(url).setup()
    barrier = threading.Barrier(workers)
    outcomes: list[Any] = [None] * workers
    config = {"configurable": {"thread_id": "double-submit"}}

    def run(worker: int) -> None:
        saver = SQLModelSaver(url, **saver_options)
        read = saver.get_tuple
        waited = False

        def get_tuple_then_wait(config: Any) -> Any:
            nonlocal waited
            found = read(config)
            if not waited:
                waited = True
                barrier.wait(60)
            return found

        saver.get_tuple = get_tuple_then_wait  # type: ignore[method-assign]
        agent = _agent(saver, worker, calls)
        try:
            outcomes[worker] = agent.invoke({"messages": [HumanMessage(f"Task of worker {worker}")]}, config)
        except Exception as exc:  # the single-writer guard's refusal, asserted by the caller
            outcomes[worker] = exc
        finally:
            saver.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return outcomes


def test_two_runs_at_once_leave_a_valid_transcript(database_url: str) -> None:
    outcomes = _concurrent_runs(database_url, workers=4, calls=4)
    assert all(isinstance(o, dict) for o in outcomes), outcomes
    saver = SQLModelSaver(database_url)
    transcript = saver.transcript("double-submit")
    assert transcript is not None
    assert historykit.check(transcript.messages) == []
    _no_duplicates(transcript.messages)
    # Nothing any run returned is missing from the transcript.
    stored = {m.id for m in transcript.messages}
    for state in outcomes:
        assert {m.id for m in state["messages"]} <= stored
    # The state is one run's turns, as with LangGraph's own savers, and valid.
    latest = saver.get_tuple({"configurable": {"thread_id": "double-submit"}})
    assert latest is not None
    assert historykit.check(latest.checkpoint["channel_values"]["messages"]) == []


def test_the_single_writer_guard_refuses_a_second_run(database_url: str) -> None:
    outcomes = _concurrent_runs(database_url, workers=4, calls=4, single_writer=True)
    refused = [o for o in outcomes if isinstance(o, ConcurrentRunError)]
    finished = [o for o in outcomes if isinstance(o, dict)]
    assert len(finished) == 1 and len(refused) == 3, outcomes
    assert "double-submit" in str(refused[0]) and "single_writer" in str(refused[0])
    saver = SQLModelSaver(database_url, single_writer=True)
    transcript = saver.transcript("double-submit")
    assert transcript is not None and historykit.check(transcript.messages) == []
    for state in finished:
        assert {m.id for m in state["messages"]} <= {m.id for m in transcript.messages}
    # The next turn, once the runs are over, is not refused.
    after = _agent(saver, 9, 1).invoke(
        {"messages": [HumanMessage("One more thing")]}, {"configurable": {"thread_id": "double-submit"}}
    )
    assert after["messages"][-1].content == "Worker 9 is done."


def _blocking_tool_agent(saver: Any, name: str, gate: threading.Event, entered: threading.Event) -> Any:
    """An agent whose one tool call waits for `gate`: a run stays in the middle of its step."""

    @tool
    def slow_read(path: str) -> str:
        """Read a file, slowly."""
        entered.set()
        if not gate.wait(60):
            raise TimeoutError("the test never opened the gate")
        return f"contents of {path}"

    def script() -> Iterator[AIMessage]:
        yield AIMessage(
            f"{name} reads.", tool_calls=[{"id": f"{name}_0", "name": "slow_read", "args": {"path": "a.py"}}]
        )
        yield AIMessage(f"{name} is done.")

    return create_agent(ToolCallingFakeModel(messages=script()), [slow_read], checkpointer=saver)


def _wait_for_step(saver: Any, config: Any, step: int) -> None:
    """Until the thread's latest checkpoint is of `step` (LangGraph saves it in the background,
    while the step's nodes already run)."""
    deadline = time.monotonic() + 60
    while (latest := saver.get_tuple(config)) is None or latest.metadata["step"] < step:
        assert time.monotonic() < deadline, "the run never saved its step"
        time.sleep(0.01)


def test_the_guard_refuses_a_run_started_while_another_is_in_the_middle_of_a_step(database_url: str) -> None:
    """A second run that starts after the first one saved a step reads that step as the thread's
    latest checkpoint, and its first checkpoint extends it: the guard still refuses it, because
    the first run has nodes to run after that checkpoint. (Found by the double-submit test on a
    loaded machine: the second run went on and the first was refused, leaving a tool call
    without its result.)"""
    SQLModelSaver(database_url).setup()
    config = {"configurable": {"thread_id": "mid-step"}}
    gate, entered = threading.Event(), threading.Event()
    first_saver, second_saver = (SQLModelSaver(database_url, single_writer=True) for _ in range(2))
    outcome: list[Any] = []

    def first_run() -> None:
        agent = _blocking_tool_agent(first_saver, "first", gate, entered)
        outcome.append(agent.invoke({"messages": [HumanMessage("First task")]}, config))

    thread = threading.Thread(target=first_run)
    thread.start()
    try:
        assert entered.wait(60), "the first run never reached its tool"
        _wait_for_step(first_saver, config, 1)
        with pytest.raises(ConcurrentRunError, match="steps still to run"):
            _agent(second_saver, 2, 1).invoke({"messages": [HumanMessage("Second task")]}, config)
    finally:
        gate.set()
        thread.join(60)
    assert outcome and outcome[0]["messages"][-1].content == "first is done."
    transcript = SQLModelSaver(database_url).transcript("mid-step")
    assert transcript is not None and historykit.check(transcript.messages) == []
    assert "Second task" not in [m.content for m in transcript.messages]
    # Once the first run is over, the second is welcome.
    after = _agent(second_saver, 2, 0).invoke({"messages": [HumanMessage("Second task")]}, config)
    assert after["messages"][-1].content == "Worker 2 is done."
    for saver in (first_saver, second_saver):
        saver.close()


def test_the_guard_lets_a_run_start_after_one_that_failed_or_was_stopped_long_ago(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that failed in a tool saved its error: the next run starts at once. A run whose
    process was killed left nothing behind: the next run starts once `RUN_SILENCE` has passed."""
    SQLModelSaver(database_url).setup()
    saver = SQLModelSaver(database_url, single_writer=True)

    @tool
    def broken_read(path: str) -> str:
        """Read a file (it fails)."""
        raise RuntimeError("disk on fire")

    def script() -> Iterator[AIMessage]:
        yield AIMessage(
            "Reading.", tool_calls=[{"id": "b_0", "name": "broken_read", "args": {"path": "a.py"}}]
        )

    failed = {"configurable": {"thread_id": "failed"}}
    with pytest.raises(RuntimeError, match="disk on fire"):
        create_agent(ToolCallingFakeModel(messages=script()), [broken_read], checkpointer=saver).invoke(
            {"messages": [HumanMessage("Try")]}, failed
        )
    assert _agent(saver, 3, 0).invoke({"messages": [HumanMessage("Again")]}, failed)["messages"][
        -1
    ].content == ("Worker 3 is done.")

    # A run stopped after saving its step, nothing else written: what a killed process leaves
    # (a static `interrupt_before` stops it the same way, and is told apart no better).
    killed = {"configurable": {"thread_id": "killed"}}
    gate, entered = threading.Event(), threading.Event()
    stopped = _blocking_tool_agent(saver, "killed", gate, entered)
    stopped.invoke({"messages": [HumanMessage("Work")]}, killed, interrupt_before=["tools"])
    with pytest.raises(ConcurrentRunError, match="steps still to run"):
        _agent(saver, 4, 0).invoke({"messages": [HumanMessage("Next")]}, killed)
    monkeypatch.setattr(_langgraph_protocol, "RUN_SILENCE", 0.0)
    assert _agent(saver, 4, 0).invoke({"messages": [HumanMessage("Next")]}, killed)["messages"][
        -1
    ].content == ("Worker 4 is done.")
    saver.close()


# ---- a manual compaction racing a run -------------------------------------------------------


def test_compact_thread_racing_a_run_duplicates_nothing(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    middleware = HistoryKitMiddleware(
        historykit.default_pipeline(summarizer=CountingSummarizer()), persist=True
    )
    config = {"configurable": {"thread_id": "compacted"}}
    agent = _agent(saver, 0, 2, middleware)
    agent.invoke({"messages": [HumanMessage("Start with the first files.")]}, config)

    calls = 30
    slow = _agent(saver, 1, calls, middleware)
    done: list[Any] = []

    def run() -> None:
        done.append(slow.invoke({"messages": [HumanMessage("What does the code do?")]}, config))

    runner = threading.Thread(target=run)
    runner.start()
    reports, refused = [], 0
    while runner.is_alive():
        try:
            reports.append(middleware.compact_thread(slow, config, "keep what the files do", keep_last=2))
        except WriteConflictError as exc:  # the run kept moving the thread on: refused, nothing written
            assert "compacted" in str(exc)
            refused += 1
    runner.join()
    assert done and (reports or refused)
    # Once the run is over, the compaction goes through.
    reports.append(middleware.compact_thread(slow, config, "keep what the files do", keep_last=2))

    transcript = saver.transcript("compacted")
    assert transcript is not None
    assert historykit.check(transcript.messages) == []
    _no_duplicates(transcript.messages)
    # Every turn the run returned is in the transcript, and its answer is in the state.
    assert {m.id for m in done[0]["messages"]} <= {m.id for m in transcript.messages}
    state = slow.get_state(config).values["messages"]
    assert historykit.check(state) == []
    assert state[-1].content == "Worker 1 is done."


# ---- a crash between LangGraph's background saves --------------------------------------------

_CRASHING_RUN = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[2])
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from historykit.checkpointers import SQLModelSaver, _langgraph_protocol
from tests.plugins.test_langgraph_agent import ToolCallingFakeModel, read_file
from tests.checkpointers.test_saver_races import _script

saver = SQLModelSaver(sys.argv[1])
put_writes, put = saver.put_writes, saver.put

def listed(value):
    return value if isinstance(value, list) else [value]

def calls_tool(value):
    return any(isinstance(m, AIMessage) and m.tool_calls for m in listed(value))

def is_result(value):
    return any(isinstance(m, ToolMessage) for m in listed(value))

def slow_put_writes(config, writes, task_id, task_path=""):
    # LangGraph saves in the background: the call's saves are held back, the result's goes first,
    # and the process dies right after it.
    if any(calls_tool(v) for _, v in writes):
        time.sleep(2)
    put_writes(config, writes, task_id, task_path)
    if any(is_result(v) for _, v in writes):
        os.kill(os.getpid(), signal.SIGKILL)

def slow_put(config, checkpoint, metadata, versions):
    if calls_tool(checkpoint["channel_values"].get("messages", [])[-1:]):
        time.sleep(2)
    return put(config, checkpoint, metadata, versions)

saver.put_writes, saver.put = slow_put_writes, slow_put
agent = create_agent(ToolCallingFakeModel(messages=_script(0, 2)), [read_file], checkpointer=saver)
agent.invoke({"messages": [HumanMessage("Read the files.")]}, {"configurable": {"thread_id": "crashed"}})
"""


def test_a_crash_between_background_saves_never_shows_a_result_before_its_call(
    database_url: str, tmp_path: Path
) -> None:
    SQLModelSaver(database_url).setup()
    script = tmp_path / "crashing_run.py"
    script.write_text(_CRASHING_RUN)
    done = subprocess.run(
        [sys.executable, str(script), database_url, str(REPO)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr  # SIGKILL
    saver = SQLModelSaver(database_url)
    transcript = saver.transcript("crashed")
    # The result is logged, its call is not (yet): the transcript holds it back. (The user's
    # message is there once the checkpoint holding it was saved before the kill.)
    assert transcript is not None
    assert historykit.check(transcript.messages) == []
    assert [m.type for m in transcript.messages] in (["human"], [])
    # The next run heals the thread: the call is logged, and the result with it. It resumes from
    # the last checkpoint; on a loaded machine the kill can come before the first one was saved
    # (LangGraph saves in the background), and then the run starts over from its input.
    config = {"configurable": {"thread_id": "crashed"}}
    saved = saver.get_tuple(config) is not None
    _agent(saver, 0, 2).invoke(None if saved else {"messages": [HumanMessage("Read the files.")]}, config)
    transcript = saver.transcript("crashed")
    assert transcript is not None and historykit.check(transcript.messages) == []
    assert [m.type for m in transcript.messages][:3] == ["human", "ai", "tool"]
    _no_duplicates(transcript.messages)


# ---- a delete racing a writer ----------------------------------------------------------------


def test_a_write_after_the_thread_was_deleted_leaves_no_orphan(database_url: str) -> None:
    """A run's node writes reach the saver after another saver deleted the thread (between the
    run's checkpoint and its writes): nothing of the thread comes back."""
    writer, deleter = SQLModelSaver(database_url), SQLModelSaver(database_url)
    config = {"configurable": {"thread_id": "deleted", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [HumanMessage("hi", id="h")]}
    checkpoint["channel_versions"] = {"messages": writer.get_next_version(None, None)}
    saved = writer.put(
        config, checkpoint, {"source": "loop", "step": 0}, dict(checkpoint["channel_versions"])
    )
    deleter.delete_thread("deleted")
    writer.put_writes(saved, [("messages", [AIMessage("late", id="late")])], "task")
    # The run's next writes (another task's), once the first ones found the thread gone and this
    # process forgot it: they must not start it again (the race test below found one in ~15 runs).
    writer.put_writes(saved, [("messages", [AIMessage("later", id="later")])], "other task")
    fresh = SQLModelSaver(database_url)
    assert fresh.get_tuple(config) is None
    assert list(fresh.list(config)) == []
    assert fresh.transcript("deleted") is None, "a message outlived its thread's delete"


@pytest.mark.parametrize("writes_first", [False, True], ids=["checkpoint-first", "writes-first"])
def test_a_run_going_on_after_a_delete_keeps_its_state_order(database_url: str, writes_first: bool) -> None:
    """The thread is deleted between a step's checkpoint and the next: the run's next checkpoint
    logs its whole state again, and the node's writes of the step before (saved concurrently, in
    either order) must not move their message before that state (found by the delete race below:
    the answer came first in the transcript)."""
    writer, deleter = SQLModelSaver(database_url), SQLModelSaver(database_url)
    config = {"configurable": {"thread_id": "deleted", "checkpoint_ns": ""}}
    question, answer = HumanMessage("question", id="h"), AIMessage("answer", id="a")
    first = empty_checkpoint()
    first["channel_values"] = {"messages": [question]}
    first["channel_versions"] = {"messages": writer.get_next_version(None, None)}
    saved = writer.put(config, first, {"source": "loop", "step": 0}, dict(first["channel_versions"]))
    deleter.delete_thread("deleted")
    second = empty_checkpoint()  # a newer id: LangGraph's ids grow with time
    second["channel_values"] = {"messages": [question, answer]}
    second["channel_versions"] = {
        "messages": writer.get_next_version(first["channel_versions"]["messages"], None)
    }

    def put_writes() -> None:
        # Written first, by a saver that never saw the thread (another worker's): it starts the
        # thread again, and the next checkpoint's state is logged after the answer.
        (SQLModelSaver(database_url) if writes_first else writer).put_writes(
            saved, [("messages", [answer])], "model"
        )

    if writes_first:
        put_writes()
    writer.put(saved, second, {"source": "loop", "step": 1}, dict(second["channel_versions"]))
    if not writes_first:
        put_writes()
    transcript = SQLModelSaver(database_url).transcript("deleted")
    assert transcript is not None
    assert [m.id for m in transcript.messages] == ["h", "a"]


def test_a_delete_racing_running_agents_leaves_no_orphan(database_url: str) -> None:
    config = {"configurable": {"thread_id": "deleted"}}
    writer, deleter = SQLModelSaver(database_url), SQLModelSaver(database_url)

    def write(stop: threading.Event, attempt: int) -> None:
        n = 0
        while not stop.is_set():
            # A run that meets the delete halfway may fail; it must not leave orphans.
            with contextlib.suppress(Exception):
                _agent(writer, 100 * attempt + n, 2).invoke(
                    {"messages": [HumanMessage(f"More {attempt}.{n}")]}, config
                )
            n += 1

    for attempt in range(5):
        stop = threading.Event()
        thread = threading.Thread(target=write, args=(stop, attempt))
        thread.start()
        time.sleep(0.05 + 0.02 * attempt)
        deleter.delete_thread("deleted")
        stop.set()
        thread.join(60)
        fresh = SQLModelSaver(database_url)
        latest = fresh.get_tuple(config)
        transcript = fresh.transcript("deleted")
        if latest is None:
            assert list(fresh.list(config)) == []
            assert transcript is None, "a message outlived its thread's delete"
        else:  # a run that started after the delete: a thread of its own, whole
            assert transcript is not None and historykit.check(transcript.messages) == []
        fresh.close()
        deleter.delete_thread("deleted")
