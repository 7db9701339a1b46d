"""The `historykit` command, driven for real: typer's runner, the installed console script, real
transcripts (the corpus and the format fixtures) and real databases written by a LangGraph graph
with `SQLModelSaver` and a Pydantic AI agent with `SQLModelConversationStore` (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from historykit._tokens import TokenCounter
from historykit._validity import check
from historykit.cli import EXIT_NOT_FOUND, EXIT_PROBLEMS, EXIT_USAGE, app, build_pipeline
from historykit.formats import read_transcript
from historykit.processors._trigger import Trigger
from tests.conftest import corpus_paths, postgres_admin_url
from tests.formats.helpers import CLAUDE_CODE, CODEX, CODEX_2025_09

SPEC = "dedupe,clear,strip,truncate"
SMALL = next(p for p in corpus_paths() if p.stem == "sweagent__demo-fc-marshmallow-1867")
LARGEST = max(corpus_paths(), key=lambda p: p.stat().st_size)

runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def assert_error(result: Any, code: int, *fragments: str) -> str:
    """One line on stderr, `historykit: error: ...`, the documented exit code, nothing on stdout."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("historykit: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


# ---------------------------------------------------------------------------------------------
# analyze
# ---------------------------------------------------------------------------------------------


def test_analyze_shows_where_the_tokens_go() -> None:
    result = run("analyze", SMALL, "--window", 8000, "--pipeline", SPEC)
    assert result.exit_code == 0, result.stderr
    for heading in (
        "where the tokens go",
        "by tool",
        "largest tool outputs",
        "replayed call by call, window 8,000",
        "what each processor did",
        "DedupeFileReads",
        "ClearToolResults",
        "PairwiseTruncate",
    ):
        assert heading in result.stdout


def test_analyze_json_adds_up() -> None:
    result = run("analyze", CLAUDE_CODE, LARGEST, "--json", "--window", 32000, "--pipeline", SPEC)
    assert result.exit_code == 0, result.stderr
    fixture, largest = json.loads(result.stdout)
    assert fixture["format"] == "claude-code" and largest["format"] == "chat"
    messages = read_transcript(LARGEST).messages
    counter = TokenCounter()
    assert largest["total_tokens"] == sum(counter.count_message(m) for m in messages)
    assert sum(largest["by_kind"].values()) == largest["total_tokens"]
    assert sum(largest["tool_results"].values()) == largest["by_kind"]["tool_result"]
    assert largest["largest_outputs"][0]["tokens"] == max(o["tokens"] for o in largest["largest_outputs"])
    assert any(r["reads"] > 1 for r in largest["repeated_reads"])
    replay = largest["replay"]
    calls = [i for i, m in enumerate(messages) if m.role == "assistant"]
    assert len(replay["calls"]) == largest["model_calls"] == len(calls)
    # Call t sees every message before the t-th assistant message.
    assert [c["before"] for c in replay["calls"]] == [
        sum(counter.count_message(m) for m in messages[:i]) for i in calls
    ]
    assert all(c["after"] <= c["before"] and c["reused"] <= c["after"] for c in replay["calls"])
    assert replay["summary"]["over_window_before"] > 0 and replay["summary"]["over_window_after"] == 0
    assert [p["processor"] for p in replay["processors"]] == [
        "DedupeFileReads",
        "ClearToolResults",
        "StripThinking",
        "PairwiseTruncate",
        "Repair",
    ]
    assert replay["violations"] == []


def test_analyze_the_default_pipeline_on_the_largest_session() -> None:
    result = run("analyze", LARGEST, "--json", "--window", 32000)
    assert result.exit_code == 0, result.stderr
    (analysis,) = json.loads(result.stdout)
    names = [p["processor"] for p in analysis["replay"]["processors"]]
    assert [p.name for p in build_pipeline("default").processors] == names
    assert analysis["replay"]["summary"]["over_window_after"] == 0


def test_analyze_reads_every_format(tmp_path: Path) -> None:
    paths = [CLAUDE_CODE, CODEX, *_framework_files(tmp_path)]
    result = run("analyze", *paths, "--json", "--pipeline", SPEC, "--window", 32000)
    assert result.exit_code == 0, result.stderr
    analyses = json.loads(result.stdout)
    assert [a["format"] for a in analyses] == ["claude-code", "codex", "pydantic-ai", "langchain"]
    for path, analysis in zip(paths, analyses):
        assert analysis["messages"] == len(read_transcript(path).messages)
    # The same session in either framework's JSON: the same tool outputs, the same file reads.
    pai, lc = analyses[2:]
    assert pai["tool_results"] == lc["tool_results"]
    assert pai["repeated_reads"] == lc["repeated_reads"]


def test_analyze_plots_the_context_per_call(tmp_path: Path) -> None:
    out = tmp_path / "context.png"
    result = run("analyze", SMALL, CODEX, "--window", 8000, "--pipeline", SPEC, "--plot", out)
    assert result.exit_code == 0, result.stderr
    assert f"wrote the plot to {out}" in result.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_analyze_format_option(tmp_path: Path) -> None:
    result = run("analyze", CODEX, "--from", "codex", "--json", "--pipeline", SPEC)
    assert result.exit_code == 0, result.stderr
    assert_error(
        run("analyze", CODEX, "--from", "claude-code", "--pipeline", SPEC),
        EXIT_USAGE,
        "no conversation rows",
    )


