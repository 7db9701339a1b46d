"""`PairwiseTruncate`: whole units and turns, the notice, hysteresis, the corpus, random histories.

The rule checks (`assert_compaction_rules`, `assert_replay_properties`) live in `support`: the
`Summarize` tests use them too, since both processors drop the older span of a history and must keep
the same things.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit._messages import Message, SummaryPart, ToolResultPart
from historykit._validity import check_neutral
from historykit.processors._pairwise_truncate import PairwiseTruncate
from historykit.processors._trigger import Trigger
from historykit.processors._turns import notice_count, split_turns, truncation_notice

from ..strategies import examples, neutral_histories
from .support import (
    FAST,
    agent_session,
    assert_compaction_rules,
    assert_nothing_more_can_go,
    assert_replay_properties,
    carry_forward,
    context,
    exchange,
    tokens,
    view_only,
)

# --- examples ----------------------------------------------------------------------------------------


def test_under_the_budget_nothing_changes_and_the_list_itself_comes_back() -> None:
    history = agent_session(3)
    out, notes = PairwiseTruncate(trigger=Trigger(max_tokens=100_000)).process(history, context())
    assert out is history
    assert (notes.removed, notes.added, notes.markers) == (0, 0, [])


def test_drops_oldest_exchanges_down_to_the_low_water_mark_and_leaves_a_notice() -> None:
    history = agent_session(30)
    high = tokens(history) - 1  # crossed at the last call only
    truncate = PairwiseTruncate(trigger=Trigger(max_tokens=high, low_water=0.5))
    out, notes = truncate.process(history, context())
    assert_compaction_rules(history, out)
    assert out[:2] == history[:2]  # system prompt and task
    notice = out[2]
    removed = len(history) - (len(out) - 1)
    assert notice_count(notice) == removed == notes.removed
    assert notice.text.startswith(
        f"[historykit] {removed} earlier messages of this conversation were removed"
    )
    assert tokens(out) <= high * 0.5
    # Only whole exchanges went: the tail starts at an assistant message, right after the notice.
    assert out[3].role == "assistant" and out[3] is history[len(history) - (len(out) - 3)]
    [marker] = notes.markers
    assert (marker.strategy, marker.covered_from, marker.covered_to) == ("truncate", 2, 2 + removed)
    assert marker.tokens_before == tokens(history) and marker.tokens_after == tokens(out)


def test_a_parallel_group_is_dropped_or_kept_whole() -> None:
    history = [Message.system("sys"), Message.user("task")]
    for n in range(8):
        history += exchange(n, 30, parallel=3)
    for budget in range(300, tokens(history), 500):
        out, _ = PairwiseTruncate(trigger=Trigger(max_tokens=budget)).process(history, context())
        assert_compaction_rules(history, out)
        for msg in out:
            for call in msg.tool_calls:
                answered = [r for m in out for r in m.tool_results if r.tool_call_id == call.id]
                assert len(answered) == 1


def test_pinned_units_stay_with_the_request_of_their_turn() -> None:
    history = [Message.system("sys"), Message.user("task")]
    history += exchange(0)
    history += [Message.user("Now look at the parser.")]
    history += exchange(1, pinned=True)
    history += exchange(2)
    history += [Message.assistant("The parser is fine.")]
    history += [Message.user("Then check the writer.")]
    for n in range(3, 12):
        history += exchange(n)
    out, _ = PairwiseTruncate(trigger=Trigger(max_tokens=tokens(history) // 3)).process(history, context())
    assert_compaction_rules(history, out)
    pinned_call = history[5]
    at = out.index(pinned_call)
    # The pinned exchange keeps its whole unit and the request it answers, but not its neighbours.
    assert out[at - 1].text == "Now look at the parser."
    assert out[at + 1] is history[6]
    assert history[7] not in out and history[2] not in out


def test_the_request_of_the_turn_being_cut_is_kept() -> None:
    history = [Message.system("sys"), Message.user("task"), Message.assistant("Done with the task.")]
    history += [Message.user("Now refactor src/io.py; never touch the tests.")]
    for n in range(20):
        history += exchange(n)
    out, _ = PairwiseTruncate(trigger=Trigger(max_tokens=tokens(history) // 2)).process(history, context())
    assert_compaction_rules(history, out)
    assert history[2] not in out  # the first turn's answer went
    assert history[3] in out  # the request being worked on stayed
    assert out.index(history[3]) < out.index(next(m for m in out if notice_count(m) is not None))


def test_earlier_summaries_are_kept_by_truncation() -> None:
    summary = Message("user", (SummaryPart("## Task\n- find the bug"),))
    history = [Message.system("sys"), Message.user("task"), summary, *agent_session(20)[2:]]
    out, _ = PairwiseTruncate(trigger=Trigger(max_tokens=tokens(history) // 2)).process(history, context())
    assert_compaction_rules(history, out)
    assert summary in out and notice_count(out[out.index(summary) + 1]) is not None


def test_over_budget_says_so_and_breaks_no_rule() -> None:
    history = [Message.system("sys"), Message.user("task"), *exchange(0), *exchange(1, lines=400)]
    out, notes = PairwiseTruncate(trigger=Trigger(max_tokens=500)).process(history, context())
    assert_compaction_rules(history, out)
    assert out[-2:] == history[-2:]  # the huge final request stays
    assert tokens(out) > 500
    assert any("over budget" in d for d in notes.details)


def test_a_final_request_larger_than_the_window_is_shortened_to_fit() -> None:
    # Six parallel reads answered at once: their results alone are over the window.
    history = [Message.system("sys"), Message.user("task"), *exchange(0), *exchange(1, lines=600, parallel=6)]
    window = tokens(history) // 2
    out, notes = PairwiseTruncate(trigger=Trigger(max_fraction=0.9)).process(history, context(window))
    assert_compaction_rules(history, out)
    assert tokens(out) <= int(window * 0.9)
    results = [p for m in out[-6:] for p in m.parts if isinstance(p, ToolResultPart)]
    originals = [p for m in history[-6:] for p in m.parts if isinstance(p, ToolResultPart)]
    for new, old in zip(results, originals, strict=True):
        head, _, tail = new.content.partition("[historykit: about")
        assert tail, "a shortened result says what was cut"
        assert old.content.startswith(head.rstrip("\n")) and old.content.endswith(
            tail.split("]", 1)[1].strip()
        )
        assert "narrower range" in tail
    assert notes.replaced == 6 and any("final request alone" in d for d in notes.details)
    # Shortening is stable: the output is already within budget.
    again, _ = PairwiseTruncate(trigger=Trigger(max_fraction=0.9)).process(out, context(window))
    assert again is out


def test_a_pinned_result_of_an_oversized_final_request_stays_whole_and_the_others_give_way() -> None:
    history = [
        Message.system("sys"),
        Message.user("task"),
        *exchange(1, lines=400, parallel=3, pinned=True),
    ]
    window = tokens(history) // 2
    out, _ = PairwiseTruncate(trigger=Trigger(max_fraction=0.9)).process(history, context(window))
    assert out[-3] == history[-3]  # the pinned one
    assert all("[historykit: about" in m.parts[0].content for m in out[-2:])  # type: ignore[union-attr]
    assert tokens(out) <= int(window * 0.9)


def test_fit_final_request_false_sends_it_as_it_is() -> None:
    history = [Message.system("sys"), Message.user("task"), *exchange(1, lines=600, parallel=6)]
    window = tokens(history) // 2
    out, notes = PairwiseTruncate(trigger=Trigger(max_fraction=0.9), fit_final_request=False).process(
        history, context(window)
    )
    assert out[-6:] == history[-6:]
    assert any("over budget" in d for d in notes.details)


def test_an_oversized_final_request_under_the_window_is_left_alone() -> None:
    # Over the budget but under the window: the provider accepts it, so nothing is shortened.
    history = [Message.system("sys"), Message.user("task"), *exchange(1, lines=600, parallel=2)]
    out, _ = PairwiseTruncate(trigger=Trigger(max_tokens=500)).process(history, context(tokens(history) * 2))
    assert out[-2:] == history[-2:]


def test_nothing_droppable_returns_the_input() -> None:
    history = [Message.system("sys"), Message.user("task " * 400)]
    out, notes = PairwiseTruncate(trigger=Trigger(max_tokens=100)).process(history, context())
    assert out is history
    assert any("still over budget" in d for d in notes.details)


def test_message_count_trigger() -> None:
    history = agent_session(20)
    truncate = PairwiseTruncate(trigger=Trigger(max_messages=20, low_water=0.5))
    out, _ = truncate.process(history, context())
    assert_compaction_rules(history, out)
    assert len(out) <= 20 and notice_count(out[2]) is not None
    # Crossing the mark at the last call only: down to the low-water mark.
    out, _ = PairwiseTruncate(trigger=Trigger(max_messages=len(history) - 1, low_water=0.5)).process(
        history, context()
    )
    assert len(out) <= (len(history) - 1) // 2


def test_fraction_of_the_window_and_the_default() -> None:
    history = agent_session(40)
    window = tokens(history) * 2 - 2  # the history is just over half the window at the last call
    out, _ = PairwiseTruncate(trigger=Trigger(max_fraction=0.5)).process(history, context(window))
    assert tokens(out) <= window * 0.5 * 0.6
    assert PairwiseTruncate().trigger.max_fraction == 0.8


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": 0}, {"max_fraction": 1.5}, {"max_messages": -1}, {"max_tokens": 10, "low_water": 0}],
)
def test_bad_configuration_is_a_clear_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs)) if "low_water" not in kwargs else "low_water"):
        PairwiseTruncate(trigger=Trigger(**kwargs))  # type: ignore[arg-type]


def test_notice_round_trip() -> None:
    for count in (1, 7, 12_345):
        assert notice_count(truncation_notice(count)) == count
    assert notice_count(Message.user("[historykit] hello")) is None
    assert notice_count(Message.assistant("x")) is None


def test_turns_group_requests_and_keep_compactions_out_of_turn_starts() -> None:
    history = [Message.system("s"), Message.user("t"), *exchange(0), truncation_notice(3), *exchange(1)]
    history += [Message.user("next"), *exchange(2, parallel=2)]
    turns = split_turns(history)
    assert [t.request.start if t.request else None for t in turns] == [None, 1, 7]
    assert [u.kind for u in turns[1].units] == ["exchange", "compaction", "exchange"]
    assert turns[2].units[0].end - turns[2].units[0].start == 3  # the parallel group is one unit


def test_hysteresis_append_only_between_compactions() -> None:
    history = agent_session(60)
    high = tokens(history) // 4
    truncate = PairwiseTruncate(trigger=Trigger(max_tokens=high))
    compactions = assert_replay_properties(history, truncate, lambda: truncate, high, context())
    # Each compaction frees down to the low-water mark (0.6 of the high one), so the next is a
    # whole high-to-low swing of growth away: no trickle.
    swing = high - int(high * 0.6)
    assert 2 <= compactions <= (tokens(history) - high) // swing + 1


def test_runs_through_a_pipeline() -> None:
    history = agent_session(30)
    result = Pipeline([PairwiseTruncate(trigger=Trigger(max_fraction=0.5))]).run(
        history, context_window=tokens(history)
    )
    assert result.report.tokens_after < result.report.tokens_before
    assert result.report.steps[0].notes.removed > 0


# --- the corpus -----------------------------------------------------------------------------------


def test_corpus_sessions_replayed_call_by_call_stay_in_the_window(corpus_session: list[Message]) -> None:
    window = 32_000
    truncate = PairwiseTruncate(trigger=Trigger(max_fraction=0.8))
    ctx = context(window)
    carried: list[Message] = []
    for carried, _ in carry_forward(truncate, corpus_session, ctx):
        assert check_neutral(carried) == []
        if tokens(carried) > window * 0.8:
            assert_nothing_more_can_go(carried)
    view = view_only(truncate, ctx)(corpus_session)
    assert view == carried
    assert_compaction_rules(corpus_session, view)


# --- random histories -----------------------------------------------------------------------------


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(neutral_histories(max_turns=6, max_steps=5), st.integers(100, 3_000), st.sampled_from([0.3, 0.6, 1.0]))
def test_random_histories_keep_every_rule(history: list[Message], budget: int, low: float) -> None:
    truncate = PairwiseTruncate(trigger=Trigger(max_tokens=budget, low_water=low))
    out = view_only(truncate, context(counter=FAST))(history)
    event("truncated" if out is not history else "unchanged")
    assert_compaction_rules(history, out)
    compactions = assert_replay_properties(history, truncate, lambda: truncate, budget, context(counter=FAST))
    event(f"compactions: {min(compactions, 3)}")
    if tokens(out, FAST) > budget:
        assert_nothing_more_can_go(out, FAST)


# --- with the recall tool ---------------------------------------------------------------------------


def _reachable(texts: list[str], originals: dict[str, str]) -> set[str]:
    """Every handle the texts lead to, following the indexes among `originals`."""
    from historykit._recall import handles_in

    seen: set[str] = set()
    todo = [h for text in texts for h in handles_in(text, "recall")]
    while todo:
        handle = todo.pop()
        if handle not in seen:
            seen.add(handle)
            todo += handles_in(originals.get(handle, ""), "recall")
    return seen


@pytest.mark.parametrize("mode", ["persistent", "view"])
def test_with_recall_a_truncation_notice_names_an_index_of_every_output_it_removed(mode: str) -> None:
    """Truncation drops outputs whole; with the recall tool its notice names an index of them, which
    the pipeline hands on (`PipelineResult.originals`), and a later truncation's index names the
    earlier one, so every output removed stays reachable (found by the quality benchmark: a subagent
    whose first turn alone was over the window lost what it read)."""
    from historykit._recall import recall_handle

    history = agent_session(30)
    truncate = PairwiseTruncate(
        trigger=Trigger(max_tokens=tokens(history) // 2, low_water=0.5), recall_tool="recall"
    )
    pipeline = Pipeline([truncate])
    kept: dict[str, str] = {}
    view: list[Message] = []
    done = 0
    for end in range(3, len(history) + 1):
        if history[end - 1].role == "assistant":
            continue  # a model call is made after each request or tool result
        given = history[:end] if mode == "view" else [*view, *history[done:end]]
        result = pipeline.run(given, 100_000, mode=mode, conversation="c")  # type: ignore[arg-type]
        kept.update(result.originals)
        view, done = list(result.messages), end
    notices = [m for m in view if notice_count(m) is not None]
    assert len(notices) == 1 and "Their tool outputs are listed by recall(handle='" in notices[0].text
    outputs = {
        recall_handle(p.content)
        for m in history[: len(history) - 2]
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    in_view = {recall_handle(p.content) for m in view for p in m.parts if isinstance(p, ToolResultPart)}
    assert outputs - in_view, "something was removed"
    assert outputs - in_view <= _reachable([m.text for m in view], kept)
    assert (
        sum(1 for text in kept.values() if text.startswith("[historykit: ")) >= 2
    )  # truncated more than once


def test_with_recall_a_shortened_final_request_names_the_whole_output() -> None:
    from historykit._recall import recall_handle

    history = [Message.system("sys"), Message.user("task"), *exchange(0), *exchange(1, lines=600, parallel=6)]
    window = tokens(history) // 2
    truncate = PairwiseTruncate(trigger=Trigger(max_fraction=0.9), recall_tool="recall")
    result = Pipeline([truncate]).run(history, window)
    originals = [p for m in history[-6:] for p in m.parts if isinstance(p, ToolResultPart)]
    results = [p for m in result.messages[-6:] for p in m.parts if isinstance(p, ToolResultPart)]
    for new, old in zip(results, originals, strict=True):
        handle = recall_handle(old.content)
        assert f"recall(handle='{handle}') returns the whole output" in new.content
        assert result.originals[handle] == old.content  # the integration keeps it for the tool
