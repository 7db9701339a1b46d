"""A third framework is added by adding one package: `tests/plugins/toy_framework` registers itself,
and every part of the core that takes a native history takes its messages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import historykit
from historykit._frameworks import adapter_for, framework_for_format, framework_of, frameworks
from historykit._messages import Message
from historykit._tokens import TokenCounter
from historykit.errors import ArgumentTypeError
from historykit.formats import read_transcript, write_transcript
from historykit.processors import ClearToolResults, PairwiseTruncate, Repair
from historykit.processors._summarizers import summarizer_for
from tests.plugins.toy_framework import ToyAdapter, ToyMessage, ToyModel


def _history(turns: int = 6) -> list[ToyMessage]:
    out = [ToyMessage("system", "You are a toy agent."), ToyMessage("user", "Read the files.")]
    for i in range(turns):
        out.append(
            ToyMessage(
                "assistant", "", calls=((f"c{i}", "read", {"path": f"f{i}.py"}),), reported_tokens=None
            )
        )
        out.append(ToyMessage("tool", f"contents of f{i}.py " + "x " * 400, answers=f"c{i}"))
    out.append(ToyMessage("assistant", "Done.", reported_tokens=5_000))
    return out


def test_the_package_registers_the_framework() -> None:
    assert "toy" in [f.name for f in frameworks()]
    assert framework_of(ToyMessage).name == "toy"  # type: ignore[union-attr]
    assert isinstance(adapter_for(_history()), ToyAdapter)
    assert framework_for_format("toy").name == "toy"


def test_pipeline_run_processes_toy_messages_and_keeps_untouched_ones() -> None:
    history = _history()
    pipeline = historykit.Pipeline([ClearToolResults(keep=1), PairwiseTruncate(), Repair()])
    result = pipeline.run(history, context_window=2_000)
    assert all(isinstance(m, ToyMessage) for m in result.messages)
    assert result.messages[0] is history[0] and result.messages[1] is history[1]
    assert result.report.tokens_after < result.report.tokens_before
    assert historykit.check(result.messages) == []


def test_check_reports_a_broken_toy_history() -> None:
    broken = [ToyMessage("user", "hi"), ToyMessage("tool", "orphan result", answers="nowhere")]
    assert historykit.check(broken) != []


def test_token_counting_uses_the_usage_the_toy_provider_reported() -> None:
    history = _history()
    count = TokenCounter().count(history)
    assert count.anchor_index == len(history) - 1 and count.tokens == 5_000
    assert len(TokenCounter().per_message(history)) == len(history)


def test_pin_and_summarizer_for_ask_the_toy_framework() -> None:
    pinned = historykit.pin(ToyMessage("user", "Never touch tests/."))
    assert adapter_for([pinned]).to_neutral([pinned])[0].pinned
    summarizer = summarizer_for(ToyModel())
    assert asyncio.run(summarizer([Message.user("hi")])) == "## Task\nread 1 messages"  # type: ignore[arg-type]


def test_transcripts_in_the_toy_format(tmp_path: Path) -> None:
    path = tmp_path / "toy.json"
    write_transcript([ToyMessage("user", "hi"), ToyMessage("assistant", "hello")], path, "toy")
    transcript = read_transcript(path, format="toy")
    assert [m.text for m in transcript.history] == ["hi", "hello"]
    write_transcript([Message.user("from neutral")], path, "toy")
    assert read_transcript(path, format="toy").messages[0].role == "user"


def test_a_history_mixing_frameworks_names_both() -> None:
    with pytest.raises(ArgumentTypeError, match=r"\(neutral\), but message 0 is a toy message"):
        adapter_for([ToyMessage("user", "hi"), Message.user("hi")])
    with pytest.raises(ArgumentTypeError, match="not a Pydantic AI, LangChain, Toy or historykit message"):
        adapter_for([object()])