# ---------------------------------------------------------------------------------------------
# compact
# ---------------------------------------------------------------------------------------------


def _framework_files(tmp_path: Path) -> list[Path]:
    """The largest corpus session as Pydantic AI and LangChain JSON files."""
    from historykit.formats import write_transcript

    messages = read_transcript(LARGEST).messages
    paths = []
    for fmt, name in (("pydantic-ai", "pai.json"), ("langchain", "lc.json")):
        path = tmp_path / name
        write_transcript(messages, path, fmt)
        paths.append(path)
    return paths


def test_compact_writes_the_input_format(tmp_path: Path) -> None:
    for source in [LARGEST, CLAUDE_CODE, CODEX, *_framework_files(tmp_path)]:
        out = tmp_path / f"compacted-{source.stem}{source.suffix}"
        window = 32000 if source.stat().st_size > 50_000 else 300
        result = run("compact", source, "--window", window, "--pipeline", SPEC, "-o", out, "--json")
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        original = read_transcript(source)
        written = read_transcript(out)
        assert written.format == original.format == report["format"]
        assert report["violations"] == [] and check(written.history) == []
        assert [s["processor"] for s in report["steps"]][-1] == "Repair"
        if window == 32000:
            assert report["tokens_before"] > window >= report["tokens_after"]
            assert sum(s["tokens_before"] - s["tokens_after"] for s in report["steps"]) > 0


