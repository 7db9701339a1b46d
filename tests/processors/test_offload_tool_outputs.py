"""`OffloadToolOutputs` and the recall tool's ranges and search: a large output is shortened to its
head and tail when it arrives, with a note naming the original's handle; recall reads it back whole,
by lines, or by the lines that contain a text; random histories keep every rule in both modes."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, Recall
from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._reading import Reading
from historykit._recall import recall_handle
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.processors import ClearToolResults, OffloadToolOutputs, Repair, Trigger
from historykit.processors._offload_tool_outputs import is_offloaded

from ..strategies import examples, neutral_histories
from .support import (
    COUNTER,
    FAST,
    assert_idempotent,
    assert_in_place_edit_rules,
    assert_modes_agree,
    context,
    tokens,
)

LOG = "\n".join(f"tests/test_mod.py::test_case_{i} PASSED [{i % 100:>3}%]" for i in range(2_000))


def session(output: str, tool: str = "Bash") -> list[Message]:
    """A task, one tool call and its output (the final request)."""
    return [
        Message("user", (TextPart("Run the tests."),)),
        Message("assistant", (ToolCallPart("c1", tool, {"command": "pytest"}),)),
        Message("tool", (ToolResultPart("c1", tool, output),)),
    ]


def shortened_content(messages: list[Message]) -> str:
    (part,) = messages[-1].parts
    assert isinstance(part, ToolResultPart)
    return part.content


def test_a_large_output_keeps_its_head_and_tail_and_names_its_handle() -> None:
    offload = OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000, recall_tool="recall")
    history = session(LOG)

    out, notes = offload.process(history, context())

    text = shortened_content(out)
    lines, shown = LOG.split("\n"), text.split("\n")
    note = shown[-1]
    assert is_offloaded(text) and notes.replaced == 1
    gap = next(i for i, line in enumerate(shown) if line.startswith("[… "))
    assert shown[:gap] == lines[:gap] and gap > 10  # the head: whole lines from the start
    tail = shown[gap + 1 : -1]
    assert tail == lines[len(lines) - len(tail) :] and len(tail) > 5  # the tail: whole lines to the end
    first, last = gap + 1, len(lines) - len(tail)
    assert f"lines {first:,}-{last:,} are left out above" in note
    assert f"start_line={first}, end_line={last}" in note
    assert note.endswith(
        f"recall(handle='{recall_handle(LOG)}') returns all of it; with start_line={first}, end_line={last} "
        'those lines, with grep="text" the lines that contain a text]'
    )
    assert 900 <= COUNTER.count_text(text) <= 1_300  # about keep_tokens, note included
    assert out[:2] == history[:2] and all(a is b for a, b in zip(out[:2], history[:2]))


def test_without_the_recall_tool_the_note_says_to_run_the_tool_again() -> None:
    out, _ = OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000).process(session(LOG), context())
    assert shortened_content(out).endswith("run Bash again with a narrower range to read them]")


def test_an_output_of_a_few_long_lines_is_cut_at_characters() -> None:
    blob = "{" + ", ".join(f'"key_{i}": "value {i}"' for i in range(6_000)) + "}"
    offload = OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000, recall_tool="recall")

    text = shortened_content(offload.process(session(blob), context())[0])

    head, gap, rest = text.partition("\n[… ")
    tail = rest.split(" …]\n", 1)[1].rsplit("\n", 1)[0]
    assert gap and blob.startswith(head) and blob.endswith(tail)
    start = len(head)
    assert f"characters {start:,}-{len(blob) - len(tail):,} are left out above" in text
    assert f"with offset={start} from there on" in text
    page = Recall(max_chars=50).lookup(recall_handle(blob), start, history=session(blob))
    assert page.startswith(blob[start : start + 50])


def test_what_it_never_touches() -> None:
    offload = OffloadToolOutputs(
        max_tokens=4_000, keep_tokens=1_000, exclude_tools=("Read",), recall_tool="recall"
    )
    small = session("3 passed in 0.41s")
    pinned = session(LOG)
    pinned[-1] = Message("tool", (ToolResultPart("c1", "Bash", LOG, pinned=True),))
    pinned_message = session(LOG)
    pinned_message[-1] = Message("tool", (ToolResultPart("c1", "Bash", LOG),), pinned=True)
    for history in (small, pinned, pinned_message, session(LOG, tool="Read"), session(LOG, tool="recall")):
        out, notes = offload.process(history, context())
        assert out is history and notes.replaced == 0


def test_it_is_idempotent_and_agrees_in_both_modes() -> None:
    offload = OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000, recall_tool="recall")
    history = [*session(LOG), Message("assistant", (TextPart("One failed."),))]
    history += [Message("user", (TextPart("Again."),)), *session(LOG + "\nagain")[1:]]
    out, _ = offload.process(history, context())
    assert_idempotent(offload, out, context())
    assert_in_place_edit_rules(history, out, shortens=True)
    assert_modes_agree(offload, offload, history, context())


def test_recall_reads_lines_and_searches_the_original() -> None:
    history = session(LOG)
    handle = recall_handle(LOG)
    recall = Recall(max_chars=400)

    lines = recall.lookup(handle, start_line=10, end_line=12, history=history)
    assert lines.split("\n") == [
        f"    10\t{LOG.split(chr(10))[9]}",
        f"    11\t{LOG.split(chr(10))[10]}",
        f"    12\t{LOG.split(chr(10))[11]}",
        "[recall: lines 10-12 of 2,000; the end]",
    ]
    page = Recall().lookup(handle, start_line=1_990, history=history)
    assert page.endswith("[recall: lines 1,990-2,000 of 2,000; the end]")
    more = recall.lookup(handle, start_line=100, history=history)
    next_line = int(re.search(r"start_line=(\d+)\) returns the next part\]\Z", more)[1])  # type: ignore[index]
    assert more.split("\n")[-2].startswith(f"{next_line - 1:>6}\t")
    assert len(more) <= 400 + 120

    found = recall.lookup(handle, grep="TEST_CASE_1999 ", history=history)
    assert (
        found == f"  2000\t{LOG.split(chr(10))[-1]}\n"
        "[recall: 1 matching line(s) shown, lines 1-2,000 of 2,000 searched; the end]"
    )
    many = recall.lookup(handle, grep="[ 50%]", history=history)
    assert "matching line(s) shown" in many and "more from line" in many
    rest = int(re.search(r"start_line=(\d+)\) shows them\]\Z", many)[1])  # type: ignore[index]
    after = recall.lookup(handle, grep="[ 50%]", start_line=rest, history=history)
    assert after.split("\n")[0] == f"{rest:>6}\t{LOG.split(chr(10))[rest - 1]}"
    none = recall.lookup(handle, grep="FAILED", history=history)
    assert none == f"[recall: no line of the output '{handle}' (lines 1-2,000 of 2,000) contains 'FAILED']"


@pytest.mark.parametrize(
    ("arguments", "answer"),
    [
        (
            {"offset": 5, "start_line": 2},
            "[recall: pass offset (characters) or start_line/end_line/grep (lines), not both]",
        ),
        ({"start_line": 0}, "[recall: start_line must be a line number (1 or more), got 0]"),
        ({"end_line": "ten"}, "[recall: end_line must be a line number (1 or more), got 'ten']"),
        ({"start_line": 9, "end_line": 3}, "[recall: end_line 3 is before start_line 9]"),
        ({"grep": ""}, "[recall: grep must be a text of 1 to 200 characters, got '']"),
        (
            {"grep": "x" * 201},
            "[recall: grep must be a text of 1 to 200 characters, got '" + "x" * 38 + "…]",
        ),
        (
            {"start_line": 5_000},
            "[recall: the output '{handle}' has 2,000 lines; line 5,000 is past its end]",
        ),
    ],
)
def test_a_bad_range_or_search_is_answered_not_raised(arguments: dict[str, object], answer: str) -> None:
    handle = recall_handle(LOG)
    assert Recall().lookup(handle, history=session(LOG), **arguments) == answer.format(handle=handle)  # type: ignore[arg-type]


def test_a_reading_of_the_whole_output_is_the_output_itself() -> None:
    reading = Reading.checked(0, None, None, None)
    assert isinstance(reading, Reading)
    assert reading.answer("recall", "0123456789", LOG, 10**6) is LOG


def test_clearing_an_offloaded_output_names_the_original() -> None:
    """Later, `ClearToolResults` clears the shortened output: its placeholder names the whole
    output's handle (the one the note named), and the pipeline hands that original to recall."""
    pipeline = Pipeline(
        [
            OffloadToolOutputs(max_tokens=4_000, keep_tokens=1_000, recall_tool="recall"),
            ClearToolResults(
                keep=0, min_tokens=10, min_gain=0, trigger=Trigger(max_tokens=100), recall_tool="recall"
            ),
            Repair(),
        ]
    )
    history = [
        *session(LOG),
        Message("assistant", (TextPart("One test file."),)),
        Message("user", (TextPart("Thanks."),)),
    ]
    first = pipeline.run(session(LOG), context_window=100_000)
    assert is_offloaded(shortened_content(first.messages))
    later = pipeline.run(
        [*first.messages, *history[3:]], context_window=100_000
    )  # persistent: the stored view
    (cleared,) = later.messages[2].parts
    assert isinstance(cleared, ToolResultPart)
    assert cleared.content.endswith(f"recall(handle='{recall_handle(LOG)}') returns it]")
    assert first.originals == {recall_handle(LOG): LOG}


