"""Usage warnings: given once per crossing of the warn mark or of the window, per conversation."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from historykit import Pipeline, Report, UsageWarning
from historykit._conversations import Conversations, ConversationState
from historykit._usage import UsageMonitor

WINDOW = 10_000


def report(tokens_after: int, changed: bool = False) -> Report:
    from historykit._pipeline import StepNotes, StepReport

    steps = (
        (StepReport("Summarize", tokens_after + 500, tokens_after, 5, 3, StepNotes(removed=2)),)
        if changed
        else ()
    )
    return Report(
        steps, WINDOW, "explicit", "heuristic", tokens_after + (500 if changed else 0), tokens_after
    )


def level(tokens: int, warn_at: float | None) -> int:
    if tokens > WINDOW:
        return 2
    return 1 if warn_at is not None and tokens > warn_at * WINDOW else 0


@given(
    st.lists(st.tuples(st.integers(0, 2 * WINDOW), st.booleans(), st.sampled_from(["a", "b"])), max_size=40),
    st.sampled_from([None, 0.6, 0.9]),
)
def test_a_warning_comes_exactly_when_a_conversation_crosses_a_mark_upwards(
    calls: list[tuple[int, bool, str]], warn_at: float | None
) -> None:
    """Two conversations interleaved through one monitor: each is judged against its own last call."""
    given_: list[UsageWarning] = []
    monitor = UsageMonitor(warn_at, on_warning=given_.append)
    states = Conversations()
    last = {"a": 0, "b": 0}
    expected: list[UsageWarning] = []
    for tokens, changed, conversation in calls:
        warnings = monitor.check(report(tokens, changed), states.get(conversation))
        now = level(tokens, warn_at)
        assert len(warnings) == (1 if now > last[conversation] else 0)
        for warning in warnings:
            assert warning.kind == ("over-window" if now == 2 else "not-freed" if changed else "near-limit")
            assert warning.mark == (1.0 if now == 2 else warn_at)
            assert warning.tokens == tokens and warning.used_fraction == tokens / WINDOW
        expected += warnings
        last[conversation] = now
    assert given_ == expected


def test_warnings_are_logged_at_warning_level(caplog: pytest.LogCaptureFixture) -> None:
    monitor = UsageMonitor(0.9)
    state = ConversationState("c")
    with caplog.at_level(logging.WARNING, logger="historykit"):
        (near,) = monitor.check(report(9_500), state)
        assert monitor.check(report(9_600), state) == ()
        (over,) = monitor.check(report(10_400, changed=True), state)
    assert [r.getMessage() for r in caplog.records if r.name == "historykit"] == [near.message, over.message]
    assert near.message == (
        "historykit: the call sends 9,500 tokens, 95% of the 10,000-token window: over the warn mark (90%)"
    )
    assert over.kind == "over-window" and "the provider will likely refuse it" in over.message


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="warn_at must be a fraction"):
        UsageMonitor(1.5)
    with pytest.raises(TypeError, match="on_warning must be a callable"):
        UsageMonitor(0.9, on_warning="print")  # type: ignore[arg-type]


def test_a_reports_warnings_show_in_its_table_and_html() -> None:
    from dataclasses import replace

    from rich.console import Console

    (warning,) = UsageMonitor(0.9).check(report(9_500), ConversationState(None))
    shown = replace(report(9_500), warnings=(warning,))
    assert f"warning (near-limit): {warning.message}" in str(shown)
    assert "95% → 95% of the window" in str(shown)
    assert "<b>warning (near-limit)</b>: historykit: the call sends 9,500 tokens" in shown._repr_html_()
    console = Console(record=True, width=200)
    console.print(shown)
    # The caption wraps at the table's width.
    assert f"warning (near-limit): {warning.message}" in " ".join(console.export_text().split())


def test_two_conversations_with_the_same_prompt_and_task_are_warned_apart() -> None:
    """The level belongs to the conversation the call names, not to what its messages look like:
    two users who sent the same first request each get their warning; a call naming none is judged
    on its own every time."""
    from historykit._messages import Message, TextPart

    given_: list[UsageWarning] = []
    pipeline = Pipeline(warn_at=0.5, on_warning=given_.append)
    history = [Message.system("Be careful."), Message.user("Fix the bug. " + "word " * 3_000)]
    for conversation in ("alice", "bob", "alice", "bob"):
        pipeline.run(history, 5_000, conversation=conversation)
    assert len(given_) == 2
    for _ in range(2):
        pipeline.run([*history, Message("assistant", (TextPart("ok"),))], 5_000)
    assert len(given_) == 4