def test_compact_keeps_the_last_request_and_the_task(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run("compact", LARGEST, "-w", 32000, "-p", SPEC, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "wrote" in result.stdout and "PairwiseTruncate" in result.stdout
    original, written = read_transcript(LARGEST).messages, read_transcript(out).messages
    first_user = next(m for m in original if m.role == "user")
    assert first_user in written
    assert written[-1] == original[-1]


def test_compact_now_with_a_focus_summarizes_a_small_history(tmp_path: Path) -> None:
    """`--focus` compacts far below every trigger: a summary, not a truncation, recording the focus."""
    focus = "the details of the marshmallow field validation"
    out = tmp_path / "focused.jsonl"
    result = run("compact", SMALL, "-w", 1_000_000, "-o", out, "--focus", focus, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    markers = [m for s in report["steps"] for m in s["markers"]]
    assert [(m["strategy"], m["automatic"], m["focus"]) for m in markers] == [("summarize", False, focus)]
    assert report["tokens_before"] < 0.6 * 1_000_000  # below Summarize's mark: only the request made it
    assert report["violations"] == []
    # The chat JSONL format writes the summary as the user message it is.
    written = [m.text for m in read_transcript(out).history]
    assert sum(f"## Focus\n- {focus}" in text for text in written) == 1
    # Without the request, the same call changes nothing.
    plain = run("compact", SMALL, "-w", 1_000_000, "-o", tmp_path / "plain.jsonl", "--json")
    assert not [m for s in json.loads(plain.stdout)["steps"] for m in s["markers"]]
    now = run("compact", SMALL, "-w", 1_000_000, "-o", tmp_path / "now.jsonl", "--now", "--json")
    assert [m["focus"] for s in json.loads(now.stdout)["steps"] for m in s["markers"]] == [None]


def test_compact_focus_needs_a_summarize_step(tmp_path: Path) -> None:
    assert_error(
        run("compact", SMALL, "-w", 8000, "-p", SPEC, "-o", tmp_path / "o.jsonl", "--focus", "auth"),
        EXIT_USAGE,
        "--focus needs a pipeline with a Summarize step",
    )


def test_compact_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    copy = tmp_path / "s.jsonl"
    shutil.copy(SMALL, copy)
    before = copy.read_bytes()
    assert_error(
        run("compact", copy, "-w", 8000, "-p", SPEC, "-o", copy), EXIT_USAGE, "refusing to overwrite"
    )
    assert copy.read_bytes() == before


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (
            "dedupe,bogus",
            "unknown processor 'bogus'; valid names: default, dedupe, clear, offload, strip, truncate",
        ),
        ("clear:kep=3", "clear has no option 'kep'; its options: keep"),
        ("clear:keep=-3", "keep must be a non-negative int"),
        ("clear:keep", "is not option=value"),
        ("dedupe,,clear", "an empty step"),
        ("default,clear", "`default` stands alone"),
        ("", "empty pipeline spec"),
    ],
)
def test_a_bad_pipeline_spec_is_one_line(tmp_path: Path, spec: str, fragment: str) -> None:
    assert_error(
        run("compact", SMALL, "-w", 8000, "-p", spec, "-o", tmp_path / "o.jsonl"), EXIT_USAGE, fragment
    )
    assert_error(run("analyze", SMALL, "-p", spec), EXIT_USAGE, fragment)


def test_pipeline_specs() -> None:
    pipeline = build_pipeline("clear:keep=5:exclude_tools=Read+Grep,truncate:max_fraction=0.7")
    clear, truncate, repair = pipeline.processors
    assert clear.keep == 5 and tuple(clear.exclude_tools) == ("Read", "Grep")
    assert truncate.trigger.max_fraction == 0.7 and type(repair).__name__ == "Repair"
    assert [type(p).__name__ for p in build_pipeline("strip,repair").processors] == [
        "StripThinking",
        "Repair",
    ]
    assert [type(p).__name__ for p in build_pipeline("summarize").processors] == ["Summarize", "Repair"]


def test_pipeline_spec_trigger_settings_go_into_the_trigger() -> None:
    """`max_fraction=` and the other `Trigger` fields set the processor's trigger (no deprecated
    flat keyword), on every processor that takes one; `low_water` alone keeps the default mark."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipeline = build_pipeline(
            "truncate:max_fraction=0.7:low_water=0.5,clear:max_tokens=9000,summarize:low_water=0.3"
        )
    truncate, clear, summarize, _ = pipeline.processors
    assert truncate.trigger == Trigger(max_fraction=0.7, low_water=0.5)
    assert clear.trigger == Trigger(max_tokens=9000)
    assert summarize.trigger == Trigger(max_fraction=0.8, low_water=0.3)
    assert_error(
        run("analyze", SMALL, "-p", "repair:max_fraction=0.5"), EXIT_USAGE, "has no option 'max_fraction'"
    )


# ---------------------------------------------------------------------------------------------
# bad input: one line, a documented exit code
# ---------------------------------------------------------------------------------------------


def _bad_inputs(tmp_path: Path) -> list[tuple[str, Path, int, str]]:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    lines = SMALL.read_text(encoding="utf-8").splitlines()
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(lines[:3]) + "\n" + lines[3][:50], encoding="utf-8")
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"event": "start"}\n{"event": "stop"}\n')
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    return [
        ("an empty file", empty, EXIT_USAGE, "the file is empty"),
        ("a truncated JSONL line", truncated, EXIT_USAGE, "truncated.jsonl:4: not valid JSON"),
        ("an unknown format", unknown, EXIT_USAGE, "not a known transcript format"),
        ("a binary file", binary, EXIT_USAGE, "not UTF-8"),
        ("a missing file", tmp_path / "missing.jsonl", EXIT_NOT_FOUND, "missing.jsonl: no such file"),
        ("a directory", tmp_path, EXIT_USAGE, "a directory"),
    ]


def test_bad_transcripts_give_one_line_and_an_exit_code(tmp_path: Path) -> None:
    for _what, path, code, fragment in _bad_inputs(tmp_path):
        assert_error(run("analyze", path, "-p", SPEC), code, fragment)
        assert_error(
            run("compact", path, "-w", 1000, "-p", SPEC, "-o", tmp_path / "out.jsonl"), code, fragment
        )


def test_an_unknown_format_name(tmp_path: Path) -> None:
    assert_error(
        run("analyze", SMALL, "--from", "yaml"), EXIT_USAGE, "unknown format 'yaml': use one of chat"
    )


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    result = run("compact", SMALL, "-w", 1000)  # no --output
    assert result.exit_code == EXIT_USAGE and "--output" in result.stderr
    assert run("analyze", SMALL, "--window", 0).exit_code == EXIT_USAGE
    assert run("compact", SMALL, "--window", 0, "-o", tmp_path / "o.jsonl").exit_code == EXIT_USAGE


def test_the_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("historykit")
    assert script.exists(), f"the console script is not installed next to {sys.executable}"
    done = subprocess.run(
        [str(script), "analyze", str(LARGEST), "--json", "--window", "32000", "--pipeline", SPEC],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (analysis,) = json.loads(done.stdout)
    assert analysis["name"] == str(LARGEST) and analysis["replay"]["summary"]["over_window_after"] == 0
    failed = subprocess.run(
        [str(script), "analyze", str(tmp_path / "nope.jsonl")], capture_output=True, text=True, timeout=60
    )
    assert failed.returncode == EXIT_NOT_FOUND
    assert failed.stderr.strip().splitlines() == [
        f"historykit: error: {tmp_path / 'nope.jsonl'}: no such file"
    ]
    assert failed.stdout == ""


# ---------------------------------------------------------------------------------------------
# Stored threads: a real LangGraph graph and a real Pydantic AI agent write the database
# ---------------------------------------------------------------------------------------------

FILES = {f"src/mod{i}.py": f"def f{i}():\n    return {i}\n" * 120 for i in range(6)}


def _run_graph(url: str) -> None:
    """A tool-calling LangGraph agent (fake chat model) that reads six files and compacts its state
    with `Summarize` as it goes (persistent mode), plus a thread whose state was broken by an update."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.prebuilt import ToolNode, tools_condition

    from historykit import Pipeline
    from historykit.checkpointers import SQLModelSaver
    from historykit.processors._summarize import Summarize

    @tool
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return FILES[path]

    def graph_for(responses: list[AIMessage], saver: Any) -> Any:
        model = GenericFakeChatModel(messages=iter(responses))
        summarize = Pipeline([Summarize(trigger=Trigger(max_tokens=3000), keep_last=2, min_gain=100)])

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        def compact(state: MessagesState) -> dict[str, Any]:
            result = summarize.run(state["messages"], 32_000)
            if not result.report.changed:
                return {}
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages]}

        builder = StateGraph(MessagesState)
        builder.add_node("compact", compact)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode([read_file]))
        builder.add_edge(START, "compact")
        builder.add_edge("compact", "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "compact")
        return builder.compile(checkpointer=saver)

    calls = [
        AIMessage("", tool_calls=[{"id": f"call_{i}", "name": "read_file", "args": {"path": p}}])
        for i, p in enumerate(FILES)
    ]
    with SQLModelSaver(url) as saver:
        graph = graph_for([*calls, AIMessage("All six modules return their number.")], saver)
        graph.invoke({"messages": [("user", "What do the modules in src/ return?")]}, _config("t-read"))
        broken = graph_for([AIMessage("src/mod0.py returns 0.")], saver)
        broken.invoke({"messages": [("user", "What does src/mod0.py return?")]}, _config("t-broken"))
        # A result that answers no call: what a naive edit of the state leaves behind.
        broken.update_state(
            _config("t-broken"), {"messages": [ToolMessage("stale output", tool_call_id="gone")]}
        )


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _run_agent(url: str) -> None:
    """A Pydantic AI agent (FunctionModel) whose conversations the store keeps, one of them broken."""
    from pydantic_ai import Agent
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from historykit.checkpointers import SQLModelConversationStore

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages for p in getattr(m, "parts", ()) if p.part_kind == "tool-return")
        if done < 2:
            path = list(FILES)[done]
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": path}, tool_call_id=f"pc_{done}")])
        return ModelResponse(parts=[TextPart("Both modules return their number.")])

    agent = Agent(FunctionModel(model), instructions="You read code carefully.")

    @agent.tool_plain
    def read_file(path: str) -> str:
        return FILES[path]

    async def main() -> None:
        store = SQLModelConversationStore(url)
        try:
            result = await agent.run(
                "What do mod0 and mod1 return?", conversation=Conversation(conversation_id="c-ok")
            )
            await store.save(result)
            broken = Conversation(
                conversation_id="c-broken",
                messages=[
                    ModelRequest(parts=[UserPromptPart("Read src/mod2.py")]),
                    ModelResponse(
                        parts=[ToolCallPart("read_file", {"path": "src/mod2.py"}, tool_call_id="lost")]
                    ),
                    ModelRequest(parts=[UserPromptPart("Never mind, what is 2 + 2?")]),
                ],
            )
            await store.save(broken)
        finally:
            await store.aclose()

    asyncio.run(main())


