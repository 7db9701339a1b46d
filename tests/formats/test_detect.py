"""Format detection: each format from its content, and a clear error for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from historykit.formats._detect import (
    FORMATS,
    TranscriptFormatError,
    detect_format,
    detect_text,
    resolve_format,
)
from tests.conftest import corpus_paths
from tests.formats.helpers import CLAUDE_CODE, CODEX


def test_the_agent_logs_are_told_apart() -> None:
    assert detect_format(CLAUDE_CODE) == "claude-code"
    assert detect_format(CODEX) == "codex"


@pytest.mark.parametrize("path", corpus_paths(), ids=[p.stem for p in corpus_paths()])
def test_every_corpus_session_is_chat(path: Path) -> None:
    assert detect_format(path) == "chat"


def test_claude_code_starting_with_bookkeeping_rows() -> None:
    text = "\n".join(
        [
            json.dumps({"type": "summary", "summary": "A title", "leafUuid": "u-9"}),
            json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}),
            json.dumps(
                {
                    "type": "user",
                    "uuid": "u-1",
                    "sessionId": "s",
                    "message": {"role": "user", "content": "hi"},
                }
            ),
        ]
    )
    assert detect_text(text) == "claude-code"


def test_framework_json_arrays() -> None:
    assert detect_text(json.dumps([{"kind": "request", "parts": []}])) == "pydantic-ai"
    assert detect_text(json.dumps([{"type": "human", "data": {"content": "hi"}}])) == "langchain"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("  \n\n ", "the file is empty"),
        ("[]", "an empty list"),
        ('[{"role": "user", "content": "hi"}]', "the chat format is JSON Lines"),
        ('[{"x": 1}]', "neither Pydantic AI messages"),
        ('{"role": "user", "cont', "line may be cut short"),
        ('{"role": "user",\n "content": "hi"}', "a JSON document that is not a list of messages"),
        ('{\n  "messages": []\n}', "not a list of messages"),
        ('{"hello": 1}\n{"world": 2}', "not a known transcript format"),
        ("[1, 2", "not valid JSON"),
        ("plain text, not JSON", "not valid JSON"),
    ],
)
def test_what_is_not_a_transcript_gets_a_one_line_error(text: str, expected: str) -> None:
    with pytest.raises(TranscriptFormatError, match=expected) as info:
        detect_text(text, "f.jsonl")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("f.jsonl")


def test_format_names_and_aliases() -> None:
    for name in FORMATS:
        assert resolve_format(name) == name
    assert resolve_format("Claude_Code") == "claude-code"
    assert resolve_format("openai") == "chat"
    assert resolve_format("PYDANTIC_AI") == "pydantic-ai"
    with pytest.raises(TranscriptFormatError, match="unknown format 'yaml': use one of chat, pydantic-ai"):
        resolve_format("yaml")


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TranscriptFormatError, match="not UTF-8"):
        detect_format(path)
