"""`check` and `Repair` on neutral histories: planted violations, the corpus, random damage."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, check
from historykit._messages import MediaPart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._pipeline import ProcessContext, StepNotes
from historykit._tokens import TokenCounter
from historykit._validity import current_cycle_start, final_request_start
from historykit.processors import Repair
from historykit.processors._repair import EMPTY_TEXT

from .strategies import examples, neutral_histories


def call(cid: str, name: str = "Read") -> ToolCallPart:
    return ToolCallPart(cid, name, {"file_path": "a.py"})


def result(cid: str, content: str = "print(1)") -> ToolResultPart:
    return ToolResultPart(cid, "Read", content)


BASE = [
    Message.system("You are an agent."),
    Message.user("Read a.py"),
    Message("assistant", (call("c1"), call("c2"))),
    Message("tool", (result("c1"),)),
    Message("tool", (result("c2"),)),
    Message.assistant("It prints 1."),
    Message.user("Thanks"),
]


def rules(messages: list[Message]) -> list[str]:
    return [v.rule for v in check(messages)]


def test_valid_history_has_no_violation() -> None:
    assert check(BASE) == []


def test_corpus_sessions_have_no_violation(corpus_session: list[Message]) -> None:
    assert check(corpus_session) == []


def test_orphan_result_is_r1_and_names_the_place() -> None:
    bad = [*BASE[:5], Message("tool", (result("c9"),)), *BASE[5:]]
    [violation] = check(bad)
    assert (violation.rule, violation.index, violation.part) == ("R1", 5, 0)
    assert "'c9'" in str(violation) and "message 5" in str(violation)


def test_missing_result_is_r2_for_each_call_of_a_parallel_group() -> None:
    bad = [*BASE[:3], BASE[5], BASE[6]]
    found = check(bad)
    # The answer right after the calls also makes two assistant messages in a row.
    assert [(v.rule, v.index, v.part) for v in found] == [("R2", 2, 0), ("R2", 2, 1), ("R5", 3, None)]


def test_final_call_waiting_for_its_result_is_fine() -> None:
    assert check(BASE[:3]) == []


def test_leading_tool_result_is_r1_and_r4() -> None:
    bad = [BASE[0], Message("tool", (result("c0"),)), *BASE[1:]]
    assert sorted(rules(bad)) == ["R1", "R4"]


def test_empty_message_and_empty_text_are_r6() -> None:
    assert rules([*BASE, Message("user", ())]) == ["R6"]
    assert rules([*BASE, Message.user("  ")]) == ["R6"]


def test_consecutive_assistants_are_r5_and_user_pairs_only_when_strict() -> None:
    assert rules([*BASE[:6], Message.assistant("More."), BASE[6]]) == ["R5"]
    doubled = [*BASE, Message.user("One more thing")]
    assert check(doubled) == []
    assert [v.rule for v in check(doubled, strict_alternation=True)] == ["R5"]


def test_text_before_tool_results_is_r3() -> None:
    bad = [*BASE[:3], Message.user("wait"), *BASE[3:]]
    assert "R3" in rules(bad)


def test_thinking_rules() -> None:
    signed_late = Message("assistant", (TextPart("x"), ThinkingPart("t", signature="s"), call("c1")))
    assert "R7" in rules([BASE[1], signed_late, BASE[3]])
    empty_sig = Message("assistant", (ThinkingPart("t", signature=""), TextPart("x")))
    assert rules([BASE[1], empty_sig]) == ["R8"]
    lonely = Message("assistant", (TextPart("x"), ThinkingPart("t", id="rs_1")))
    assert rules([BASE[1], lonely]) == ["R9"]


def test_repair_fixes_planted_violations_and_keeps_system_and_final_request() -> None:
    bad = [
        Message("tool", (result("zz"),)),  # leading orphan
        BASE[0],
        BASE[1],
        Message("assistant", (call("c1"), call("c2"))),
        Message("tool", (result("c1"),)),  # c2 never answered
        Message("user", ()),  # empty
        Message.assistant("It prints 1."),
        Message.assistant("Anything else?"),  # two assistants
        Message("tool", (result("c7"),)),  # orphan in the final request
    ]
    assert set(rules(bad)) >= {"R1", "R2", "R5", "R6"}
    result_ = Repair().run(bad)
    fixed = result_.messages
    assert check(fixed) == []
    assert fixed[0] == BASE[0]
    assert fixed[-1].role == "user" and "c7" in fixed[-1].text  # final request kept as text
    notes = result_.report.steps[0].notes
    assert notes.added and notes.removed and notes.details


def test_repair_leaves_a_valid_history_alone() -> None:
    out = Repair().run(BASE)
    assert all(a is b for a, b in zip(out.messages, BASE)) and len(out.messages) == len(BASE)
    assert not out.report.changed


def test_repair_adds_a_user_notice_before_a_leading_assistant() -> None:
    fixed = Repair()([BASE[0], *BASE[5:]])
    assert [m.role for m in fixed] == ["system", "user", "assistant", "user"]
    assert check(fixed) == []


def test_repair_moves_results_before_text() -> None:
    bad = [*BASE[:3], Message.user("wait"), *BASE[3:]]
    fixed = Repair()(bad)
    assert check(fixed) == []
    assert [m.role for m in fixed[3:6]] == ["tool", "tool", "user"]


def _damage(history: list[Message], data: st.DataObject) -> list[Message]:
    """Break a valid history the ways processors do: drop messages or parts, blank text."""
    out = list(history)
    for _ in range(data.draw(st.integers(1, 4))):
        if not out:
            break
        i = data.draw(st.integers(0, len(out) - 1))
        action = data.draw(st.sampled_from(("drop", "drop_part", "blank", "swap")))
        msg = out[i]
        if action == "drop":
            del out[i]
        elif action == "drop_part" and len(msg.parts) > 1:
            j = data.draw(st.integers(0, len(msg.parts) - 1))
            out[i] = replace(msg, parts=msg.parts[:j] + msg.parts[j + 1 :])
        elif action == "blank" and msg.role == "user":
            out[i] = replace(msg, parts=(TextPart(""),))
        elif action == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories())
def test_generated_histories_are_valid(history: list[Message]) -> None:
    assert check(history) == []
    assert Pipeline([Repair()]).run(history).messages == history


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(), st.data())
def test_repair_makes_any_damaged_history_valid(history: list[Message], data: st.DataObject) -> None:
    damaged = _damage(history, data)
    if not damaged:
        return
    fixed = Repair()(damaged)
    assert check(fixed) == [], [str(v) for v in check(fixed)]
    # Never drops a system message or the final request.
    for msg in damaged:
        if msg.role == "system":
            assert any(m is msg for m in fixed)
    final = damaged[final_request_start(damaged) :]
    for msg in final:
        kept = (
            any(m is msg for m in fixed)
            or any(p in m.parts for m in fixed for p in msg.parts)
            or any(
                isinstance(p, ToolResultPart) and p.tool_call_id in m.text for m in fixed for p in msg.parts
            )
            # A final request that was only blank text stays, as a visible placeholder.
            or (not msg.text.strip() and not msg.tool_results and any(m.text == EMPTY_TEXT for m in fixed))
        )
        assert kept, f"final request message lost: {msg}"
    # Never edits the thinking of the current tool-use cycle.
    cycle = damaged[current_cycle_start(damaged) :]
    thinking = [p for m in cycle if m.role == "assistant" for p in m.parts if isinstance(p, ThinkingPart)]
    fixed_thinking = [p for m in fixed for p in m.parts if isinstance(p, ThinkingPart)]
    for part in thinking:
        assert any(part is q for q in fixed_thinking)


@pytest.mark.parametrize("bad", [[1, 2], ["text"], [Message.user("x"), {"role": "user"}]])
def test_non_messages_raise_type_error_naming_index_and_type(bad: list) -> None:
    with pytest.raises(TypeError, match=r"message \d+ is a builtins\.(int|str|dict)"):
        check(bad)


def test_repair_moves_a_late_result_of_a_parallel_group_before_text() -> None:
    bad = [*BASE[:4], Message.user("wait"), BASE[4]]
    assert "R3" in rules(bad)
    fixed = Repair()(bad)
    assert check(fixed) == []
    assert [m.role for m in fixed[3:]] == ["tool", "tool", "user"]


def _damage_more(history: list[Message], data: st.DataObject) -> list[Message]:
    """`_damage`, and the shapes only a framework or a hand-made history gives: a message twice, a
    user message of media alone or with text ahead of its results, thinking unsigned or last."""
    out = _damage(history, data) if data.draw(st.booleans()) else list(history)
    for _ in range(data.draw(st.integers(0, 3))):
        if not out:
            break
        i = data.draw(st.integers(0, len(out) - 1))
        msg = out[i]
        actions = ("twice", "media", "text_first", "unsigned", "reasoning", "system")
        action = data.draw(st.sampled_from(actions))
        if action == "twice":
            out.insert(i, msg)
        elif action == "media":
            out.insert(i, Message("user", (MediaPart("image/png", size=10),)))
        elif action == "text_first" and msg.tool_results:
            out[i] = Message("user", (TextPart("and then"), *msg.parts))
        elif action == "unsigned" and msg.role == "assistant":
            out[i] = replace(msg, parts=(ThinkingPart("hmm", signature=""), *msg.parts))
        elif action == "reasoning" and msg.role == "assistant":
            out[i] = replace(msg, parts=(*msg.parts, ThinkingPart("hmm", id="rs_1")))
        elif action == "system":
            out.insert(i, Message.system("Be brief."))
    return out


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(), st.data())
def test_repair_vouches_for_a_history_only_when_the_full_path_changes_nothing(
    history: list[Message], data: st.DataObject
) -> None:
    """`Repair` skips its fixes on a history its one pass vouches for (`_plainly_valid`): it must
    vouch only where every fix leaves the history as it is and `check` finds nothing, so the
    result is the full path's, whatever the history."""
    damaged = _damage_more(history, data)
    ctx = ProcessContext(200_000, "explicit", TokenCounter())
    quick = Repair()
    full = Repair()
    full._plainly_valid = lambda messages, ctx: False  # type: ignore[method-assign]
    out, notes = quick.process(damaged, ctx)
    full_out, full_notes = full.process(damaged, ctx)
    assert out == full_out
    assert (out is damaged) == (full_out is damaged)
    assert notes == full_notes
    if Repair()._plainly_valid(damaged, ctx):
        assert check(damaged) == []
        assert full_out is damaged and full_notes == StepNotes()