@pytest.fixture(scope="module")
def pristine_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "agent.db"
    url = f"sqlite:///{path}"
    _run_graph(url)
    _run_agent(url)
    return path


@pytest.fixture
def db(pristine_db: Path, tmp_path: Path) -> Path:
    """A copy of the database for tests that change it."""
    target = tmp_path / "agent.db"
    for suffix in ("", "-wal", "-shm"):
        source = Path(str(pristine_db) + suffix)
        if source.exists():
            shutil.copy(source, str(target) + suffix)
    return target


def _saver(path: Path | str) -> Any:
    from historykit.checkpointers import SQLModelSaver

    return SQLModelSaver(path if isinstance(path, str) else f"sqlite:///{path}")


def test_threads_lists_both_frameworks(pristine_db: Path) -> None:
    result = run("threads", pristine_db, "--json")
    assert result.exit_code == 0, result.stderr
    threads = {t["thread_id"]: t for t in json.loads(result.stdout)}
    assert set(threads) == {"t-read", "t-broken", "c-ok", "c-broken"}
    assert threads["t-read"]["framework"] == "langgraph" and threads["c-ok"]["framework"] == "pydantic_ai"
    with _saver(pristine_db) as saver:
        transcript = saver.transcript("t-read")
        checkpoints = list(saver.list(_config("t-read")))
    # Log rows: the originals and the messages compactions wrote.
    assert threads["t-read"]["messages"] == len(transcript.messages) + len(transcript.compactions)
    assert threads["t-read"]["checkpoints"] == len(checkpoints)
    assert threads["t-read"]["compactions"] == len(transcript.compactions) >= 1
    assert threads["c-ok"]["entries"] > 0 and threads["t-read"]["storage_bytes"] > 0
    human = run("threads", f"sqlite:///{pristine_db}")
    assert human.exit_code == 0 and "t-read" in human.stdout and "c-broken" in human.stdout


