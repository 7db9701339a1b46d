"""The Pydantic AI adapter: identity, fidelity and round trip, on the corpus, hand-built and generated
histories, and inside a real agent run. Runs against Pydantic AI 1.x and 2.x."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from historykit._frameworks import adapter_for
from historykit._messages import (
    COMPACTION_KEY,
    PIN_KEY,
    CompactionMarker,
    MediaPart,
    Message,
    OtherPart,
    Part,
    ReportedUsage,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    payload_digest,
)
from historykit.plugins.pydantic_ai import PromptItem, PydanticAIAdapter, RequestInstructions
from tests.plugins.pydantic_ai_histories import UnknownPart, has_field, pydantic_ai_histories
from tests.strategies import examples

pytestmark = pytest.mark.pydantic_ai

adapter = PydanticAIAdapter()
T0 = datetime(2025, 1, 1, 9, 0, tzinfo=timezone.utc)

HAS_RETRY_FEEDBACK = hasattr(pai, "RetryFeedbackPart")
REQUEST_COMPACTION = has_field(pai.CompactionPart, "metadata")
SYSTEM_PROMPT_METADATA = has_field(pai.SystemPromptPart, "metadata")
needs_v2_retry_feedback = pytest.mark.skipif(
    not HAS_RETRY_FEEDBACK,
    reason="RetryFeedbackPart is new in Pydantic AI 2 (1.x has tool-less RetryPromptPart)",
)
needs_request_compaction = pytest.mark.skipif(
    not REQUEST_COMPACTION,
    reason="Pydantic AI 1.x only has a provider's CompactionPart in a response, none in a request",
)
needs_system_prompt_metadata = pytest.mark.skipif(
    not SYSTEM_PROMPT_METADATA, reason="SystemPromptPart.metadata is new in Pydantic AI 2"
)

HISTORY_SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# --- helpers -----------------------------------------------------------------------------------


def round_trip(history: Sequence[Any]) -> list[Any]:
    return adapter.to_native(adapter.to_neutral(history))


def assert_same_objects(actual: Sequence[Any], expected: Sequence[Any]) -> None:
    assert len(actual) == len(expected)
    for index, (a, b) in enumerate(zip(actual, expected, strict=True)):
        assert a is b, f"item {index} is a new object"


def json_round_trip(history: Sequence[Any]) -> list[Any]:
    return pai.ModelMessagesTypeAdapter.validate_json(pai.ModelMessagesTypeAdapter.dump_json(list(history)))


def assert_fields_kept(new: Any, old: Any, *, edited: set[str]) -> None:
    """Every dataclass field of `new` not in `edited` equals the one of `old`."""
    assert type(new) is type(old)
    for f in dataclasses.fields(old):
        if f.name not in edited:
            assert getattr(new, f.name) == getattr(old, f.name), f"{type(old).__name__}.{f.name} changed"


def content_view(messages: Sequence[Message]) -> list[tuple[Any, ...]]:
    """Roles and contents of a neutral history, part by part (how messages are grouped aside)."""
    view: list[tuple[Any, ...]] = []
    for msg in messages:
        for part in msg.parts:
            if isinstance(part, TextPart):
                view.append((msg.role, "text", part.text))
            elif isinstance(part, ThinkingPart):
                view.append((msg.role, "thinking", part.text))
            elif isinstance(part, ToolCallPart):
                view.append((msg.role, "tool_call", part.id, part.name, part.arguments))
            elif isinstance(part, ToolResultPart):
                view.append(
                    (msg.role, "tool_result", part.tool_call_id, part.name, part.content, part.is_error)
                )
            else:
                view.append((msg.role, part.kind))
    return view


def retry_prompt(content: str, **kwargs: Any) -> Any:
    # 2.x deprecates RetryPromptPart; histories written by older code still hold it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pai.RetryPromptPart(content, **kwargs)


def index_of(messages: Sequence[Message], predicate: Callable[[Message], bool]) -> int:
    return next(i for i, msg in enumerate(messages) if predicate(msg))


def rich_history() -> list[Any]:
    """A three-turn history with every field Pydantic AI keeps set to something."""
    t = [T0 + timedelta(seconds=10 * i) for i in range(8)]
    system_extra = {"metadata": {"source": "policy"}} if SYSTEM_PROMPT_METADATA else {}
    first = pai.ModelRequest(
        [
            pai.SystemPromptPart("You are careful.", timestamp=t[0], **system_extra),
            pai.UserPromptPart(
                [
                    "Look at this",
                    pai.TextContent("app state", metadata={"ui": "sidebar"}),
                    pai.ImageUrl("https://example.com/cat.png"),
                ],
                timestamp=t[0],
            ),
        ],
        timestamp=t[0],
        instructions="Be brief.",
        run_id="run-1",
        metadata={"app": "first"},
    )
    response = pai.ModelResponse(
        [
            pai.ThinkingPart(
                "plan the reads",
                id="th_1",
                signature="sig-abc",
                provider_name="anthropic",
                provider_details={"n": 1},
            ),
            pai.TextPart("Reading.", id="msg_1", provider_name="openai", provider_details={"p": 2}),
            pai.ToolCallPart(
                "Read",
                {"file_path": "a.py"},
                "call_1",
                id="fc_1",
                provider_name="openai",
                provider_details={"s": 3},
            ),
            pai.ToolCallPart("bash", '{"command": "ls"}', "call_2"),
        ],
        usage=RequestUsage(input_tokens=120, output_tokens=30, cache_read_tokens=50),
        model_name="claude-x",
        timestamp=t[1],
        provider_name="anthropic",
        provider_details={"finish": "tool_use"},
        provider_response_id="resp_1",
        finish_reason="tool_call",
        run_id="run-1",
        metadata={"app": "response"},
    )
    results = pai.ModelRequest(
        [
            pai.ToolReturnPart("Read", "print(1)\n", "call_1", timestamp=t[2], metadata={"bytes": 9}),
            pai.ToolReturnPart("bash", "a.py\n", "call_2", timestamp=t[2]),
        ],
        timestamp=t[2],
        instructions="Be brief.",
        run_id="run-1",
    )
    answer = pai.ModelResponse(
        [pai.TextPart("Done.")],
        usage=RequestUsage(input_tokens=300, output_tokens=5),
        model_name="claude-x",
        timestamp=t[3],
        provider_response_id="resp_2",
        run_id="run-1",
    )
    thanks = pai.ModelRequest(
        [pai.UserPromptPart("thanks", timestamp=t[4])],
        timestamp=t[4],
        instructions="Be brief.",
        run_id="run-1",
    )
    return [first, response, results, answer, thanks]


# --- the corpus --------------------------------------------------------------------------------


def test_corpus_session_through_pydantic_ai(corpus_session: list[Message]) -> None:
    native = adapter.to_native(corpus_session)
    assert all(isinstance(msg, (pai.ModelRequest, pai.ModelResponse)) for msg in native)
    # Valid for Pydantic AI: it serializes and loads back to equal messages.
    loaded = json_round_trip(native)
    assert loaded == native

    neutral = adapter.to_neutral(native)
    assert_same_objects(adapter.to_native(neutral), native)
    assert content_view(neutral) == content_view(corpus_session)

    reloaded = adapter.to_neutral(loaded)
    assert_same_objects(adapter.to_native(reloaded), loaded)
    assert content_view(reloaded) == content_view(corpus_session)


def test_corpus_system_prompt_and_tool_results_land_in_requests(
    largest_corpus_session: list[Message],
) -> None:
    native = adapter.to_native(largest_corpus_session)
    calls = [
        p
        for m in native
        if isinstance(m, pai.ModelResponse)
        for p in m.parts
        if isinstance(p, pai.ToolCallPart)
    ]
    returns = [
        p
        for m in native
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart)
    ]
    assert [c.tool_call_id for c in calls] == [r.tool_call_id for r in returns]
    # Each response's calls are answered by the request right after it.
    for msg, following in itertools.pairwise(native):
        if isinstance(msg, pai.ModelResponse) and any(isinstance(p, pai.ToolCallPart) for p in msg.parts):
            assert isinstance(following, pai.ModelRequest)
            answered = {p.tool_call_id for p in following.parts if isinstance(p, pai.ToolReturnPart)}
            assert answered == {p.tool_call_id for p in msg.parts if isinstance(p, pai.ToolCallPart)}


# --- mapping of every part type ----------------------------------------------------------------


def test_rich_history_maps_to_neutral_messages() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    assert [m.role for m in neutral] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [m.native for m in neutral] == [
        history[0],
        history[0],
        history[1],
        history[2],
        history[3],
        history[4],
    ]

    system, user, response, tools, answer, thanks = neutral
    instructions, prompt = system.parts
    assert isinstance(instructions, TextPart) and instructions.text == "Be brief."
    assert isinstance(instructions.native, RequestInstructions) and instructions.native.request is history[0]
    assert prompt == TextPart("You are careful.")
    assert [p.kind for p in user.parts] == ["text", "text", "media"]
    assert all(isinstance(p.native, PromptItem) for p in user.parts)
    assert user.parts[2] == MediaPart("image/png", source="https://example.com/cat.png")

    thinking, text, read, bash = response.parts
    assert thinking == ThinkingPart("plan the reads", signature="sig-abc", id="th_1", provider="anthropic")
    assert text == TextPart("Reading.")
    assert read == ToolCallPart("call_1", "Read", {"file_path": "a.py"})
    assert bash == ToolCallPart("call_2", "bash", {"command": "ls"})
    assert response.usage == ReportedUsage(120, 30) and response.id == "resp_1"

    assert tools.parts == (
        ToolResultPart("call_1", "Read", "print(1)\n"),
        ToolResultPart("call_2", "bash", "a.py\n"),
    )
    assert answer.usage == ReportedUsage(300, 5) and answer.id == "resp_2"
    # Every request carries the instructions; they are shown once, where they take effect.
    assert thanks.parts == (TextPart("thanks"),)
    assert sum(isinstance(p.native, RequestInstructions) for m in neutral for p in m.parts) == 1
    assert_same_objects(adapter.to_native(neutral), history)


def test_changed_instructions_are_shown_again_and_none_are_not() -> None:
    history = [
        pai.ModelRequest([pai.UserPromptPart("a")], instructions="Be brief."),
        pai.ModelResponse([pai.TextPart("ok")]),
        pai.ModelRequest([pai.UserPromptPart("b")], instructions="Be brief."),
        pai.ModelResponse([pai.TextPart("ok")]),
        pai.ModelRequest([pai.UserPromptPart("c")], instructions="Answer in French."),
        pai.ModelResponse([pai.TextPart("ok")]),
        pai.ModelRequest([pai.UserPromptPart("d")]),
    ]
    neutral = adapter.to_neutral(history)
    shown = [p.text for m in neutral for p in m.parts if isinstance(p.native, RequestInstructions)]
    assert shown == ["Be brief.", "Answer in French."]
    roles = ["system", "user", "assistant", "user", "assistant", "system", "user", "assistant", "user"]
    assert [m.role for m in neutral] == roles
    assert_same_objects(adapter.to_native(neutral), history)


def test_thinking_signed_unsigned_and_redacted() -> None:
    response = pai.ModelResponse(
        [
            pai.ThinkingPart("let me think"),
            pai.ThinkingPart("signed", signature="c2ln", provider_name="anthropic"),
            pai.ThinkingPart("", id="redacted_thinking", signature="opaque", provider_name="anthropic"),
            pai.ThinkingPart("", id="redacted_content", signature="opaque2", provider_name="bedrock"),
            pai.ThinkingPart("summary", id="rs_1", signature="enc", provider_name="openai"),
        ]
    )
    (msg,) = adapter.to_neutral([response])
    assert msg.parts == (
        ThinkingPart("let me think"),
        ThinkingPart("signed", signature="c2ln", provider="anthropic"),
        ThinkingPart("", signature="opaque", id="redacted_thinking", provider="anthropic", redacted=True),
        ThinkingPart("", signature="opaque2", id="redacted_content", provider="bedrock", redacted=True),
        ThinkingPart("summary", signature="enc", id="rs_1", provider="openai"),
    )
    assert_same_objects(round_trip([response]), [response])


def test_tool_call_arguments_in_every_form() -> None:
    response = pai.ModelResponse(
        [
            pai.ToolCallPart("a", {"x": 1}, "c1"),
            pai.ToolCallPart("b", '{"x": 2}', "c2"),
            pai.ToolCallPart("c", "cat a.py", "c3"),
            pai.ToolCallPart("d", "[1, 2]", "c4"),
            pai.ToolCallPart("e", None, "c5"),
            pai.ToolCallPart("f", "", "c6"),
        ]
    )
    (msg,) = adapter.to_neutral([response])
    assert [p.arguments for p in msg.tool_calls] == [{"x": 1}, {"x": 2}, "cat a.py", "[1, 2]", {}, ""]
    assert_same_objects(round_trip([response]), [response])


def test_multimodal_user_content() -> None:
    items: list[Any] = [
        "plain",
        pai.TextContent("tagged", metadata={"k": 1}),
        pai.ImageUrl("https://example.com/a.jpg"),
        pai.AudioUrl("https://example.com/a.mp3"),
        pai.VideoUrl("https://example.com/a.mp4"),
        pai.DocumentUrl("https://example.com/a.pdf"),
        pai.DocumentUrl("https://example.com/no-extension"),
        pai.BinaryContent(b"12345", media_type="image/png"),
        pai.UploadedFile("file-abc", "openai", media_type="application/pdf"),
        pai.CachePoint(),
    ]
    request = pai.ModelRequest([pai.UserPromptPart(items)])
    (msg,) = adapter.to_neutral([request])
    assert msg.role == "user"
    assert msg.parts == (
        TextPart("plain"),
        TextPart("tagged"),
        MediaPart("image/jpeg", source="https://example.com/a.jpg"),
        MediaPart("audio/mpeg", source="https://example.com/a.mp3"),
        MediaPart("video/mp4", source="https://example.com/a.mp4"),
        MediaPart("application/pdf", source="https://example.com/a.pdf"),
        MediaPart("document", source="https://example.com/no-extension"),
        MediaPart("image/png", size=5, digest=payload_digest(b"12345")),
        MediaPart("application/pdf", source="file-abc"),
        OtherPart("CachePoint"),
    )
    assert [p.native.item for p in msg.parts] == items
    assert_same_objects(round_trip([request]), [request])


def test_tool_returns_rendered_as_pydantic_ai_sends_them() -> None:
    request = pai.ModelRequest(
        [
            pai.ToolReturnPart("lookup", {"rows": [1, 2]}, "c1"),
            pai.ToolReturnPart("count", 3, "c2"),
            pai.ToolReturnPart("broken", "disk full", "c3", outcome="failed"),
            pai.ToolReturnPart("nothing", None, "c4"),
            pai.ToolReturnPart("denied", "not allowed", "c5", outcome="denied"),
        ]
    )
    (msg,) = adapter.to_neutral([request])
    assert msg.role == "tool"
    assert msg.parts == (
        ToolResultPart("c1", "lookup", '{"rows":[1,2]}'),
        ToolResultPart("c2", "count", "3"),
        ToolResultPart("c3", "broken", "disk full", is_error=True),
        ToolResultPart("c4", "nothing", ""),
        ToolResultPart("c5", "denied", "not allowed"),
    )
    assert_same_objects(round_trip([request]), [request])


def test_retry_prompts_with_and_without_a_tool() -> None:
    with_tool = retry_prompt("bad path", tool_name="Read", tool_call_id="c1")
    without = retry_prompt("answer in JSON")
    request = pai.ModelRequest([with_tool, without])
    tool_msg, user_msg = adapter.to_neutral([request])
    assert tool_msg.role == "tool" and user_msg.role == "user"
    (result,) = tool_msg.parts
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.name, result.is_error) == ("c1", "Read", True)
    assert result.content == with_tool.model_response()
    assert user_msg.parts == (TextPart(without.model_response()),)
    assert_same_objects(round_trip([request]), [request])


@needs_v2_retry_feedback
def test_retry_feedback_is_user_text() -> None:
    feedback = pai.RetryFeedbackPart("too long", retry=pai.RetryInfo(cause="model_retry"))
    retried = pai.ToolReturnPart("Read", "no such file", "c1", outcome="retried")
    request = pai.ModelRequest([retried, feedback])
    tool_msg, user_msg = adapter.to_neutral([request])
    assert tool_msg.parts == (ToolResultPart("c1", "Read", "no such file", is_error=True),)
    assert user_msg.parts == (TextPart(feedback.model_response()),)
    assert_same_objects(round_trip([request]), [request])


@needs_request_compaction
def test_application_summary_in_a_request_is_a_summary_part() -> None:
    marker = CompactionMarker(0, 12, 40_000, 900, "summarize", model="m", created_at=T0)
    summary = pai.CompactionPart("## Task\nfix it", metadata={COMPACTION_KEY: marker.to_dict()})
    plain = pai.CompactionPart("older summary")
    request = pai.ModelRequest([summary, plain, pai.UserPromptPart("go on")])
    # Each summary and each user prompt is a message of its own (Pydantic AI merges requests).
    msgs = adapter.to_neutral([request])
    assert [m.role for m in msgs] == ["user", "user", "user"]
    assert [m.parts for m in msgs] == [
        (SummaryPart("## Task\nfix it", marker=marker),),
        (SummaryPart("older summary"),),
        (TextPart("go on"),),
    ]
    assert_same_objects(round_trip([request]), [request])


def test_provider_compaction_native_tools_files_and_unknown_parts_pass_through() -> None:
    compaction = pai.CompactionPart("provider summary", id="cmp_1", provider_name="anthropic")
    call = pai.NativeToolCallPart("web_search", {"query": "x"}, "ws_1", provider_name="anthropic")
    ret = pai.NativeToolReturnPart("web_search", [{"title": "t"}], "ws_1", provider_name="anthropic")
    file = pai.FilePart(pai.BinaryContent(b"\x89PNG", media_type="image/png"))
    unknown = UnknownPart("future")
    response = pai.ModelResponse([compaction, call, ret, file, unknown, pai.TextPart("hi")])
    request = pai.ModelRequest([pai.UserPromptPart("q"), UnknownPart("also future")])
    msgs = adapter.to_neutral([request, response])
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[0].parts[1] == OtherPart("UnknownPart", "also future")
    kinds = [(p.kind, getattr(p, "type_name", None)) for p in msgs[1].parts]
    assert kinds == [
        ("other", "CompactionPart"),
        ("other", "NativeToolCallPart"),
        ("other", "NativeToolReturnPart"),
        ("media", None),
        ("other", "UnknownPart"),
        ("text", None),
    ]
    assert msgs[1].parts[0].text == "provider summary"
    assert "web_search" in msgs[1].parts[1].text and msgs[1].parts[3] == MediaPart(
        "image/png", size=4, digest=payload_digest(b"\x89PNG")
    )
    assert_same_objects(round_trip([request, response]), [request, response])

    # An edit next to them keeps the unknown parts as the very same objects.
    edited = [msgs[0], replace(msgs[1], parts=(*msgs[1].parts[:-1], TextPart("bye")))]
    new_request, new_response = adapter.to_native(edited)
    assert new_request is request
    assert [p is q for p, q in zip(new_response.parts[:5], response.parts[:5], strict=True)] == [True] * 5


def test_unknown_part_first_in_a_request_joins_the_next_group() -> None:
    request = pai.ModelRequest([UnknownPart("x"), pai.ToolReturnPart("t", "r", "c1"), UnknownPart("y")])
    (msg,) = adapter.to_neutral([request])
    assert msg.role == "tool" and [p.kind for p in msg.parts] == ["other", "tool_result", "other"]
    assert_same_objects(round_trip([request]), [request])


def test_usage_and_empty_messages() -> None:
    history = [
        pai.ModelRequest([]),
        pai.ModelResponse([], usage=RequestUsage()),
        pai.ModelRequest([pai.UserPromptPart([])]),
        pai.ModelResponse([pai.TextPart("x")], usage=RequestUsage(input_tokens=7)),
    ]
    empty_request, empty_response, empty_prompt, response = adapter.to_neutral(history)
    assert (empty_request.role, empty_request.parts) == ("user", ())
    assert (empty_response.role, empty_response.parts, empty_response.usage) == ("assistant", (), None)
    assert empty_prompt.parts == (OtherPart("UserPromptPart"),)
    assert response.usage == ReportedUsage(7, 0)
    assert_same_objects(round_trip(history), history)


# --- identity ----------------------------------------------------------------------------------


@HISTORY_SETTINGS
@given(pydantic_ai_histories(unknown_parts=True))
def test_round_trip_is_identity(history: list[Any]) -> None:
    assert_same_objects(round_trip(history), history)


@HISTORY_SETTINGS
@given(pydantic_ai_histories())
def test_identity_after_json_round_trip(history: list[Any]) -> None:
    loaded = json_round_trip(history)
    assert_same_objects(round_trip(loaded), loaded)
    assert content_view(adapter.to_neutral(loaded)) == content_view(adapter.to_neutral(history))


def test_adapter_for_picks_the_pydantic_ai_adapter() -> None:
    assert isinstance(adapter_for(rich_history()), PydanticAIAdapter)


# --- fidelity ----------------------------------------------------------------------------------


def test_replacing_a_tool_result_keeps_every_other_field() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    i = index_of(neutral, lambda m: m.role == "tool")
    msg = neutral[i]
    neutral[i] = replace(msg, parts=(replace(msg.parts[0], content="[cleared: re-run Read]"), msg.parts[1]))
    out = adapter.to_native(neutral)
    assert [a is b for a, b in zip(out, history, strict=True)] == [True, True, False, True, True]
    assert_fields_kept(out[2], history[2], edited={"parts"})
    edited, untouched = out[2].parts
    assert untouched is history[2].parts[1]
    assert edited.content == "[cleared: re-run Read]"
    assert_fields_kept(edited, history[2].parts[0], edited={"content"})
    assert adapter.to_neutral(out)[i].parts[0].content == "[cleared: re-run Read]"


def test_dropping_thinking_keeps_the_response() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    i = index_of(neutral, lambda m: m.role == "assistant")
    neutral[i] = replace(neutral[i], parts=neutral[i].parts[1:])
    out = adapter.to_native(neutral)
    assert out[0] is history[0] and out[2:] == history[2:]
    assert all(a is b for a, b in zip(out[2:], history[2:], strict=True))
    assert_fields_kept(out[1], history[1], edited={"parts"})
    assert all(a is b for a, b in zip(out[1].parts, history[1].parts[1:], strict=True))
    assert out[1].usage is history[1].usage


def test_editing_response_text_drops_its_provider_id_only() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    i = index_of(neutral, lambda m: m.role == "assistant")
    parts = list(neutral[i].parts)
    parts[1] = replace(parts[1], text="Reading a.py.")
    neutral[i] = replace(neutral[i], parts=tuple(parts))
    new = adapter.to_native(neutral)[1]
    assert new.parts[1].content == "Reading a.py." and new.parts[1].id is None
    assert_fields_kept(new.parts[1], history[1].parts[1], edited={"content", "id"})
    assert [p is q for p, q in zip(new.parts, history[1].parts, strict=True)] == [True, False, True, True]


def test_editing_tool_call_arguments_keeps_their_form() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    i = index_of(neutral, lambda m: m.role == "assistant")
    parts = list(neutral[i].parts)
    parts[2] = replace(parts[2], arguments={"file_path": "b.py"})
    parts[3] = replace(parts[3], arguments={"command": "ls -la"})
    neutral[i] = replace(neutral[i], parts=tuple(parts))
    new = adapter.to_native(neutral)[1]
    assert new.parts[2].args == {"file_path": "b.py"}
    assert_fields_kept(new.parts[2], history[1].parts[2], edited={"args"})
    assert isinstance(new.parts[3].args, str) and new.parts[3].args_as_dict() == {"command": "ls -la"}
    assert_fields_kept(new.parts[3], history[1].parts[3], edited={"args"})


def test_editing_a_prompt_item_keeps_the_others_and_its_metadata() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    user = neutral[1]
    neutral[1] = replace(user, parts=(user.parts[0], replace(user.parts[1], text="new state"), user.parts[2]))
    out = adapter.to_native(neutral)
    new_request = out[0]
    assert_fields_kept(new_request, history[0], edited={"parts"})
    system, prompt = new_request.parts
    assert system is history[0].parts[0]
    old_prompt = history[0].parts[1]
    assert_fields_kept(prompt, old_prompt, edited={"content"})
    first, item, image = prompt.content
    assert first is old_prompt.content[0] and image is old_prompt.content[2]
    assert item.content == "new state" and item.metadata == {"ui": "sidebar"}


def test_editing_instructions_rewrites_only_the_field() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    system = neutral[0]
    neutral[0] = replace(system, parts=(replace(system.parts[0], text="Be very brief."), system.parts[1]))
    new_request = adapter.to_native(neutral)[0]
    assert new_request.instructions == "Be very brief."
    assert_fields_kept(new_request, history[0], edited={"instructions", "parts"})
    assert all(a is b for a, b in zip(new_request.parts, history[0].parts, strict=True))


def test_dropping_the_instructions_message_keeps_the_instructions() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    system = neutral[0]
    neutral[0] = replace(system, parts=system.parts[1:])
    out = adapter.to_native(neutral)
    assert out[0].instructions == "Be brief."
    assert all(a is b for a, b in zip(out[0].parts, history[0].parts, strict=True))


def test_editing_a_system_prompt_keeps_timestamp_and_metadata() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    system = neutral[0]
    neutral[0] = replace(
        system, parts=(system.parts[0], replace(system.parts[1], text="You are very careful."))
    )
    new_prompt = adapter.to_native(neutral)[0].parts[0]
    assert new_prompt.content == "You are very careful."
    assert_fields_kept(new_prompt, history[0].parts[0], edited={"content"})


def test_pinning_and_unpinning_a_message_writes_its_metadata() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    i = index_of(neutral, lambda m: m.role == "assistant")
    neutral[i] = replace(neutral[i], pinned=True)
    pinned = adapter.to_native(neutral)
    assert pinned[1].metadata == {"app": "response", PIN_KEY: True}
    assert_fields_kept(pinned[1], history[1], edited={"metadata"})
    assert all(a is b for a, b in zip(pinned[1].parts, history[1].parts, strict=True))
    again = adapter.to_neutral(pinned)
    assert again[i].pinned
    again[i] = replace(again[i], pinned=False)
    assert adapter.to_native(again)[1].metadata == {"app": "response"}


def test_pinning_a_part_uses_its_metadata_or_else_its_message() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    tools = index_of(neutral, lambda m: m.role == "tool")
    neutral[tools] = replace(
        neutral[tools], parts=(replace(neutral[tools].parts[0], pinned=True), *neutral[tools].parts[1:])
    )
    answer = index_of(neutral, lambda m: m.role == "assistant" and m.id == "resp_2")
    neutral[answer] = replace(neutral[answer], parts=(replace(neutral[answer].parts[0], pinned=True),))
    out = adapter.to_native(neutral)
    assert out[2].parts[0].metadata == {"bytes": 9, PIN_KEY: True} and out[2].metadata is None
    assert out[3].metadata == {PIN_KEY: True} and out[3].parts[0] is history[3].parts[0]
    again = adapter.to_neutral(out)
    assert again[tools].parts[0].pinned and not again[tools].parts[1].pinned
    assert again[answer].pinned


@needs_system_prompt_metadata
def test_pinning_a_system_prompt_uses_its_metadata() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    system = neutral[0]
    neutral[0] = replace(system, parts=(system.parts[0], replace(system.parts[1], pinned=True)))
    out = adapter.to_native(neutral)
    assert out[0].parts[0].metadata == {"source": "policy", PIN_KEY: True}
    assert adapter.to_neutral(out)[0].parts[1].pinned


def test_a_retry_prompt_answering_a_call_stays_one_when_edited() -> None:
    retry = retry_prompt("bad path", tool_name="Read", tool_call_id="c1", timestamp=T0)
    history = [pai.ModelRequest([retry])]
    (msg,) = adapter.to_neutral(history)
    (new,) = adapter.to_native([replace(msg, parts=(replace(msg.parts[0], content="[cleared]"),))])
    assert type(new.parts[0]) is type(retry)
    assert new.parts[0].content == "[cleared]"
    assert_fields_kept(new.parts[0], retry, edited={"content"})


# --- summaries and messages made by processors -------------------------------------------------


def test_a_new_summary_round_trips_with_its_marker() -> None:
    marker = CompactionMarker(1, 30, 50_000, 1_200, "summarize", model=None, created_at=T0, automatic=False)
    neutral = [
        Message.system("rules"),
        Message("user", (SummaryPart("## Task\nfix the bug", marker=marker),)),
    ]
    (request,) = adapter.to_native(neutral)
    system, summary = request.parts
    assert isinstance(system, pai.SystemPromptPart)
    if REQUEST_COMPACTION:
        assert isinstance(summary, pai.CompactionPart)
        assert summary.content == "## Task\nfix the bug" and summary.metadata == {
            COMPACTION_KEY: marker.to_dict()
        }
    else:
        assert isinstance(summary, pai.UserPromptPart)
        (item,) = summary.content
        assert item.content == "## Task\nfix the bug" and item.metadata == {COMPACTION_KEY: marker.to_dict()}
    loaded = json_round_trip([request])
    back = adapter.to_neutral(loaded)
    assert back[1].parts == (SummaryPart("## Task\nfix the bug", marker=marker),)
    assert_same_objects(adapter.to_native(back), loaded)


@pytest.mark.skipif(not hasattr(pai, "TextContent"), reason="this Pydantic AI has no TextContent")
def test_a_notice_keeps_its_marker_when_pydantic_ai_merges_its_request() -> None:
    """A truncation notice is a user prompt a compaction wrote: its marker rides on its text
    (a `TextContent`), since Pydantic AI merges consecutive requests and keeps no request's metadata.
    Read back from the merged request, it is still the compaction's message, apart from the results
    beside it; the text the model reads is the same."""
    from pydantic_ai._agent_graph import _clean_message_history

    marker = CompactionMarker(1, 30, 50_000, 1_200, "truncate", created_at=T0)
    notice = Message("user", (TextPart("[historykit] 30 earlier messages were removed"),), marker=marker)
    results = Message("tool", (ToolResultPart("c1", "Run", "done"),))
    call = Message("assistant", (ToolCallPart("c1", "Run", {"command": "ls"}),))
    native = adapter.to_native([Message.user("task"), call, results, notice])
    (prompt,) = [p for p in native[-1].parts if isinstance(p, pai.UserPromptPart)]
    assert [item.content for item in prompt.content] == ["[historykit] 30 earlier messages were removed"]
    merged = _clean_message_history([*native, pai.ModelRequest(parts=[pai.UserPromptPart("go on")])])
    assert merged[-1].metadata is None and len(merged[-1].parts) == 3
    back = adapter.to_neutral(json_round_trip(merged))
    assert [(m.role, m.marker) for m in back[-3:]] == [("tool", None), ("user", marker), ("user", None)]
    assert back[-2].parts[0].text == "[historykit] 30 earlier messages were removed"


def test_editing_a_summary_keeps_its_native() -> None:
    marker = CompactionMarker(0, 5, 9_000, 300, "summarize", created_at=T0)
    (request,) = adapter.to_native([Message("user", (SummaryPart("v1", marker=marker),))])
    (msg,) = adapter.to_neutral([request])
    newer = replace(marker, covered_to=9)
    (new,) = adapter.to_native([replace(msg, parts=(replace(msg.parts[0], text="v2", marker=newer),))])
    (back,) = adapter.to_neutral([new])
    assert back.parts == (SummaryPart("v2", marker=newer),)
    assert_fields_kept(new, request, edited={"parts"})


def test_neutral_messages_without_natives_become_requests_and_responses() -> None:
    call = ToolCallPart("c1", "Read", {"file_path": "a.py"})
    neutral = [
        Message.system("You are an agent."),
        Message.user("Fix a.py"),
        Message(
            "assistant", (ThinkingPart("look first"), TextPart("Reading."), call), usage=ReportedUsage(10, 2)
        ),
        Message("tool", (ToolResultPart("c1", "Read", "x = 1"),)),
        Message.user("and be quick"),
        Message("assistant", (ToolCallPart("c2", "bash", "ls"),), id="resp_9"),
        Message.user("what happened?"),
        Message("tool", (ToolResultPart("c2", "bash", "error: nope", is_error=True),), pinned=True),
    ]
    first, response, results, second, last = adapter.to_native(neutral)
    assert [type(p) for p in first.parts] == [pai.SystemPromptPart, pai.UserPromptPart]
    assert [type(p) for p in response.parts] == [pai.ThinkingPart, pai.TextPart, pai.ToolCallPart]
    assert response.usage.input_tokens == 10 and response.usage.output_tokens == 2
    assert [type(p) for p in results.parts] == [pai.ToolReturnPart, pai.UserPromptPart]
    assert second.provider_response_id == "resp_9" and second.parts[0].args == "ls"
    # Provider rule R3: tool results first, then the user's text.
    assert [type(p) for p in last.parts] == [pai.ToolReturnPart, pai.UserPromptPart]
    assert last.parts[0].outcome == "failed" and last.metadata == {PIN_KEY: True}
    assert json_round_trip([first, response, results, second, last]) == [
        first,
        response,
        results,
        second,
        last,
    ]
    back = adapter.to_neutral([first, response, results, second, last])
    assert back[-1].pinned and back[-2].parts[0] == ToolResultPart("c2", "bash", "error: nope", is_error=True)


def test_a_new_message_reusing_original_parts_reuses_their_natives() -> None:
    history = rich_history()
    neutral = adapter.to_neutral(history)
    # A processor merging the tool results into a message of its own keeps the parts' natives.
    tools = index_of(neutral, lambda m: m.role == "tool")
    merged = Message("tool", neutral[tools].parts)
    out = adapter.to_native([*neutral[:tools], merged, *neutral[tools + 1 :]])
    assert out[2] is not history[2]
    assert all(a is b for a, b in zip(out[2].parts, history[2].parts, strict=True))


def test_a_pinned_new_user_text_is_pinned_at_part_level() -> None:
    (request,) = adapter.to_native([Message("user", (TextPart("never touch tests/", pinned=True),))])
    (msg,) = adapter.to_neutral([request])
    assert msg.parts == (TextPart("never touch tests/", pinned=True),) and not msg.pinned


# --- bad input ---------------------------------------------------------------------------------


def test_a_part_instead_of_a_message_is_named() -> None:
    with pytest.raises(
        TypeError, match=r"message 1 is a pydantic_ai\.messages\.UserPromptPart, not a ModelRequest"
    ):
        adapter.to_neutral([pai.ModelRequest([pai.UserPromptPart("x")]), pai.UserPromptPart("y")])
    with pytest.raises(TypeError, match="expected a list"):
        adapter.to_neutral("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message 1 is a builtins.str, not a historykit Message"):
        adapter.to_native([Message.user("x"), "y"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="message 0 was made from a builtins.object"):
        adapter.to_native([Message("user", (TextPart("x"),), native=object())])


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (Message("user", (ThinkingPart("hmm"),)), "message 0: a neutral ThinkingPart with no native object"),
        (Message("assistant", (ToolResultPart("c", "t", "r"),)), "cannot go into a ModelResponse"),
        (Message("user", (MediaPart("image/png"),)), "no http"),
        (Message("user", (OtherPart("x"),)), "cannot go into a ModelRequest"),
    ],
)
def test_parts_that_cannot_be_written_are_named(message: Message, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        adapter.to_native([message])


# --- generated histories: edits keep fidelity --------------------------------------------------


def _edits(neutral: list[Message]) -> list[tuple[int, str, int]]:
    edits: list[tuple[int, str, int]] = []
    for i, msg in enumerate(neutral):
        edits.append((i, "pin", -1))
        for j, part in enumerate(msg.parts):
            if isinstance(part, ToolResultPart):
                edits.append((i, "clear", j))
            elif isinstance(part, ThinkingPart):
                edits.append((i, "drop", j))
            elif isinstance(part, TextPart) and msg.role == "assistant":
                edits.append((i, "reword", j))
    return edits


@HISTORY_SETTINGS
@given(pydantic_ai_histories(min_turns=1), st.data())
def test_an_edit_changes_only_what_it_edits(history: list[Any], data: st.DataObject) -> None:
    neutral = adapter.to_neutral(history)
    i, edit, j = data.draw(st.sampled_from(_edits(neutral)))
    msg = neutral[i]
    parts: list[Part] = list(msg.parts)
    if edit == "pin":
        neutral[i] = replace(msg, pinned=not msg.pinned)
    elif edit == "clear":
        parts[j] = replace(parts[j], content="[cleared]")  # type: ignore[call-arg]
        neutral[i] = replace(msg, parts=tuple(parts))
    elif edit == "drop":
        del parts[j]
        neutral[i] = replace(msg, parts=tuple(parts))
    else:
        parts[j] = replace(parts[j], text="reworded")  # type: ignore[call-arg]
        neutral[i] = replace(msg, parts=tuple(parts))
    out = adapter.to_native(neutral)

    assert len(out) == len(history)
    k = history.index(msg.native)
    assert all(a is b for n, (a, b) in enumerate(zip(out, history, strict=True)) if n != k)
    old, new = history[k], out[k]
    assert_fields_kept(new, old, edited={"parts", "metadata"})
    old_meta = {key: v for key, v in (old.metadata or {}).items() if key != PIN_KEY}
    assert {key: v for key, v in (new.metadata or {}).items() if key != PIN_KEY} == old_meta

    after = adapter.to_neutral(out)
    if edit == "pin":
        assert all(a is b for a, b in zip(new.parts, old.parts, strict=True))
        # A request split into several neutral messages has one pin: it stays while any of them has it.
        assert after[i].pinned is any(m.pinned for m in neutral if m.native is msg.native)
        return
    edited_native = msg.parts[j].native
    kept_old = [p for p in old.parts if p is not edited_native]
    if edit == "drop":
        assert list(new.parts) == kept_old and all(a is b for a, b in zip(new.parts, kept_old, strict=True))
        assert len(after[i].parts) == len(msg.parts) - 1
        return
    position = list(old.parts).index(edited_native)
    kept_new = [p for n, p in enumerate(new.parts) if n != position]
    assert len(new.parts) == len(old.parts) and all(a is b for a, b in zip(kept_new, kept_old, strict=True))
    changed = new.parts[position]
    if edit == "clear":
        assert after[i].parts[j].content.startswith("[cleared]")
        assert_fields_kept(changed, edited_native, edited={"content"})
    else:
        assert after[i].parts[j].text == "reworded"
        assert_fields_kept(changed, edited_native, edited={"content", "id"})


# --- a real agent ------------------------------------------------------------------------------


def _history_processing(processor: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    """`Agent` keyword arguments that install `processor`: 1.x `history_processors`, 2.x `ProcessHistory`."""
    if "history_processors" in inspect.signature(Agent.__init__).parameters:
        return {"history_processors": [processor]}
    from pydantic_ai.capabilities import ProcessHistory

    return {"capabilities": [ProcessHistory(processor)]}


def _adding_model(seen: list[list[Any]]) -> FunctionModel:
    def respond(messages: list[Any], info: AgentInfo) -> pai.ModelResponse:
        seen.append(list(messages))
        returns = [p for m in messages if isinstance(m, pai.ModelRequest) for p in m.parts]
        returns = [p for p in returns if isinstance(p, pai.ToolReturnPart)]
        if not returns:
            return pai.ModelResponse(
                [pai.ThinkingPart("add them"), pai.ToolCallPart("add", {"a": 1, "b": 2}, "call_add")],
                usage=RequestUsage(input_tokens=50, output_tokens=10),
            )
        return pai.ModelResponse([pai.TextPart(f"The sum is {returns[-1].content}.")])

    return FunctionModel(respond)


async def test_an_agent_runs_with_a_round_trip_history_processor() -> None:
    seen: list[list[Any]] = []
    processed: list[tuple[list[Any], list[Any]]] = []

    def processor(messages: list[Any]) -> list[Any]:
        out = adapter.to_native(adapter.to_neutral(messages))
        processed.append((list(messages), out))
        return out

    agent = Agent(_adding_model(seen), instructions="Be brief.", **_history_processing(processor))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    result = await agent.run("What is 1 + 2?")
    assert result.output == "The sum is 3."
    assert len(processed) == len(seen) == 2
    for (before, after), model_view in zip(processed, seen, strict=True):
        assert_same_objects(after, before)
        assert_same_objects(model_view, after)
    neutral = adapter.to_neutral(result.all_messages())
    assert [m.role for m in neutral] == ["system", "user", "assistant", "tool", "assistant"]
    assert neutral[0].parts[0].text == "Be brief." and neutral[3].parts[0].content == "3"


async def test_an_agent_runs_with_an_editing_history_processor() -> None:
    seen: list[list[Any]] = []

    def clear_results(messages: list[Any]) -> list[Any]:
        neutral = adapter.to_neutral(messages)
        cleared = [
            replace(m, parts=tuple(replace(p, content="[cleared]") for p in m.parts))
            if m.role == "tool"
            else m
            for m in neutral
        ]
        return adapter.to_native(cleared)

    agent = Agent(_adding_model(seen), instructions="Be brief.", **_history_processing(clear_results))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    result = await agent.run("What is 1 + 2?")
    assert result.output == "The sum is [cleared]."
    (tool_return,) = [p for p in seen[-1][-1].parts if isinstance(p, pai.ToolReturnPart)]
    assert tool_return.tool_call_id == "call_add" and tool_return.tool_name == "add"


def test_metadata_changed_in_place_is_converted_again_nested_values_too() -> None:
    """A conversion is reused while the message's metadata compares equal to a copy kept of it:
    a pin set in place, or a value changed inside a nested dict, makes a new conversion."""
    response = pai.ModelResponse(parts=[pai.TextPart("done")], metadata={"app": {"step": 1}})
    first = adapter.to_neutral([pai.ModelRequest.user_text_prompt("go"), response])
    assert adapter.to_neutral([first[0].native, response])[1] is first[1]  # reused
    response.metadata[PIN_KEY] = True  # type: ignore[index]
    pinned = adapter.to_neutral([first[0].native, response])[1]
    assert pinned is not first[1] and pinned.pinned
    response.metadata["app"]["step"] = 2  # type: ignore[index]
    assert adapter.to_neutral([first[0].native, response])[1] is not pinned


def test_metadata_that_does_not_compare_is_converted_each_time() -> None:
    class Opaque:
        def __eq__(self, other: object) -> bool:
            raise ValueError("the truth value is ambiguous")

        __hash__ = object.__hash__

    response = pai.ModelResponse(parts=[pai.TextPart("done")], metadata={"app": Opaque()})
    history = [pai.ModelRequest.user_text_prompt("go"), response]
    first = adapter.to_neutral(history)
    again = adapter.to_neutral(history)
    assert again[1] == first[1] and again[1] is not first[1]
