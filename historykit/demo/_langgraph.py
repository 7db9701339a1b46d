"""The demo's LangGraph run: `create_agent` with `HistoryKitMiddleware`, checkpointed by `SQLModelSaver`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from historykit._pipeline import HistoryProcessor, Report
from historykit._tokens import TokenCounter
from historykit.demo._replay_run import DEFAULT_WINDOW, THREAD_IDS, ReplayRun, collecting
from historykit.testing import Call, LangChainReplay, Recording


def run_langgraph(
    recording: Recording,
    pipeline: HistoryProcessor,
    *,
    window: int = DEFAULT_WINDOW,
    database: str | None = None,
    counter: TokenCounter | None = None,
    on_call: Callable[[Call], None] | None = None,
    on_report: Callable[[Report], None] | None = None,
    delay: float = 0.0,
) -> ReplayRun:
    """Replay `recording` with a LangChain `create_agent` graph running `pipeline` as middleware (persistent).

    With `database` (a SQLAlchemy URL) the graph is checkpointed by `SQLModelSaver` at every step,
    under the thread id `demo-langgraph`, replacing the previous demo's; otherwise in memory.
    """
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    replay = LangChainReplay(recording, window=window, counter=counter, on_call=on_call, delay=delay)
    reports, report = collecting(on_report)
    thread_id = THREAD_IDS["langgraph"]
    saver: Any
    if database is not None:
        from historykit.checkpointers import SQLModelSaver

        saver = SQLModelSaver(database)
        saver.delete_thread(thread_id)
    else:
        saver = InMemorySaver()
    agent = create_agent(
        replay.model,
        replay.tools,
        system_prompt=replay.system_prompt,
        middleware=[HistoryKitMiddleware(pipeline, persist=True, on_report=report)],
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 100_000}
    answer = ""
    started = time.perf_counter()
    for turn in range(len(recording.turns)):
        replay.start_turn(turn)
        state: Any = agent.invoke({"messages": replay.prompts[turn]}, config)  # type: ignore[call-overload]
        last = state["messages"][-1]
        answer = str(last.text) if isinstance(last, AIMessage) else ""
    seconds = time.perf_counter() - started
    result = ReplayRun("LangGraph", thread_id, replay.calls, reports, answer, seconds)
    result.history = len(agent.get_state(config).values["messages"])
    if database is not None:
        result.transcript = saver.transcript(thread_id)
        saver.close()
    return result