@pytest.mark.parametrize(
    "bad",
    [
        # A result after a user message without results is moved before it (`_fix_result_order`),
        # though `check` finds nothing wrong there.
        [*BASE[:4], Message("user", (MediaPart("image/png", size=10),)), BASE[4]],
        [*BASE[:5], Message.assistant("It prints 1."), *BASE[5:]],  # R5
        BASE[2:],  # R4, and results of calls no longer there
        [*BASE[:3], BASE[4], BASE[3], *BASE[5:]][:1] + BASE[2:3] + BASE[1:2],  # R4: a call before the task
        [*BASE[:4], *BASE[5:]],  # R2: a call without its result
        [*BASE[:3], Message("user", (TextPart("and then"), result("c1"), result("c2"))), *BASE[5:]],  # R3
        [*BASE[:5], replace(BASE[5], parts=(TextPart("x"), ThinkingPart("t", signature="s"))), BASE[6]],  # R7
    ],
)
def test_repair_does_not_vouch_for_what_a_fix_changes(bad: list[Message]) -> None:
    ctx = ProcessContext(200_000, "explicit", TokenCounter())
    assert not Repair()._plainly_valid(bad, ctx)
    full = Repair()
    full._plainly_valid = lambda messages, ctx: False  # type: ignore[method-assign]
    assert Repair().process(bad, ctx) == full.process(bad, ctx)


def test_repair_vouches_for_a_valid_history_and_a_call_waiting_for_its_results() -> None:
    ctx = ProcessContext(200_000, "explicit", TokenCounter())
    assert Repair()._plainly_valid(BASE, ctx)
    assert Repair()._plainly_valid(BASE[:3], ctx)
