"""historykit's checkpointer under LangGraph's Agent Server: `langgraph dev` (langgraph-cli[inmem])
serves `agent_app.py` with `historykit.checkpointers.agent_server.checkpointer` named in
langgraph.json, on SQLite and on PostgreSQL, driven with `langgraph_sdk`.

Three threads take 9 turns each, concurrently, and the server is restarted twice in the middle
(SIGTERM, then SIGKILL). Afterwards: every prompt the server accepted is in the thread's transcript
once and in order, the transcript and the state pass `check()`, compaction happened, every model
request is the one an uninterrupted in-process run sends, `get_state`, the history and the thread's
values show none of historykit's private keys, and the copy and delete endpoints work. And a
thread goes from a process of its own to the server and back.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from historykit import check
from historykit.checkpointers import SQLModelSaver
from historykit.plugins.langchain import private_state_keys
from tests.deploy import agent_app
from tests.deploy.conftest import DevServer, read_calls, reference_calls

pytestmark = pytest.mark.slow

THREADS = 3
TURNS = int(os.environ.get("HISTORYKIT_DEPLOY_TURNS", "9"))
"""Turns per thread (`HISTORYKIT_DEPLOY_TURNS` for a longer run). A thread compacts on every turn
from its third on (`agent_app.WINDOW`): with 9 turns and the restarts before turns 3 and 6, each of
the three server processes compacts every thread, the later two on state the one before stored."""
_RESTART_COUNT = int(os.environ.get("HISTORYKIT_DEPLOY_RESTARTS", "2"))
RESTARTS = {TURNS * (n + 1) // (_RESTART_COUNT + 1): n % 2 == 1 for n in range(_RESTART_COUNT)}
"""Before these turns (evenly spaced; `HISTORYKIT_DEPLOY_RESTARTS` of them, 2 by default) the server
is stopped and started again: SIGTERM (False) and SIGKILL (True) in turn."""

AT_REST = 12.0
"""Seconds at most to wait before a SIGKILL. `langgraph dev` keeps its own records (threads, runs) in
memory and writes them to `.langgraph_api/` every 10 s: killed sooner after a run, it starts again
from a snapshot where the run is still pending and runs it a second time (its prompt is then in the
thread twice, whatever the checkpointer: the checkpoints were stored). A production server keeps its
runs in PostgreSQL; here the kill comes once the snapshot holds every finished run (`at_rest`)."""
SNAPSHOT_MARGIN = 2.0
"""A snapshot written this many seconds after the last run finished was dumped after it too (the
dump of these records takes milliseconds)."""


async def at_rest(server: DevServer, finished: float) -> None:
    """Until the snapshot of the threads and runs (`.langgraph_api/.langgraph_ops.pckl`, rewritten by
    every flush) was written SNAPSHOT_MARGIN after `finished` (`time.time()` when the last run
    ended); AT_REST after `finished` at the latest, as if no flush had been seen."""
    runs = server.project / ".langgraph_api" / ".langgraph_ops.pckl"
    while time.time() < finished + AT_REST:
        if runs.exists() and runs.stat().st_mtime >= finished + SNAPSHOT_MARGIN:
            return
        await asyncio.sleep(0.2)


def labels() -> list[str]:
    return [f"t{n}" for n in range(THREADS)]


async def drive(server: DevServer, thread_ids: Mapping[str, str]) -> None:
    """Every thread's turns, the threads concurrently, with the restarts in between."""
    from langgraph_sdk import get_client

    turn = 0
    while turn < TURNS:
        last = min([t for t in RESTARTS if t > turn] + [TURNS])
        client = get_client(url=server.url, timeout=300)
        for thread_id in thread_ids.values():
            # After a SIGKILL the server may have lost its record of the thread (not the checkpoints).
            await client.threads.create(thread_id=thread_id, if_exists="do_nothing")

        async def turns(
            label: str, thread_id: str, first: int = turn, end: int = last, client: Any = client
        ) -> None:
            for n in range(first, end):
                result = await client.runs.wait(
                    thread_id,
                    "agent",
                    input={"messages": [{"role": "user", "content": agent_app.prompt(label, n)}]},
                    raise_error=True,
                )
                assert isinstance(result, dict) and result["messages"][-1]["type"] == "ai"

        await asyncio.gather(*(turns(label, thread_id) for label, thread_id in thread_ids.items()))
        finished = time.time()
        turn = last
        if turn < TURNS:
            if RESTARTS[turn]:
                await at_rest(server, finished)
            server.stop(kill=RESTARTS[turn])
            server.start()


def _no_private_keys(values: Any, where: str) -> None:
    assert isinstance(values, dict), where
    leaked = private_state_keys() & set(values)
    assert not leaked, f"{where} shows historykit's private keys {sorted(leaked)}"


