"""`read_transcript` / `write_transcript`: every format through one door, with clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from historykit.formats import FORMATS, read_chat_jsonl, read_transcript, write_transcript
from historykit.formats._detect import TranscriptFormatError
from tests.conftest import corpus_paths
from tests.formats.helpers import CLAUDE_CODE, CODEX, chat_records, merge_adjacent_assistants

CORPUS = corpus_paths()
IDS = [p.stem for p in CORPUS]


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_a_corpus_session_reads_as_chat(path: Path) -> None:
    transcript = read_transcript(path)
    assert transcript.format == "chat" and transcript.native is None
    assert transcript.messages == read_chat_jsonl(path)


def _merge_user_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic AI keeps consecutive user prompts in one request, which reads back as one message."""
    out: list[dict[str, Any]] = []
    for record in records:
        if out and record["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {**out[-1], "content": out[-1]["content"] + "\n\n" + record["content"]}
        else:
            out.append(record)
    return out


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
@pytest.mark.parametrize("fmt", ["chat", "pydantic-ai", "langchain", "codex", "claude-code"])
def test_a_corpus_session_converts_to_every_format(tmp_path: Path, path: Path, fmt: str) -> None:
    messages = read_transcript(path).messages
    out = tmp_path / "converted"
    if fmt == "claude-code" and any(m.role == "system" for m in messages):
        with pytest.raises(ValueError, match="a Claude Code session log has no system messages"):
            write_transcript(messages, out, fmt)
        return
    write_transcript(messages, out, fmt)
    back = read_transcript(out)
    assert back.format == fmt
    expected = chat_records(merge_adjacent_assistants(messages) if fmt == "codex" else messages)
    if fmt == "pydantic-ai":
        assert _merge_user_records(chat_records(back.messages)) == _merge_user_records(expected)
    else:
        assert chat_records(back.messages) == expected


@pytest.mark.parametrize(
    ("source", "fmt"),
    [
        (CORPUS[0], "codex"),
        (CORPUS[0], "claude-code"),
        (CORPUS[0], "pydantic-ai"),
        (CORPUS[0], "langchain"),
        (CODEX, "chat"),
        (CLAUDE_CODE, "codex"),
    ],
)
def test_reading_as_the_wrong_format_is_an_error(source: Path, fmt: str) -> None:
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(source, fmt)
    assert str(source) in str(info.value) and "\n" not in str(info.value)


def test_a_truncated_line_is_named(tmp_path: Path) -> None:
    lines = CORPUS[0].read_text(encoding="utf-8").splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:5]) + "\n" + lines[5][: len(lines[5]) // 2], encoding="utf-8")
    with pytest.raises(TranscriptFormatError, match=r"cut\.jsonl:6: not valid JSON"):
        read_transcript(path)
    cut = tmp_path / "cut_codex.jsonl"
    rows = CODEX.read_text(encoding="utf-8").splitlines()
    cut.write_text("\n".join(rows[:-1]) + "\n" + rows[-1][:40], encoding="utf-8")
    with pytest.raises(TranscriptFormatError, match=rf"cut_codex\.jsonl:{len(rows)}: .*cut short"):
        read_transcript(cut)


def test_missing_empty_and_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_transcript(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(TranscriptFormatError, match="the file is empty"):
        read_transcript(tmp_path / "empty.jsonl")
    with pytest.raises(TranscriptFormatError, match="a directory"):
        read_transcript(tmp_path)
    with pytest.raises(TranscriptFormatError, match="unknown format"):
        read_transcript(CODEX, "xml")


def test_writing_rejects_what_is_not_a_message(tmp_path: Path) -> None:
    for fmt in FORMATS:
        with pytest.raises(TypeError, match="message 0"):
            write_transcript([{"role": "user", "content": "hi"}], tmp_path / f"x.{fmt}", fmt)


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path) -> None:
    messages = read_transcript(CORPUS[0]).messages
    out = tmp_path / "out.jsonl"
    with pytest.raises(TypeError):
        write_transcript([*messages, "not a message"], out, "chat")
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))
    write_transcript(messages, out, "chat")
    assert [json.loads(line)["role"] for line in out.read_text().splitlines()][:1] == [messages[0].role]
