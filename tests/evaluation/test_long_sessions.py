"""The generated long sessions, and `default_pipeline()`'s quality on them.

The generator must be deterministic and its sessions valid, with probes of every kind whose
answers are where the rules say; then the compact records of `ClearToolResults` (a cleared
write keeps the line it added, a cleared failure its error line) must keep the artifacts and
decisions of a long session reachable, and the recall tool its cleared outputs recoverable.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

import historykit
from historykit._messages import ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit._validity import check_neutral
from historykit.evaluation import KINDS, evaluate, extract_probes
from historykit.evaluation._matching import normalise
from historykit.processors._clear_tool_results import ClearToolResults

from .long_sessions import long_session


def test_the_same_seed_gives_the_same_session_and_another_seed_another() -> None:
    assert long_session(3, calls=150) == long_session(3, calls=150)
    assert long_session(3, calls=150) != long_session(4, calls=150)


def test_a_long_session_is_valid_and_has_probes_of_every_kind() -> None:
    session = long_session(5, calls=600)
    check_neutral(session)
    calls = sum(1 for m in session if m.role == "assistant")
    assert 590 <= calls <= 610
    probes = extract_probes(session)
    kinds = Counter(p.kind for p in probes)
    assert all(kinds[kind] >= 10 for kind in KINDS), kinds
    # Tools of every shape the loop uses, and failing test runs among them.
    names = Counter(p.name for m in session for p in m.parts if isinstance(p, ToolCallPart))
    assert {"Read", "Edit", "Write", "Bash", "TodoWrite"} <= set(names)
    assert sum(p.is_error for m in session for p in m.parts if isinstance(p, ToolResultPart)) >= 20


def test_the_probes_of_a_long_session_are_sound() -> None:
    """Each probe's answer is where its rule says: a decision's error line in the failing output
    at its source, an artifact's line in the new text of the edit or write at its source."""
    session = long_session(9, calls=400)
    for probe in extract_probes(session):
        source = session[probe.source]
        text = normalise(
            "\n".join(
                p.content if isinstance(p, ToolResultPart) else str(p.arguments)
                for p in source.parts
                if isinstance(p, (ToolResultPart, ToolCallPart))
            )
        )
        if probe.kind == "decisions":
            error = next(p for p in source.parts if isinstance(p, ToolResultPart))
            assert error.is_error and normalise(probe.needles[0]) in text
        elif probe.kind == "artifacts":
            call = next(p for p in source.parts if isinstance(p, ToolCallPart))
            new = call.arguments_dict().get("new_string") or call.arguments_dict().get("content")
            assert isinstance(new, str) and normalise(probe.needles[-1]) in normalise(new)
        elif probe.kind == "recall":
            assert normalise(probe.needles[0]) in text or source.role == "user"


@pytest.fixture(scope="module")
def session() -> list[historykit.Message]:
    return long_session(11, calls=300)


def test_default_pipeline_with_recall_keeps_every_kind_at_100k(session: list[historykit.Message]) -> None:
    logging.getLogger("historykit").setLevel(logging.ERROR)
    counter = TokenCounter()
    assert sum(counter.count_message(m) for m in session) > 120_000  # the pipeline has work to do
    evaluation = evaluate(session, historykit.default_pipeline(), window=100_000, recall=True)
    for kind in evaluation.kinds:
        assert kind.reachable_share is not None and kind.reachable_share >= 0.95, kind
        assert kind.worst is not None and kind.worst >= 0.95, kind


def test_the_records_of_cleared_calls_keep_the_artifacts(session: list[historykit.Message]) -> None:
    """Without the records (the placeholders of the old code), clearing loses the latest changes."""
    logging.getLogger("historykit").setLevel(logging.ERROR)
    pipeline = historykit.default_pipeline()
    kept = evaluate(session, pipeline, window=100_000)
    bare = historykit.default_pipeline()
    for step in bare.processors:
        if isinstance(step, ClearToolResults):
            step.clear_tool_inputs = False  # no argument cleared: the upper bound for artifacts
    upper = evaluate(session, bare, window=100_000)
    share = {k.kind: k.reachable_share for k in kept.kinds}
    top = {k.kind: k.reachable_share for k in upper.kinds}
    assert share["artifacts"] is not None and share["artifacts"] >= 0.95
    assert share["artifacts"] >= (top["artifacts"] or 0) - 0.02
    assert share["decisions"] is not None and share["decisions"] >= 0.95
