"""`make demo` (`python -m historykit.demo`): the bundled session replayed through both frameworks.

The replays run in-process on real agents (a Pydantic AI `Agent` with the `HistoryKit` capability
and `SQLModelConversationStore`, a LangChain `create_agent` graph with `HistoryKitMiddleware` and
`SQLModelSaver`, on a real SQLite file), then the command itself runs in a subprocess, as `make demo`
runs it. What is checked:

- the replay is faithful: one model call per recorded assistant message, each tool answered with
  its recorded result, the recorded final answer at the end;
- the window is small enough that the raw history overflows it, and the default pipeline keeps
  every call inside it, compacting (markers) along the way;
- both frameworks send the model the same number of tokens at every call;
- the stored threads keep every recorded message with the compaction markers, and a rerun replaces
  them; the command prints the gauge, the report, the threads and where the database is, which the
  `historykit` command then reads;
- bad arguments give one error line and exit code 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip(
    "pydantic_ai.conversation_store", reason="the demo stores Pydantic AI runs, a 2.x feature"
)
pytest.importorskip("langchain.agents", reason="the demo needs LangChain v1")

import historykit
from historykit._messages import Message, TextPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit._validity import check
from historykit.checkpointers import SQLModelConversationStore, SQLModelSaver
from historykit.cli import app
from historykit.demo import (
    DEFAULT_DATABASE,
    DEFAULT_WINDOW,
    THREAD_IDS,
    ReplayRun,
    main,
    run_langgraph,
    run_pydantic_ai,
)
from historykit.testing import CLOSING_TEXT, Recording, sample_path
from tests.test_readme import lines_match

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recording() -> Recording:
    return Recording.load()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('demo') / 'demo.db'}"


@pytest.fixture(scope="module")
def pydantic_ai_run(recording: Recording, database: str) -> ReplayRun:
    return asyncio.run(run_pydantic_ai(recording, historykit.default_pipeline(), database=database))


@pytest.fixture(scope="module")
def langgraph_run(recording: Recording, database: str) -> ReplayRun:
    return run_langgraph(recording, historykit.default_pipeline(), database=database)


def final_answer(recording: Recording) -> str:
    last = [m for m in recording.messages if m.role == "assistant"][-1]
    return "".join(p.text for p in last.parts if isinstance(p, TextPart))


def test_the_sample_is_bundled_with_its_source() -> None:
    source = (sample_path().parent / "SAMPLE-SOURCE.md").read_text()
    assert "MIT" in source and "d-kimuson/claude-code-viewer" in source
    recording = Recording.load()
    assert recording.name == "sample_session.jsonl"
    assert recording.model_calls > 20
    assert not check(recording.messages)


@pytest.mark.parametrize("framework", ["pydantic_ai_run", "langgraph_run"])
def test_the_replay_is_the_recorded_session(
    framework: str, recording: Recording, request: pytest.FixtureRequest
) -> None:
    run: ReplayRun = request.getfixturevalue(framework)
    assert len(run.calls) == recording.model_calls
    assert all(call.replayed for call in run.calls)
    assert run.answer == final_answer(recording) != CLOSING_TEXT
    assert len(run.reports) == recording.model_calls  # the pipeline ran before every call


@pytest.mark.parametrize("framework", ["pydantic_ai_run", "langgraph_run"])
def test_the_default_pipeline_keeps_every_call_inside_the_window(
    framework: str, recording: Recording, request: pytest.FixtureRequest
) -> None:
    run: ReplayRun = request.getfixturevalue(framework)
    raw = recording.raw_sizes(TokenCounter())
    assert [c.raw for c in run.calls] == raw
    assert max(raw) > 2 * DEFAULT_WINDOW  # the raw history would overflow the window
    assert max(c.sent for c in run.calls) <= DEFAULT_WINDOW
    assert sum(run.compactions.values()) >= 1
    # Before the first compaction the model is sent the raw history, token for token.
    first = next(i for i, r in enumerate(run.reports) if r.changed)
    assert [c.sent for c in run.calls[:first]] == raw[:first]
    # Between compactions the input only grows: each call repeats the previous one from its start.
    changed = {i for i, r in enumerate(run.reports) if r.changed}
    for i, call in enumerate(run.calls[1:], start=1):
        if i not in changed:
            assert call.reused == run.calls[i - 1].sent, i
    assert all(r.window_source == "model profile" and r.context_window == DEFAULT_WINDOW for r in run.reports)


def test_both_frameworks_send_the_same_tokens_at_every_call(
    pydantic_ai_run: ReplayRun, langgraph_run: ReplayRun
) -> None:
    assert [c.sent for c in pydantic_ai_run.calls] == [c.sent for c in langgraph_run.calls]
    assert [c.reused for c in pydantic_ai_run.calls] == [c.reused for c in langgraph_run.calls]
    assert pydantic_ai_run.compactions == langgraph_run.compactions


def contents(messages: list[Message]) -> list[str]:
    """Every text and tool result of a history, as the model reads them."""
    out = []
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, TextPart) and part.text:
                out.append(part.text)
            elif isinstance(part, ToolResultPart):
                out.append(part.content)
    return out


@pytest.mark.parametrize("framework", ["pydantic_ai_run", "langgraph_run"])
def test_the_stored_thread_keeps_every_message_and_the_markers(
    framework: str, recording: Recording, request: pytest.FixtureRequest
) -> None:
    from historykit._frameworks import adapter_for

    run: ReplayRun = request.getfixturevalue(framework)
    transcript = run.transcript
    assert transcript is not None and transcript.thread_id == run.thread_id
    stored = contents(adapter_for(transcript.messages).to_neutral(transcript.messages))
    missing = [text[:60] for text in contents(recording.messages) if text not in stored]
    assert not missing
    summaries = [m for r in run.reports for m in r.markers if m.strategy == "summarize"]
    assert [c.marker for c in transcript.compactions if c.marker.strategy == "summarize"] == summaries
    # The originals are the recording's messages, each once, and valid as a history; every message a
    # compaction wrote is a marker beside them, of every kind the run made.
    assert len(transcript.messages) == len(recording.messages) > run.history
    assert not check(transcript.messages)
    assert {c.marker.strategy for c in transcript.compactions} >= {"summarize", "clear_tool_results"}


async def test_the_database_holds_both_threads(
    pydantic_ai_run: ReplayRun, langgraph_run: ReplayRun, database: str
) -> None:
    store = SQLModelConversationStore(database)
    conversation = await store.load(THREAD_IDS["pydantic-ai"])
    assert conversation is not None and len(conversation.messages) == pydantic_ai_run.history
    await store.aclose()
    saver = SQLModelSaver(database)
    state = saver.get_tuple({"configurable": {"thread_id": THREAD_IDS["langgraph"], "checkpoint_ns": ""}})
    assert state is not None
    assert len(state.checkpoint["channel_values"]["messages"]) == langgraph_run.history
    saver.close()


def demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "historykit.demo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def command(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`make demo`'s command, run once in a new directory: the directory and what it printed."""
    cwd = tmp_path_factory.mktemp("command")
    return cwd, demo(cwd)