async def inspect_through_the_api(
    server: DevServer, thread_ids: Mapping[str, str], url: str, persist: bool
) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server.url, timeout=300)
    saver = SQLModelSaver(url)
    try:
        for label, thread_id in thread_ids.items():
            state = await client.threads.get_state(thread_id)
            _no_private_keys(state["values"], f"get_state of {label}")
            thread = await client.threads.get(thread_id)
            _no_private_keys(thread["values"], f"the thread record of {label}")
            history = await client.threads.get_history(thread_id, limit=10)
            assert len(history) == 10
            assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
            for entry in history:
                _no_private_keys(entry["values"], f"the history of {label}")
            if not persist:
                # The saver has the view, and the graph reads it: hidden, not dropped.
                stored = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
                assert stored is not None
                assert {"historykit_view", "historykit_view_of"} <= set(stored.checkpoint["channel_values"])

            copy = await client.threads.copy(thread_id)
            copied = await client.threads.get_state(copy["thread_id"])
            assert copied["values"]["messages"] == state["values"]["messages"]
            original = await saver.atranscript(thread_id)
            duplicate = await saver.atranscript(copy["thread_id"])
            assert original is not None and duplicate is not None
            assert [m.content for m in duplicate.messages] == [m.content for m in original.messages]
            await client.threads.delete(copy["thread_id"])
            assert await saver.atranscript(copy["thread_id"]) is None
    finally:
        await saver.aclose()


def check_the_store(url: str, thread_ids: Mapping[str, str], persist: bool, turns: int = TURNS) -> None:
    with SQLModelSaver(url) as saver:
        for label, thread_id in thread_ids.items():
            transcript = saver.transcript(thread_id)
            assert transcript is not None
            prompts = [m.content for m in transcript.messages if isinstance(m, HumanMessage)]
            assert prompts == [agent_app.prompt(label, n) for n in range(turns)], label
            assert check(transcript.messages) == [], label
            state = saver.get_tuple({"configurable": {"thread_id": thread_id}})
            assert state is not None
            messages = state.checkpoint["channel_values"]["messages"]
            assert check(messages) == [], label
            if persist:
                # Compaction rewrote the state: the transcript keeps what the state no longer has.
                assert len(messages) < len(transcript.messages), label
            else:
                view = state.checkpoint["channel_values"]["historykit_view"]
                assert len(view) < len(messages) == len(transcript.messages), label


@pytest.mark.parametrize("persist", [False, True], ids=["view-only", "persistent"])
def test_the_agent_server_keeps_every_turn_across_restarts(
    backend_url: str,
    persist: bool,
    tmp_path: Path,
    dev_server: Callable[[Mapping[str, str]], DevServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = backend_url
    expected = reference_calls(tmp_path, labels(), TURNS, persist, monkeypatch)
    calls = tmp_path / "server-calls.jsonl"
    server = dev_server(
        {
            "HISTORYKIT_CHECKPOINTER_URL": url,
            agent_app.CALLS_VARIABLE: str(calls),
            agent_app.PERSIST_VARIABLE: "1" if persist else "0",
        }
    )
    server.start()
    thread_ids = {label: str(uuid.uuid4()) for label in labels()}
    try:
        asyncio.run(drive(server, thread_ids))
        asyncio.run(inspect_through_the_api(server, thread_ids, url, persist))
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()
    assert server.starts == 1 + len(RESTARTS)

    check_the_store(url, thread_ids, persist)
    served = read_calls(calls)
    assert sorted(served) == sorted(expected)
    for label in labels():
        assert len(served[label]) == 2 * TURNS
        assert served[label] == expected[label], f"{label}: the server sent other requests"


def test_a_thread_started_outside_the_server_continues_inside_it_and_back(
    tmp_path: Path, dev_server: Callable[[Mapping[str, str]], DevServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns 0-4 in this process with `SQLModelSaver`, 5-9 through the server (whose checkpointer
    adapter writes its own channel versions), 10-14 in this process again."""
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    label, turns = "m", 15
    expected = reference_calls(tmp_path, [label], turns, False, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv(agent_app.CALLS_VARIABLE, str(calls))
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}

    def here(first: int, end: int) -> None:
        with SQLModelSaver(url) as saver:
            graph = agent_app.build(saver)
            for turn in range(first, end):
                graph.invoke({"messages": [HumanMessage(agent_app.prompt(label, turn))]}, config)

    async def there(first: int, end: int) -> None:
        from langgraph_sdk import get_client

        client = get_client(url=server.url, timeout=300)
        await client.threads.create(thread_id=thread_id, if_exists="do_nothing")
        for turn in range(first, end):
            await client.runs.wait(
                thread_id,
                "agent",
                input={"messages": [{"role": "user", "content": agent_app.prompt(label, turn)}]},
                raise_error=True,
            )

    here(0, 5)
    server = dev_server({"HISTORYKIT_CHECKPOINTER_URL": url, agent_app.CALLS_VARIABLE: str(calls)})
    server.start()
    try:
        asyncio.run(there(5, 10))
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()
    with SQLModelSaver(url) as saver:
        latest = saver.get_tuple(config)
        assert latest is not None
        versions = [*latest.checkpoint["channel_versions"].values()]
        # The server's versions (a float after the counter) beside historykit's, all one width.
        assert any(v.count(".") == 2 for v in versions)
        assert {len(v.split(".")[0]) for v in versions} == {32}
    here(10, 15)

    assert read_calls(calls) == expected
    check_the_store(url, {label: thread_id}, persist=False, turns=turns)
