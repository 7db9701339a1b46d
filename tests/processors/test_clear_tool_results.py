"""`ClearToolResults`: placeholders, batches, what is never cleared, the corpus, random histories."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit._validity import check_neutral
from historykit.processors._change_records import change_line
from historykit.processors._clear_tool_results import (
    CHANGE_PLACEHOLDER,
    RESULT_PLACEHOLDER,
    ClearToolResults,
    describe_call,
)
from historykit.processors._trigger import Trigger

from ..strategies import examples, neutral_histories
from .support import (
    COUNTER,
    assert_idempotent,
    assert_in_place_edit_rules,
    assert_modes_agree,
    context,
    file_reading_agent,
    file_text,
    replay_both_modes,
    tokens,
    view_only_outputs,
)


def read_session(reads: int, lines: int = 60) -> list[Message]:
    """A system prompt, a task, then `reads` Read calls each answered by a file's content."""
    history = [Message.system("You are a coding agent."), Message.user("Find the bug.")]
    for n in range(reads):
        call = ToolCallPart(f"c{n}", "Read", {"file_path": f"src/f{n}.py"})
        history.append(Message("assistant", (TextPart(f"Reading f{n}."), call)))
        history.append(Message("tool", (ToolResultPart(f"c{n}", "Read", file_text(f"f{n}", lines)),)))
    return history


def result_placeholder(call: ToolCallPart, content: str) -> str:
    return RESULT_PLACEHOLDER.format(call=describe_call(call), tokens=COUNTER.count_text(content))


# --- what it clears and how it says so ---------------------------------------------------------


def test_under_the_high_water_mark_nothing_changes() -> None:
    history = read_session(6)
    processor = ClearToolResults(trigger=Trigger(max_tokens=tokens(history) + 1))
    out, notes = processor.process(history, context())
    assert out is history
    assert notes.replaced == 0 and not notes.details


def test_a_call_makes_placeholders_only_for_what_it_may_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    """No placeholder is made (sized, its call's shell command read) for a result the call may not
    clear: none under the mark, none of the kept results above it. After a load every one would be
    made at once. A later call of the conversation that may clear more makes those then, and gives
    what a call that remembers nothing gives."""
    made: list[str] = []
    make = ClearToolResults._placeholder

    def recording(self: ClearToolResults, call: ToolCallPart, *args: Any) -> str:
        made.append(call.id)
        return make(self, call, *args)

    monkeypatch.setattr(ClearToolResults, "_placeholder", recording)
    history = read_session(12)
    under = ClearToolResults(keep=3, trigger=Trigger(max_tokens=tokens(history) + 1))
    assert under.process(history, context())[0] is history
    assert made == []

    processor = ClearToolResults(keep=3, trigger=Trigger(max_tokens=1_000, low_water=0.1), min_gain=0)
    ctx = context()  # one conversation's calls: the second carries on from the first
    first, _ = processor.process(history[:-4], ctx)  # ten reads
    assert made == [f"c{n}" for n in range(7)]  # the last three stay: never sized
    made.clear()
    second, _ = processor.process(history, ctx)
    assert made == ["c7", "c8"]  # what the two new reads made clearable, only
    fresh = ClearToolResults(keep=3, trigger=Trigger(max_tokens=1_000, low_water=0.1), min_gain=0)
    assert second == fresh.process(history, context())[0]
    assert first == fresh.process(history[:-4], context())[0]


def test_old_results_get_a_placeholder_naming_the_call_and_the_last_ones_stay() -> None:
    history = read_session(10)
    # Fires at the last call only, with a low-water mark out of reach: everything allowed goes.
    processor = ClearToolResults(
        keep=3, trigger=Trigger(max_tokens=tokens(history) - 10, low_water=0.1), min_gain=0
    )
    out, notes = processor.process(history, context())

    assert len(out) == len(history) and [m.role for m in out] == [m.role for m in history]
    results = [i for i, m in enumerate(history) if m.role == "tool"]
    for i in results[-3:]:
        assert out[i] is history[i]
    cleared = [i for i in results if out[i] is not history[i]]
    assert cleared == results[:-3]  # the low-water mark is out of reach: all but the kept ones
    first = out[results[0]].tool_results[0]
    original = history[results[0]].tool_results[0]
    assert first.content == (
        f"[cleared: output of Read(file_path='src/f0.py'), {COUNTER.count_text(original.content):,} tokens; "
        "call the tool again to see it]"
    )
    assert first.tool_call_id == original.tool_call_id and first.name == "Read"
    # The calls (small arguments) and every other message are the very same objects.
    for i, msg in enumerate(history):
        if i not in cleared:
            assert out[i] is msg
    assert notes.replaced == len(cleared)
    assert "cleared 7 tool result(s)" in notes.details[0]