def test_the_command(command: tuple[Path, subprocess.CompletedProcess[str]], recording: Recording) -> None:
    cwd, first = command
    assert first.returncode == 0, first.stderr
    out = first.stdout
    database = (cwd / DEFAULT_DATABASE).resolve()
    assert database.is_file()
    for expected in (
        "1. Pydantic AI",
        "2. LangGraph",
        "context sent",
        "without historykit",
        f"{recording.model_calls} of {recording.model_calls}",
        "the report",
        "input tokens, all calls",
        "prompt-cache hits",
        "the stored threads",
        "marker 1:",
        "the latest summary",
        "the agent's final answer",
        f"database: {database}",
        f"historykit threads {DEFAULT_DATABASE}",
    ):
        assert expected in out, expected
    assert "Summarize" in out and "+ marker" in out  # a compaction announced as it happened

    # The command line reads the demo's database.
    threads = CliRunner().invoke(app, ["threads", str(database), "--json"])
    assert threads.exit_code == 0, threads.stderr
    assert sorted(row["thread_id"] for row in json.loads(threads.stdout)) == sorted(THREAD_IDS.values())


def readme_excerpt() -> str:
    """The demo output the README shows under "What `make demo` shows"."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## What `make demo` shows\n", 1)[1].split("\n## ", 1)[0]
    (excerpt,) = re.findall(r"^```text\n(.*?)^```$", section, re.S | re.M)
    return excerpt


def test_the_readme_shows_what_the_command_prints(
    command: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """The README's excerpt is lines the command printed, in order; a `...` line stands for the lines
    it leaves out. Nothing else may differ: the replay is deterministic and the command runs at the
    width the excerpt was taken at (100 columns)."""
    _, run = command
    assert run.returncode == 0, run.stderr
    excerpt = readme_excerpt()
    assert len([line for line in excerpt.splitlines() if line.strip() != "..."]) >= 5
    assert lines_match(excerpt, run.stdout, excerpt=True), (
        f"the README shows:\n{excerpt}\n`make demo` prints:\n{run.stdout}"
    )


def test_a_rerun_replaces_the_demo_thread(
    recording: Recording, database: str, langgraph_run: ReplayRun
) -> None:
    again = run_langgraph(recording, historykit.default_pipeline(), database=database)
    assert again.transcript is not None and langgraph_run.transcript is not None
    assert len(again.transcript.messages) == len(langgraph_run.transcript.messages)
    task = recording.prompts(0)[0]
    assert sum(1 for m in again.transcript.messages if m.type == "human" and m.text == task) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--window", "0"], "--window must be a positive number"),
        (["--session", "no-such-file.jsonl"], "no-such-file.jsonl"),
        (["--delay", "-1"], "--delay must not be negative"),
    ],
)
def test_bad_arguments_give_one_error_line(
    tmp_path: Path,
    args: list[str],
    fragment: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("historykit demo: error: ") and fragment in lines[0]
    assert not (tmp_path / DEFAULT_DATABASE).exists()


def test_a_transcript_without_a_model_call_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "question.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "hello"}) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--session", str(path)]) == 2
    assert "no assistant message" in capsys.readouterr().err


def test_a_database_that_cannot_be_used_gives_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("these are notes, not a database\n")
    assert main(["--db", str(not_a_database), "--only", "langgraph"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("historykit demo: error: the database ")
    assert "notes.db" in lines[0]
    assert not_a_database.read_text() == "these are notes, not a database\n"


# ---------------------------------------------------------------------------------------------
# Agent logs as the session, in both frameworks; a clean screen
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "session", ["claude_code_session.jsonl", "codex_rollout_2025_09.jsonl", "codex_rollout.jsonl"]
)
def test_an_agent_log_replays_in_both_frameworks(
    session: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Claude Code or Codex log keeps its rows on each message; the adapters build their own."""
    monkeypatch.chdir(tmp_path)
    path = REPO / "tests" / "formats" / "data" / session
    assert main(["--session", str(path), "--delay", "0", "--window", "2000"]) == 0
    out = capsys.readouterr().out
    assert "1. Pydantic AI" in out and "2. LangGraph" in out and "the stored threads" in out
    recording = Recording.load(path)
    assert f"{recording.model_calls} of {recording.model_calls}" in out
    assert all(m.native is None and m.usage is None for m in recording.messages)


