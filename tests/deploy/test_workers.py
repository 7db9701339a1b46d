"""Several workers take turns on the same threads, as a deployment with several server processes
(or several savers in one server process) does: every turn of a thread is served by another worker
than the turn before, and every model request must be the one a single process sends.

- 4 worker processes on one PostgreSQL database, 8 threads of 8 turns (64 turns; every thread is
  served by every worker twice, and compacted from its third turn on), view-only and persistent.
- One process with two `SQLModelSaver` instances on one database (LangGraph's Agent Server opens a
  saver per thread of its own), alternating turns through the async methods the server calls.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from historykit import check
from historykit.checkpointers import SQLModelSaver
from tests.deploy import agent_app
from tests.deploy.conftest import read_calls, reference_calls
from tests.deploy.worker_process import serve

WORKERS = 4
THREADS = 8
TURNS = 8
WAIT = 600.0
"""Seconds a worker may take to start or to serve a round (the machine may be shared and loaded)."""


def labels(threads: int) -> list[str]:
    return [f"w{n}" for n in range(threads)]


def assert_stored_once_in_order(url: str, thread_ids: dict[str, str], turns: int) -> None:
    with SQLModelSaver(url) as saver:
        for label, thread_id in thread_ids.items():
            transcript = saver.transcript(thread_id)
            assert transcript is not None, label
            prompts = [m.content for m in transcript.messages if isinstance(m, HumanMessage)]
            assert prompts == [agent_app.prompt(label, n) for n in range(turns)], label
            assert check(transcript.messages) == [], label


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Any]:
    """Starts worker processes (spawned: nothing of this process's caches is inherited) and ends
    them at the end of the test."""
    context = multiprocessing.get_context("spawn")
    started: list[tuple[Any, Any]] = []

    def start(count: int, url: str, env: dict[str, str]) -> tuple[list[Any], Any]:
        outbox = context.Queue()
        inboxes = []
        for n in range(count):
            inbox = context.Queue()
            process = context.Process(
                target=serve, args=(f"worker-{n}", url, env, inbox, outbox), daemon=True
            )
            process.start()
            started.append((process, inbox))
            inboxes.append(inbox)
        for _ in range(count):
            name, what, _ = outbox.get(timeout=WAIT)
            assert what == "ready", name
        return inboxes, outbox

    yield start
    for _, inbox in started:
        inbox.put(None)
    for process, _ in started:
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
            process.join()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("persist", [False, True], ids=["view-only", "persistent"])
def test_four_workers_hand_every_thread_around(
    persist: bool, tmp_path: Path, postgres_url: str, workers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = labels(THREADS)
    expected = reference_calls(tmp_path, names, TURNS, persist, monkeypatch)
    calls = tmp_path / "worker-calls.jsonl"
    env = {agent_app.CALLS_VARIABLE: str(calls), agent_app.PERSIST_VARIABLE: "1" if persist else "0"}
    inboxes, outbox = workers(WORKERS, postgres_url, env)
    thread_ids = {label: f"thread-{label}" for label in names}
    served_by: dict[str, list[int]] = {label: [] for label in names}
    errors = []
    for turn in range(TURNS):
        for k, label in enumerate(names):
            worker = (k + turn) % WORKERS
            served_by[label].append(worker)
            inboxes[worker].put((label, thread_ids[label], turn))
        for _ in names:
            try:
                name, what, detail = outbox.get(timeout=WAIT)
            except queue.Empty:
                pytest.fail(f"round {turn}: a worker did not answer within {WAIT:.0f} s")
            if what != "done":
                errors.append((name, detail))
        assert errors == [], errors
    # Every turn went to another worker than the turn before.
    assert all(a != b for ws in served_by.values() for a, b in itertools.pairwise(ws))

    assert_stored_once_in_order(postgres_url, thread_ids, TURNS)
    served = read_calls(calls)
    assert sorted(served) == sorted(expected)
    for label in names:
        assert len(served[label]) == 2 * TURNS
        assert served[label] == expected[label], f"{label}: the workers sent other requests"


def test_two_savers_in_one_process_take_turns(
    backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = backend_url
    names, turns = labels(2), 12
    expected = reference_calls(tmp_path, names, turns, persist=False, monkeypatch=monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv(agent_app.CALLS_VARIABLE, str(calls))
    thread_ids = {label: f"thread-{label}" for label in names}

    async def run() -> None:
        savers = [SQLModelSaver(url), SQLModelSaver(url)]
        graphs = [agent_app.build(saver) for saver in savers]
        try:
            for turn in range(turns):
                for k, label in enumerate(names):
                    graph = graphs[(k + turn) % 2]
                    config = {"configurable": {"thread_id": thread_ids[label]}}
                    await graph.ainvoke({"messages": [HumanMessage(agent_app.prompt(label, turn))]}, config)
        finally:
            for saver in savers:
                await saver.aclose()

    asyncio.run(run())
    assert_stored_once_in_order(url, thread_ids, turns)
    assert read_calls(calls) == expected