def test_clears_down_to_the_low_water_mark_and_no_further() -> None:
    history = read_session(12)
    total = tokens(history)
    trigger = Trigger(max_tokens=total - 10, low_water=0.8)
    # Without the rewrite condition, which would take the batch further (tested on its own below).
    out, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0, rewrite_ratio=0).process(
        history, context()
    )
    target = trigger.target_tokens(context())
    assert target is not None
    assert tokens(out) <= target
    cleared = [i for i, m in enumerate(out) if m is not history[i]]
    assert cleared, "the trigger fired"
    # One unit fewer would not have reached the target: the batch is the smallest that does.
    last = cleared[-1]
    assert tokens(out[:last] + history[last:]) > target
    # Results after the batch are intact although they are old.
    assert any(
        out[i] is history[i] for i, m in enumerate(history) if m.role == "tool" and i < len(history) - 2
    )


def test_min_gain_refuses_a_small_batch_and_sizes_the_others() -> None:
    history = read_session(8, lines=20)
    result_tokens = COUNTER.count_message(history[3])
    # Clearing one result would bring the history under the low-water mark.
    trigger = Trigger(max_tokens=tokens(history) - 5, low_water=0.99)
    # Without the rewrite condition, which sizes batches too (tested on its own below).
    clear = ClearToolResults(keep=1, trigger=trigger, min_gain=0, rewrite_ratio=0)
    one, _ = clear.process(history, context())
    assert [i for i, m in enumerate(one) if m is not history[i]] == [3]
    # A batch that cannot free min_gain is not made at all...
    out, _ = replace(clear, min_gain=tokens(history)).process(history, context())
    assert out is history
    # ...and one that can is made at least min_gain big, past the low-water mark.
    out, _ = replace(clear, min_gain=2 * result_tokens).process(history, context())
    assert tokens(history) - tokens(out) >= 2 * result_tokens
    assert sum(m is not history[i] for i, m in enumerate(out)) == 3


def test_exclude_tools_are_never_cleared() -> None:
    history = read_session(6)
    history[4] = Message("assistant", (ToolCallPart("c1", "TodoWrite", {"todos": ["x"]}),))
    history[5] = Message("tool", (ToolResultPart("c1", "TodoWrite", file_text("todo")),))
    processor = ClearToolResults(
        keep=1, exclude_tools=("TodoWrite",), trigger=Trigger(max_tokens=100), min_gain=0
    )
    out, _ = processor.process(history, context())
    assert out[5] is history[5]
    assert out[3] is not history[3] and out[7] is not history[7]


def test_pinned_results_and_messages_are_kept_verbatim() -> None:
    history = read_session(6)
    pinned_part = replace(history[3].tool_results[0], pinned=True)
    history[3] = Message("tool", (pinned_part,))
    history[5] = replace(history[5], pinned=True)
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    assert out[3] is history[3] and out[5] is history[5]
    assert out[7] is not history[7]


def test_the_final_request_is_never_cleared_even_with_keep_zero() -> None:
    history = read_session(5)
    out, _ = ClearToolResults(keep=0, trigger=Trigger(max_tokens=50), min_gain=0).process(history, context())
    assert out[-1] is history[-1] and out[-2] is history[-2]
    assert all(out[i] is not history[i] for i in (3, 5, 7, 9))
    # Once the model answered and the user spoke again, that unit may go too.
    later = [*history, Message.assistant("The bug is in f4."), Message.user("Fix it.")]
    out, _ = ClearToolResults(keep=0, trigger=Trigger(max_tokens=50), min_gain=0).process(later, context())
    assert out[11] is not later[11]


def test_keep_tokens_keeps_a_tail_intact() -> None:
    history = read_session(10)
    tail = tokens(history[-6:])
    processor = ClearToolResults(keep=0, keep_tokens=tail, trigger=Trigger(max_tokens=100), min_gain=0)
    out, _ = processor.process(history, context())
    assert all(out[i] is history[i] for i in range(len(history) - 6, len(history)))
    assert out[3] is not history[3]


def test_message_count_trigger_keeps_the_results_of_the_last_messages() -> None:
    history = read_session(10)  # 22 messages
    # Without the rewrite condition, which would take the batch further (tested on its own below).
    processor = ClearToolResults(
        keep=0, trigger=Trigger(max_messages=20, low_water=0.5), min_gain=0, rewrite_ratio=0
    )
    out, _ = processor.process(history, context())
    changed = [i for i, m in enumerate(out) if m is not history[i]]
    assert changed and max(changed) < len(history) - 10
    assert (
        ClearToolResults(keep=0, trigger=Trigger(max_messages=30)).process(history, context())[0] is history
    )