def test_bad_settings_are_named() -> None:
    with pytest.raises(InvalidArgumentError, match="keep_tokens"):
        OffloadToolOutputs(max_tokens=1_000, keep_tokens=1_000)
    with pytest.raises(ArgumentTypeError, match="exclude_tools"):
        OffloadToolOutputs(exclude_tools="Bash")
    with pytest.raises(InvalidArgumentError, match="recall_tool"):
        OffloadToolOutputs(recall_tool="not a name")


def test_installing_recall_makes_the_note_name_the_tool() -> None:
    offload = OffloadToolOutputs()
    Recall().install([offload])
    assert offload.recall_tool == "recall"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(neutral_histories(max_turns=4, max_steps=4), st.integers(5, 200), st.data())
def test_random_histories_keep_every_rule_in_both_modes(
    history: list[Message], limit: int, data: st.DataObject
) -> None:
    offload = OffloadToolOutputs(
        max_tokens=limit,
        keep_tokens=data.draw(st.integers(1, limit - 1)),
        recall_tool=data.draw(st.sampled_from((None, "recall"))),
    )
    ctx = context(counter=FAST)
    out, _ = offload.process(history, ctx)
    event("shortened" if out is not history else "untouched")
    assert_in_place_edit_rules(history, out, shortens=True)
    assert_idempotent(offload, out, ctx)
    assert_modes_agree(offload, offload, history, ctx)
    assert tokens(out, FAST) <= tokens(history, FAST)
    for before, after in zip(history, out):
        for a, b in zip(before.parts, after.parts):
            if a is b:
                continue
            assert isinstance(a, ToolResultPart) and isinstance(b, ToolResultPart)
            assert FAST.count_text(a.content) > limit and is_offloaded(b.content)
            if offload.recall_tool is not None:  # the note names the original, which recall returns
                assert f"recall(handle='{recall_handle(a.content)}')" in b.content
                assert Recall().lookup(recall_handle(a.content), history=history) == a.content
