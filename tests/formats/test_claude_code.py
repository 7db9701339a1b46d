"""Claude Code session logs: read as the corpus conversion reads them, written back faithfully."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, SummaryPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit.formats import read_chat_jsonl, read_transcript, write_transcript
from historykit.formats._claude_code import read_claude_code, write_claude_code
from historykit.formats._detect import TranscriptFormatError
from tests.formats.helpers import CLAUDE_CODE, DATA, chat_records
from tests.strategies import examples, neutral_histories


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_reads_what_the_corpus_conversion_gives() -> None:
    messages = read_claude_code(CLAUDE_CODE)
    expected = read_chat_jsonl(DATA / "claude_code_session.expected.jsonl")
    assert chat_records(messages) == chat_records(expected)


def test_keeps_what_the_chat_format_cannot_hold() -> None:
    messages = read_claude_code(CLAUDE_CODE)
    thinking = [p for m in messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert thinking[0].signature == "EqQBCkYIBxgCKkB0c2lnbmF0dXJl" and thinking[0].provider == "anthropic"
    assert (
        thinking[1].redacted
        and thinking[1].signature == "ErcBCkYIBRgCIkD0cmVkYWN0ZWQ="
        and thinking[1].text == ""
    )
    bash = next(p for m in messages for p in m.tool_results if p.name == "Bash")
    assert bash.is_error


def test_blocks_of_one_api_message_are_one_message_and_results_follow_call_order() -> None:
    messages = read_claude_code(CLAUDE_CODE)
    first = messages[1]
    assert first.role == "assistant"
    assert [p.kind for p in first.parts] == ["thinking", "text", "tool_call", "tool_call"]
    # The log wrote the Bash result before the Read result; the calls were Read then Bash.
    assert [m.tool_results[0].name for m in messages[2:4]] == ["Read", "Bash"]
    assert len(first.native.rows) == 4  # the four rows of the API message, bookkeeping left out


def test_skips_meta_and_sidechain_rows_and_keeps_the_compaction_summary() -> None:
    messages = read_claude_code(CLAUDE_CODE)
    texts = [m.text for m in messages]
    assert not any("local-command-caveat" in t for t in texts)
    assert not any("(sub-agent work)" in t for t in texts)
    assert any(t.startswith("This session is being continued") for t in texts)


def test_a_reused_call_id_is_made_unique() -> None:
    messages = read_claude_code(CLAUDE_CODE)
    ids = [p.id for m in messages for p in m.tool_calls]
    assert ids.count("toolu_01Read") == 1 and "toolu_01Read__2" in ids
    assert messages[-2].tool_results[0].tool_call_id == "toolu_01Read__2"


def test_a_subagent_log_is_read_whole(tmp_path: Path) -> None:
    rows = [
        {**row, "isSidechain": True, "agentId": "a1b2c3"}
        for row in _rows(CLAUDE_CODE)
        if row.get("type") in ("user", "assistant")
    ]
    path = tmp_path / "agent-a1b2c3.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    messages = read_claude_code(path)
    assert any("(sub-agent work)" in m.text for m in messages)


def test_rows_are_written_back_verbatim_and_chained(tmp_path: Path) -> None:
    messages = read_claude_code(CLAUDE_CODE)
    out = tmp_path / "out.jsonl"
    write_claude_code(messages, out)
    written = _rows(out)
    originals = {r["uuid"]: r for r in _rows(CLAUDE_CODE) if "uuid" in r}
    for row in written:
        original = originals[row["uuid"]]
        assert {k: v for k, v in row.items() if k != "parentUuid"} == {
            k: v for k, v in original.items() if k != "parentUuid"
        }
    # Each row follows the one before, except Claude Code's compact boundary: the context a resumed
    # session rebuilds starts there (no parent; the row before it is only its logical parent).
    previous = [None] + [r["uuid"] for r in written[:-1]]
    boundary = [n for n, r in enumerate(written) if r.get("subtype") == "compact_boundary"]
    assert len(boundary) == 1 and written[boundary[0]]["logicalParentUuid"] == previous[boundary[0]]
    expected = [None if n in boundary else parent for n, parent in enumerate(previous)]
    assert [r["parentUuid"] for r in written] == expected
    assert read_claude_code(out) == messages


def test_edited_messages_keep_their_rows_fields(tmp_path: Path) -> None:
    messages = read_claude_code(CLAUDE_CODE)
    read_result = messages[2].tool_results[0]
    messages[2] = replace(messages[2], parts=(replace(read_result, content="[cleared]"),))
    messages[1] = replace(messages[1], parts=tuple(p for p in messages[1].parts if p.kind != "thinking"))
    out = tmp_path / "out.jsonl"
    write_claude_code(messages, out)
    written = _rows(out)
    cleared = next(
        r
        for r in written
        if isinstance(r["message"]["content"], list)
        and r["message"]["content"][0].get("content") == "[cleared]"
    )
    original = next(r for r in _rows(CLAUDE_CODE) if r.get("uuid") == cleared["uuid"])
    assert "toolUseResult" in original and "toolUseResult" not in cleared  # it held the cleared output
    assert cleared["timestamp"] == original["timestamp"] and cleared["sessionId"] == original["sessionId"]
    assistant = next(r for r in written if r["type"] == "assistant")
    assert [b["type"] for b in assistant["message"]["content"]] == ["text", "tool_use", "tool_use"]
    assert assistant["message"]["usage"]["output_tokens"] == 96 and assistant["requestId"] == "req_01"
    assert read_claude_code(out) == messages


def test_new_messages_get_rows_of_their_own(tmp_path: Path) -> None:
    messages = read_claude_code(CLAUDE_CODE)
    notice = Message("user", (TextPart("[historykit] 4 earlier messages were removed."),))
    summary = Message("user", (SummaryPart("Task: fix the parser. Done: tokens() returns a list."),))
    edited = [messages[0], notice, summary, *messages[5:]]
    out = tmp_path / "out.jsonl"
    write_claude_code(edited, out)
    written = _rows(out)
    assert written[1]["message"]["content"] == [{"type": "text", "text": notice.text}]
    assert written[1]["sessionId"] == written[0]["sessionId"] and written[1]["uuid"] != written[0]["uuid"]
    assert written[2]["isCompactSummary"] is True
    assert len({r["uuid"] for r in written}) == len(written)
    back = read_claude_code(out)
    assert back[1] == notice and back[2].text == summary.parts[0].text


def test_a_system_message_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="message 0 is a system message"):
        write_claude_code([Message.system("You are helpful.")], "unused.jsonl")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "user", "uuid": "u", "sessionId": "s"}', "a user row without a 'message' object"),
        (
            '{"type": "user", "uuid": "u", "message": {"role": "user", "content": 3}}',
            "must be a string or a list",
        ),
        (
            '{"type": "user", "uuid": "u", "message": {"role": "user", "content": [{"x": 1}]}}',
            "not an object with a 'type'",
        ),
        (
            '{"type": "assistant", "uuid": "u", '
            '"message": {"id": "m", "content": [{"type": "tool_use", "input": {}}]}}',
            "needs an 'id' and a 'name'",
        ),
        ('{"type": "summary", "summary": "t", "leafUuid": "x"}', "no conversation rows"),
        (
            '{"type": "user", "uuid": "u", "message": {"role": "user", "content": "hi"}}\n{"type": "assi',
            "cut short",
        ),
    ],
)
def test_bad_rows_are_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TranscriptFormatError, match=expected) as info:
        read_transcript(path, "claude-code")
    assert str(path) in str(info.value) and "\n" not in str(info.value)


_EDITS = st.sampled_from(("keep", "keep", "drop", "edit", "notice"))


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_EDITS, min_size=13, max_size=13))
def test_any_edit_survives_writing_and_reading(tmp_path: Path, ops: list[str]) -> None:
    """What a processor does (drop, clear, strip, add) reads back exactly as it was written."""
    edited: list[Message] = []
    for message, op in zip(read_claude_code(CLAUDE_CODE), ops):
        if op == "drop":
            continue
        if op == "notice":
            edited.append(Message("user", (TextPart(f"[notice before message {len(edited)}]"),)))
        if op == "edit":
            message = _edit(message)
        edited.append(message)
    out = tmp_path / "edited.jsonl"
    write_claude_code(edited, out)
    assert _canonical(read_claude_code(out)) == _canonical(edited)


def _canonical(messages: list[Message]) -> list[Message]:
    """Ids as the log has them (a `__<n>` suffix only tells a reused id apart), and a result whose
    call is gone unnamed (the log names results by their call)."""
    called: set[str] = set()
    out = []
    for message in messages:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                part = replace(part, id=part.id.split("__")[0])
                called.add(part.id)
            elif isinstance(part, ToolResultPart):
                call_id = part.tool_call_id.split("__")[0]
                part = replace(part, tool_call_id=call_id, name=part.name if call_id in called else None)
            parts.append(part)
        out.append(replace(message, parts=tuple(parts)))
    return out


def _edit(message: Message) -> Message:
    parts = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            parts.append(replace(part, content=f"[cleared: output of {part.name}]"))
        elif isinstance(part, ThinkingPart):
            continue
        elif isinstance(part, TextPart):
            parts.append(replace(part, text=part.text[:20] + " [shortened]"))
        elif isinstance(part, ToolCallPart) and isinstance(part.arguments, dict):
            parts.append(replace(part, arguments={k: "[cleared]" for k in part.arguments}))
        else:
            parts.append(part)
    return replace(message, parts=tuple(parts or [TextPart("(emptied)")]))


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(neutral_histories())
def test_any_history_can_be_written_as_a_session(tmp_path: Path, history: list[Message]) -> None:
    history = [m for m in history if m.role != "system"]
    out = tmp_path / "new.jsonl"
    write_transcript(history, out, "claude-code")
    back = read_transcript(out)
    assert back.format == "claude-code"
    assert chat_records(back.messages) == chat_records(history)
    signatures = [p.signature for m in history for p in m.parts if isinstance(p, ThinkingPart)]
    assert [p.signature for m in back.messages for p in m.parts if isinstance(p, ThinkingPart)] == signatures


# ---------------------------------------------------------------------------------------------
# What the log records besides the conversation: usage, its own compaction, accepted requests
# ---------------------------------------------------------------------------------------------


def test_the_recorded_usage_is_every_input_token_of_the_call() -> None:
    from historykit.formats import compaction_boundaries, read_transcript

    messages = read_transcript(CLAUDE_CODE).messages
    rows = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    usage = next(
        r["message"]["usage"] for r in rows if r.get("type") == "assistant" and not r.get("isSidechain")
    )
    expected = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    answers = [m for m in messages if m.role == "assistant"]
    assert answers and all(m.usage is not None for m in answers)
    assert answers[0].usage is not None and answers[0].usage.input_tokens == expected
    # Claude Code's own compaction: the summary it wrote is where its next context started.
    (boundary,) = compaction_boundaries(messages)
    assert messages[boundary].role == "user" and messages[boundary].text.startswith(
        "This session is being continued"
    )


def _session(tmp_path: Path, first_text: str) -> Path:
    """An assistant turn logged as Claude Code logs it: a text block, then signed thinking, then a
    call, each on its own row (one API message), and the tool's result."""
    base = {"isSidechain": False, "sessionId": "s", "version": "2.1.39", "cwd": "/p"}
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6"}
    blocks = [
        {"type": "text", "text": first_text},
        {"type": "thinking", "thinking": "Read it first.", "signature": "EqQBsig"},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/p/a.py"}},
    ]
    rows = [{**base, "type": "user", "uuid": "u0", "message": {"role": "user", "content": "Look at a.py"}}]
    rows += [
        {**base, "type": "assistant", "uuid": f"a{n}", "message": {**msg, "content": [block]}}
        for n, block in enumerate(blocks)
    ]
    rows.append(
        {
            **base,
            "type": "user",
            "uuid": "r0",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}],
            },
        }
    )
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_whitespace_text_before_thinking_is_not_an_r7_violation(tmp_path: Path) -> None:
    """Two real sessions have a "\\n\\n" block logged before the thinking of requests the API accepted:
    whitespace-only text is no content (the API refuses such blocks, clients drop them)."""
    from historykit._validity import check
    from historykit.formats import read_transcript

    accepted = read_transcript(_session(tmp_path, "\n\n")).messages
    assert [v.rule for v in check(accepted)] == []
    # Real text before the thinking is still out of order.
    refused = read_transcript(_session(tmp_path, "Let me look.")).messages
    assert [v.rule for v in check(refused)] == ["R7"]