def test_parallel_calls_are_cleared_as_one_unit() -> None:
    history = [Message.user("Read both.")]
    calls = (
        ToolCallPart("a", "Read", {"file_path": "a.py"}),
        ToolCallPart("b", "Read", {"file_path": "b.py"}),
    )
    history.append(Message("assistant", calls))
    history.append(Message("tool", (ToolResultPart("a", "Read", file_text("a")),)))
    history.append(Message("tool", (ToolResultPart("b", "Read", file_text("b")),)))
    history += read_session(3)[2:]
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    assert out[2].tool_results[0].content == result_placeholder(calls[0], file_text("a"))
    assert out[3].tool_results[0].content == result_placeholder(calls[1], file_text("b"))
    assert check_neutral(out) == []


# --- tool-call arguments -----------------------------------------------------------------------


def write_session() -> list[Message]:
    big = file_text("new_module", 80)
    history = [Message.user("Write the module, then edit it.")]
    history.append(Message("assistant", (ToolCallPart("w", "Write", {"file_path": "m.py", "content": big}),)))
    history.append(Message("tool", (ToolResultPart("w", "Write", "File created successfully at: m.py"),)))
    edit = {
        "file_path": "m.py",
        "old_string": file_text("old", 15),
        "new_string": file_text("new", 15),
        "n": 1,
    }
    history.append(Message("assistant", (ToolCallPart("e", "Edit", edit),)))
    history.append(Message("tool", (ToolResultPart("e", "Edit", "The file m.py has been updated."),)))
    history += read_session(3)[2:]
    return history


def test_bulky_arguments_of_old_calls_are_cleared_keeping_their_keys() -> None:
    history = write_session()
    processor = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0)
    out, notes = processor.process(history, context())
    write = out[1].tool_calls[0]
    assert isinstance(write.arguments, dict)
    content = history[1].tool_calls[0].arguments_dict()["content"]
    # The write's placeholder keeps the record of what it added: its longest new line.
    line = change_line(history[1].tool_calls[0])
    assert line is not None and line in content
    assert write.arguments == {
        "file_path": "m.py",
        "content": CHANGE_PLACEHOLDER.format(tokens=COUNTER.count_text(content), line=line, head=""),
    }
    edit = out[3].tool_calls[0].arguments_dict()
    assert list(edit) == ["file_path", "old_string", "new_string", "n"]
    assert edit["file_path"] == "m.py" and edit["n"] == 1
    assert edit["old_string"].startswith("[cleared from the history: ")
    assert edit["new_string"].startswith("[cleared from the history: ")
    # One record per call, of the new text (never of the old one), in the first placeholder made.
    new_line = change_line(history[3].tool_calls[0])
    assert new_line is not None and new_line.startswith("new line")
    assert sum(new_line in v for v in edit.values() if isinstance(v, str)) == 1
    assert new_line in edit["new_string"]
    # What a summary reads of the cleared call is the record, not the placeholder.
    assert change_line(out[3].tool_calls[0]) == new_line and change_line(write) == line
    assert not any("`old line" in v for v in edit.values() if isinstance(v, str))
    # Small results (the write's confirmation) are left as they are.
    assert out[2] is history[2] and out[4] is history[4]
    assert "the arguments of 2 tool call(s)" in notes.details[0]

    without, _ = replace(processor, clear_tool_inputs=False).process(history, context())
    assert without[1] is history[1] and without[3] is history[3]
    assert tokens(out) < tokens(without)


def test_a_cleared_failure_keeps_its_error_line_and_a_success_says_nothing_more() -> None:
    history = [Message.user("Run the tests.")]
    trace = "\n".join(f"  File 'src/m.py', line {k}, in f{k}" for k in range(200))
    failure = f"Traceback (most recent call last):\n{trace}\nKeyError: 'missing_key_42'"
    for n, output in enumerate([failure, file_text("ok", 200)]):
        call = ToolCallPart(f"b{n}", "Bash", {"command": f"pytest tests/test_{n}.py"})
        history.append(Message("assistant", (call,)))
        history.append(Message("tool", (ToolResultPart(f"b{n}", "Bash", output),)))
    history += read_session(3)[2:]
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    failed, passed = out[2].parts[0].content, out[4].parts[0].content
    assert failed.startswith("[cleared: output of Bash(command='pytest tests/test_0.py') (failed: ")
    assert "KeyError: 'missing_key_42'" in failed and "\n" not in failed
    assert passed == RESULT_PLACEHOLDER.format(
        call="Bash(command='pytest tests/test_1.py')", tokens=COUNTER.count_text(file_text("ok", 200))
    )
    # A placeholder with an error line is still recognised as one: clearing again changes nothing.
    again, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(out, context())
    assert again[2] is out[2]


def test_arguments_given_as_a_json_string_stay_a_json_string() -> None:
    history = write_session()
    raw = json.dumps(history[1].tool_calls[0].arguments)
    history[1] = Message("assistant", (replace(history[1].tool_calls[0], arguments=raw),))
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    cleared = out[1].tool_calls[0].arguments
    assert isinstance(cleared, str)
    parsed = json.loads(cleared)
    assert set(parsed) == {"file_path", "content"} and parsed["content"].startswith(
        "[cleared from the history"
    )


