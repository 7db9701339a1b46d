"""`HistoryKit` in a DBOS workflow killed with SIGKILL inside a model call, then recovered by DBOS.

Real processes (`dbos_app.py`), real DBOS on SQLite and on PostgreSQL, both ways of making the agent
durable (`DBOSDurability`, the deprecated `DBOSAgent`) and both modes. The summarizer writes another
text on every call, as an LLM does. Each process appends every request the model is sent to a file.

What must hold:
- the recovered workflow's first request is the very request that was in flight when the process
  died, summary text and the marker's time included (both come from DBOS's record, not from a second
  summarizer call or the clock);
- the requests before the kill and after the recovery are, one for one, the requests of the same
  workflow run without a kill (summary texts included: the summarizer is called exactly as often);
- the workflow's result is the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import postgres_admin_url

pytest.importorskip("dbos")
pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("dbos_app.py")
ROOT = APP.parents[2]
KILL_AT = 10
"""The model call the killed process dies in (of 18: two turns of eight tool calls and an answer)."""
TIMEOUT = 600


def _run(role: str, database: str, wrapper: str, mode: str, workdir: Path, kill_at: int = 0) -> str:
    args = [sys.executable, str(APP), role, database, wrapper, mode, str(workdir)]
    if kill_at:
        args.append(str(kill_at))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=workdir)
    if kill_at:
        assert done.returncode == -9, (
            f"the process was to die in model call {kill_at}:\n{done.stderr[-3000:]}"
        )
        return ""
    assert done.returncode == 0, done.stderr[-3000:]
    return str(json.loads(done.stdout.strip().splitlines()[-1])["output"])


def _requests(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (workdir / "requests.jsonl").read_text().splitlines()]


def _without(value: Any, keys: frozenset[str]) -> Any:
    """`value` without the fields no provider is sent and that differ between two runs anyway."""
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


PER_PROCESS = frozenset({"timestamp", "run_id", "conversation_id"})
"""Set by Pydantic AI from the clock or the workflow's identity: another run has others."""
PER_RUN = PER_PROCESS | {"created_at"}
"""Also the marker's time: recorded with the summary in one run, another run summarizes at another time."""


def _summary_numbers(request: dict[str, Any]) -> list[str]:
    text = json.dumps(request)
    return [text[i : i + 20] for i in range(len(text)) if text.startswith("summary number", i)]


_BASELINES: dict[tuple[str, str], tuple[str, list[dict[str, Any]], int]] = {}


def _baseline(
    wrapper: str, mode: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[dict[str, Any]], int]:
    """The uninterrupted run of the same workflow (once per wrapper and mode): its output, its
    requests, its summarizer calls."""
    key = (wrapper, mode)
    if key not in _BASELINES:
        workdir = tmp_path_factory.mktemp(f"uninterrupted-{wrapper}-{mode}")
        output = _run("run", f"sqlite:///{workdir / 'dbos.sqlite'}", wrapper, mode, workdir)
        calls = len((workdir / "summaries.txt").read_text().splitlines())
        _BASELINES[key] = (output, _requests(workdir), calls)
    return _BASELINES[key]


@pytest.fixture
def postgres_database() -> Iterator[str]:
    """A new PostgreSQL database for DBOS's system tables, dropped afterwards."""
    import psycopg

    admin = postgres_admin_url()
    name = f"historykit_dbos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


CASES = [
    ("sqlite", "capability", "persistent"),
    ("sqlite", "capability", "view"),
    ("sqlite", "agent", "persistent"),
    ("sqlite", "agent", "view"),
    ("postgres", "capability", "view"),
    ("postgres", "agent", "persistent"),
]


@pytest.mark.parametrize(("database", "wrapper", "mode"), CASES, ids=["-".join(c) for c in CASES])
def test_a_recovered_workflow_sends_what_the_killed_one_would_have(
    database: str,
    wrapper: str,
    mode: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'dbos.sqlite'}"
        if database == "sqlite"
        else str(request.getfixturevalue("postgres_database"))
    )
    expected_output, expected, expected_calls = _baseline(wrapper, mode, tmp_path_factory)
    assert len(expected) == 18 and expected_calls >= 3, (
        "the scenario must summarize before and after the kill"
    )
    before = [r for r in expected[: KILL_AT - 1] if _summary_numbers(r)]
    after = [r for r in expected[KILL_AT:] if _summary_numbers(r) != _summary_numbers(expected[KILL_AT - 1])]
    assert before and after, "a summary must be carried across the kill and another written after it"

    _run("run", url, wrapper, mode, tmp_path, kill_at=KILL_AT)
    killed = _requests(tmp_path)
    assert len(killed) == KILL_AT
    output = _run("recover", url, wrapper, mode, tmp_path)
    sent = _requests(tmp_path)
    recovered = sent[KILL_AT:]

    # DBOS replays the steps that completed: the first request sent again is the one in flight.
    assert _without(recovered[0], PER_PROCESS) == _without(killed[-1], PER_PROCESS)
    # Every request is the uninterrupted run's, summary texts included.
    assert [_without(r, PER_RUN) for r in [*killed[:-1], *recovered]] == [
        _without(r, PER_RUN) for r in expected
    ]
    calls = len((tmp_path / "summaries.txt").read_text().splitlines())
    assert calls == expected_calls, "the recovery summarized again what the killed process had summarized"
    assert output == expected_output