REAL = DATA / "real"
"""Real Claude Code session logs (data/real/SOURCE.md)."""


def test_the_compact_boundary_row_is_kept_where_claude_code_wrote_it(tmp_path: Path) -> None:
    from historykit.formats import compaction_boundaries

    source = REAL / "spotter-4d5611e5-compact-boundary.jsonl"
    messages = read_claude_code(source)
    assert compaction_boundaries(messages) == [3] and messages[3].native.preceding
    boundary = next(r for r in _rows(source) if r.get("subtype") == "compact_boundary")
    # Untouched, and with the summary after it edited (as a processor may): the row stays before it.
    edited = list(messages)
    edited[3] = replace(messages[3], parts=(TextPart("a shorter summary"),))
    for history in (messages, edited):
        out = tmp_path / "out.jsonl"
        write_claude_code(history, out)
        written = _rows(out)
        at = next(n for n, r in enumerate(written) if r.get("subtype") == "compact_boundary")
        fields = ("parentUuid", "logicalParentUuid")
        assert {k: v for k, v in written[at].items() if k not in fields} == {
            k: v for k, v in boundary.items() if k not in fields
        }
        assert written[at]["parentUuid"] is None
        assert written[at]["logicalParentUuid"] == written[at - 1]["uuid"]
        assert written[at + 1]["parentUuid"] == boundary["uuid"] and written[at + 1]["isCompactSummary"]
        assert compaction_boundaries(read_claude_code(out)) == [3]


def test_each_answer_knows_its_model() -> None:
    messages = read_claude_code(REAL / "spotter-tool_heavy.jsonl")
    assert {m.model for m in messages if m.role == "assistant"} == {"claude-opus-4-6"}
    assert all(m.model is None for m in messages if m.role != "assistant")