def test_arguments_that_are_not_a_json_object_are_left_alone() -> None:
    history = write_session()
    text = "*** Begin Patch\n" + file_text("patch", 80)
    history[1] = Message("assistant", (ToolCallPart("w", "apply_patch", text),))
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    assert out[1] is history[1]


def test_nested_argument_values_are_cleared_in_place() -> None:
    edits = [
        {"old_string": file_text("o", 12), "new_string": file_text("n", 12)},
        {"old_string": "a", "new_string": "b"},
    ]
    history = [Message.user("Edit.")]
    history.append(
        Message("assistant", (ToolCallPart("m", "MultiEdit", {"file_path": "x.py", "edits": edits}),))
    )
    history.append(Message("tool", (ToolResultPart("m", "MultiEdit", "Applied 2 edits."),)))
    history += read_session(3)[2:]
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    args = out[1].tool_calls[0].arguments_dict()
    assert args["file_path"] == "x.py" and len(args["edits"]) == 2
    assert args["edits"][0]["old_string"].startswith("[cleared from the history")
    assert args["edits"][1] == {"old_string": "a", "new_string": "b"}
    assert edits[0]["old_string"] == file_text("o", 12)  # the input is never mutated


@pytest.mark.parametrize(
    ("call", "described"),
    [
        (ToolCallPart("1", "Read", {"file_path": "a.py", "offset": 10}), "Read(file_path='a.py')"),
        (
            ToolCallPart("2", "str_replace_editor", {"command": "view", "path": "/repo/a.py"}),
            "str_replace_editor(path='/repo/a.py', command='view')",
        ),
        (
            ToolCallPart("3", "bash", {"command": "cat > x.py << 'EOF'\nprint(1)\nEOF"}),
            "bash(command=\"cat > x.py << 'EOF'…\")",
        ),
        (ToolCallPart("4", "bash", {"command": "x" * 100}), f"bash(command='{'x' * 80}…')"),
        (ToolCallPart("5", "TaskOutput", {"task_id": "t1", "block": True}), "TaskOutput(task_id='t1')"),
        (ToolCallPart("6", "EnterPlanMode", {}), "EnterPlanMode()"),
        (ToolCallPart("7", "raw", "not json"), "raw()"),
    ],
)
def test_describe_call(call: ToolCallPart, described: str) -> None:
    assert describe_call(call) == described


# --- determinism, idempotence, batches ---------------------------------------------------------


