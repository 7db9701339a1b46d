"""`StripThinking`: turns, the current tool-use cycle, batches, the corpus, random histories."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit._validity import check_neutral, current_cycle_start, final_request_start
from historykit.processors._strip_thinking import StripThinking
from historykit.processors._trigger import Trigger

from ..strategies import examples, neutral_histories
from .support import (
    COUNTER,
    assert_idempotent,
    assert_modes_agree,
    context,
    replay_both_modes,
    request_points,
    tokens,
    view_only_outputs,
)

EAGER = StripThinking(trigger=None)


def reasoning(label: str, lines: int = 8) -> str:
    return "\n".join(
        f"{label}: considering option {k}, which means checking value_{k} first." for k in range(lines)
    )


def thinking(label: str, signed: bool = True) -> ThinkingPart:
    return ThinkingPart(reasoning(label), signature=f"sig-{label}" if signed else None)


def turn(n: int, steps: int = 2) -> list[Message]:
    """A user message and the assistant's answer: `steps` tool steps, then a final text."""
    out = [Message.user(f"Request {n}: fix bug {n}.")]
    for s in range(steps):
        call = ToolCallPart(f"t{n}s{s}", "Read", {"file_path": f"f{n}_{s}.py"})
        out.append(Message("assistant", (thinking(f"t{n}s{s}"), TextPart(f"Step {s}."), call)))
        out.append(Message("tool", (ToolResultPart(call.id, "Read", f"content of f{n}_{s}.py"),)))
    out.append(Message("assistant", (thinking(f"t{n}end", signed=False), TextPart(f"Fixed bug {n}."))))
    return out


def chat(turns: int, steps: int = 2) -> list[Message]:
    history = [Message.system("You are a coding agent.")]
    for n in range(turns):
        history += turn(n, steps)
    return history


def test_a_call_counts_no_stripped_copy_it_may_not_strip() -> None:
    """Only the turns before the latest `keep_turns` may be stripped: the copies of the others are
    never counted (after a load each would be tokenized, a copy being a new message). One long
    turn, as an agent's task is: nothing may be stripped, and nothing but the history is counted."""

    class Recording(TokenCounter):
        def count_message(self, message: Message) -> int:
            counted.append(message)
            return super().count_message(message)

    counted: list[Message] = []
    history = [Message.system("You are a coding agent."), *turn(0, steps=12)]
    ctx = context(counter=Recording())
    out, _ = StripThinking(keep_turns=1, trigger=Trigger(max_tokens=10)).process(history, ctx)
    assert out is history
    assert counted and all(any(m is h for h in history) for m in counted)

    # Two turns: the first may be stripped, and its copies are counted to size the batch.
    counted.clear()
    history = chat(2, steps=6)
    out, _ = StripThinking(keep_turns=1, trigger=Trigger(max_tokens=10), min_gain=0).process(history, ctx)
    copies = [m for m in counted if not any(m is h for h in history)]
    first_turn = turn_of(history).index(1)
    assert copies and all(any(c is o for o in out[:first_turn]) for c in copies)


def has_thinking(msg: Message) -> bool:
    return any(isinstance(p, ThinkingPart) for p in msg.parts)


def turn_of(history: list[Message]) -> list[int]:
    """For each message, the number of the user turn it belongs to (-1 before the first)."""
    out, n = [], -1
    for msg in history:
        if msg.role == "user" and not msg.tool_results:
            n += 1
        out.append(n)
    return out


def assert_stripping_only(original: list[Message], out: list[Message]) -> None:
    """`out` is `original` with some unpinned thinking dropped, and nothing else."""
    assert len(out) == len(original)
    for before, after in zip(original, out):
        if after is before:
            continue
        assert before.role == after.role == "assistant" and not before.pinned and not after.pinned
        kept = [p for p in before.parts if not (isinstance(p, ThinkingPart) and not p.pinned)]
        assert len(after.parts) == len(kept) and all(a is b for a, b in zip(after.parts, kept))
        assert any(not (isinstance(p, TextPart) and not p.text.strip()) for p in after.parts), "never empty"
        assert (after.id, after.usage) == (before.id, before.usage)


# --- turns and what is kept ----------------------------------------------------------------------


def test_no_thinking_no_change() -> None:
    history = [Message.system("s"), Message.user("hi"), Message.assistant("hello"), Message.user("bye")]
    out, notes = EAGER.process(history, context())
    assert out is history and notes.replaced == 0


