"""Codex CLI rollouts: read as the corpus conversion reads them, written back faithfully."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit.formats import read_chat_jsonl, read_transcript, write_transcript
from historykit.formats.codex import read_codex, write_codex
from historykit.formats.detect import TranscriptFormatError
from historykit.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from tests.formats.helpers import CODEX, DATA, chat_records, merge_adjacent_assistants
from tests.strategies import neutral_histories


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
        if r["type"] in ("session_meta", "compacted")
        or (r["type"] == "response_item" and r["payload"]["type"] != "ghost_snapshot")
    ]
    assert _rows(out) == kept
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    assert _named(read_codex(out)) == _named(merge_adjacent_assistants(edited))


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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