def test_same_history_same_output_and_a_cleared_history_is_left_alone() -> None:
    history = write_session() + read_session(6)[2:]
    processor = ClearToolResults(keep=2, trigger=Trigger(max_tokens=tokens(history) // 2), min_gain=0)
    first, _ = processor.process(history, context())
    again, _ = ClearToolResults(keep=2, trigger=Trigger(max_tokens=tokens(history) // 2), min_gain=0).process(
        list(history), context()
    )
    assert first == again and first is not history
    twice, notes = processor.process(first, context())
    assert twice is first and notes.replaced == 0
    # Even a trigger that fires on the cleared history finds nothing left to gain in the cleared part.
    tighter, _ = replace(processor, trigger=Trigger(max_tokens=50)).process(first, context())
    assert all(tighter[i] is first[i] for i in range(len(first)) if first[i] is not history[i])


def test_replayed_call_by_call_it_clears_in_a_few_big_batches() -> None:
    history = read_session(40)
    ctx = context(20_000)
    processor = ClearToolResults(keep=3, trigger=Trigger(max_fraction=0.5, low_water=0.6), min_gain=1_000)
    outputs = view_only_outputs(processor, history, ctx)
    high = processor.trigger.high_tokens(ctx)
    assert high is not None
    events = 0
    for t in range(1, len(outputs)):
        before, now = outputs[t - 1], outputs[t]
        if now[: len(before)] == before:
            continue  # append-only between batches
        events += 1
        grown = before + now[len(before) :]
        assert tokens(grown) > high, "an edit happens only when the history crosses the high-water mark"
        assert tokens(grown) - tokens(now) >= 1_000, "and frees at least min_gain"
    # Each batch goes down to the low-water mark, so the next one waits for the history to grow
    # by the whole band between the marks.
    target = processor.trigger.target_tokens(ctx)
    assert target is not None
    assert 2 <= events <= tokens(history) // (high - target)
    assert max(tokens(o) for o in outputs) <= high + 2 * COUNTER.count_message(history[3])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"keep": -1}, "keep must be a non-negative int"),
        ({"keep": 1.5}, "keep must be a non-negative int"),
        ({"keep_tokens": -5}, "keep_tokens must be a non-negative int"),
        ({"min_tokens": True}, "min_tokens must be a non-negative int"),
        ({"min_gain": -1}, "min_gain must be a non-negative int"),
    ],
)
def test_bad_numbers_are_named(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ClearToolResults(**kwargs)


def test_bad_types_are_named() -> None:
    with pytest.raises(TypeError, match="exclude_tools must be a collection of tool names, got str 'Read'"):
        ClearToolResults(exclude_tools="Read")
    with pytest.raises(TypeError, match=r"exclude_tools\[1\] must be a tool name \(str\), got int"):
        ClearToolResults(exclude_tools=["Read", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="trigger must be a historykit Trigger, got dict"):
        ClearToolResults(trigger={"max_tokens": 5})  # type: ignore[arg-type]


def test_run_reports_what_it_cleared() -> None:
    history = read_session(10)
    result = ClearToolResults(trigger=Trigger(max_fraction=0.5), min_gain=0).run(
        history, context_window=4_000
    )
    step = result.report.steps[0]
    assert step.processor == "ClearToolResults" and step.notes.replaced > 0
    assert step.tokens_after < step.tokens_before
    assert f"{step.tokens_before - step.tokens_after:,} tokens freed" in step.notes.details[0]


# --- real frameworks -----------------------------------------------------------------------------


@pytest.mark.pydantic_ai
def test_pydantic_ai_agent_sees_placeholders_and_stays_small() -> None:
    from pydantic_ai import messages as pai

    clear = ClearToolResults(keep=2, trigger=Trigger(max_tokens=6_000, low_water=0.5), min_gain=500)
    paths = [f"src/m{step}.py" for step in range(30)]
    agent, seen = file_reading_agent(clear, paths, lambda path: file_text(path, 40))

    result = agent.run_sync("Read every module.")
    assert result.output == "done"
    counter = TokenCounter()
    sizes = [counter.count(m, use_usage=False).tokens for m in seen]
    assert max(sizes) < 6_000 + 3 * counter.count_text(file_text("src/m0.py", 40))
    texts = [
        str(p.content) for m in seen[-1] for p in getattr(m, "parts", ()) if isinstance(p, pai.ToolReturnPart)
    ]
    assert texts[0].startswith("[cleared: output of read_file(path='src/m0.py'), ")
    assert texts[-1] == file_text("src/m29.py", 40)
    # The processed history the model saw grew by appending between batches.
    batches = sum(1 for a, b in pairwise(seen) if b[: len(a)] != a)
    assert 1 <= batches <= 8


# --- a batch pays for the cache rewrite it causes ---------------------------------------------


def assert_pays_for_its_rewrite(history: list[Message], out: list[Message], ratio: float) -> None:
    """`out` frees at least `ratio` times what it sends anew: from its first edit to the end."""
    first = next(i for i, m in enumerate(out) if m is not history[i])
    freed = tokens(history) - tokens(out)
    assert freed > 0
    assert freed >= ratio * tokens(out[first:])


def behind_a_long_tail(tail_lines: int) -> list[Message]:
    """Two old reads, then one read whose result (kept) is `tail_lines` lines long."""
    history = read_session(2, lines=40)
    call = ToolCallPart("big", "Read", {"file_path": "src/big.py"})
    history.append(Message("assistant", (TextPart("Reading big."), call)))
    history.append(Message("tool", (ToolResultPart("big", "Read", file_text("big", tail_lines)),)))
    return history


def test_a_batch_that_frees_less_than_the_tail_it_makes_the_cache_write_again_is_not_made() -> None:
    """Clearing the two old reads frees about a fifth of what the provider would then write again
    (the big result after them): the batch costs more than it saves, so nothing is cleared."""
    history = behind_a_long_tail(400)
    trigger = Trigger(max_tokens=tokens(history) - 10, low_water=0.1)
    out, notes = ClearToolResults(keep=1, trigger=trigger, min_gain=0).process(history, context())
    assert out is history and notes.replaced == 0
    # Without the condition the same call clears both...
    loose, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0, rewrite_ratio=0).process(
        history, context()
    )
    assert [i for i, m in enumerate(loose) if m is not history[i]] == [3, 5]
    # ...and a ratio the batch does meet lets it through.
    freed = tokens(history) - tokens(loose)
    rewritten = tokens(loose[3:])
    ratio = freed / rewritten
    met, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0, rewrite_ratio=ratio).process(
        history, context()
    )
    assert met == loose
    missed, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0, rewrite_ratio=ratio * 1.01).process(
        history, context()
    )
    assert missed is history


def test_a_batch_behind_a_short_tail_pays_and_is_made() -> None:
    history = behind_a_long_tail(10)
    trigger = Trigger(max_tokens=tokens(history) - 10, low_water=0.1)
    out, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0).process(history, context())
    assert [i for i, m in enumerate(out) if m is not history[i]] == [3, 5]
    assert_pays_for_its_rewrite(history, out, 1.0)