@pytest.mark.parametrize("keep_turns", [0, 1, 2, 3])
def test_thinking_is_dropped_from_all_but_the_last_turns(keep_turns: int) -> None:
    history = [*chat(3), Message.user("One more thing.")]
    out, notes = replace(EAGER, keep_turns=keep_turns).process(history, context())
    assert_stripping_only(history, out)
    owner = turn_of(history)
    for i, msg in enumerate(history):
        if not has_thinking(msg):
            continue
        stripped = not has_thinking(out[i])
        assert stripped == (owner[i] < 3 - keep_turns), (i, owner[i])
    # Text and tool calls are all still there, in order: thinking never becomes text.
    for before, after in zip(history, out):
        assert [p for p in after.parts if not isinstance(p, ThinkingPart)] == [
            p for p in before.parts if not isinstance(p, ThinkingPart)
        ]
    dropped = sum(has_thinking(m) for m in history) - sum(has_thinking(m) for m in out)
    assert notes.replaced == dropped
    if dropped:
        assert f"{tokens(history) - tokens(out):,} tokens freed" in notes.details[0]


def test_the_current_tool_use_cycle_is_never_touched() -> None:
    # Mid-cycle: the latest user message was answered by tool calls whose results just came in.
    history = [*chat(2), *turn(2, steps=3)[:-1]]
    out, _ = replace(EAGER, keep_turns=0).process(history, context())
    cycle = current_cycle_start(history)
    assert all(out[i] is history[i] for i in range(cycle, len(history)))
    assert all(not has_thinking(m) for m in out[:cycle])
    assert check_neutral(out) == []


def test_a_single_task_agent_run_keeps_all_its_thinking() -> None:
    # One user message, then only tool steps: everything is the current tool-use cycle.
    history = [Message.system("s"), *turn(0, steps=20)[:-1]]
    out, _ = replace(EAGER, keep_turns=0).process(history, context())
    assert out is history


def test_tool_results_in_a_user_message_do_not_start_a_turn() -> None:
    # Pydantic AI sends tool returns and a retry prompt in one request: still the same cycle.
    call = ToolCallPart("x", "Read", {"file_path": "a.py"})
    history = [
        *chat(1),
        Message.user("Now b.py."),
        Message("assistant", (thinking("a"), call)),
        Message("user", (ToolResultPart("x", "Read", "a"), TextPart("Also check c.py."))),
        Message(
            "assistant", (thinking("b"), TextPart("Checking."), ToolCallPart("y", "Read", {"path": "c"}))
        ),
        Message("tool", (ToolResultPart("y", "Read", "c"),)),
    ]
    out, _ = replace(EAGER, keep_turns=0).process(history, context())
    cycle = history.index(history[-5]) + 1
    assert current_cycle_start(history) == cycle
    assert all(out[i] is history[i] for i in range(cycle, len(history)))
    assert not any(has_thinking(m) for m in out[:cycle])


def test_a_message_with_only_thinking_keeps_it() -> None:
    history = [
        Message.system("s"),
        Message.user("Start."),
        Message("assistant", (thinking("alone"),)),
        Message.user("Go on."),
        Message("assistant", (thinking("blank"), TextPart(""), ToolCallPart("z", "Glob", {"pattern": "*"}))),
        Message("tool", (ToolResultPart("z", "Glob", "a.py"),)),
        Message("assistant", (thinking("empty"), TextPart("  "))),
        Message.user("Thanks."),
        Message.assistant("Bye."),
        Message.user("Bye."),
    ]
    out, _ = replace(EAGER, keep_turns=0).process(history, context())
    assert out[2] is history[2], "thinking alone: stripping it would leave an empty message"
    assert out[6] is history[6], "thinking and blank text: the same"
    assert not has_thinking(out[4]), "thinking beside a tool call goes"
    assert out[4].parts == history[4].parts[1:]
    assert all(m.parts for m in out) and len(out) == len(history)


def test_redacted_thinking_is_thinking() -> None:
    history = chat(2)
    redacted = ThinkingPart("", signature="opaque-bytes", redacted=True)
    history[2] = replace(history[2], parts=(redacted, *history[2].parts))
    out, _ = replace(EAGER, keep_turns=0).process([*history, Message.user("next")], context())
    assert not any(isinstance(p, ThinkingPart) for p in out[2].parts)


def test_pinned_thinking_and_pinned_messages_are_kept() -> None:
    history = [*chat(3), Message.user("next")]
    pinned_part = replace(history[2].parts[0], pinned=True)
    history[2] = replace(history[2], parts=(pinned_part, *history[2].parts[1:]))
    history[4] = replace(history[4], pinned=True)
    out, _ = replace(EAGER, keep_turns=0).process(history, context())
    assert out[2].parts[0] is pinned_part and len(out[2].parts) == len(history[2].parts)
    assert out[4] is history[4]
    assert not has_thinking(out[6]) and not has_thinking(out[8])


# --- when: the trigger, min_gain, batches ------------------------------------------------------


