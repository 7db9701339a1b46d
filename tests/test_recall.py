"""Recall's handles and lookups (`historykit._recall`), framework-free: the placeholders' handles on
random histories (each maps back to the one original it replaced, the same in both modes and on
every call), the wording without recall, the tool's answers (pages, unknown handles), the originals
persistent mode keeps, and what a recall result is afterwards (cleared like any output, never a read)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline
from historykit._messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from historykit._recall import HANDLE_LENGTH, Recall, handle_in, originals, recall_handle
from historykit.evaluation._matching import handles_named, message_text
from historykit.processors import ClearToolResults, DedupeFileReads, Repair, Summarize, Trigger
from historykit.processors._clear_tool_results import RESULT_PLACEHOLDER, describe_call
from historykit.processors._dedupe_file_reads import NOTICE_PREFIX
from historykit.processors._file_reads import FileRead, file_accesses
from historykit.processors._summary_recall import ensure_recall_section
from tests.processors.support import COUNTER, context, file_text, replay_both_modes, tokens
from tests.strategies import examples, neutral_histories


def recalling_processors(min_tokens: int, keep: int) -> Pipeline:
    """Dedupe and clear as eagerly as they go, both naming the recall tool."""
    return Pipeline(
        [
            DedupeFileReads(min_gain=0, trigger=None, recall_tool="recall"),
            ClearToolResults(
                keep=keep,
                min_tokens=min_tokens,
                min_gain=0,
                trigger=Trigger(max_tokens=1),
                recall_tool="recall",
            ),
        ]
    )


def results_by_call(history: list[Message]) -> dict[str, str]:
    return {p.tool_call_id: p.content for m in history for p in m.tool_results}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=4, max_steps=4), st.integers(1, 60), st.integers(0, 2))
def test_every_handle_maps_back_to_the_one_original_it_replaced(
    history: list[Message], min_tokens: int, keep: int
) -> None:
    raw = results_by_call(history)
    handles: dict[str, str] = {}  # handle -> original, over every call of the conversation
    ctx = context()
    for step in replay_both_modes(
        recalling_processors(min_tokens, keep), recalling_processors(min_tokens, keep), history, ctx
    ):
        for msg in step.output:
            for part in msg.tool_results:
                if part.content == raw[part.tool_call_id]:
                    continue  # not replaced
                handle = handle_in(part.content, "recall")
                assert handle is not None, part.content  # every placeholder and notice names one
                original = raw[part.tool_call_id]
                # The handle is the replaced content's, and the raw history has it under that handle.
                assert handle == recall_handle(original)
                assert originals(handle, history) == [original]
                assert handles.setdefault(handle, original) == original
    # Different outputs, different handles; the same output, one handle.
    assert len(set(handles.values())) == len(handles)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=4, max_steps=4), st.integers(1, 60))
def test_without_recall_no_handle_and_the_wording_is_as_before(
    history: list[Message], min_tokens: int
) -> None:
    deduped = DedupeFileReads(min_gain=0, trigger=None).process(history, context())[0]
    clear = ClearToolResults(keep=0, min_tokens=min_tokens, min_gain=0, trigger=Trigger(max_tokens=1))
    out = clear.process(deduped, context())[0]
    calls = {c.id: c for m in history for c in m.tool_calls}
    for before, after in zip(deduped, out):
        for old, new in zip(before.tool_results, after.tool_results):
            assert "recall(" not in new.content and "recall(" not in old.content
            if new.content != old.content:
                call = calls[new.tool_call_id]
                tokens_ = COUNTER.count_text(old.content)
                assert new.content == RESULT_PLACEHOLDER.format(call=describe_call(call), tokens=tokens_)


NEXT_PART = re.compile(r"recall\(handle='([0-9a-f]+)', offset=(\d+)\) returns the next part")


def read_session(reads: int) -> list[Message]:
    history = [Message.user("Find the bug.")]
    for n in range(reads):
        call = ToolCallPart(f"c{n}", "Read", {"file_path": f"src/f{n % 2}.py"})
        history += [
            Message("assistant", (TextPart(f"Reading f{n % 2}."), call)),
            Message("tool", (ToolResultPart(f"c{n}", "Read", file_text(f"f{n}", 40)),)),
        ]
    return history


def test_placeholders_name_the_tool_and_the_handle_and_are_not_cleared_again() -> None:
    history = read_session(4)
    clear = ClearToolResults(keep=1, min_gain=0, trigger=Trigger(max_tokens=1), recall_tool="fetch_back")
    out, _ = clear.process(history, context())
    first = out[2].tool_results[0]
    original = history[2].tool_results[0].content
    handle = recall_handle(original)
    assert len(handle) == HANDLE_LENGTH
    assert first.content == (
        f"[cleared: output of Read(file_path='src/f0.py'), {COUNTER.count_text(original):,} tokens; "
        f"fetch_back(handle='{handle}') returns it]"
    )
    again, notes = clear.process(out, context())
    assert again == out and notes.replaced == 0


def test_a_re_pointed_notice_keeps_the_handle_of_the_copy_it_replaced() -> None:
    """Persistent mode: the second call re-points the first notice at the newer copy; its copy is
    gone from the history by then, and the notice still names its handle."""
    # Through a pipeline, as the integrations run it: what a step writes carries its marker.
    dedupe = Pipeline([DedupeFileReads(min_gain=0, trigger=None, recall_tool="recall")])
    history = read_session(3)  # f0, f1, f0
    first, _ = dedupe.process(history, context())
    notice = first[2].tool_results[0].content
    assert handle_in(notice, "recall") == recall_handle(history[2].tool_results[0].content)
    grown = [*first, *read_session(5)[len(history) :]]  # f1, f0 again
    second, _ = dedupe.process(grown, context())
    re_pointed = second[2].tool_results[0].content
    assert re_pointed != notice and "tool call c4" in re_pointed
    assert handle_in(re_pointed, "recall") == handle_in(notice, "recall")


def test_a_recall_result_is_cleared_like_any_output_and_is_never_a_read() -> None:
    history = read_session(2)
    original = history[2].tool_results[0].content
    handle = recall_handle(original)
    call = ToolCallPart("r1", "recall", {"handle": handle})
    assert not isinstance(file_accesses([call])[0], FileRead)  # dedupe and summaries: not a read
    history += [
        Message("assistant", (call,)),
        Message("tool", (ToolResultPart("r1", "recall", original),)),
        Message("assistant", (TextPart("Seen it."),)),
        Message.user("Go on."),
    ]
    clear = ClearToolResults(keep=0, min_gain=0, trigger=Trigger(max_tokens=1), recall_tool="recall")
    out, _ = clear.process(history, context())
    recalled = out[6].tool_results[0].content
    # Cleared again, with the very handle it was recalled by: one output, one handle.
    assert recalled.startswith(f"[cleared: output of recall(handle='{handle}')")
    assert handle_in(recalled, "recall") == handle
    assert tokens(out) < tokens(history)


# --- the tool's answers ---------------------------------------------------------------------------


def test_lookup_answers_pages_unknown_handles_and_bad_arguments() -> None:
    content = "x" * 250 + "y" * 250
    history = [Message.user("u"), Message("tool", (ToolResultPart("c", "t", content),))]
    recall = Recall(max_chars=200)
    handle = recall_handle(content)
    pages = [recall.lookup(handle, offset, history=history) for offset in (0, 200, 400)]
    assert (
        pages[0]
        == "x" * 200
        + f"\n[recall: characters 0-200 of 500; recall(handle='{handle}', offset=200) returns the next part]"
    )
    assert pages[2] == "y" * 100 + "\n[recall: characters 400-500 of 500; the end]"
    assert "".join(p.split("\n[recall:")[0] for p in pages) == content
    assert Recall().lookup(handle, history=history) == content
    assert recall.lookup(handle, 500, history=history).startswith("[recall: the output")
    assert recall.lookup("0123456789", history=history).startswith("[recall: no cleared output")
    assert recall.lookup("src/app.py", history=history).startswith("[recall: 'src/app.py' is not a handle")
    assert recall.lookup(handle, -1, history=history).startswith("[recall: offset must be")


def test_keep_remembers_what_a_persistent_call_replaced_within_its_bound() -> None:
    recall = Recall(max_originals=2)
    pipeline = Pipeline([ClearToolResults(keep=0, min_tokens=1, min_gain=0, trigger=Trigger(max_tokens=1))])
    recall.install(pipeline.processors)
    history = [*read_session(4), Message("assistant", (TextPart("Read them."),)), Message.user("And now?")]
    result = pipeline.run(history, 100_000, conversation="t1")
    processed = result.messages
    assert not any(p.content.startswith("f") for m in processed for p in m.tool_results)  # all cleared
    handles = [recall_handle(m.tool_results[0].content) for m in history if m.tool_results]
    # The result names what each placeholder replaced; the conversation keeps the last two.
    assert result.originals == {h: m.tool_results[0].content for h, m in zip(handles, history[2::2])}
    t1, t2 = pipeline.conversations.get("t1"), pipeline.conversations.get("t2")
    recall.keep(t1, result.originals)
    assert recall.lookup(handles[-1], state=t1, history=processed) == history[-3].tool_results[0].content
    assert recall.lookup(handles[0], state=t1, history=processed).startswith("[recall: no cleared")
    # Another conversation does not see them.
    assert recall.lookup(handles[-1], state=t2, history=processed).startswith("[recall: no cleared")
    # An untouched history names nothing.
    assert pipeline.run(processed, 100_000, conversation="t1").originals == {}


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="name must be a tool name"):
        Recall(name="recall me")
    with pytest.raises(ValueError, match="max_chars must be a positive int"):
        Recall(max_chars=0)
    with pytest.raises(TypeError, match="store must have a transcript"):
        Recall(store=object())
    with pytest.raises(ValueError, match="recall_tool must be None or a tool name"):
        ClearToolResults(recall_tool="")
    with pytest.raises(ValueError, match="recall_tool must be None or a tool name"):
        DedupeFileReads(recall_tool="two words")
    named = ClearToolResults(recall_tool="other")
    with pytest.raises(ValueError, match="names the recall tool 'other'"):
        Recall().install([named])
    same = replace(named, recall_tool=None)
    Recall().install([same, Repair()])
    assert same.recall_tool == "recall"


def test_a_bad_handle_is_answered_briefly_whatever_its_size() -> None:
    """A model may pass megabytes as a handle or an offset: the answer repeats a few dozen
    characters of it, never the whole."""
    recall = Recall()
    huge = "x" * 10_000_000
    for answer in (recall.lookup(huge), recall.lookup("3f9a0c1b2d", huge), recall.lookup([huge])):
        assert answer.startswith("[recall: ") and len(answer) < 300, answer[:300]


def test_an_output_that_looks_like_a_placeholder_is_recalled_as_itself() -> None:
    """A tool output whose text names another handle, as a placeholder or a notice would, gets a
    placeholder naming its own handle: its content can be recalled, and it cannot point recall at
    another output. Only what historykit wrote (a marked message) passes a handle on."""
    bait = "[cleared: output of Read(file_path='x'), 10 tokens; recall(handle='0123456789') returns it]"
    notice = (
        f"{NOTICE_PREFIX}src/f0.py was read again later. This read's own copy: recall(handle='0123456789')."
    )
    for content in (bait + " " * 400 + "padding " * 200, notice + " padding" * 300):
        history = [
            Message.user("Go."),
            Message("assistant", (ToolCallPart("c0", "Read", {"file_path": "src/f0.py"}),)),
            Message("tool", (ToolResultPart("c0", "Read", content),)),
            *read_session(2)[1:],
            Message("assistant", (TextPart("Done."),)),
            Message.user("And now?"),
        ]
        clear = ClearToolResults(keep=0, min_tokens=1, min_gain=0, trigger=Trigger(max_tokens=1))
        recall = Recall()
        pipeline = Pipeline([DedupeFileReads(min_gain=0, trigger=None), clear, Repair()])
        recall.install(pipeline.processors)
        result = pipeline.run(history, 100_000, conversation="c")
        placeholder = result.messages[2].tool_results[0].content
        assert handle_in(placeholder, "recall") == recall_handle(content), placeholder
        assert result.originals[recall_handle(content)] == content
        state = pipeline.conversations.get("c")
        recall.keep(state, result.originals)
        assert recall.lookup(recall_handle(content), state=state).startswith(content[:100])


def test_paging_through_a_long_output_hashes_the_history_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paging costs time linear in the output: the first page finds the original (each output of
    the history hashed once), the conversation keeps it, and every later page is a slice."""
    import historykit._recall as recall_module

    long = "".join(f"line {i}: {'x' * 90}\n" for i in range(20_000))  # about 2 MB
    history = [*read_session(40), Message("tool", (ToolResultPart("big", "Read", long),))]
    hashed: list[int] = []
    real = recall_module.recall_handle

    def counting(content: str) -> str:
        hashed.append(len(content))
        return real(content)

    monkeypatch.setattr(recall_module, "recall_handle", counting)
    recall = Recall(max_chars=20_000)
    state = Pipeline().conversations.get("c")
    handle = real(long)
    offset, pages, text = 0, 0, []
    while True:
        answer = recall.lookup(handle, offset, state=state, history=history)
        pages += 1
        found = NEXT_PART.search(answer)
        text.append(answer.rsplit("\n[recall: characters", 1)[0])
        if found is None:
            break
        offset = int(found[2])
    assert "".join(text) == long and pages == -(-len(long) // 20_000)
    # Every output hashed at most once over all the pages (the identity cache keeps the rest).
    outputs = sum(len(m.tool_results) for m in history)
    assert len(hashed) <= outputs and hashed.count(len(long)) == 1


def summarizing_processors() -> Pipeline:
    """Clear and summarize as eagerly as they go, both naming the recall tool."""
    return Pipeline(
        [
            ClearToolResults(
                keep=1, min_tokens=1, min_gain=0, trigger=Trigger(max_tokens=1), recall_tool="recall"
            ),
            Summarize(
                trigger=Trigger(max_tokens=1),
                keep_last=1,
                min_gain=0,
                summary_tokens=1,
                recall_tool="recall",
                clock=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc),  # both modes' markers alike
            ),
        ]
    )


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neutral_histories(max_turns=5, max_steps=4))
def test_no_tool_output_a_summary_replaced_is_more_than_one_recall_away(history: list[Message]) -> None:
    """Whatever is cleared and then summarized, over any number of compactions: each tool output
    of the history is in the view, written out in the summary, or named there by a handle the
    history maps back to it (through the placeholders' handles of outputs cleared before)."""
    ctx = context()
    for step in replay_both_modes(summarizing_processors(), summarizing_processors(), history, ctx):
        if any("earlier message" in message_text(m) and "removed" in message_text(m) for m in step.output):
            break  # a summary longer than what it replaced is not used: truncated instead, from here on
        text = "\n".join(message_text(m) for m in step.output)
        named = set(handles_named(text))
        for msg in history[: step.point]:
            for part in msg.tool_results:
                content = part.content.strip()
                if not content:
                    continue
                assert (
                    any(p.content == part.content for m in step.output for p in m.tool_results)
                    or recall_handle(part.content) in named
                    or f"returned `{content}`" in text
                ), f"tool output {part.tool_call_id} is neither in the view nor named by a handle"
        for handle in named:
            assert len(originals(handle, history)) == 1  # each handle is one output of the history