def test_the_rewrite_condition_takes_the_batch_past_the_low_water_mark_until_it_pays() -> None:
    """Reaching the low-water mark with the oldest result alone would not pay for rewriting the
    rest: the batch grows until it does, and no further."""
    history = read_session(12)
    trigger = Trigger(max_tokens=tokens(history) - 10, low_water=0.95)
    out, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0).process(history, context())
    cleared = [i for i, m in enumerate(out) if m is not history[i]]
    assert len(cleared) > 1
    assert_pays_for_its_rewrite(history, out, 1.0)
    # One unit fewer would not have paid.
    fewer = out[: cleared[-1]] + history[cleared[-1] :]
    assert tokens(history) - tokens(fewer) < tokens(fewer[cleared[0] :])


def test_a_history_over_the_window_is_cleared_whatever_the_rewrite_costs() -> None:
    history = behind_a_long_tail(400)
    trigger = Trigger(max_tokens=tokens(history) - 10, low_water=0.1)
    window = tokens(history) - 1
    out, _ = ClearToolResults(keep=1, trigger=trigger, min_gain=0).process(history, context(window))
    assert [i for i, m in enumerate(out) if m is not history[i]] == [3, 5]


@pytest.mark.parametrize("ratio", [-0.5, float("nan"), float("inf"), "1", True, None])
def test_rewrite_ratio_must_be_a_finite_number_at_least_zero(ratio: Any) -> None:
    with pytest.raises(ValueError, match=r"rewrite_ratio must be a finite number >= 0, got "):
        ClearToolResults(rewrite_ratio=ratio)


# --- the corpus ----------------------------------------------------------------------------------


def test_corpus_session(corpus_session: list[Message], record_property: Any) -> None:
    ctx = context(32_000)
    before = tokens(corpus_session)
    # Every session over the mark has something to clear, results alone too (without the rewrite
    # condition: whether a batch pays for its rewrite is checked with the default below).
    out, _ = ClearToolResults(rewrite_ratio=0).process(corpus_session, ctx)
    results_only, _ = ClearToolResults(clear_tool_inputs=False, rewrite_ratio=0).process(corpus_session, ctx)
    if not check_neutral(corpus_session):
        assert check_neutral(out) == [] and check_neutral(results_only) == []
    assert_clearing_only(corpus_session, out)
    assert_clearing_only(corpus_session, results_only)
    freed, freed_results = before - tokens(out), before - tokens(results_only)
    record_property("tokens_before", before)
    record_property("tokens_freed", freed)
    record_property("tokens_freed_results_only", freed_results)
    high = ClearToolResults().trigger.high_tokens(ctx)
    assert high is not None
    if before > high:
        assert freed > 0 and freed_results > 0
    assert freed >= freed_results
    paying, _ = ClearToolResults().process(corpus_session, ctx)
    assert_clearing_only(corpus_session, paying)
    if paying is not corpus_session and before <= ctx.context_window:
        assert_pays_for_its_rewrite(corpus_session, paying, 1.0)


def test_corpus_session_persistent_and_view_only_agree_call_by_call(corpus_session: list[Message]) -> None:
    assert_modes_agree(ClearToolResults(), ClearToolResults(), corpus_session, context(32_000))


def test_claude_code_writes_and_edits_weigh_more_than_the_results_left(
    largest_corpus_session: list[Message],
) -> None:
    # The largest session is a Claude Code main thread: once old results are cleared, the file
    # contents carried by Write/Edit arguments are the biggest thing left.
    ctx = context(32_000)
    results_only, _ = ClearToolResults(clear_tool_inputs=False).process(largest_corpus_session, ctx)
    breakdown = COUNTER.breakdown(results_only)
    assert breakdown["tool_call"] > breakdown["tool_result"]
    out, _ = ClearToolResults().process(largest_corpus_session, ctx)
    assert tokens(results_only) - tokens(out) > 10_000


def assert_clearing_only(original: list[Message], out: list[Message]) -> None:
    """`out` is `original` with some results/argument values replaced by placeholders, nothing else."""
    assert len(out) == len(original)
    for before, after in zip(original, out):
        if after is before:
            continue
        assert after.role == before.role and after.pinned == before.pinned and not before.pinned
        assert len(after.parts) == len(before.parts)
        for p, q in zip(before.parts, after.parts):
            if p is q:
                continue
            assert not p.pinned and type(p) is type(q)
            if isinstance(p, ToolResultPart):
                assert isinstance(q, ToolResultPart)
                assert (q.tool_call_id, q.name, q.is_error) == (p.tool_call_id, p.name, p.is_error)
                assert q.content.startswith("[cleared: output of ") and q.content != p.content
            else:
                assert isinstance(p, ToolCallPart) and isinstance(q, ToolCallPart)
                assert (q.id, q.name) == (p.id, p.name)
                assert_same_shape(p.arguments_dict(), q.arguments_dict())


def assert_same_shape(before: Any, after: Any) -> None:
    if isinstance(before, dict):
        assert isinstance(after, dict) and list(after) == list(before)
        for key in before:
            assert_same_shape(before[key], after[key])
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) == len(before)
        for a, b in zip(before, after):
            assert_same_shape(a, b)
    elif after != before:
        assert isinstance(before, str) and after.startswith("[cleared from the history: ")


