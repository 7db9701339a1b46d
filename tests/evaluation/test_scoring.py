"""Scoring views: the full history holds every probe; a processor that drops a fact makes the score
fall; a placeholder naming a recall handle makes it recoverable; matching is normalised."""

from __future__ import annotations

import itertools

import pytest

from historykit._messages import Message
from historykit._tokens import TokenCounter
from historykit.evaluation import CACHE_READ, CACHE_WRITE, KINDS, Probe, ViewScorer, evaluate, extract_probes
from historykit.processors import ClearToolResults, Repair
from historykit.processors._trigger import Trigger
from tests.evaluation.transcripts import ERROR, SECRET, ForgetSecret, session


def points(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "assistant"]


def test_the_full_history_holds_every_probe_at_every_call() -> None:
    messages = session()
    scorer = ViewScorer(messages, extract_probes(messages))
    scores = [scorer.score(n, p, messages[:p]) for n, p in enumerate(points(messages), start=1)]
    assert sum(sum(s.scored.values()) for s in scores) > 0
    for s in scores:
        assert s.held == s.scored and not s.lost
        assert s.recoverable == dict.fromkeys(KINDS, 0)
    # The raw history grows by appending: each call after the first reads the previous input from the cache.
    counter = TokenCounter()
    for before, s in itertools.pairwise(scores):
        assert s.reused == before.tokens
        assert s.cost == pytest.approx(CACHE_READ * s.reused + CACHE_WRITE * (s.tokens - s.reused))
        assert s.tokens == sum(counter.count_message(m) for m in messages[: s.point])


def test_a_processor_that_drops_a_fact_makes_its_score_fall() -> None:
    messages = session()
    kept = evaluate(messages, Repair(), window=200_000)
    dropped = evaluate(messages, ForgetSecret() | Repair(), window=200_000)
    recall_kept = next(k for k in kept.kinds if k.kind == "recall")
    recall_dropped = next(k for k in dropped.kinds if k.kind == "recall")
    assert recall_kept.reachable_share == 1.0
    assert recall_dropped.scored == recall_kept.scored
    assert recall_dropped.reachable_share is not None and recall_dropped.reachable_share < 1.0
    lost = [p.needles for p, _ in dropped.lost()]
    assert (SECRET,) in lost
    # The other kinds keep what they had.
    for a, b in zip(kept.kinds, dropped.kinds):
        if a.kind in ("continuation", "decisions"):
            assert b.reachable_share == a.reachable_share


def test_a_cleared_output_is_recoverable_through_the_handle_its_placeholder_names() -> None:
    messages = session(rounds=8)
    run = next(i for i, m in enumerate(messages) if m.role == "tool" and ERROR in m.parts[0].content)
    # A fact of the traceback that no placeholder keeps (a frame), and everything extracted.
    frame = Probe("recall", ("lib/layer_7.py",), appeared=run, source=run, question="Which frame?")
    probes = [*extract_probes(messages), frame]

    def clear() -> ClearToolResults:
        trigger = Trigger(max_tokens=800, low_water=0.1)
        return ClearToolResults(keep=1, min_tokens=5, min_gain=1, trigger=trigger)

    without = evaluate(messages, clear() | Repair(), window=200_000, probes=probes)
    with_recall = evaluate(messages, clear() | Repair(), window=200_000, recall=True, probes=probes)
    # Without recall the frame is gone once the output is cleared; with it, the placeholder's
    # handle returns it.
    assert [p.needles for p, _ in without.lost()] == [frame.needles]
    assert sum(c.recoverable["recall"] for c in with_recall.calls) > 0
    assert with_recall.lost() == []
    recall = {k.kind: k for k in with_recall.kinds}["recall"]
    assert recall.held < recall.scored == recall.held + recall.recoverable
    # The error line itself stays in the view either way: the failure's placeholder names it.
    for evaluation in (without, with_recall):
        decisions = {k.kind: k for k in evaluation.kinds}["decisions"]
        assert decisions.scored > 0 and decisions.held == decisions.scored
    # The views themselves are the same size either way: only the placeholders' wording differs.
    assert [c.scored for c in without.calls] == [c.scored for c in with_recall.calls]


def test_matching_ignores_case_whitespace_and_quotes() -> None:
    messages = [Message.user("go"), Message.assistant("ok")]
    probe = Probe("decisions", ("ValueError: bad   `value`", "retry it"), appeared=0, source=0, question="?")
    raw = [Message.user("go\nValueError: bad value\nthen I will RETRY\n  it")]
    scorer = ViewScorer(raw + messages[1:], [probe])
    assert scorer.score(1, 1, raw).held["decisions"] == 1
    other = ViewScorer(raw + messages[1:], [probe])
    assert other.score(1, 1, [Message.user("ValueError: bad value")]).lost == (0,)
