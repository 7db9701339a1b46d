"""Codex CLI rollouts: read as the corpus conversion reads them, written back faithfully."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit.formats import read_chat_jsonl, read_transcript, write_transcript
from historykit.formats._codex import read_codex, write_codex
from historykit.formats._detect import TranscriptFormatError
from tests.formats.helpers import CODEX, CODEX_2025_09, DATA, chat_records, merge_adjacent_assistants
from tests.strategies import examples, neutral_histories


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_reads_what_the_corpus_conversion_gives() -> None:
    messages = read_codex(CODEX)
    expected = read_chat_jsonl(DATA / "codex_rollout.expected.jsonl")
    assert chat_records(messages) == chat_records(expected)


def test_reasoning_keeps_its_encrypted_content_unread() -> None:
    messages = read_codex(CODEX)
    thinking = [p for m in messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert thinking[0].text == "**Finding the entry point**\n\nI should look for where the server starts."
    assert thinking[0].signature == "gAAAAABfakeEncrypted1" and not thinking[0].redacted
    assert (
        thinking[1].text == "" and thinking[1].redacted and thinking[1].signature == "gAAAAABfakeEncrypted2"
    )


def test_one_model_turn_is_one_assistant_message() -> None:
    messages = read_codex(CODEX)
    turn = messages[4]
    assert [p.kind for p in turn.parts] == ["thinking", "text", "tool_call"]
    patch = turn.tool_calls[0]
    assert (
        patch.name == "apply_patch"
        and isinstance(patch.arguments, str)
        and "*** Begin Patch" in patch.arguments
    )


def test_shell_outputs_are_unwrapped_and_plain_outputs_kept() -> None:
    results = [p for m in read_codex(CODEX) for p in m.tool_results]
    assert results[0].content == "import argparse\n\nPORT = 8000\n" and results[0].name == "shell"
    assert results[2].content == "Plan updated"


def test_rows_are_written_back_verbatim(tmp_path: Path) -> None:
    messages = read_codex(CODEX)
    out = tmp_path / "out.jsonl"
    write_codex(messages, out)
    kept = [
        r
        for r in _rows(CODEX)
        if r["type"] in ("session_meta", "compacted", "turn_context")
        or (r["type"] == "response_item" and r["payload"]["type"] != "ghost_snapshot")
    ]
    # Token counts (the recorded usage of a call) travel with their call's items: compared apart.
    assert [r for r in _rows(out) if r["type"] != "event_msg"] == kept
    assert read_codex(out) == messages


def test_an_edited_shell_output_goes_back_into_its_envelope(tmp_path: Path) -> None:
    messages = read_codex(CODEX)
    result = messages[3].tool_results[0]
    messages[3] = replace(messages[3], parts=(replace(result, content="[cleared: output of shell]"),))
    out = tmp_path / "out.jsonl"
    write_codex(messages, out)
    row = next(
        r for r in _rows(out) if r["payload"].get("call_id") == "call_AAA1" and "output" in r["payload"]
    )
    assert json.loads(row["payload"]["output"]) == {
        "output": "[cleared: output of shell]",
        "metadata": {"exit_code": 0, "duration_seconds": 0.0},
    }
    assert row["timestamp"] == next(
        r["timestamp"]
        for r in _rows(CODEX)
        if r["payload"].get("call_id") == "call_AAA1" and "output" in r["payload"]
    )
    assert read_codex(out) == messages


def test_the_session_header_comes_first(tmp_path: Path) -> None:
    messages = read_codex(CODEX)
    out = tmp_path / "out.jsonl"
    write_codex(messages[1:], out)
    assert _rows(out)[0]["type"] == "session_meta"
    assert detect_is_codex(out)


def detect_is_codex(path: Path) -> bool:
    return read_transcript(path).format == "codex"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "response_item", "payload": "x"}', "whose 'payload' is not an item"),
        (
            '{"type": "response_item", "payload": {"type": "message", "role": "robot", "content": []}}',
            "unknown role",
        ),
        (
            '{"type": "response_item", "payload": {"type": "function_call", "name": "shell"}}',
            "without a 'call_id'",
        ),
        (
            '{"type": "response_item", "payload": {"type": "function_call_output", "output": "x"}}',
            "without a 'call_id'",
        ),
        ('{"type": "compacted", "payload": {}}', "without a 'payload.message'"),
        ('{"type": "session_meta", "payload": {"id": "x"}}', "no conversation items"),
    ],
)
def test_bad_rows_are_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TranscriptFormatError, match=expected) as info:
        read_transcript(path, "codex")
    assert str(path) in str(info.value) and "\n" not in str(info.value)


_EDITS = st.sampled_from(("keep", "keep", "drop", "edit", "notice"))


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_EDITS, min_size=10, max_size=10))
def test_any_edit_survives_writing_and_reading(tmp_path: Path, ops: list[str]) -> None:
    edited: list[Message] = []
    for message, op in zip(read_codex(CODEX), ops):
        if op == "drop":
            continue
        if op == "notice":
            edited.append(Message("user", (TextPart(f"[notice before message {len(edited)}]"),)))
        if op == "edit":
            message = _edit(message)
        edited.append(message)
    out = tmp_path / "edited.jsonl"
    write_codex(edited, out)
    # The model comes from the turn_context rows, which travel with their turn: a dropped turn
    # takes its own with it, so the model is compared apart (kept turns keep theirs).
    back = read_codex(out)
    assert _named(_modelless(back)) == _named(_modelless(merge_adjacent_assistants(edited)))
    assert {m.model for m in back if m.model} <= {m.model for m in edited if m.model}


def _modelless(messages: list[Message]) -> list[Message]:
    return [replace(m, model=None) for m in messages]


def _named(messages: list[Message]) -> list[Message]:
    """A rollout names a result by its call: a result whose call is gone reads back unnamed."""
    called: set[str] = set()
    out = []
    for message in messages:
        called.update(p.id for p in message.tool_calls)
        parts = tuple(
            replace(p, name=p.name if p.tool_call_id in called else None)
            if isinstance(p, ToolResultPart)
            else p
            for p in message.parts
        )
        out.append(replace(message, parts=parts))
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
def test_any_history_can_be_written_as_a_rollout(tmp_path: Path, history: list[Message]) -> None:
    out = tmp_path / "new.jsonl"
    write_transcript(history, out, "codex")
    back = read_transcript(out)
    assert back.format == "codex"
    assert chat_records(back.messages) == chat_records(merge_adjacent_assistants(_one_result_each(history)))


def _one_result_each(history: list[Message]) -> list[Message]:
    return [
        Message("tool", (p,)) if m.role == "tool" else m
        for m in history
        for p in (m.parts if m.role == "tool" else [None])
    ]


# ---------------------------------------------------------------------------------------------
# The 2025-09 generation: a bare header line, `record_type` state lines, items without envelope
# ---------------------------------------------------------------------------------------------


def test_a_2025_09_rollout_is_detected_and_read() -> None:
    transcript = read_transcript(CODEX_2025_09)
    assert transcript.format == "codex"
    messages = transcript.messages
    assert [m.role for m in messages] == [
        "user", "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant", "tool",
        "assistant",
    ]  # fmt: skip
    assert messages[1].text == "Why does `make test` fail on a clean checkout?"
    thinking, call = messages[2].parts
    assert isinstance(thinking, ThinkingPart) and thinking.text == "**Reading the Makefile**"
    assert isinstance(call, ToolCallPart) and call.arguments == {
        "command": ["bash", "-lc", "cat Makefile"],
        "workdir": "/home/user/app",
    }
    # Shell outputs come out of their envelope; the freeform apply_patch call keeps its text.
    assert messages[5].tool_results[0].content.startswith("E   ModuleNotFoundError")
    patch = messages[8].tool_calls[0]
    assert patch.name == "apply_patch" and str(patch.arguments).startswith("*** Begin Patch")
    assert messages[9].tool_results[0].name == "apply_patch"
    assert read_codex(CODEX_2025_09) == messages


def test_a_2025_09_rollout_is_written_back_in_its_own_shape(tmp_path: Path) -> None:
    messages = read_codex(CODEX_2025_09)
    out = tmp_path / "out.jsonl"
    write_codex(messages, out)
    # Every row but the state markers (bookkeeping, like Claude Code's), verbatim and in order.
    assert _rows(out) == [r for r in _rows(CODEX_2025_09) if "record_type" not in r]
    # An edited output stays a bare item (no envelope appears in an old file), inside its shell envelope.
    edited = messages[5].tool_results[0]
    messages[5] = replace(messages[5], parts=(replace(edited, content="[cleared]"),))
    write_codex(messages, out)
    row = next(r for r in _rows(out) if r.get("call_id") == "call_L2" and "output" in r)
    assert set(row) == {"type", "call_id", "output"} and json.loads(row["output"])["output"] == "[cleared]"
    assert read_codex(out)[5].tool_results[0].content == "[cleared]"
    # A message a processor adds is a bare item too.
    write_codex([*messages, Message.user("and now the docs")], out)
    assert _rows(out)[-1] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "and now the docs"}],
    }


def test_a_2025_09_rollout_converts_to_the_chat_format(tmp_path: Path) -> None:
    out = tmp_path / "chat.jsonl"
    write_transcript(read_codex(CODEX_2025_09), out, "chat")
    assert read_transcript(out).format == "chat"
    assert chat_records(read_chat_jsonl(out)) == chat_records(read_codex(CODEX_2025_09))


def test_token_counts_are_the_recorded_usage_of_the_call_they_follow(tmp_path: Path) -> None:
    messages = read_codex(CODEX)
    answered = [m for m in messages if m.role == "assistant"]
    counts = [
        r["payload"]["info"]["last_token_usage"]
        for r in _rows(CODEX)
        if r["type"] == "event_msg" and r["payload"]["type"] == "token_count" and r["payload"]["info"]
    ]
    assert counts, "the fixture records token counts"
    assert answered[0].usage is not None and answered[0].usage.input_tokens == counts[0]["input_tokens"]
    assert answered[0].usage.output_tokens == counts[0]["output_tokens"]
    out = tmp_path / "out.jsonl"
    write_codex(messages, out)
    assert [m.usage for m in read_codex(out)] == [m.usage for m in messages]


def test_the_model_and_the_window_the_rollout_records(tmp_path: Path) -> None:
    from historykit.formats._recorded import recorded_window, transcript_model

    messages = read_codex(CODEX)
    assert {m.model for m in messages if m.role == "assistant"} == {"gpt-5.1-codex"}
    assert transcript_model(messages) == "gpt-5.1-codex" and recorded_window(messages) == 258_400
    # The turn's settings row travels with it: written back, the model still reads.
    out = tmp_path / "out.jsonl"
    write_codex(messages, out)
    assert [r["payload"]["model"] for r in _rows(out) if r["type"] == "turn_context"] == ["gpt-5.1-codex"]
    assert transcript_model(read_codex(out)) == "gpt-5.1-codex"