# --- properties on random histories --------------------------------------------------------------

configs = st.builds(
    lambda keep, fraction, low, min_gain, min_tokens, inputs: ClearToolResults(
        keep=keep,
        trigger=Trigger(max_fraction=fraction, low_water=low),
        min_gain=min_gain,
        min_tokens=min_tokens,
        clear_tool_inputs=inputs,
    ),
    st.integers(0, 4),
    st.floats(0.2, 1.0),
    st.floats(0.1, 1.0),
    st.integers(0, 400),
    st.integers(0, 150),
    st.booleans(),
)
windows = st.integers(300, 6_000)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(), configs, windows)
def test_random_histories_keep_every_rule(
    history: list[Message], processor: ClearToolResults, window: int
) -> None:
    ctx = context(window)
    out, _ = processor.process(history, ctx)
    event("edited" if out is not history else "unchanged")
    # Valid stays valid; final request and the current cycle's thinking are untouched.
    assert_in_place_edit_rules(history, out)
    assert_clearing_only(history, out)
    # So is the system prompt.
    assert all(a is b for a, b in zip(out, history) if a.role == "system")
    # The last `keep` results are intact.
    results = [
        (i, j) for i, m in enumerate(history) for j, p in enumerate(m.parts) if isinstance(p, ToolResultPart)
    ]
    for i, j in results[len(results) - processor.keep :] if processor.keep else []:
        assert out[i].parts[j] is history[i].parts[j]
    # One boundary: everything clearable before it is cleared, nothing after it.
    everything, _ = replace(processor, trigger=Trigger(max_tokens=1), min_gain=0, keep=0).process(
        history, ctx
    )
    changed = [i for i in range(len(out)) if out[i] is not history[i]]
    if changed:
        boundary = changed[-1] + 1
        while boundary < len(out) and history[boundary].role != "assistant":
            boundary += 1
        assert out[:boundary] == everything[:boundary]
        assert all(out[i] is history[i] for i in range(boundary, len(out)))


_EDIT_TOO_SHORT_FOR_ITS_RECORD = [
    Message("user", (TextPart("Fix the bug in src/app.py. "),)),
    Message("assistant", (ToolCallPart("call_0", "Read", {"file_path": "src/app.py"}),)),
    Message("tool", (ToolResultPart("call_0", "Read", "error", pinned=True),)),
    Message(
        "assistant",
        (
            ToolCallPart(
                "call_1",
                "Edit",
                {
                    "file_path": "src/app.py",
                    "old_string": "error\nerror\ndef self path test error self\n"
                    "test value None class path import self import return None self path\n"
                    "= None import self return = return assert value test path return",
                    "new_string": "error error\ndef self path test error self\n"
                    "test value None class path import\nself import return None self path\n"
                    "= None import self return = return assert value",
                },
            ),
        ),
    ),
    Message("tool", (ToolResultPart("call_1", "Edit", "error", pinned=True),)),
    Message("user", (TextPart("error"),), pinned=True),
    Message("assistant", (TextPart("Done."),)),
]
"""Found by the test below: the new text of an edit was too short to carry the change's record, so it
was left as it was and the old text took the record; a second pass then read another record from it
and cleared it: not idempotent. Now it is cleared plainly and the old text takes the record."""


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=6, max_steps=5), configs, windows)
@example(
    _EDIT_TOO_SHORT_FOR_ITS_RECORD,
    ClearToolResults(keep=0, min_tokens=0, min_gain=0, trigger=Trigger(max_fraction=0.5, low_water=1.0)),
    300,
)
def test_random_histories_persistent_equals_view_only_and_never_trickles(
    history: list[Message], processor: ClearToolResults, window: int
) -> None:
    ctx = context(window)
    high = processor.trigger.high_tokens(ctx)
    assert high is not None
    min_gain = processor.min_gain or 0
    for step in replay_both_modes(processor, processor, history, ctx):
        assert_idempotent(processor, step.output, ctx)  # nothing left to clear, the very same list
        if step.grown is not None:
            assert tokens(step.grown) > high
            assert tokens(step.grown) - tokens(step.output) >= max(min_gain, 1)
            event("a batch between two calls")


@given(st.text(max_size=120), st.integers(1, 200))
def test_a_text_skipped_as_too_short_is_under_min_tokens_for_the_real_tokenizer(
    text: str, min_tokens: int
) -> None:
    from historykit.processors._clear_tool_results import _too_short

    if _too_short(text, min_tokens):
        assert COUNTER.count_text(text) < min_tokens