def test_a_summary_carries_every_handle_through_later_summaries() -> None:
    """Twelve reads, summarized again and again: each summary lists the reads it replaced and the
    ones its predecessor listed, so every read stays one recall away, in both modes."""
    history = [Message("user", (TextPart("Read every file under src/."),))]
    for n in range(12):
        path = f"src/f{n}.py"
        history.append(Message("assistant", (ToolCallPart(f"c{n}", "Read", {"file_path": path}),)))
        body = "\n".join(f"{path}:{i}: value_{i} = compute({i}, {n})" for i in range(40))
        history.append(Message("user", (ToolResultPart(f"c{n}", "Read", body),)))
    history.append(Message("assistant", (TextPart("Done."),)))
    summarize = Summarize(
        trigger=Trigger(max_tokens=2_500),
        keep_last=1,
        min_gain=100,
        summary_tokens=400,
        recall_tool="recall",
        clock=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc),
    )
    summaries = 0
    for step in replay_both_modes(summarize, summarize, history, context()):
        text = "\n".join(message_text(m) for m in step.output)
        summaries = max(summaries, text.count("## Tool outputs (recall by handle)"))
        named = set(handles_named(text))
        for msg in history[: step.point]:
            for part in msg.tool_results:
                in_view = any(p.content == part.content for m in step.output for p in m.tool_results)
                assert in_view or recall_handle(part.content) in named, part.tool_call_id
    markers = [m.marker for m in step.output if m.marker is not None]
    assert summaries == 1 and markers and markers[-1].covered_to > 20  # summarized several times over


