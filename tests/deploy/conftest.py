"""Fixtures of the deployment tests: `langgraph dev` (langgraph-cli[inmem]) serving
`agent_app.py` with historykit's checkpointer factory, and a PostgreSQL database of their own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

# The PostgreSQL fixtures of the persistence tests: a database for the session, emptied per test.
from tests.checkpointers.conftest import new_postgres_database, postgres_database, postgres_url

__all__ = ["new_postgres_database", "postgres_database", "postgres_url"]

APP = Path(__file__).resolve().parent / "agent_app.py"
LANGGRAPH = Path(sys.executable).parent / "langgraph"
START_TIMEOUT = 180.0
"""Seconds `langgraph dev` may take to answer /ok (a few on an idle machine; far more on a loaded one)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_calls(path: Path) -> dict[str, list[Any]]:
    """The model requests recorded in `path` (`agent_app.CALLS_VARIABLE`), by thread label, in order."""
    by_thread: dict[str, list[Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            call = json.loads(line)
            by_thread.setdefault(call["thread"], []).append(call["request"])
    return by_thread


def reference_calls(
    tmp_path: Path, labels: list[str], turns: int, persist: bool, monkeypatch: pytest.MonkeyPatch
) -> dict[str, list[Any]]:
    """The requests of the same conversations run in this process on `InMemorySaver`, uninterrupted
    and one thread after the other: what every deployment must send."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.deploy import agent_app

    calls = tmp_path / "reference-calls.jsonl"
    calls.unlink(missing_ok=True)
    monkeypatch.setenv(agent_app.CALLS_VARIABLE, str(calls))
    monkeypatch.setenv(agent_app.PERSIST_VARIABLE, "1" if persist else "0")
    graph = agent_app.build(InMemorySaver())
    for label in labels:
        config = {"configurable": {"thread_id": label}}
        for turn in range(turns):
            graph.invoke({"messages": [HumanMessage(agent_app.prompt(label, turn))]}, config)
    return read_calls(calls)


class DevServer:
    """One `langgraph dev` process after another on a project directory (so its own thread records,
    `.langgraph_api/`, survive a restart as they would for a developer), each on a new free port."""

    def __init__(self, project: Path, env: Mapping[str, str]) -> None:
        self.project = project
        self.env = {**os.environ, **env}
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.starts = 0

    def start(self) -> str:
        assert self.process is None, "the server is running already"
        port = free_port()
        self.starts += 1
        with open(self.project / f"server-{self.starts}.log", "wb") as log:
            self.process = subprocess.Popen(
                [str(LANGGRAPH), "dev", "--port", str(port), "--no-browser", "--no-reload"],
                cwd=self.project,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends it and what it started
            )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as answer:
                    if answer.status == 200:
                        return self.url
            except OSError:
                time.sleep(0.5)
        self.stop(kill=True)
        raise RuntimeError(f"langgraph dev did not answer within {START_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (a graceful shutdown, the server closes its checkpointers) or SIGKILL."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    def log_tail(self, lines: int = 60) -> str:
        path = self.project / f"server-{self.starts}.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[Callable[[Mapping[str, str]], DevServer]]:
    """Makes a project directory (langgraph.json naming `agent_app.py` and
    `historykit.checkpointers.agent_server.checkpointer`) and a `DevServer` on it; stops it at the end."""
    if not LANGGRAPH.exists():
        pytest.fail(f"{LANGGRAPH} is missing: install historykit's test extra (langgraph-cli[inmem])")
    servers: list[DevServer] = []

    def make(env: Mapping[str, str]) -> DevServer:
        project = tmp_path / "project"
        project.mkdir()
        config = {
            "dependencies": ["."],
            "graphs": {"agent": f"{APP}:agent"},
            "checkpointer": {"path": "historykit.checkpointers.agent_server.checkpointer"},
        }
        (project / "langgraph.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        server = DevServer(
            project,
            {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false", **env},
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop(kill=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each backend in turn: a new SQLite file, then the session's PostgreSQL database emptied of
    historykit's tables (`tests/checkpointers/conftest.py`)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'agents.db'}"