def test_a_cleared_script_keeps_its_first_line_and_is_read_as_no_command() -> None:
    """What the agent ran stays readable after its script is cleared (found by the quality
    benchmark: what the agent did about an error was a long `python -c` script, gone with it), and
    the quoted line is never parsed as a command that still writes a file."""
    from historykit.processors._file_reads import file_accesses

    script = 'cd /testbed && python -c "\n' + "\n".join(f"print({n} * 'x' + `y`)" for n in range(150)) + '\n"'
    first = "cat > notes.txt <<'EOF'"
    writer = first + "\n" + "\n".join(f"note {n}: a line long enough to count" for n in range(150)) + "\nEOF"
    history = [
        Message.user("task"),
        Message.assistant("", [ToolCallPart("1", "bash", {"command": script})]),
        Message("tool", (ToolResultPart("1", "bash", "ok"),)),
        Message.assistant("", [ToolCallPart("2", "bash", {"command": writer, "description": "notes.txt"})]),
        Message("tool", (ToolResultPart("2", "bash", "ok"),)),
        Message.user("go on"),
        Message.assistant("", [ToolCallPart("3", "bash", {"command": "ls"})]),
        Message("tool", (ToolResultPart("3", "bash", "notes.txt"),)),
    ]
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    ran = out[1].tool_calls[0].arguments_dict()["command"]
    assert ran.startswith("[cleared from the history: ")
    assert ' tokens beginning `cd /testbed && python -c "`; the call was made' in ran
    wrote = out[3].tool_calls[0]
    assert (
        " beginning `cat > notes.txt <<'EOF'` of a call that wrote notes.txt, which added `note 100: a "
        in (wrote.arguments_dict()["command"])
    )
    # The recogniser reads the same accesses from the placeholders as from the scripts (the writer's
    # from the placeholder's wording, not from the quoted line, which is no command any more).
    calls = [out[1].tool_calls[0], wrote]
    assert file_accesses(calls) == file_accesses([history[1].tool_calls[0], history[3].tool_calls[0]])
    quoted = (
        "[cleared from the history: 500 tokens beginning `cat > x.py <<'EOF'`; the call was made with the "
        "full value]"
    )
    assert file_accesses([ToolCallPart("9", "bash", {"command": quoted})]) == [None]
    assert file_accesses([ToolCallPart("9", "shell", {"command": ["bash", "-lc", quoted]})]) == [None]
    # Backticks of the script become quotes: the head cannot end the quote early.
    assert "`y`" not in ran


def test_a_call_whose_script_was_cleared_is_described_by_its_first_line() -> None:
    """A summary's recall items and later placeholders name such a call by what it ran, not by the
    start of its placeholder (found by the quality benchmark)."""
    script = "cat > test_fix.py << 'EOF'\n" + "x = 1\n" * 300 + "EOF"
    call = ToolCallPart("1", "bash", {"command": script})
    history = [
        Message.user("task"),
        Message.assistant("", [call]),
        Message("tool", (ToolResultPart("1", "bash", "ok"),)),
        Message.user("go on"),
        Message.assistant("", [ToolCallPart("2", "bash", {"command": "ls"})]),
        Message("tool", (ToolResultPart("2", "bash", "test_fix.py"),)),
    ]
    out, _ = ClearToolResults(keep=1, trigger=Trigger(max_tokens=100), min_gain=0).process(history, context())
    cleared = out[1].tool_calls[0]
    assert cleared.arguments_dict()["command"].startswith("[cleared from the history: ")
    assert describe_call(cleared) == describe_call(call) == "bash(command=\"cat > test_fix.py << 'EOF'…\")"


def test_a_call_is_described_with_its_backslashes_as_the_agent_wrote_them() -> None:
    """`repr` doubled them (`grep "a\\\\|b"`): the model and the summary's recall items read a command
    that was never run (found by the quality benchmark)."""
    call = ToolCallPart("1", "bash", {"command": 'grep -r "struct.pack\\|pack" src | head'})
    assert describe_call(call) == "bash(command='grep -r \"struct.pack\\|pack\" src | head')"
    tab = ToolCallPart("2", "bash", {"command": "printf 'a\\tb'\tx"})
    assert describe_call(tab) == "bash(command=" + repr("printf 'a\\tb'\tx") + ")"  # a control character


def test_a_call_with_both_kinds_of_quote_is_triple_quoted_as_the_agent_wrote_it() -> None:
    """`repr` escaped one kind of quote and doubled every backslash: the description read a
    command that was never run (found by the cost branch's replays)."""
    command = "grep -n 'it\\|x' \"a b.py\" | head"
    assert describe_call(ToolCallPart("1", "bash", {"command": command})) == f"bash(command='''{command}''')"
    # Ending in a single quote, it takes double triple quotes (''' would close early).
    command = "echo \"x\" 'y'"
    assert describe_call(ToolCallPart("2", "bash", {"command": command})) == f'bash(command="""{command}""")'
    # Text no triple quote can hold is written as `repr` writes it.
    command = "echo ''' \"\"\" done"
    assert describe_call(ToolCallPart("3", "bash", {"command": command})) == f"bash(command={command!r})"
