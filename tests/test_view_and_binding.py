"""The view (`historykit._view`) and thinking binding (`historykit._binding`, R13).

- both modes send the same view on every call, and make the same summarizer calls;
- on a model that binds thinking, no call replays a thinking block after a history other than the
  one it was produced under (checked with `check(..., sent_before=previous view)`, R13);
- on other models the current tool-use cycle's thinking is kept byte for byte (R7);
- tool-call ids are unique in every output (R12), duplicates in the input are renamed in pairs.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from historykit import Pipeline, check, default_pipeline
from historykit._binding import (
    BINDING_MODELS,
    drop_unbound_thinking,
    first_edit,
    history_binds_thinking,
    model_binds_thinking,
)
from historykit._digests import message_digest
from historykit._messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from historykit._validity import check_neutral
from historykit._view import ViewReplay, request_points
from historykit.processors import ClearToolResults, Repair, StripThinking
from historykit.processors._trigger import Trigger
from tests.strategies import examples, neutral_histories
from tests.test_pipelines_property import processors

EXAMPLES = settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))


# -- which models bind ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "binds"),
    [
        ("claude-opus-5-5", True),
        ("claude-opus-5-5-20261001", True),
        ("anthropic:claude-sonnet-5-5", True),
        ("us.anthropic.claude-haiku-5-5-v1:0", True),
        ("claude-fable-5.2", True),
        ("claude-mythos-5-2", True),
        ("claude-mythos-5-1", False),  # Anthropic: Mythos 5.1 does not run the check
        ("claude-fable-5-0", False),
        ("claude-sonnet-4-5", False),
        ("gpt-5.1-codex", False),
        ("", False),
        (None, False),
    ],
)
def test_model_binds_thinking(name: str | None, binds: bool) -> None:
    assert model_binds_thinking(name) is binds


def test_every_listed_model_binds() -> None:
    assert all(model_binds_thinking(name) for name in BINDING_MODELS)


def test_history_binds_from_the_latest_named_model() -> None:
    history = [
        Message.user("hi"),
        Message("assistant", (TextPart("a"),), model="claude-sonnet-4-5"),
        Message.user("more"),
        Message("assistant", (TextPart("b"),), model="claude-opus-5-5"),
        Message("assistant", (TextPart("c"),)),
    ]
    assert history_binds_thinking(history)
    assert not history_binds_thinking(history[:3])
    assert not history_binds_thinking([Message.user("no model anywhere")])


@pytest.mark.pydantic_ai
def test_pydantic_ai_model_binding_from_profile_and_name() -> None:
    from pydantic_ai.models.function import FunctionModel

    from historykit.plugins.pydantic_ai import model_binds_thinking_blocks

    def answer(messages: Any, info: Any) -> Any:  # pragma: no cover - never called
        raise AssertionError

    assert model_binds_thinking_blocks(None) is None
    assert model_binds_thinking_blocks(FunctionModel(answer, model_name="claude-opus-5-5")) is True
    assert model_binds_thinking_blocks(FunctionModel(answer, model_name="claude-opus-4-5")) is False
    if int(importlib.metadata.version("pydantic-ai-slim").split(".")[0]) >= 2:
        # The profile flag came with Pydantic AI 2.68; a model whose name says nothing is flagged by it.
        flagged = FunctionModel(
            answer, model_name="my-proxy", profile={"anthropic_binds_thinking_blocks": True}
        )
        assert model_binds_thinking_blocks(flagged) is True


def test_langchain_chat_model_binding_from_its_name() -> None:
    pytest.importorskip("langchain")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from historykit.plugins.langchain import chat_model_binds_thinking

    class Named(FakeListChatModel):
        model_name: str = "claude-sonnet-5-5"

    assert chat_model_binds_thinking(Named(responses=["x"])) is True
    assert chat_model_binds_thinking(Named(responses=["x"], model_name="claude-sonnet-4-5")) is False
    assert chat_model_binds_thinking(None) is None


# -- dropping what an edit made invalid -----------------------------------------------------------


def _assistant(text: str, thinking: str | None = "why", *calls: ToolCallPart) -> Message:
    parts: list[Any] = [ThinkingPart(thinking, signature="sig")] if thinking is not None else []
    if text:
        parts.append(TextPart(text))
    return Message("assistant", (*parts, *calls), model="claude-opus-5-5")


def test_drop_unbound_thinking_drops_everything_after_the_first_edit() -> None:
    call = ToolCallPart("c1", "read", {"path": "a.py"})
    before = [
        Message.user("task"),
        _assistant("one", "t1", call),
        Message("tool", (ToolResultPart("c1", "read", "x" * 100),)),
        _assistant("two", "t2"),
        Message.user("next"),
        _assistant("", "t3"),  # nothing but thinking: goes with it
    ]
    after = list(before)
    after[2] = Message("tool", (ToolResultPart("c1", "read", "[cleared]"),))
    assert first_edit(before, after) == 2
    out, drop = drop_unbound_thinking(before, after)
    assert drop.edit_at == 2 and drop.blocks == 2 and drop.messages_removed == 1
    assert out[1] is before[1]  # before the edit: untouched, thinking kept
    assert [m.text for m in out] == ["task", "one", "", "two", "next"]
    assert not any(isinstance(p, ThinkingPart) for m in out[2:] for p in m.parts)
    unchanged, nothing = drop_unbound_thinking(before, [*before, Message.user("appended")])
    assert nothing.blocks == 0 and unchanged[-1].text == "appended"


def test_pipeline_drops_thinking_after_an_edit_only_on_binding_models() -> None:
    history = [Message.user("task " * 50)]
    for i in range(8):
        call = ToolCallPart(f"c{i}", "read", {"path": f"f{i}.py"})
        history += [
            _assistant("", f"think {i}", call),
            Message("tool", (ToolResultPart(f"c{i}", "read", "x " * 400),)),
        ]
    pipeline = Pipeline(
        [ClearToolResults(keep=1, trigger=Trigger(max_tokens=1_000, low_water=0.5), min_gain=1), Repair()]
    )
    bound = pipeline.run(history, 100_000, binds_thinking=True)
    kept = [p for m in bound.messages for p in m.parts if isinstance(p, ThinkingPart)]
    first = first_edit(history, bound.messages)
    assert first < len(history)
    assert all(not isinstance(p, ThinkingPart) for m in bound.messages[first:] for p in m.parts)
    assert len(kept) == sum(1 for m in history[:first] if m.role == "assistant")
    blocks, tokens = bound.report.thinking_dropped
    assert blocks > 0 and tokens > 0
    assert any(s.processor == "ThinkingBinding" for s in bound.report.steps)
    # Not binding (the messages' model names decide when nothing is said): thinking stays.
    free = pipeline.run([replace(m, model="claude-sonnet-4-5") for m in history], 100_000)
    assert free.report.thinking_dropped == (0, 0)
    assert sum(isinstance(p, ThinkingPart) for m in free.messages for p in m.parts) == 8
    with pytest.raises(TypeError, match="binds_thinking"):
        pipeline.run(history, 100_000, binds_thinking="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        pipeline.run(history, 100_000, mode="raw")  # type: ignore[arg-type]


def test_strip_thinking_on_a_binding_model_strips_from_its_edit_on() -> None:
    history: list[Message] = [Message.user("task")]
    for turn in range(4):
        history += [_assistant(f"answer {turn}", "reasoning " * 200), Message.user(f"request {turn}")]
    strip = StripThinking(keep_turns=1, trigger=None)
    free = strip.run(history, 100_000, binds_thinking=False).messages
    assert any(isinstance(p, ThinkingPart) for p in free[-2].parts)  # the latest turn keeps it
    bound = strip.run(history, 100_000, binds_thinking=True).messages
    assert not any(isinstance(p, ThinkingPart) for m in bound for p in m.parts)


def test_strip_thinking_keeps_the_cycle_when_results_and_a_new_prompt_share_the_final_request() -> None:
    """R7 on a model that does not bind: the final request holds the tool results and a new user
    prompt (Pydantic AI sends them in one request): the tool-use cycle is still the current one."""
    call = ToolCallPart("c1", "read", {"path": "a.py"})
    history = [
        Message.user("task"),
        _assistant("", "old reasoning", ToolCallPart("c0", "read", {"path": "b.py"})),
        Message("tool", (ToolResultPart("c0", "read", "b"),)),
        _assistant("", "current reasoning", call),
        Message("tool", (ToolResultPart("c1", "read", "a"),)),
        Message.user("also look at c.py"),
    ]
    history = [replace(m, model=None) for m in history]
    out = StripThinking(keep_turns=0, trigger=None).run(history, 100_000).messages
    assert next(p for p in out[3].parts if isinstance(p, ThinkingPart)).text == "current reasoning"
    assert check_neutral(out) == []


def test_repair_makes_repeated_call_ids_unique_in_pairs() -> None:
    first = ToolCallPart("t1", "read", {"path": "a.py"})
    history = [
        Message.user("task"),
        Message("assistant", (first,)),
        Message("tool", (ToolResultPart("t1", "read", "a"),)),
        # A parallel group that repeats the earlier id twice: the n-th result answers the n-th call.
        Message(
            "assistant",
            (replace(first, arguments={"path": "b.py"}), replace(first, arguments={"path": "c.py"})),
        ),
        Message("tool", (ToolResultPart("t1", "read", "b"),)),
        Message("tool", (ToolResultPart("t1", "read", "c"),)),
    ]
    assert [v.rule for v in check(history)].count("R12") == 2
    out = Repair().run(history).messages
    assert check(out) == []
    calls = [p for m in out for p in m.tool_calls]
    results = [p for m in out for p in m.tool_results]
    assert [c.id for c in calls] == ["t1", "t1__2", "t1__3"]
    assert [(r.tool_call_id, r.content) for r in results] == [("t1", "a"), ("t1__2", "b"), ("t1__3", "c")]
    assert out[0] is history[0] and out[1] is history[1] and out[2] is history[2]


def test_strip_thinking_keeps_the_thinking_of_an_exchange_with_a_pinned_result() -> None:
    """Compactions keep a pinned exchange whole; once the turns after it are gone it stands before the
    final request, where a model that does not bind needs its thinking (found by the random
    default-pipeline test: stripped at one call, made the current cycle's by a truncation later)."""
    history = [
        Message.user("task"),
        _assistant("", "why a", ToolCallPart("a", "read", {"path": "a.py"})),
        Message("tool", (ToolResultPart("a", "read", "a", pinned=True),)),
        _assistant("", "why b", ToolCallPart("b", "read", {"path": "b.py"})),
        Message("tool", (ToolResultPart("b", "read", "b"),)),
        Message.user("next"),
        _assistant("done", "why c"),
        Message.user("more"),
    ]
    history = [replace(m, model=None) for m in history]
    out = StripThinking(keep_turns=0, trigger=None).run(history, 100_000).messages
    assert out[1] is history[1]  # the pinned exchange keeps its thinking
    assert not any(isinstance(p, ThinkingPart) for p in out[3].parts)


# -- one view ------------------------------------------------------------------------------------


def _replay(
    pipeline: Pipeline, raw: list[Message], window: int, mode: str, binds: bool
) -> list[list[Message]]:
    """What the model is sent at each call of `raw`, driven as a framework drives each mode."""
    sent: list[list[Message]] = []
    carried: list[Message] = []
    previous = 0
    for point in request_points(raw):
        history = carried + raw[previous:point] if mode == "persistent" else raw[:point]
        result = pipeline.run(history, window, mode=mode, binds_thinking=binds, conversation="c")  # type: ignore[arg-type]
        sent.append(result.messages)
        carried, previous = result.history, point  # a persistent integration keeps the history
    return sent


def _same(a: list[Message], b: list[Message]) -> bool:
    """The same messages as the model reads them (a summary's marker records when it was written,
    which the model never sees)."""
    return len(a) == len(b) and all(message_digest(x) == message_digest(y) for x, y in zip(a, b))


class _CountingSummarizer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        return f"summary {self.calls} of {len(messages)} messages"


@pytest.mark.parametrize("binds", [True, False])
def test_both_modes_send_the_same_view_on_a_corpus_session(binds: bool) -> None:
    from historykit.formats import read_chat_jsonl
    from tests.conftest import CORPUS

    raw = read_chat_jsonl(CORPUS / "codex__sessionview-019a93b9.jsonl")
    assert any(isinstance(p, ThinkingPart) for m in raw for p in m.parts)
    summaries = {}
    views = {}
    for mode in ("persistent", "view"):
        summarizer = _CountingSummarizer()
        views[mode] = _replay(default_pipeline(summarizer=summarizer), raw, 6_000, mode, binds)
        summaries[mode] = summarizer.calls
    assert summaries["persistent"] == summaries["view"]
    assert len(views["view"][-1]) < len(raw) - 10  # it did compact
    assert all(_same(a, b) for a, b in zip(views["persistent"], views["view"], strict=True))
    previous: list[Message] | None = None
    for view in views["view"]:
        assert check(view, sent_before=previous, binds_thinking=binds) == []
        previous = view


def _tool_loop(calls: int) -> list[Message]:
    """A task and `calls` tool exchanges: as many model calls, none of which compacts."""
    raw = [Message.user("task")]
    for i in range(calls):
        raw += [
            Message("assistant", (ToolCallPart(f"c{i}", "t", {}),)),
            Message("tool", (ToolResultPart(f"c{i}", "t", "r"),)),
        ]
    return raw


def test_view_replay_replays_only_what_is_new() -> None:
    raw = _tool_loop(5)
    pipeline = Pipeline([Repair()])
    cold = pipeline.run(raw, 10_000, mode="view", conversation="c")
    assert cold.report.replayed_calls == len(request_points(raw))
    grown = [*raw, Message("assistant", (TextPart("done"),)), Message.user("thanks")]
    assert pipeline.run(grown, 10_000, mode="view", conversation="c").report.replayed_calls == 1
    assert pipeline.run(grown, 10_000, mode="view", conversation="c").report.replayed_calls == 0
    # Another window is another setting: nothing derived under the first one is reused.
    assert pipeline.run(grown, 20_000, mode="view", conversation="c").report.replayed_calls == len(
        request_points(grown)
    )
    replay = ViewReplay(max_views=2)
    steps = replay.derive(raw)
    call = next(steps)
    with pytest.raises(StopIteration):
        while True:
            call = steps.send(call)
    assert len(replay._views) == 2


def _drive_replay(replay: ViewReplay, raw: list[Message], process: Any) -> tuple[list[Message], int]:
    steps = replay.derive(raw)
    try:
        call = next(steps)
        while True:
            call = steps.send(process(call))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _copies(messages: list[Message]) -> list[Message]:
    """Equal messages that are other objects (what a new process reads back)."""
    return [replace(m) for m in messages]


def test_a_remembered_view_continued_with_its_own_messages_digests_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = _tool_loop(4)
    points = request_points(raw)
    stored = [Message.user("a view stored with the conversation")]
    tag = Message.user("processed")

    def process(messages: list[Message]) -> list[Message]:
        return [*messages, tag]

    replay = ViewReplay()
    digested: list[int] = []
    chain = ViewReplay._chain
    monkeypatch.setattr(
        ViewReplay, "_chain", lambda self, r, p, s: digested.append(len(r)) or chain(self, r, p, s)
    )
    replay.remember(raw[: points[-2]], stored)
    view, replayed = _drive_replay(replay, raw, process)
    assert (view, replayed) == ([*stored, *raw[points[-2] :], tag], 1)
    assert _drive_replay(replay, raw, process) == (view, 0)
    assert digested == []  # the resume of an integration: the very messages the view was stored with
    # The same content as other objects (a new process read it back): found by its digests.
    assert _drive_replay(replay, _copies(raw), process) == (view, 0)
    assert digested
    # A view remembered by content past the one found by its messages wins, as it always did.
    later = ViewReplay()
    later_view = [Message.user("derived by content")]
    later.remember(_copies(raw), later_view)
    _drive_replay(later, _copies(raw[: points[-2]]), process)  # digests the first view
    later.remember(raw[: points[-2]], stored)
    assert _drive_replay(later, raw, process) == (later_view, 0)


def test_views_remembered_by_their_messages_are_bounded_and_still_found_by_content() -> None:
    raw = _tool_loop(8)
    points = request_points(raw)
    replay = ViewReplay()
    views = {point: [Message.user(f"view at {point}")] for point in points}
    for point in points:
        replay.remember(raw[:point], views[point])
    assert len(replay._unkeyed) <= 4 and len(replay) == len(points)
    for point in points:  # each one, also those digested to keep the bound
        assert _drive_replay(replay, _copies(raw[:point]), lambda m: m) == (views[point], 0)


# -- random histories through random pipelines ----------------------------------------------------

MODELS = ("claude-opus-5-5", "claude-fable-5-2", "claude-sonnet-4-5", None)


@st.composite
def histories_with_models(draw: st.DrawFn) -> list[Message]:
    """Valid histories whose assistant messages name a model (binding or not), some with a tool-call
    id used twice (R12, which Repair must fix)."""
    history = draw(neutral_histories(max_turns=4, max_steps=4))
    model = draw(st.sampled_from(MODELS))
    history = [replace(m, model=model) if m.role == "assistant" else m for m in history]
    calls = [(i, p) for i, m in enumerate(history) if m.role == "assistant" for p in m.tool_calls]
    if len(calls) >= 2 and draw(st.booleans()):
        (_, first), (at, later) = calls[0], calls[-1]
        if later.id != first.id:
            history = [_rename(m, later.id, first.id) if i >= at else m for i, m in enumerate(history)]
    return history


def _rename(msg: Message, old: str, new: str) -> Message:
    parts = tuple(
        replace(p, id=new)
        if isinstance(p, ToolCallPart) and p.id == old
        else replace(p, tool_call_id=new)
        if isinstance(p, ToolResultPart) and p.tool_call_id == old
        else p
        for p in msg.parts
    )
    return replace(msg, parts=parts)


@EXAMPLES
@given(histories_with_models(), processors(), st.integers(300, 4_000))
def test_random_pipelines_send_one_valid_view(raw: list[Message], steps: list[Any], window: int) -> None:
    if not isinstance(steps[-1], Repair):
        steps = [*steps, Repair()]
    binds = history_binds_thinking(raw)
    persistent = _replay(Pipeline(steps), raw, window, "persistent", binds)
    view_only = _replay(Pipeline(steps), raw, window, "view", binds)
    assert all(_same(a, b) for a, b in zip(persistent, view_only, strict=True))
    previous: list[Message] | None = None
    for view in view_only:
        assert check(view, sent_before=previous, binds_thinking=binds) == []
        previous = view


def test_a_call_with_its_own_counter_or_callback_continues_the_pipelines_views() -> None:
    raw = _tool_loop(4)
    pipeline = Pipeline([Repair()])
    pipeline.run(raw, 10_000, mode="view", conversation="c")
    grown = [*raw, Message("assistant", (TextPart("done"),)), Message.user("thanks")]
    reports: list[Any] = []
    again = pipeline.run(
        grown, 10_000, mode="view", on_report=reports.append, counter=pipeline.counter, conversation="c"
    )
    assert again.report.replayed_calls == 1 and reports == [again.report]