def test_show_a_thread_with_its_markers(pristine_db: Path) -> None:
    result = run("show", pristine_db, "t-read", "--json")
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    with _saver(pristine_db) as saver:
        transcript = saver.transcript("t-read")
        state = saver.get_tuple(_config("t-read")).checkpoint["channel_values"]["messages"]
    assert [(c["at"], c["strategy"], c["covered_from"], c["covered_to"]) for c in shown["compactions"]] == [
        (c.at, c.marker.strategy, c.marker.covered_from, c.marker.covered_to) for c in transcript.compactions
    ]
    summary = shown["summary"]
    assert summary["messages in the state"] == len(state) < summary["original messages (transcript)"]
    assert summary["messages in the view"] == len(state)
    assert summary["original messages (transcript)"] == len(transcript.messages)
    assert "summarize" in {c["strategy"] for c in shown["compactions"]}
    human = run("show", pristine_db, "t-read")
    assert "compaction marker(s)" in human.stdout and "summarize" in human.stdout
    conversation = run("show", pristine_db, "c-ok", "--json")
    assert (
        conversation.exit_code == 0
        and json.loads(conversation.stdout)["summary"]["messages in the history"] > 0
    )


def test_export_writes_the_full_original_transcript(pristine_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "t-read.json"
    result = run("export", pristine_db, "t-read", "-o", out)
    assert result.exit_code == 0, result.stderr
    exported = read_transcript(out)
    with _saver(pristine_db) as saver:
        transcript = saver.transcript("t-read")
        state = saver.get_tuple(_config("t-read")).checkpoint["channel_values"]["messages"]
    assert exported.format == "langchain" and exported.native == transcript.messages
    assert len(exported.native) > len(state)  # what compaction removed from the state is there too
    chat = tmp_path / "t-read.jsonl"
    assert run("export", pristine_db, "t-read", "-o", chat, "--to", "chat").exit_code == 0
    assert read_transcript(chat).format == "chat"
    conversation = tmp_path / "c-ok.json"
    assert run("export", pristine_db, "c-ok", "-o", conversation).exit_code == 0
    assert read_transcript(conversation).format == "pydantic-ai"


def test_doctor_finds_the_broken_threads(pristine_db: Path) -> None:
    result = run("doctor", pristine_db, "--json")
    assert result.exit_code == EXIT_PROBLEMS, result.stderr
    status = {d["thread_id"]: d for d in json.loads(result.stdout)}
    assert status["t-read"]["status"] == "ok" and status["c-ok"]["status"] == "ok"
    assert status["t-broken"]["status"] == "violations" and status["t-broken"]["violations"][0].startswith(
        "R1"
    )
    assert status["c-broken"]["status"] == "violations" and status["c-broken"]["violations"][0].startswith(
        "R2"
    )


def test_doctor_repairs_through_the_normal_write_path(db: Path) -> None:
    from historykit.checkpointers import SQLModelConversationStore

    with _saver(db) as saver:
        before = saver.get_tuple(_config("t-broken"))
        count = len(list(saver.list(_config("t-broken"))))
    store = SQLModelConversationStore(f"sqlite:///{db}")
    record = asyncio.run(store.read_record("c-broken"))
    asyncio.run(store.aclose())

    result = run("doctor", db, "--repair", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    status = {d["thread_id"]: d["status"] for d in json.loads(result.stdout)}
    assert status == {"t-read": "ok", "t-broken": "repaired", "c-ok": "ok", "c-broken": "repaired"}

    with _saver(db) as saver:
        after = saver.get_tuple(_config("t-broken"))
        history = list(saver.list(_config("t-broken")))
        old = saver.get_tuple({"configurable": {**before.config["configurable"]}})
    assert len(history) == count + 1  # a new checkpoint, written with `put`
    assert after.parent_config["configurable"]["checkpoint_id"] == before.checkpoint["id"]
    assert after.metadata["historykit"]["repaired_by"] == "historykit doctor --repair"
    assert check(after.checkpoint["channel_values"]["messages"]) == []
    assert old.checkpoint["channel_values"] == before.checkpoint["channel_values"]  # nothing edited in place

    store = SQLModelConversationStore(f"sqlite:///{db}")
    repaired = asyncio.run(store.load("c-broken"))
    new_record = asyncio.run(store.read_record("c-broken"))
    asyncio.run(store.aclose())
    assert check(repaired.messages) == []
    assert len(new_record.branches) == len(record.branches) + 1  # the original history is kept as a branch

    again = run("doctor", db)
    assert again.exit_code == 0 and "repaired" not in again.stdout


def test_database_errors_are_one_line(tmp_path: Path, pristine_db: Path) -> None:
    assert_error(run("threads", tmp_path / "missing.db"), EXIT_NOT_FOUND, "missing.db: no such database file")
    assert not (tmp_path / "missing.db").exists()
    assert_error(run("threads", f"sqlite:///{tmp_path}/missing.db"), EXIT_NOT_FOUND, "no such database file")
    assert_error(
        run("show", pristine_db, "no-such-thread"), EXIT_NOT_FOUND, "thread 'no-such-thread' is not in"
    )
    assert_error(
        run("export", pristine_db, "nope", "-o", tmp_path / "x.json"), EXIT_NOT_FOUND, "thread 'nope'"
    )

    from langgraph.checkpoint.sqlite import SqliteSaver

    other = tmp_path / "langgraph.db"
    with sqlite3.connect(other, check_same_thread=False) as conn:
        SqliteSaver(conn).setup()
    for command in ("threads", "doctor"):
        assert_error(run(command, other), EXIT_USAGE, "is not a historykit database", "checkpoints")

    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("these are notes, not a database\n" * 100)
    assert_error(run("threads", not_a_db), EXIT_USAGE, "cannot read the database")

    newer = tmp_path / "newer.db"
    shutil.copy(pristine_db, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE historykit_schema SET version = 99 WHERE component = 'core'")
    assert_error(run("threads", newer), EXIT_USAGE, "schema version 99", "newer historykit")
    assert_error(run("threads", "oracle://nobody@localhost/x"), EXIT_USAGE, "unsupported database URL")


def test_inspecting_never_changes_a_foreign_database(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = other.read_bytes()
    assert_error(run("doctor", other, "--repair"), EXIT_USAGE, "not a historykit database", "notes")
    assert other.read_bytes() == before


@pytest.fixture
def postgres_url() -> Iterator[str]:
    import psycopg

    admin = postgres_admin_url()
    name = f"historykit_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_the_commands_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    _run_graph(postgres_url)
    threads = json.loads(run("threads", postgres_url, "--json").stdout)
    assert {t["thread_id"] for t in threads} == {"t-read", "t-broken"}
    shown = json.loads(run("show", postgres_url, "t-read", "--json").stdout)
    assert len(shown["compactions"]) >= 1
    out = tmp_path / "t-read.json"
    assert run("export", postgres_url, "t-read", "-o", out).exit_code == 0
    with _saver(postgres_url) as saver:
        assert read_transcript(out).native == saver.transcript("t-read").messages
    assert run("doctor", postgres_url).exit_code == EXIT_PROBLEMS
    repaired = run("doctor", postgres_url, "--repair", "--json")
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    assert run("doctor", postgres_url).exit_code == 0
    assert_error(run("show", postgres_url, "missing"), EXIT_NOT_FOUND, "thread 'missing'")


# ---------------------------------------------------------------------------------------------
# Every transcript generation, batches, flags with one meaning, output that survives a pipe
# ---------------------------------------------------------------------------------------------


def _subagent_file(tmp_path: Path) -> Path:
    """The Claude Code fixture as a sub-agent log writes it: every row a sidechain of one agent."""
    rows = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    conversation = [r for r in rows if r.get("type") in ("user", "assistant") and not r.get("isSidechain")]
    path = tmp_path / "agent-a1b2c3d.jsonl"
    path.write_text(
        "".join(json.dumps({**r, "isSidechain": True, "agentId": "a1b2c3d"}) + "\n" for r in conversation),
        encoding="utf-8",
    )
    return path


def test_every_transcript_generation_through_analyze_and_compact(tmp_path: Path) -> None:
    files = {
        "claude-code": CLAUDE_CODE,
        "claude-code sub-agent": _subagent_file(tmp_path),
        "codex": CODEX,
        "codex 2025-09": CODEX_2025_09,
    }
    result = run("analyze", *files.values(), "--json", "--window", 8000)
    assert result.exit_code == 0, result.stderr
    analyses = json.loads(result.stdout)
    assert [a["format"] for a in analyses] == ["claude-code", "claude-code", "codex", "codex"]
    assert all(a["model_calls"] > 0 and a["replay"]["calls"] for a in analyses)
    for name, source in files.items():
        out = tmp_path / f"compacted-{source.name}"
        result = run("compact", source, "--window", 300, "--pipeline", SPEC, "-o", out, "--json")
        assert result.exit_code == 0, (name, result.stderr)
        assert read_transcript(out).format == read_transcript(source).format
        assert check(read_transcript(out).history) == []


def test_a_batch_reports_each_unreadable_file_and_analyses_the_rest(tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text(CODEX.read_text()[:700], encoding="utf-8")
    missing = tmp_path / "missing.jsonl"
    result = run("analyze", CODEX, cut, CLAUDE_CODE, missing, CODEX_2025_09, "--json", "--pipeline", SPEC)
    assert result.exit_code == EXIT_NOT_FOUND  # the worst of the failures: 3 (not found) over 2
    assert [Path(a["name"]).name for a in json.loads(result.stdout)] == [
        CODEX.name,
        CLAUDE_CODE.name,
        CODEX_2025_09.name,
    ]
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("historykit: error: ") for e in errors)
    assert str(cut) in errors[0] and str(missing) in errors[1]
    shown = run("analyze", cut, CODEX, "--pipeline", SPEC)
    assert shown.exit_code == EXIT_USAGE and "where the tokens go" in shown.stdout
    assert "1 of 2 file(s) could not be analysed" in shown.stderr


def test_analyze_shows_the_recorded_usage_and_what_it_cannot_see() -> None:
    result = run("analyze", CLAUDE_CODE, "--window", 8000)
    assert result.exit_code == 0, result.stderr
    assert "recorded" in result.stdout and "calls over the window" in result.stdout
    assert "system prompt and the tool definitions" in result.stdout
    assert "compacted its own history 1 time(s)" in result.stdout


def test_compact_converts_between_formats(tmp_path: Path) -> None:
    for source, target in ((CLAUDE_CODE, "chat"), (CODEX_2025_09, "pydantic-ai"), (LARGEST, "langchain")):
        out = tmp_path / f"{source.stem}.{target}"
        window = 32000 if source == LARGEST else 300
        result = run("compact", source, "-w", window, "-p", SPEC, "-o", out, "--to", target, "--json")
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["format"] == read_transcript(source).format and report["output_format"] == target
        written = read_transcript(out)
        assert written.format == target and check(written.history) == []
    shown = run("compact", CLAUDE_CODE, "-w", 300, "-p", SPEC, "-o", tmp_path / "c.jsonl", "--to", "codex")
    assert shown.exit_code == 0 and "(converted from claude-code)" in shown.stdout


def test_format_flags_have_one_meaning_and_no_old_spelling(tmp_path: Path) -> None:
    """`--from` reads, `--to` writes; `--format`/`-f` of unreleased versions is an unknown option."""
    for args in (
        ("analyze", CODEX, "--format", "codex", "--json", "--pipeline", SPEC),
        ("compact", CODEX, "-w", 300, "-p", SPEC, "-o", tmp_path / "out.json", "-f", "codex", "--json"),
    ):
        result = run(*args)
        assert result.exit_code == EXIT_USAGE, result.stdout
        assert "No such option" in result.stderr and "deprecated" not in result.stderr
    assert not (tmp_path / "out.json").exists()
    assert "--to" in run("compact", "--help").stdout and "--from" in run("analyze", "--help").stdout
    assert "--format" not in run("export", "--help").stdout


def test_model_names_with_colons_in_a_pipeline_spec() -> None:
    pipeline = build_pipeline("clear:keep=3,summarize:model=openai:gpt-4o-mini:max_tokens=2000")
    clear, summarize, _ = pipeline.processors
    assert summarize.model == "openai:gpt-4o-mini" and summarize.trigger.max_tokens == 2000
    assert clear.keep == 3
    with pytest.raises(Exception, match="is not option=value"):
        build_pipeline("summarize:openai:gpt-4o")


def _long_path_transcript(tmp_path: Path) -> Path:
    """A chat transcript that reads a file with a very long path twice (a wide cell in the tables)."""
    path = "/home/USER/.claude/projects/" + "-".join(["a-very-long-project-directory"] * 6) + "/notes.txt"
    rows: list[dict[str, Any]] = [{"role": "user", "content": "read the notes"}]
    # A second file elsewhere, so no common directory shortens the long path.
    for n, read in enumerate((path, path, "/srv/app/readme.md"), start=1):
        call = {"id": f"call_{n}", "name": "Read", "arguments": json.dumps({"file_path": read})}
        rows += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "name": "Read", "content": "notes " * 200},
        ]
    rows.append({"role": "assistant", "content": "done"})
    out = tmp_path / "long-path.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def test_piped_output_keeps_its_lines_whole_and_its_tables_readable(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "historykit"
    env = {k: v for k, v in __import__("os").environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [str(script), "analyze", str(_long_path_transcript(tmp_path)), str(CLAUDE_CODE)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    lines = done.stdout.splitlines()
    # The pipeline heading and the note about what a transcript lacks are long lines, kept whole.
    assert any(len(line) > 120 and "pipeline ClearMedia | DedupeFileReads" in line for line in lines)
    assert any("tool definitions sent with every call" in line and len(line) > 120 for line in lines)
    # Tables fit 120 columns: the long path folds in its cell instead of padding every row to it.
    rows = [line for line in lines if line.startswith(" ") and line.strip()]
    assert rows and max(len(line.rstrip()) for line in rows) <= 120
    assert "notes.txt" in done.stdout


def test_help_shows_no_formatting_markers_and_names_the_chat_format() -> None:
    from docs._hooks.historykit_docs import _cli_help

    shown = run("--help").stdout
    assert "\b" not in shown and "corpus" not in shown
    assert "chat (OpenAI\n  chat-completions messages, one JSON object a line)" in shown
    for command in ("analyze", "compact", "threads", "show", "export", "doctor"):
        assert "\b" not in run(command, "--help").stdout
    # The docs' command-line page is generated from the same help.
    page = _cli_help(app)
    assert "\b" not in page and "DB_URL: sqlite:///path.db" in page


# ---------------------------------------------------------------------------------------------
# Raw agent logs: the transcript's own window, its recorded usage, the agent's own compaction
# ---------------------------------------------------------------------------------------------

REAL = Path(__file__).resolve().parent / "formats" / "data" / "real"
"""Real Claude Code session logs (tests/formats/data/real/SOURCE.md)."""


def test_analyze_takes_the_window_from_the_model_and_counts_from_the_recorded_usage() -> None:
    result = run("analyze", REAL / "spotter-tool_heavy.jsonl", CODEX, "--json", "-p", SPEC)
    assert result.exit_code == 0, result.stderr
    claude, codex = (a["replay"] for a in json.loads(result.stdout))
    # claude-opus-4-6: the standard 200k window (genai-prices lists the 1M beta as a price tier).
    assert (claude["window"], claude["window_source"], claude["model"]) == (
        200_000,
        "genai-prices",
        "claude-opus-4-6",
    )
    assert (codex["window"], codex["window_source"]) == (258_400, "transcript")  # the rollout says
    last = claude["calls"][-1]
    assert abs(last["before"] - last["recorded"]) <= 0.15 * last["recorded"]
    shown = run("analyze", REAL / "spotter-tool_heavy.jsonl", "-p", SPEC).stdout
    assert "window 200,000 (claude-opus-4-6, from genai-prices)" in shown


def test_calls_over_the_window_agree_with_the_recorded_usage() -> None:
    result = run("analyze", REAL / "spotter-tool_heavy.jsonl", "--json", "-p", "repair", "-w", 27_000)
    summary = json.loads(result.stdout)[0]["replay"]["summary"]
    assert summary["over_window_before"] == summary["recorded"]["over_window"] == 1


def test_compact_keeps_what_the_agents_own_compaction_dropped(tmp_path: Path) -> None:
    source = REAL / "spotter-4d5611e5-compact-boundary.jsonl"
    out = tmp_path / "compacted.jsonl"
    result = run("compact", source, "-w", 300, "-p", SPEC, "-o", out, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["agent_compaction"] == {"starts_at": 3, "kept_as_written": 3}
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    boundary = next(n for n, r in enumerate(rows) if r.get("subtype") == "compact_boundary")

    # Everything up to the boundary, the boundary itself and the summary after it, as Claude Code
    # wrote them (the rows chained in the order written): the pipeline only saw what the agent
    # still had in its context.
    def unlinked(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in ("parentUuid", "logicalParentUuid")}

    assert [unlinked(r) for r in written[: boundary + 2]] == [unlinked(r) for r in rows[: boundary + 2]]
    assert written[boundary]["parentUuid"] is None
    assert written[boundary]["logicalParentUuid"] == written[boundary - 1]["uuid"]
    assert read_transcript(out).messages[3].text.startswith("This session is being continued")
    # To another format, only what the agent still had: the summary and what follows.
    chat = tmp_path / "compacted.chat.jsonl"
    assert run("compact", source, "-w", 300, "-p", SPEC, "-o", chat, "--to", "chat").exit_code == 0
    assert read_transcript(chat).messages[0].text.startswith("This session is being continued")


# ---------------------------------------------------------------------------------------------
# User data is shown as text; doctor reports every thread
# ---------------------------------------------------------------------------------------------

HOSTILE_IDS = ["[/]", "[link=https://example.invalid]hidden[/link]", "\x1b[31mred\x1b[0m", "[bold]b"]


def _hostile_db(path: Path) -> Path:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from historykit.checkpointers import SQLModelSaver

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("ok")]})
    builder.add_edge(START, "agent")
    with SQLModelSaver(f"sqlite:///{path}") as saver:
        graph = builder.compile(checkpointer=saver)
        for thread in HOSTILE_IDS:
            graph.invoke({"messages": [("user", "hi")]}, _config(thread))
    return path


def test_thread_ids_are_shown_as_text_never_as_markup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wide enough for the longest id whatever the terminal (an xdist worker has none: 80 columns).
    monkeypatch.setenv("COLUMNS", "200")
    db = _hostile_db(tmp_path / "hostile.db")
    listed = run("threads", db)
    assert listed.exit_code == 0, listed.stderr
    assert "\x1b" not in listed.stdout
    for shown in ("[/]", "[link=https://example.invalid]hidden[/link]", "\\x1b[31mred\\x1b[0m", "[bold]b"):
        assert shown in listed.stdout
    assert {t["thread_id"] for t in json.loads(run("threads", db, "--json").stdout)} == set(HOSTILE_IDS)
    doctor = run("doctor", db)
    assert doctor.exit_code == 0, doctor.stderr
    assert "[link=https://example.invalid]hidden[/link]" in doctor.stdout and "\x1b" not in doctor.stdout
    shown = run("show", db, "[/]")
    assert shown.exit_code == 0 and "thread '[/]'" in shown.stdout
    missing = run("show", db, "\x1b[2Jgone")
    assert missing.exit_code == EXIT_NOT_FOUND and "\x1b" not in missing.stderr


def test_doctor_reports_every_thread_and_names_the_table_of_a_corrupt_write(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        (checkpoint_id,) = conn.execute(
            "SELECT checkpoint_id FROM historykit_checkpoint WHERE thread_id = 't-read' "
            "ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
        conn.execute(
            "INSERT INTO historykit_write VALUES ('t-read', '', ?, 'task-x', 0, 'extra', '', 'msgpack', ?)",
            (checkpoint_id, b"\xc1\xc1\xc1"),
        )
    result = run("doctor", db, "--json")
    assert result.exit_code == EXIT_PROBLEMS, result.stderr
    status = {d["thread_id"]: d["status"] for d in json.loads(result.stdout)}
    assert set(status) == {"t-read", "t-broken", "c-ok", "c-broken"}  # every thread, past the corrupt one
    assert status["t-read"].startswith("unreadable: ") and "historykit_write" in status["t-read"]
    assert "historykit_checkpoint" not in status["t-read"]
    assert status["t-broken"] == "violations" and status["c-ok"] == "ok"
    table = run("doctor", db)
    assert table.exit_code == EXIT_PROBLEMS and "unreadable" in table.stdout and "t-broken" in table.stdout
