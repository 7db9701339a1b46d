"""LangChain JSON files (`messages_to_dict`): native messages kept, written back with what was not edited."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from historykit.formats import read_transcript, write_transcript
from historykit.formats._detect import TranscriptFormatError

pytest.importorskip("langchain_core")

from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from historykit.plugins.langchain import LangChainAdapter
from tests.plugins.langchain_histories import langchain_histories
from tests.strategies import examples


def _history() -> list:
    return [
        SystemMessage("You are a careful coding agent.", id="sys"),
        HumanMessage("What does setup.py install?", id="h1"),
        AIMessage(
            "",
            id="run-1",
            tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "setup.py"}}],
            usage_metadata={"input_tokens": 120, "output_tokens": 12, "total_tokens": 132},
            response_metadata={"model_name": "gpt-5", "finish_reason": "tool_calls"},
        ),
        ToolMessage("from setuptools import setup\n" * 50, tool_call_id="call_1", name="read_file", id="t1"),
        AIMessage("It installs the `app` package.", id="run-2", response_metadata={"model_name": "gpt-5"}),
    ]


def test_a_langchain_history_reads_with_its_native_messages(tmp_path: Path) -> None:
    path = tmp_path / "thread.json"
    path.write_text(json.dumps(messages_to_dict(_history())))
    transcript = read_transcript(path)
    assert transcript.format == "langchain"
    assert transcript.native == messages_from_dict(messages_to_dict(_history()))
    assert transcript.messages == LangChainAdapter().to_neutral(transcript.native)


def test_an_edited_langchain_history_keeps_every_other_field(tmp_path: Path) -> None:
    path = tmp_path / "thread.json"
    path.write_text(json.dumps(messages_to_dict(_history())))
    neutral = list(read_transcript(path).messages)
    result = neutral[3].tool_results[0]
    neutral[3] = replace(neutral[3], parts=(replace(result, content="[cleared]"),))
    out = tmp_path / "out.json"
    write_transcript(neutral, out, "langchain")
    written = json.loads(out.read_text())
    original = messages_to_dict(_history())
    assert [w for i, w in enumerate(written) if i != 3] == [o for i, o in enumerate(original) if i != 3]
    assert written[3]["data"]["content"] == "[cleared]"
    assert {k: v for k, v in written[3]["data"].items() if k != "content"} == {
        k: v for k, v in original[3]["data"].items() if k != "content"
    }


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(langchain_histories())
def test_any_langchain_history_round_trips(tmp_path: Path, history: list) -> None:
    path = tmp_path / "h.json"
    write_transcript(history, path, "langchain")
    back = read_transcript(path)
    assert back.native == history
    again = tmp_path / "again.json"
    write_transcript(back.messages, again, "langchain")
    assert json.loads(again.read_text()) == json.loads(path.read_text())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            [{"type": "human", "data": {"content": "hi"}}, {"type": "robot", "data": {"content": "x"}}],
            "message 1 \\(type 'robot'\\)",
        ),
        (
            [{"type": "human", "data": {"content": "hi"}}, {"type": "ai"}],
            "message 1 is not an object with 'type' and 'data'",
        ),
        (
            [{"type": "tool", "data": {"content": "x"}}],
            "message 0 \\(type 'tool'\\) is not a LangChain message",
        ),
    ],
)
def test_a_bad_langchain_file_is_named(tmp_path: Path, data: list, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TranscriptFormatError, match=expected) as info:
        read_transcript(path, "langchain")
    assert str(path) in str(info.value) and "\n" not in str(info.value)
