"""`PairwiseTruncate`: whole units and turns, the notice, hysteresis, the corpus, random histories.

The rule checks here (`assert_compaction_rules`, `assert_replay_properties`) are shared with the
`Summarize` tests: both processors drop the older span of a history and must keep the same things.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit.messages import Message, SummaryPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit.pipeline import ProcessContext, StepNotes
from historykit.processors.pairwise_truncate import PairwiseTruncate
from historykit.processors.turns import (
    head_end,
    is_compaction_message,
    notice_count,
    split_turns,
    split_units,
    truncation_notice,
)
from historykit.tokens import TokenCounter, heuristic_tokenizer
from historykit.validity import check_neutral, current_cycle_start, final_request_start

from ..strategies import neutral_histories

COUNTER = TokenCounter()
FAST = TokenCounter(tokenizer=heuristic_tokenizer)
"""For generated histories: the heuristic is exact enough and does not depend on tiktoken files."""


def context(window: int = 100_000, counter: TokenCounter = COUNTER) -> ProcessContext:
    return ProcessContext(window, "explicit", counter)


def tokens(messages: list[Message], counter: TokenCounter = COUNTER) -> int:
    return sum(counter.count_message(m) for m in messages)


def file_text(name: str, lines: int = 40) -> str:
    return "\n".join(f"{name} line {k}: value_{k} = compute({k}, '{name}')" for k in range(lines))


def exchange(n: int, lines: int = 40, *, parallel: int = 1, pinned: bool = False) -> list[Message]:
    """An assistant message with `parallel` Read calls and one tool message per result."""
    calls = tuple(
        ToolCallPart(f"c{n}_{k}", "Read", {"file_path": f"src/f{n}_{k}.py"}) for k in range(parallel)
    )
    results = [
        Message("tool", (ToolResultPart(c.id, "Read", file_text(f"f{n}", lines), pinned=pinned and k == 0),))
        for k, c in enumerate(calls)
    ]
    return [Message("assistant", (TextPart(f"Reading batch {n}."), *calls)), *results]


def agent_session(steps: int, lines: int = 40) -> list[Message]:
    """A system prompt, a task, `steps` tool exchanges, and the final tool results."""
    history = [Message.system("You are a coding agent."), Message.user("Find the bug in src/.")]
    for n in range(steps):
        history += exchange(n, lines)
    return history


def request_points(messages: list[Message]) -> list[int]:
    """Where the model was called: before each assistant message (not the first), and the end."""
    return [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0] + [len(messages)]


# --- the rules every compaction keeps (shared with the Summarize tests) -----------------------------


def assert_compaction_rules(before: list[Message], after: list[Message]) -> None:
    """What neither `PairwiseTruncate` nor `Summarize` may ever break."""
    if not check_neutral(before):
        assert check_neutral(after) == [], check_neutral(after)
    if after is before:
        return
    kept = {id(m) for m in after}
    given = {id(m) for m in before}
    made = [m for m in after if id(m) not in given]
    # The only new messages are the processor's own notice or summary; nothing else is rewritten.
    assert all(is_compaction_message(m) for m in made), made
    assert all(m.parts for m in after)
    # Kept messages stay in their order.
    order = {id(m): i for i, m in enumerate(before)}
    positions = [order[id(m)] for m in after if id(m) in order]
    assert positions == sorted(positions)
    # System messages, the task and the final request stay; the final request ends the history.
    for msg in before[: head_end(before)]:
        assert id(msg) in kept
    assert all(id(m) in kept for m in before if m.role == "system")
    final = before[final_request_start(before) :]
    assert after[len(after) - len(final) :] == final
    assert all(a is b for a, b in zip(after[len(after) - len(final) :], final))
    # Pinned content stays, verbatim (the same objects).
    for msg in before:
        if msg.pinned or any(p.pinned for p in msg.parts):
            assert id(msg) in kept, msg
    # A tool call and all its results (a parallel group) are kept or dropped together.
    for unit in split_units(before):
        inside = {id(m) in kept for m in before[unit.start : unit.end]}
        assert len(inside) == 1, (unit, before[unit.start : unit.end])
    # The thinking of the output's current tool-use cycle reaches the provider as it was.
    for msg in after[current_cycle_start(after) :]:
        if msg.role == "assistant":
            assert id(msg) in order
    # Nothing turned from thinking into text.
    thinking = {p.text for m in before for p in m.parts if isinstance(p, ThinkingPart)}
    assert not any(isinstance(p, TextPart) and p.text in thinking and p.text for m in made for p in m.parts)
    # At most one compaction message of each kind after the head.
    assert sum(1 for m in after if notice_count(m) is not None) <= 1


Process = Callable[[list[Message]], tuple[list[Message], StepNotes]]


def compaction_of(messages: list[Message]) -> list[Message]:
    return [m for m in messages if is_compaction_message(m)]


def assert_replay_properties(
    history: list[Message], process: Process, fresh: Callable[[], Process], high: int, counter: TokenCounter
) -> int:
    """Idempotence, persistent == view-only, and append-only between compactions; returns compactions."""
    out, _ = process(history)
    again, _ = process(out)
    assert again == out, "processing an output again changes it (not idempotent, or trickles)"
    points = request_points(history)
    # Persistent mode at every call: the processed history is carried forward.
    carried: list[Message] = []
    previous = 0
    run = fresh()
    for point in points:
        carried, _ = run(carried + history[previous:point])
        previous = point
    assert carried == out, "persistent and view-only modes disagree"
    # View-only mode at every call: append-only unless the high-water mark was crossed.
    compactions = 0
    views = [process(history[:p])[0] for p in points]
    for (p0, v0), (p1, v1) in pairwise(zip(points, views)):
        appended = v0 + history[p0:p1]
        if v1 == appended:
            continue
        compactions += 1
        assert compaction_of(v1) != compaction_of(v0), "rewrote old messages without a new compaction"
        assert tokens(appended, counter) > high, "compacted below the high-water mark"
        assert tokens(v1, counter) < tokens(appended, counter), "a compaction that frees nothing"
    return compactions


# --- examples ----------------------------------------------------------------------------------------


def test_under_the_budget_nothing_changes_and_the_list_itself_comes_back() -> None:
    history = agent_session(3)
    out, notes = PairwiseTruncate(max_tokens=100_000).process(history, context())
    assert out is history
    assert (notes.removed, notes.added, notes.markers) == (0, 0, [])


def test_drops_oldest_exchanges_down_to_the_low_water_mark_and_leaves_a_notice() -> None:
    history = agent_session(30)
    high = tokens(history) - 1  # crossed at the last call only
    truncate = PairwiseTruncate(max_tokens=high, low_water=0.5)
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
        out, _ = PairwiseTruncate(max_tokens=budget).process(history, context())
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
    out, _ = PairwiseTruncate(max_tokens=tokens(history) // 3).process(history, context())
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
    out, _ = PairwiseTruncate(max_tokens=tokens(history) // 2).process(history, context())
    assert_compaction_rules(history, out)
    assert history[2] not in out  # the first turn's answer went
    assert history[3] in out  # the request being worked on stayed
    assert out.index(history[3]) < out.index(next(m for m in out if notice_count(m) is not None))


def test_earlier_summaries_are_kept_by_truncation() -> None:
    summary = Message("user", (SummaryPart("## Task\n- find the bug"),))
    history = [Message.system("sys"), Message.user("task"), summary, *agent_session(20)[2:]]
    out, _ = PairwiseTruncate(max_tokens=tokens(history) // 2).process(history, context())
    assert_compaction_rules(history, out)
    assert summary in out and notice_count(out[out.index(summary) + 1]) is not None


def test_over_budget_says_so_and_breaks_no_rule() -> None:
    history = [Message.system("sys"), Message.user("task"), *exchange(0), *exchange(1, lines=400)]
    out, notes = PairwiseTruncate(max_tokens=500).process(history, context())
    assert_compaction_rules(history, out)
    assert out[-2:] == history[-2:]  # the huge final request stays
    assert tokens(out) > 500
    assert any("over budget" in d for d in notes.details)


def test_nothing_droppable_returns_the_input() -> None:
    history = [Message.system("sys"), Message.user("task " * 400)]
    out, notes = PairwiseTruncate(max_tokens=100).process(history, context())
    assert out is history
    assert any("still over budget" in d for d in notes.details)


def test_message_count_trigger() -> None:
    history = agent_session(20)
    truncate = PairwiseTruncate(max_messages=20, low_water=0.5)
    out, _ = truncate.process(history, context())
    assert_compaction_rules(history, out)
    assert len(out) <= 20 and notice_count(out[2]) is not None
    # Crossing the mark at the last call only: down to the low-water mark.
    out, _ = PairwiseTruncate(max_messages=len(history) - 1, low_water=0.5).process(history, context())
    assert len(out) <= (len(history) - 1) // 2


def test_fraction_of_the_window_and_the_default() -> None:
    history = agent_session(40)
    window = tokens(history) * 2 - 2  # the history is just over half the window at the last call
    out, _ = PairwiseTruncate(max_fraction=0.5).process(history, context(window))
    assert tokens(out) <= window * 0.5 * 0.6
    assert PairwiseTruncate().max_fraction == 0.8


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": 0}, {"max_fraction": 1.5}, {"max_messages": -1}, {"max_tokens": 10, "low_water": 0}],
)
def test_bad_configuration_is_a_clear_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs)) if "low_water" not in kwargs else "low_water"):
        PairwiseTruncate(**kwargs)  # type: ignore[arg-type]


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
    truncate = PairwiseTruncate(max_tokens=high)

    def process(messages: list[Message]) -> tuple[list[Message], StepNotes]:
        return truncate.process(messages, context())

    compactions = assert_replay_properties(history, process, lambda: process, high, COUNTER)
    # Each compaction frees down to the low-water mark (0.6 of the high one), so the next is a
    # whole high-to-low swing of growth away: no trickle.
    swing = high - int(high * 0.6)
    assert 2 <= compactions <= (tokens(history) - high) // swing + 1


def test_runs_through_a_pipeline() -> None:
    history = agent_session(30)
    result = Pipeline([PairwiseTruncate(max_fraction=0.5)]).run(history, context_window=tokens(history))
    assert result.report.tokens_after < result.report.tokens_before
    assert result.report.steps[0].notes.removed > 0


# --- the corpus -----------------------------------------------------------------------------------


def test_corpus_sessions_replayed_call_by_call_stay_in_the_window(corpus_session: list[Message]) -> None:
    window = 32_000
    truncate = PairwiseTruncate(max_fraction=0.8)
    ctx = context(window)
    carried: list[Message] = []
    previous = 0
    for point in request_points(corpus_session):
        carried, _ = truncate.process(carried + corpus_session[previous:point], ctx)
        previous = point
        assert check_neutral(carried) == []
        if tokens(carried) > window * 0.8:
            assert_nothing_more_can_go(carried)
    view, _ = truncate.process(corpus_session, ctx)
    assert view == carried
    assert_compaction_rules(corpus_session, view)


# --- random histories -----------------------------------------------------------------------------


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(neutral_histories(max_turns=6, max_steps=5), st.integers(100, 3_000), st.sampled_from([0.3, 0.6, 1.0]))
def test_random_histories_keep_every_rule(history: list[Message], budget: int, low: float) -> None:
    truncate = PairwiseTruncate(max_tokens=budget, low_water=low)

    def process(messages: list[Message]) -> tuple[list[Message], StepNotes]:
        return truncate.process(messages, context(counter=FAST))

    out, _ = process(history)
    event("truncated" if out is not history else "unchanged")
    assert_compaction_rules(history, out)
    compactions = assert_replay_properties(history, process, lambda: process, budget, FAST)
    event(f"compactions: {min(compactions, 3)}")
    if tokens(out, FAST) > budget:
        assert_nothing_more_can_go(out, FAST)


def assert_nothing_more_can_go(out: list[Message], counter: TokenCounter = COUNTER) -> None:
    """An output over its budget: cutting as far as the rules allow would free nothing more."""
    floor, _ = PairwiseTruncate(max_tokens=1).process(out, context(counter=counter))
    assert tokens(floor, counter) >= tokens(out, counter)
