"""Manual compaction (`Pipeline.compact`, `Summarize.compact`): made now, with a focus.

What the table row of issue 15 said was missing: a small history was truncated instead of
summarized, the marker said automatic, and the focus reached nobody. Here: the small history is
summarized, the marker records `automatic=False` and the focus, the summarizers get the focus, and
random conversations compacted at a random call send one valid view in both modes, continuing
append-only from the compacted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, check, default_pipeline
from historykit._binding import history_binds_thinking
from historykit._digests import message_digest
from historykit._messages import CompactionMarker, Message, SummaryPart, ToolCallPart, ToolResultPart
from historykit._pipeline import ManualCompaction
from historykit._view import request_points
from historykit.processors import PairwiseTruncate, Repair, Summarize
from historykit.processors._summarizers import ExtractiveSummarizer, focus_terms
from historykit.processors._trigger import Trigger
from historykit.processors._turns import notice_count
from tests.strategies import examples
from tests.test_view_and_binding import histories_with_models

FOCUS = "keep the details of the auth refactor"


def _conversation(steps: int = 6) -> list[Message]:
    """A task, `steps` file reads alternating between auth and billing, an answer and a new request."""
    history = [Message.system("Be careful."), Message.user("Refactor auth and billing. Keep the API.")]
    for i in range(steps):
        area = "auth" if i % 2 else "billing"
        history += [
            Message.assistant(
                f"I decided to move the {area} tokens in step {i}.",
                [ToolCallPart(f"c{i}", "Read", {"file_path": f"src/{area}/m{i}.py"})],
            ),
            Message("tool", (ToolResultPart(f"c{i}", "Read", f"{area} module {i}\n" * 30),)),
        ]
    return [*history, Message.assistant("Read them all."), Message.user("Now the billing part.")]


def _summaries(messages: Sequence[Message]) -> list[SummaryPart]:
    return [p for m in messages for p in m.parts if isinstance(p, SummaryPart)]


def test_a_small_history_is_summarized_when_asked_not_truncated() -> None:
    history = _conversation()
    # The unusual configuration that was the only way before: the trigger fires, and the small
    # history (less than `min_gain` to free) is truncated instead, with an automatic marker.
    configured = Summarize(trigger=Trigger(max_tokens=200), automatic=False, truncate_instead=True).run(
        history, 100_000
    )
    assert not _summaries(configured.messages)
    assert any(notice_count(m) for m in configured.messages)
    # Asked for: summarized, far below the default trigger, the focus recorded.
    result = Summarize().compact(history, 100_000, focus=f"  {FOCUS} ")
    (summary,) = _summaries(result.messages)
    marker = summary.marker
    assert marker is not None and result.report.markers == [marker]
    assert (marker.strategy, marker.automatic, marker.focus) == ("summarize", False, FOCUS)
    assert marker.tokens_before - marker.tokens_after < Summarize().min_gain  # too little for a trigger
    assert not any(notice_count(m) for m in result.messages)
    assert check(result.messages) == []
    assert "asked for, focus: 'keep the details of the auth refactor'" in str(result.report)
    # The task, the kept tail and the final request stay verbatim.
    assert result.messages[:2] == history[:2] and result.messages[-1] is history[-1]


def test_keep_last_and_what_is_not_worth_a_summary() -> None:
    history = _conversation()
    kept = Summarize(keep_last=3).compact(history, 100_000)
    tight = Summarize(keep_last=3).compact(history, 100_000, keep_last=1)
    # System, task, summary, then the units kept: 3 (a read, the answer, the request) or 1.
    assert len(kept.messages) == 3 + 2 + 1 + 1 and len(tight.messages) == 3 + 1
    assert kept.messages[-4:] == history[-4:]
    alone = [Message.user("Hello.")]
    result = Summarize().compact(alone, 100_000, focus=FOCUS)
    assert result.messages == alone and not result.report.markers
    assert "nothing to summarize" in str(result.report)
    # A summary longer than the one short answer it would replace is not used.
    tiny = [Message.user("Hello."), Message.assistant("Hi."), Message.user("Compact, please.")]
    result = Summarize().compact(tiny, 100_000, focus=FOCUS)
    assert result.messages == tiny and not result.report.markers
    assert "would make the history longer" in str(result.report)


def test_the_focus_reaches_the_summarizer() -> None:
    seen: list[str | None] = []

    def with_focus(messages: Sequence[Message], focus: str | None = None) -> str:
        seen.append(focus)
        return "## Task\n- the task"

    Summarize(summarizer=with_focus).compact(_conversation(), 100_000, focus=FOCUS)
    Summarize(summarizer=with_focus).compact(_conversation(), 100_000)
    assert seen == [FOCUS, None]
    plain = Summarize(summarizer=lambda messages: "## Task\n- the task").compact(
        _conversation(), 100_000, focus=FOCUS
    )
    assert plain.report.markers[0].focus == FOCUS
    assert "takes no focus= argument: the focus is recorded in the marker only" in str(plain.report)


def test_the_extractive_summarizer_puts_what_the_focus_names_first() -> None:
    history = _conversation(steps=10)
    assert focus_terms(FOCUS) == ("auth", "refactor")
    text = ExtractiveSummarizer(max_items=3)(history[1:-2], focus=FOCUS)
    assert text.startswith(f"## Focus\n- {FOCUS}\n\n## Task")
    decisions = text.split("## Decisions\n")[1].split("\n\n")[0].splitlines()
    # The three latest auth decisions, though billing ones came later.
    assert decisions == [f"- I decided to move the auth tokens in step {i}." for i in (5, 7, 9)]
    files = text.split("## Files touched\n")[1].split("\n\n")[0].splitlines()
    assert all("auth" in f for f in files[:5]) and all("billing" in f for f in files[5:])
    unfocused = ExtractiveSummarizer(max_items=3)(history[1:-2])
    assert "## Focus" not in unfocused and "billing tokens in step 8" in unfocused


def test_a_summarizer_that_fails_leaves_the_history_as_it_was() -> None:
    def failing(messages: Sequence[Message]) -> str:
        raise RuntimeError("no model")

    history = _conversation()
    result = Summarize(summarizer=failing, attempts=1).compact(history, 100_000, focus=FOCUS)
    assert result.messages == history and not result.report.markers
    assert "the summarizer failed (RuntimeError: no model after 1 attempt)" in str(result.report)


def test_bad_requests_are_named() -> None:
    with pytest.raises(ValueError, match="has no step that compacts on request"):
        Pipeline([PairwiseTruncate(), Repair()]).compact(_conversation(), 100_000)
    with pytest.raises(ValueError, match="must end with what that call sends"):
        Summarize().compact(_conversation()[:-1], 100_000, mode="view")
    with pytest.raises(TypeError, match="focus must be a str"):
        ManualCompaction(focus=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_last must be an int >= 0"):
        ManualCompaction(keep_last=-1)
    assert ManualCompaction(focus="  ").focus is None


def test_the_marker_keeps_the_focus_and_old_markers_still_load() -> None:
    marker = CompactionMarker(
        1, 5, 900, 120, "summarize", created_at=datetime(2026, 1, 1, tzinfo=timezone.utc)
    )
    manual = CompactionMarker(1, 5, 900, 120, "summarize", automatic=False, focus=FOCUS)
    assert CompactionMarker.from_dict(manual.to_dict()) == manual
    assert list(manual.to_dict())[-2:] == ["focus", "kept_after"]  # the newest fields come last
    stored = marker.to_dict()
    del stored["focus"], stored["kept_after"]  # as every marker stored before manual compaction
    assert CompactionMarker.from_dict(stored) == marker and marker.focus is None


def _same(a: list[Message], b: list[Message]) -> bool:
    return len(a) == len(b) and all(message_digest(x) == message_digest(y) for x, y in zip(a, b))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(histories_with_models(), st.data(), st.sampled_from([600, 1_500, 4_000, 1_000_000]))
def test_a_compaction_asked_for_at_any_call_gives_one_valid_view(
    raw: list[Message], data: st.DataObject, window: int
) -> None:
    points = request_points(raw)
    if raw[-1].role == "assistant":
        points = points[:-1]  # view-only mode compacts at a call about to be made
    asked = data.draw(st.sampled_from(points))
    binds = history_binds_thinking(raw)
    sent: dict[str, list[list[Message]]] = {}
    for mode in ("persistent", "view"):
        pipeline = default_pipeline(context_window=window)
        carried: list[Message] = []
        previous = 0
        views = []
        for point in request_points(raw):
            history = carried + raw[previous:point] if mode == "persistent" else raw[:point]
            if point == asked:
                result = pipeline.compact(
                    history, window, focus=FOCUS, mode=mode, binds_thinking=binds, conversation="c"
                )  # type: ignore[arg-type]
                manual = [m for m in result.report.markers if not m.automatic]
                assert [m.focus for m in manual] in ([FOCUS], [])
                # Below every trigger nothing else edits: a summary, or the reason there is none.
                reasons = ("nothing to summarize", "would make the history longer")
                assert manual or any(r in str(result.report) for r in reasons) or window < 1_000_000
            else:
                result = pipeline.run(history, window, mode=mode, binds_thinking=binds, conversation="c")  # type: ignore[arg-type]
                assert all(m.automatic for m in result.report.markers)
            views.append(result.messages)
            carried, previous = result.history, point
        sent[mode] = views
    assert all(_same(a, b) for a, b in zip(sent["persistent"], sent["view"], strict=True))
    before: list[Message] | None = None
    for view in sent["view"]:
        assert check(view, sent_before=before, binds_thinking=binds) == []
        before = view
    if window == 1_000_000:
        # Nothing fires by itself: after the compaction each call extends the one before it.
        at = request_points(raw).index(asked)
        for earlier, later in zip(sent["view"][at:], sent["view"][at + 1 :]):
            assert _same(later[: len(earlier)], earlier)