@pytest.mark.parametrize("only", [None, "pydantic-ai", "langgraph"])
def test_the_commands_it_suggests_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, only: str | None
) -> None:
    """Every `historykit` command the demo prints under "where it is" runs on what it stored,
    whichever frameworks it replayed (with `--only`, the other framework's thread is not there)."""
    session = REPO / "tests" / "formats" / "data" / "claude_code_session.jsonl"
    run = demo(tmp_path, "--session", str(session), *(["--only", only] if only else []))
    assert run.returncode == 0, run.stderr
    suggested = run.stdout.split("Look inside with the historykit command:\n", 1)[1].splitlines()
    commands = [shlex.split(line)[1:] for line in suggested if line.startswith("  ")]
    assert [c[0] for c in commands] == ["threads", "show", "export", "analyze"]
    monkeypatch.chdir(tmp_path)
    for arguments in commands:
        done = CliRunner().invoke(app, arguments)
        assert done.exit_code == 0, (arguments, done.output)


def test_the_demo_screen_has_no_pydantic_ai_banner(tmp_path: Path) -> None:
    """Pydantic AI shows a first-run banner to a terminal or a coding agent; the demo owns its screen."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "CI", "PYDANTIC_AI_NO_BANNER")}
    env.update({"AI_AGENT": "1", "PYTHONPATH": str(REPO)})
    # The banner this guards against does show in this environment, from a plain agent run ...
    plain = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pydantic_ai import Agent\nfrom pydantic_ai.models.test import TestModel\n"
            "Agent(TestModel()).run_sync('hi')",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    assert "pydantic-ai v" in plain.stdout + plain.stderr
    # ... and not from the demo's.
    session = REPO / "tests" / "formats" / "data" / "claude_code_session.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "historykit.demo",
            "--session",
            str(session),
            "--delay",
            "0",
            "--only",
            "pydantic-ai",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pydantic-ai v" not in done.stdout + done.stderr and "1. Pydantic AI" in done.stdout