def test_under_the_high_water_mark_old_thinking_stays() -> None:
    history = [*chat(4), Message.user("next")]
    strip = StripThinking(trigger=Trigger(max_tokens=tokens(history) + 1))
    assert strip.process(history, context())[0] is history
    # Over it, the old turns go, in one batch.
    out, _ = replace(strip, trigger=Trigger(max_tokens=tokens(history) - 1), min_gain=0).process(
        history, context()
    )
    assert_stripping_only(history, out)
    assert tokens(out) < tokens(history)


def test_min_gain_refuses_a_small_batch() -> None:
    history = [*chat(4), Message.user("next")]
    strippable = tokens(history) - tokens(replace(EAGER, keep_turns=0).process(history, context())[0])
    trigger = Trigger(max_tokens=tokens(history) - 1)
    assert StripThinking(trigger=trigger, min_gain=strippable + 1).process(history, context())[0] is history
    out, _ = StripThinking(trigger=trigger, min_gain=100).process(history, context())
    assert tokens(history) - tokens(out) >= 100


def test_replayed_turn_by_turn_it_strips_in_batches_and_both_modes_agree() -> None:
    history = chat(12, steps=3)
    ctx = context(12_000)
    strip = StripThinking(trigger=Trigger(max_fraction=0.5, low_water=0.6), min_gain=300)
    high = strip.trigger.high_tokens(ctx) if strip.trigger else None
    assert high is not None
    events = 0
    for step in replay_both_modes(strip, strip, history, ctx):
        assert_idempotent(strip, step.output, ctx)
        if step.grown is not None:
            events += 1
            assert tokens(step.grown) > high and tokens(step.grown) - tokens(step.output) >= 300
    assert 1 <= events < 12


def test_eager_mode_edits_at_every_new_turn() -> None:
    # What the trigger avoids. With keep_turns=1, at the first request of turn n the latest
    # assistant turn is n - 1, which keeps its thinking; at the second request it is turn n (in
    # progress), and turn n - 1 is stripped: an edit of old messages at every turn.
    history = chat(5)
    points = request_points(history)
    outputs = view_only_outputs(EAGER, history, context())
    edits = [points[k + 1] for k, (a, b) in enumerate(pairwise(outputs)) if b[: len(a)] != a]
    owner = turn_of(history)
    assistants = [
        [i for i, m in enumerate(history) if m.role == "assistant" and owner[i] == n] for n in range(5)
    ]
    assert edits == [assistants[n][1] for n in range(1, 5)]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"keep_turns": -1}, ValueError),
        ({"keep_turns": "1"}, ValueError),
        ({"min_gain": -3}, ValueError),
        ({"trigger": 5}, TypeError),
    ],
)
def test_bad_configuration_is_named(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=next(iter(kwargs))):
        StripThinking(**kwargs)


def test_run_reports_what_it_dropped() -> None:
    history = [*chat(3), Message.user("next")]
    result = StripThinking(trigger=Trigger(max_fraction=0.1), min_gain=0).run(history, context_window=4_000)
    step = result.report.steps[0]
    assert step.processor == "StripThinking" and step.notes.replaced == 6
    assert step.tokens_after < step.tokens_before


# --- real frameworks -----------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_pydantic_ai_history_keeps_every_other_field_of_a_stripped_response() -> None:
    from pydantic_ai import messages as pai
    from pydantic_ai.usage import RequestUsage

    def response(label: str) -> Any:
        return pai.ModelResponse(
            [pai.ThinkingPart(reasoning(label), signature=f"sig-{label}"), pai.TextPart(f"answer {label}")],
            usage=RequestUsage(input_tokens=100, output_tokens=20),
            model_name="claude-x",
            provider_name="anthropic",
            provider_response_id=f"msg_{label}",
        )

    history = [
        pai.ModelRequest([pai.SystemPromptPart("be good"), pai.UserPromptPart("first")]),
        response("a"),
        pai.ModelRequest([pai.UserPromptPart("second")]),
        response("b"),
        pai.ModelRequest([pai.UserPromptPart("third")]),
    ]
    out = EAGER(history)
    assert out[0] is history[0] and out[2] is history[2] and out[3] is history[3] and out[4] is history[4]
    stripped = out[1]
    assert isinstance(stripped, pai.ModelResponse)
    assert [type(p) for p in stripped.parts] == [pai.TextPart] and stripped.parts[0] == history[1].parts[1]
    assert (stripped.usage, stripped.model_name, stripped.provider_response_id) == (
        history[1].usage,
        "claude-x",
        "msg_a",
    )


