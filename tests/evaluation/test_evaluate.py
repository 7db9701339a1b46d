"""`evaluate` on corpus sessions: it replays as `historykit analyze` does (the same calls, the same
tokens), every call is scored, and a pipeline that compacts keeps less than the full history."""

from __future__ import annotations

from pathlib import Path

import pytest

import historykit
from historykit.analysis._analysis import replay
from historykit.errors import ArgumentTypeError
from historykit.evaluation import KINDS, evaluate
from historykit.formats import read_chat_jsonl
from historykit.processors import Repair
from tests.conftest import corpus_paths

# One session of each agent family that edits files, small to large.
FAMILIES = ["sweagent__gpt4-pydicom-1458", "openhands__msb-ponyc-4588", "claudecode__spotter-258c7280"]


def session(stem: str) -> list[historykit.Message]:
    path = next((p for p in corpus_paths() if p.stem == stem), None)
    if path is None:
        pytest.skip(f"corpus session {stem} missing")
    return read_chat_jsonl(Path(path))


@pytest.mark.parametrize("stem", FAMILIES)
def test_every_call_is_scored_with_the_analyze_replays_tokens(stem: str) -> None:
    messages = session(stem)
    evaluation = evaluate(messages, historykit.default_pipeline(), window=32_000, name=stem)
    sizes = replay(messages, historykit.default_pipeline(), window=32_000).calls
    assert [c.tokens for c in evaluation.calls] == [s.after for s in sizes]
    assert [c.reused for c in evaluation.calls] == [s.reused for s in sizes]
    assert len(evaluation.calls) == sum(1 for m in messages if m.role == "assistant")
    assert evaluation.cost == pytest.approx(sum(c.cost for c in evaluation.calls))
    kinds = {k.kind: k for k in evaluation.kinds}
    assert set(kinds) == set(KINDS)
    assert all(k.scored > 0 for k in kinds.values() if k.kind != "decisions")
    for k in kinds.values():
        assert k.held + k.recoverable <= k.scored
    data = evaluation.to_dict()
    assert data["name"] == stem and len(data["calls"]) == len(evaluation.calls)


def test_compaction_keeps_less_than_the_full_history_and_costs_less() -> None:
    messages = session("claudecode__spotter-258c7280")
    full = evaluate(messages, Repair(), window=32_000)
    compacted = evaluate(messages, historykit.default_pipeline(), window=32_000)
    assert all(k.reachable_share == 1.0 for k in full.kinds if k.scored)
    assert compacted.cost < full.cost
    assert any((k.reachable_share or 1.0) < 1.0 for k in compacted.kinds)
    # Every probe lost is one the full history held at that call.
    assert compacted.lost() and not full.lost()


def test_refuses_what_is_not_a_neutral_history() -> None:
    with pytest.raises(ArgumentTypeError, match="message 0 is a dict"):
        evaluate([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
