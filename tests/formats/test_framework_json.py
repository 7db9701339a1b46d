"""Pydantic AI and LangChain JSON files: native messages kept, written back with what was not edited."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from historykit.formats import read_transcript, write_transcript
from historykit.formats._detect import TranscriptFormatError

pai = pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from historykit.plugins.pydantic_ai import PydanticAIAdapter  # noqa: E402
from tests.plugins.pydantic_ai_histories import pydantic_ai_histories  # noqa: E402
from tests.strategies import examples  # noqa: E402

FILES = {"src/app.py": "def main():\n    return 1\n" * 40, "README.md": "# app\n" * 30}


def _agent_history() -> list:
    """A real agent run: the model reads two files, then answers."""

    def model(messages: list, info: AgentInfo) -> ModelResponse:
        calls = sum(1 for m in messages for p in getattr(m, "parts", ()) if p.part_kind == "tool-return")
        if calls < 2:
            path = list(FILES)[calls]
            return ModelResponse(
                parts=[ToolCallPart("read_file", {"path": path}, tool_call_id=f"call_{calls}")]
            )
        return ModelResponse(parts=[pai.messages.TextPart("Both files read.")])

    agent = Agent(FunctionModel(model), instructions="You are a careful coding agent.")

    @agent.tool_plain
    def read_file(path: str) -> str:
        return FILES[path]

    return agent.run_sync("Summarize src/app.py and README.md").all_messages()


@pytest.mark.pydantic_ai
def test_a_pydantic_ai_history_reads_with_its_native_messages(tmp_path: Path) -> None:
    history = _agent_history()
    path = tmp_path / "conversation.json"
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(history))
    transcript = read_transcript(path)
    assert transcript.format == "pydantic-ai"
    assert transcript.native == history
    assert transcript.messages == PydanticAIAdapter().to_neutral(transcript.native)
    assert transcript.history is transcript.native


@pytest.mark.pydantic_ai
def test_an_edited_pydantic_ai_history_keeps_every_other_field(tmp_path: Path) -> None:
    history = _agent_history()
    path = tmp_path / "conversation.json"
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(history))
    transcript = read_transcript(path)
    neutral = list(transcript.messages)
    index = next(i for i, m in enumerate(neutral) if m.role == "tool")
    result = neutral[index].tool_results[0]
    neutral[index] = replace(neutral[index], parts=(replace(result, content="[cleared]"),))
    out = tmp_path / "out.json"
    write_transcript(neutral, out, "pydantic-ai")
    back = read_transcript(out)
    changed = [i for i, (a, b) in enumerate(zip(back.native, history)) if a != b]
    assert len(back.native) == len(history) and len(changed) == 1
    request = back.native[changed[0]]
    returns = [p for p in request.parts if p.part_kind == "tool-return"]
    assert returns[0].content == "[cleared]"
    original = history[changed[0]].parts[0]
    assert returns[0].tool_call_id == original.tool_call_id and returns[0].timestamp == original.timestamp


@pytest.mark.pydantic_ai
@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pydantic_ai_histories())
def test_any_pydantic_ai_history_round_trips(tmp_path: Path, history: list) -> None:
    path = tmp_path / "h.json"
    write_transcript(history, path, "pydantic-ai")
    back = read_transcript(path)
    # What Pydantic AI itself loads from its own JSON (it turns `BinaryContent` images into `BinaryImage`).
    assert back.native == ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
    # Written from its neutral view, an untouched history is the same file.
    again = tmp_path / "again.json"
    write_transcript(back.messages, again, "pydantic-ai")
    assert json.loads(again.read_text()) == json.loads(path.read_text())


@pytest.mark.pydantic_ai
def test_a_bad_pydantic_ai_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"kind": "request", "parts": [{"part_kind": "no-such-part"}]}]))
    with pytest.raises(TranscriptFormatError, match="not a valid Pydantic AI message history") as info:
        read_transcript(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