def test_the_recall_section_keeps_the_newest_outputs_in_its_room_and_indexes_the_rest() -> None:
    """Past its room the section names an index of the older items, itself recalled by handle; an
    update's index names the previous one, so every output stays reachable through the chain."""

    def reads(start: int, stop: int) -> list[Message]:
        out = []
        for n in range(start, stop):
            out.append(Message("assistant", (ToolCallPart(f"c{n}", "Read", {"file_path": f"src/f{n}.py"}),)))
            out.append(Message("user", (ToolResultPart(f"c{n}", "Read", f"line one of {n}\nline two"),)))
        return out

    def reachable(text: str, originals: dict[str, str]) -> set[str]:
        """Every handle `text` leads to, following the indexes."""
        seen: set[str] = set()
        todo = handles_named(text)
        while todo:
            handle = todo.pop()
            if handle not in seen:
                seen.add(handle)
                todo += handles_named(originals.get(handle, ""))
        return seen

    room = 12 * len("- Read(file_path='src/f10.py'): recall(handle='0123456789')")
    first = ensure_recall_section("## Task\n- read", reads(0, 30), "recall", room)
    assert first.index is not None
    originals = dict([first.index])
    listed = handles_named(first.text)
    assert listed[0] == first.index[0] and first.index[0] == recall_handle(first.index[1])
    assert 1 < len(listed) < 30 and listed[-1] == recall_handle("line one of 29\nline two")  # the newest stay
    assert (
        f"{31 - len(listed)} earlier tool outputs are listed by recall(handle='{first.index[0]}')"
        in first.text
    )
    assert len(first.text) <= len("## Task\n- read") + 40 + room
    every = {recall_handle(f"line one of {n}\nline two") for n in range(40)}
    assert reachable(first.text, originals) >= {
        recall_handle(f"line one of {n}\nline two") for n in range(30)
    }
    # An update's index names the previous index and holds the items the update had no room for.
    previous = Message("user", (SummaryPart(first.text),))
    second = ensure_recall_section("## Task\n- read", [previous, *reads(30, 40)], "recall", room)
    assert second.index is not None and second.index[0] != first.index[0]
    assert f"recall(handle='{first.index[0]}')" in second.index[1]
    originals.update([second.index])
    kept = handles_named(second.text)
    assert kept[-1] == recall_handle("line one of 39\nline two")
    assert f"{41 - len(kept)} earlier tool outputs are listed by" in second.text
    assert reachable(second.text, originals) >= every
    assert len(second.text) <= len(first.text) + 200  # the room holds however long the conversation gets
    # With room for everything, no index.
    roomy = ensure_recall_section("## Task\n- read", reads(0, 3), "recall", room)
    assert roomy.index is None and "earlier tool outputs" not in roomy.text