def test_langchain_history_drops_the_thinking_block_only() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    def answer(label: str) -> AIMessage:
        blocks = [
            {"type": "thinking", "thinking": reasoning(label), "signature": f"sig-{label}"},
            {"type": "text", "text": f"answer {label}"},
        ]
        return AIMessage(content=blocks, id=f"ai-{label}", response_metadata={"model_name": "claude-x"})  # type: ignore[arg-type]

    history = [HumanMessage("first", id="h1"), answer("a"), HumanMessage("second", id="h2"), answer("b")]
    history.append(HumanMessage("third", id="h3"))
    out = EAGER(history)
    assert [m is h for m, h in zip(out, history)] == [True, False, True, True, True]
    assert out[1].id == "ai-a" and out[1].response_metadata == {"model_name": "claude-x"}
    blocks = out[1].content
    assert isinstance(blocks, list) and [b["type"] for b in blocks] == ["text"]  # type: ignore[index]


# --- the corpus ----------------------------------------------------------------------------------


def test_corpus_session(corpus_session: list[Message], record_property: Any) -> None:
    ctx = context(32_000)
    before = tokens(corpus_session)
    cycle = current_cycle_start(corpus_session)
    for strip in (StripThinking(), EAGER, replace(EAGER, keep_turns=0)):
        out, _ = strip.process(corpus_session, ctx)
        if not check_neutral(corpus_session):
            assert check_neutral(out) == []
        assert_stripping_only(corpus_session, out)
        assert all(out[i] is corpus_session[i] for i in range(cycle, len(corpus_session)))
        record_property(f"tokens_freed_{strip.trigger is not None}_{strip.keep_turns}", before - tokens(out))
    user_turns = sum(1 for m in corpus_session if m.role == "user" and not m.tool_results)
    if user_turns == 1:  # an agent run on one task: all of it is the current tool-use cycle
        assert replace(EAGER, keep_turns=0).process(corpus_session, ctx)[0] is corpus_session


def test_corpus_session_persistent_and_view_only_agree_call_by_call(corpus_session: list[Message]) -> None:
    assert_modes_agree(StripThinking(), StripThinking(), corpus_session, context(32_000))


def test_corpus_thinking_of_old_turns_is_freed(largest_corpus_session: list[Message]) -> None:
    # The largest session is a Claude Code main thread with thinking in several user turns.
    out, _ = EAGER.process(largest_corpus_session, context(32_000))
    assert (
        COUNTER.breakdown(largest_corpus_session)["thinking"] - COUNTER.breakdown(out).get("thinking", 0)
        > 1_000
    )


# --- properties on random histories --------------------------------------------------------------

configs = st.builds(
    lambda keep, trigger, min_gain: StripThinking(keep_turns=keep, trigger=trigger, min_gain=min_gain),
    st.integers(0, 3),
    st.none()
    | st.builds(
        lambda f, low: Trigger(max_fraction=f, low_water=low), st.floats(0.2, 1.0), st.floats(0.1, 1.0)
    ),
    st.integers(0, 300),
)
windows = st.integers(300, 6_000)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(), configs, windows)
def test_random_histories_keep_every_rule(history: list[Message], strip: StripThinking, window: int) -> None:
    out, _ = strip.process(history, context(window))
    event("edited" if out is not history else "unchanged")
    if not check_neutral(history):
        assert check_neutral(out) == []
    assert_stripping_only(history, out)
    cycle = current_cycle_start(history)
    assert all(out[i] is history[i] for i in range(cycle, len(history)))
    final = final_request_start(history)
    assert all(out[i] is history[i] for i in range(final, len(history)))
    # The last `keep_turns` assistant turns keep their thinking.
    owner = turn_of(history)
    answered = sorted({owner[i] for i, m in enumerate(history) if m.role == "assistant"})
    kept = set(answered[len(answered) - strip.keep_turns :]) if strip.keep_turns else set()
    assert all(out[i] is history[i] for i in range(len(history)) if owner[i] in kept)
    # One boundary: whole turns before it are stripped, nothing after it.
    changed = [i for i in range(len(out)) if out[i] is not history[i]]
    if changed:
        everything, _ = replace(strip, trigger=None, keep_turns=0).process(history, context(window))
        last_turn = owner[changed[-1]]
        inside = [i for i in range(len(history)) if owner[i] <= last_turn]
        assert all(out[i] == everything[i] for i in inside)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=7, max_steps=4), configs, windows)
def test_random_histories_persistent_equals_view_only_and_never_trickles(
    history: list[Message], strip: StripThinking, window: int
) -> None:
    ctx = context(window)
    high = strip.trigger.high_tokens(ctx) if strip.trigger is not None else None
    for step in replay_both_modes(strip, strip, history, ctx):
        assert_idempotent(strip, step.output, ctx)
        if step.grown is not None:
            if high is not None:
                assert tokens(step.grown) > high
                assert tokens(step.grown) - tokens(step.output) >= max(strip.min_gain or 0, 1)
            event("a batch between two calls")
