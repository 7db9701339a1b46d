"""The LangChain adapter: identity, fidelity and round trip on real langchain-core messages."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

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
from historykit.plugins.langchain import SUMMARY_SOURCE, LangChainAdapter
from tests.plugins.langchain_histories import langchain_histories, texts
from tests.strategies import examples

adapter = LangChainAdapter()

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PNG_B64 = base64.b64encode(PNG).decode()
PDF = b"%PDF-1.4 test document"
PDF_B64 = base64.b64encode(PDF).decode()
WAV = b"RIFF....WAVEfmt " + bytes(10)
WAV_B64 = base64.b64encode(WAV).decode()


def same_objects(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def round_trip(history: list[BaseMessage]) -> list[BaseMessage]:
    return adapter.to_native(adapter.to_neutral(history))


def replace_part(msg: Message, old: Part, new: Part | None) -> Message:
    parts = tuple(new if p is old else p for p in msg.parts if new is not None or p is not old)
    return replace(msg, parts=parts)


# --- the corpus -------------------------------------------------------------------------------


def test_corpus_session_round_trips(corpus_session: list[Message]) -> None:
    native = adapter.to_native(corpus_session)
    assert len(native) == len(corpus_session)
    roles = {HumanMessage: "user", AIMessage: "assistant", SystemMessage: "system", ToolMessage: "tool"}
    assert [roles[type(m)] for m in native] == [m.role for m in corpus_session]
    assert all(m.id is None for m in native), "new messages get their ids from LangGraph, not from us"

    neutral = adapter.to_neutral(native)
    assert neutral == corpus_session
    assert same_objects(adapter.to_native(neutral), native)

    restored = messages_from_dict(messages_to_dict(native))
    assert restored is not native
    again = adapter.to_neutral(restored)
    assert again == corpus_session
    assert same_objects(adapter.to_native(again), restored)


def test_corpus_reasoning_and_calls_land_where_providers_read_them(corpus_session: list[Message]) -> None:
    native = adapter.to_native(corpus_session)
    for msg, out in zip(corpus_session, native, strict=True):
        if msg.role == "assistant":
            assert isinstance(out, AIMessage)
            assert [(c["id"], c["name"], c["args"]) for c in out.tool_calls] == [
                (c.id, c.name, c.arguments) for c in msg.tool_calls
            ]
            thinking = [p.text for p in msg.parts if isinstance(p, ThinkingPart)]
            blocks = out.content if isinstance(out.content, list) else []
            assert [b["reasoning"] for b in blocks if b["type"] == "reasoning"] == thinking
            assert out.text == msg.text
        if msg.role == "tool":
            assert isinstance(out, ToolMessage)
            result = msg.tool_results[0]
            assert (out.tool_call_id, out.name, out.content) == (
                result.tool_call_id,
                result.name,
                result.content,
            )


# --- mapping of message types -----------------------------------------------------------------


def test_message_types_map_to_roles_and_fields() -> None:
    history = [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("hi", id="h"),
        AIMessage(
            "hello",
            id="a",
            usage_metadata={"input_tokens": 120, "output_tokens": 7, "total_tokens": 127},
        ),
        AIMessage("", tool_calls=[{"id": "c1", "name": "grep", "args": {"pattern": "x"}}], id="a2"),
        ToolMessage("no match", tool_call_id="c1", name="grep", status="error", id="t"),
    ]
    neutral = adapter.to_neutral(history)
    assert [m.role for m in neutral] == ["system", "user", "assistant", "assistant", "tool"]
    assert [m.id for m in neutral] == ["s", "h", "a", "a2", "t"]
    assert neutral[2].usage == ReportedUsage(120, 7)
    assert neutral[3].parts == (ToolCallPart("c1", "grep", {"pattern": "x"}),)
    assert neutral[4].parts == (ToolResultPart("c1", "grep", "no match", is_error=True),)
    assert all(p.native is not None for m in neutral for p in m.parts)
    assert same_objects(adapter.to_native(neutral), history)


def test_adapter_for_picks_the_langchain_adapter() -> None:
    assert isinstance(adapter_for([HumanMessage("a"), AIMessage("b")]), LangChainAdapter)


def test_chunks_chat_and_function_messages_are_kept() -> None:
    chunk = AIMessageChunk(
        content="partial",
        id="run-1",
        tool_call_chunks=[{"id": "c1", "name": "bash", "args": '{"command": "ls"}', "index": 0}],
    )
    history: list[BaseMessage] = [
        ChatMessage(role="developer", content="rules"),
        ChatMessage(role="critic", content="looks wrong"),
        ChatMessage(role="assistant", content="fixed"),
        chunk,
        ChatMessage(role="tool", content="ok"),
        FunctionMessage(name="bash", content="file.txt"),
    ]
    neutral = adapter.to_neutral(history)
    assert [m.role for m in neutral] == ["system", "user", "assistant", "assistant", "tool", "tool"]
    assert neutral[3].parts == (TextPart("partial"), ToolCallPart("c1", "bash", {"command": "ls"}))
    assert neutral[4].parts == (OtherPart("ChatMessage", "ok"),)
    assert neutral[5].parts == (OtherPart("FunctionMessage", "file.txt"),)
    assert neutral[5].parts[0].native is history[5]
    assert same_objects(adapter.to_native(neutral), history)

    # Pinning the function message rewrites its metadata and nothing else.
    pinned = adapter.to_native([replace(neutral[5], pinned=True)])
    assert len(pinned) == 1 and isinstance(pinned[0], FunctionMessage)
    assert pinned[0].additional_kwargs == {PIN_KEY: True}
    assert (pinned[0].name, pinned[0].content) == ("bash", "file.txt")
    # An edited chunk keeps its tool call chunks in step with its tool calls.
    edited = adapter.to_native([replace(neutral[3], parts=neutral[3].parts[:1])])[0]
    assert isinstance(edited, AIMessageChunk)
    assert edited.tool_calls == [] and edited.tool_call_chunks == [] and edited.id == "run-1"


@pytest.mark.parametrize(
    ("bad", "type_name"),
    [({"role": "user", "content": "hi"}, "builtins.dict"), ("hi", "builtins.str"), (("user", "hi"), "tuple")],
)
def test_non_messages_are_refused_with_index_and_type(bad: object, type_name: str) -> None:
    with pytest.raises(TypeError, match=rf"message 1 is a .*{type_name}"):
        adapter.to_neutral([HumanMessage("ok"), bad])


def test_remove_message_is_not_a_history_message() -> None:
    with pytest.raises(TypeError, match=r"message 2 is a RemoveMessage \(id='a1'\)"):
        adapter.to_neutral([HumanMessage("a"), AIMessage("b", id="a1"), RemoveMessage(id="a1")])


def test_to_native_refuses_non_neutral_messages() -> None:
    with pytest.raises(TypeError, match=r"message 1 is a .*HumanMessage, not a historykit Message"):
        adapter.to_native([Message.user("a"), HumanMessage("b")])  # type: ignore[list-item]


def test_malformed_compaction_marker_is_a_clear_error() -> None:
    bad = HumanMessage("summary", additional_kwargs={COMPACTION_KEY: {"covered_from": 0}})
    with pytest.raises(ValueError, match=r"message 1 \(HumanMessage\).*'covered_to'"):
        adapter.to_neutral([SystemMessage("s"), bad])
    with pytest.raises(ValueError, match=r"message 0 .*must be a dict"):
        adapter.to_neutral([HumanMessage("summary", additional_kwargs={COMPACTION_KEY: "yes"})])


# --- every content block type -----------------------------------------------------------------

AI_ANTHROPIC = {"model_provider": "anthropic", "model_name": "claude-sonnet-4-5"}

BLOCK_CASES: list[tuple[str, Any, Part]] = [
    ("str item", "plain", TextPart("plain")),
    ("text", {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}, TextPart("hi")),
    (
        "reasoning",
        {"type": "reasoning", "reasoning": "think", "id": "r1", "extras": {"signature": "sig"}},
        ThinkingPart("think", signature="sig", id="r1", provider="anthropic"),
    ),
    (
        "reasoning (Responses item)",
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
            "encrypted_content": "gAAAAenc",
        },
        ThinkingPart("a\n\nb", signature="gAAAAenc", id="rs_1", provider="openai"),
    ),
    (
        "thinking",
        {"type": "thinking", "thinking": "step", "signature": "EqSig"},
        ThinkingPart("step", signature="EqSig", provider="anthropic"),
    ),
    (
        "redacted_thinking",
        {"type": "redacted_thinking", "data": "EmwKopaque"},
        ThinkingPart("", signature="EmwKopaque", provider="anthropic", redacted=True),
    ),
    (
        "non_standard thinking",
        {"type": "non_standard", "value": {"type": "redacted_thinking", "data": "EmwK2"}},
        ThinkingPart("", signature="EmwK2", provider="anthropic", redacted=True),
    ),
    (
        "image url",
        {"type": "image", "url": "https://example.com/a.png", "mime_type": "image/png"},
        MediaPart("image/png", "https://example.com/a.png", 0),
    ),
    (
        "image base64",
        {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
        MediaPart("image/png", "", len(PNG), digest=payload_digest(PNG_B64)),
    ),
    (
        "audio",
        {"type": "audio", "base64": WAV_B64, "mime_type": "audio/wav"},
        MediaPart("audio/wav", "", len(WAV), digest=payload_digest(WAV_B64)),
    ),
    (
        "video",
        {"type": "video", "url": "https://example.com/v.mp4", "mime_type": "video/mp4"},
        MediaPart("video/mp4", "https://example.com/v.mp4", 0),
    ),
    (
        "file",
        {"type": "file", "file_id": "file-abc", "mime_type": "application/pdf"},
        MediaPart("application/pdf", "file_id:file-abc", 0),
    ),
    (
        "text-plain",
        {"type": "text-plain", "text": "notes ✓", "mime_type": "text/plain", "title": "n"},
        MediaPart("text/plain", "", len("notes ✓".encode()), digest=payload_digest("notes ✓")),
    ),
    (
        "image_url (OpenAI)",
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG_B64}", "detail": "low"}},
        MediaPart("image/jpeg", "", len(PNG), digest=payload_digest(PNG_B64)),
    ),
    (
        "input_audio (OpenAI)",
        {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}},
        MediaPart("audio/wav", "", len(WAV), digest=payload_digest(WAV_B64)),
    ),
    (
        "image (Anthropic source)",
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": PNG_B64}},
        MediaPart("image/gif", "", len(PNG), digest=payload_digest(PNG_B64)),
    ),
    (
        "document (Anthropic)",
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}},
        MediaPart("application/pdf", "", len(PDF), digest=payload_digest(PDF_B64)),
    ),
    (
        "tool_result (Anthropic, in a user message)",
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "42", "is_error": True},
        ToolResultPart("toolu_9", None, "42", is_error=True),
    ),
    (
        "tool_use without a tool_calls entry",
        {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "x"}},
        ToolCallPart("toolu_1", "grep", {"pattern": "x"}),
    ),
    (
        "tool_call without a tool_calls entry",
        {"type": "tool_call", "id": "c7", "name": "grep", "args": {"pattern": "y"}},
        ToolCallPart("c7", "grep", {"pattern": "y"}),
    ),
    (
        "tool_call_chunk without a call",
        {"type": "tool_call_chunk", "id": "c8", "name": "grep", "args": '{"pat', "index": 0},
        OtherPart("tool_call_chunk"),
    ),
    (
        "invalid_tool_call without an entry",
        {"type": "invalid_tool_call", "id": None, "name": None, "args": "{oops", "error": "bad json"},
        OtherPart("invalid_tool_call"),
    ),
    (
        "server_tool_call",
        {"type": "server_tool_call", "id": "srv_1", "name": "web_search", "args": {"query": "q"}},
        OtherPart("server_tool_call"),
    ),
    (
        "server_tool_result",
        {"type": "server_tool_result", "tool_call_id": "srv_1", "status": "success", "output": "found"},
        OtherPart("server_tool_result"),
    ),
    (
        "non_standard",
        {"type": "non_standard", "value": {"type": "web_search_call", "id": "ws_1"}},
        OtherPart("non_standard:web_search_call"),
    ),
    (
        "unknown type",
        {"type": "x-vendor-thing", "text": "count me"},
        OtherPart("x-vendor-thing"),
    ),
]


def string_values(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in string_values(v)]
    return []


def message_with(block: Any, expected: Part) -> BaseMessage:
    """A message of the role a block of this kind lives in, with a text block around it."""
    content = [{"type": "text", "text": "before"}, block, {"type": "text", "text": "after"}]
    if isinstance(expected, ToolResultPart):
        return HumanMessage(content=content, id="h1")
    return AIMessage(content=content, id="a1", response_metadata=AI_ANTHROPIC, additional_kwargs={"k": 1})


@pytest.mark.parametrize(("block", "expected"), [c[1:] for c in BLOCK_CASES], ids=[c[0] for c in BLOCK_CASES])
def test_content_block_maps_to_its_kind_and_survives_edits(block: Any, expected: Part) -> None:
    native = message_with(block, expected)
    block = native.content[1]  # pydantic copied the dict: the message's own block is the native one
    [msg] = adapter.to_neutral([native])
    part = msg.parts[1]
    if isinstance(expected, OtherPart):
        # Unknown blocks pass through; their text is only there to count tokens, and must not miss any.
        assert isinstance(part, OtherPart) and part.type_name == expected.type_name
        assert all(
            value in part.text or json.dumps(value, ensure_ascii=False)[1:-1] in part.text
            for value in string_values(block)
            if value != block["type"]
        )
        expected = part
    assert msg.parts == (TextPart("before"), expected, TextPart("after"))
    assert part.native is block
    assert same_objects(round_trip([native]), [native])

    # Editing the text after it keeps the block itself, in place.
    edited = replace_part(msg, msg.parts[2], TextPart("after, edited"))
    [out] = adapter.to_native([edited])
    assert out is not native and isinstance(out.content, list)
    assert out.content[0] is native.content[0] and out.content[1] is block
    assert out.content[2] == {"type": "text", "text": "after, edited"}
    assert (out.id, out.additional_kwargs, out.response_metadata) == (
        native.id,
        native.additional_kwargs,
        native.response_metadata,
    )
    assert adapter.to_neutral([out])[0] == edited


@pytest.mark.parametrize(
    ("block", "call_field"),
    [
        (
            {
                "type": "tool_use",
                "id": "c1",
                "name": "grep",
                "input": {"pattern": "x"},
                "caller": {"type": "direct"},
            },
            None,
        ),
        ({"type": "tool_call", "id": "c1", "name": "grep", "args": {"pattern": "x"}}, None),
        (
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "grep",
                "arguments": '{"pattern": "x"}',
                "id": "fc_1",
            },
            None,
        ),
        (
            {"type": "invalid_tool_call", "id": "c1", "name": "grep", "args": "{pattern", "error": "bad"},
            "invalid",
        ),
    ],
    ids=["tool_use", "tool_call", "function_call", "invalid_tool_call"],
)
def test_a_call_repeated_in_content_is_one_part(block: dict[str, Any], call_field: str | None) -> None:
    if call_field == "invalid":
        fields: dict[str, Any] = {
            "invalid_tool_calls": [{"id": "c1", "name": "grep", "args": "{pattern", "error": "bad"}]
        }
        expected = ToolCallPart("c1", "grep", "{pattern")
    else:
        fields = {"tool_calls": [{"id": "c1", "name": "grep", "args": {"pattern": "x"}}]}
        expected = ToolCallPart("c1", "grep", {"pattern": "x"})
    native = AIMessage(content=[{"type": "text", "text": "looking"}, block], id="m", **fields)
    block = native.content[1]
    [msg] = adapter.to_neutral([native])
    assert msg.parts == (TextPart("looking"), expected)
    assert same_objects(round_trip([native]), [native])

    # Dropping the text keeps the repeating block untouched...
    [out] = adapter.to_native([replace(msg, parts=msg.parts[1:])])
    assert out.content == [block] and out.content[0] is block
    # ...dropping the call drops its block with it (a lone tool_use would need a result)...
    [out] = adapter.to_native([replace(msg, parts=msg.parts[:1])])
    assert out.content == [{"type": "text", "text": "looking"}]
    assert out.tool_calls == [] and out.invalid_tool_calls == []
    # ...and an edit of the call is followed by its block, other keys kept.
    call = msg.parts[1]
    assert isinstance(call, ToolCallPart)
    [out] = adapter.to_native([replace_part(msg, call, replace(call, arguments={"pattern": "z"}))])
    assert out.tool_calls == [{"id": "c1", "name": "grep", "args": {"pattern": "z"}, "type": "tool_call"}]
    assert out.content[1] is not block
    assert {k: v for k, v in out.content[1].items() if k not in ("input", "args", "arguments")} == {
        k: v for k, v in block.items() if k not in ("input", "args", "arguments")
    }
    assert adapter.to_neutral([out])[0].parts == (
        TextPart("looking"),
        ToolCallPart("c1", "grep", {"pattern": "z"}),
    )


def test_tool_call_chunks_repeated_in_content_are_one_part() -> None:
    native = AIMessageChunk(
        content=[
            {"type": "tool_call_chunk", "id": "c1", "name": "bash", "args": '{"command": "ls"}', "index": 0}
        ],
        tool_call_chunks=[{"id": "c1", "name": "bash", "args": '{"command": "ls"}', "index": 0}],
    )
    [msg] = adapter.to_neutral([native])
    assert msg.parts == (ToolCallPart("c1", "bash", {"command": "ls"}),)
    assert same_objects(round_trip([native]), [native])


def test_reasoning_in_additional_kwargs() -> None:
    deepseek = AIMessage(
        "The answer.",
        additional_kwargs={"reasoning_content": "Let me think.", "other": 1},
        response_metadata={"model_provider": "deepseek"},
        id="ds",
    )
    item = {
        "id": "rs_9",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "gAAAAx",
    }
    responses = AIMessage(
        content=[{"type": "text", "text": "Done."}], additional_kwargs={"reasoning": item}, id="msg_1"
    )
    both = AIMessage(
        content=[{"type": "reasoning", "reasoning": "in content"}, {"type": "text", "text": "x"}],
        additional_kwargs={"reasoning_content": "in kwargs"},
    )
    neutral = adapter.to_neutral([deepseek, responses, both])
    assert neutral[0].parts == (ThinkingPart("Let me think.", provider="deepseek"), TextPart("The answer."))
    assert neutral[1].parts == (
        ThinkingPart("Plan.", signature="gAAAAx", id="rs_9", provider="openai"),
        TextPart("Done."),
    )
    # LangChain's own rule: reasoning_content counts only when the content has no reasoning block.
    assert neutral[2].parts == (ThinkingPart("in content"), TextPart("x"))
    assert same_objects(adapter.to_native(neutral), [deepseek, responses, both])

    # Dropping the thinking removes its key and keeps the rest; a string content stays a string.
    out = adapter.to_native([replace(m, parts=m.parts[1:]) for m in neutral[:2]])
    assert out[0].content == "The answer." and out[0].additional_kwargs == {"other": 1}
    assert out[1].additional_kwargs == {} and out[1].content is responses.content
    assert out[0].response_metadata is deepseek.response_metadata

    # Editing it rewrites it where it was.
    thinking = neutral[0].parts[0]
    [edited] = adapter.to_native([replace_part(neutral[0], thinking, replace(thinking, text="Shorter."))])
    assert edited.additional_kwargs == {"reasoning_content": "Shorter.", "other": 1}
    assert edited.content == "The answer."


# --- fidelity of edits ------------------------------------------------------------------------


def anthropic_turn() -> list[BaseMessage]:
    ai = AIMessage(
        content=[
            {"type": "thinking", "thinking": "First, look at the file.", "signature": "EqSigOne"},
            {"type": "redacted_thinking", "data": "EmwKRedacted"},
            {"type": "thinking", "thinking": "Then grep.", "signature": "EqSigTwo"},
            {"type": "text", "text": "Let me check both."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "grep", "input": {"pattern": "def"}},
        ],
        tool_calls=[
            {"id": "toolu_1", "name": "read_file", "args": {"path": "a.py"}},
            {"id": "toolu_2", "name": "grep", "args": {"pattern": "def"}},
        ],
        id="msg_01",
        name="coder",
        additional_kwargs={"cache": {"hit": True}},
        response_metadata={"model_provider": "anthropic", "stop_reason": "tool_use", "model_name": "claude"},
        usage_metadata={
            "input_tokens": 2048,
            "output_tokens": 96,
            "total_tokens": 2144,
            "input_token_details": {"cache_read": 1024},
        },
    )
    return [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix a.py", id="h1"),
        ai,
        ToolMessage(
            "print('a')\n" * 50,
            tool_call_id="toolu_1",
            name="read_file",
            id="t1",
            artifact={"lines": 50},
            additional_kwargs={"x": 1},
            response_metadata={"elapsed": 0.1},
        ),
        ToolMessage(
            [
                {"type": "text", "text": "a.py:1: def f"},
                {"type": "image", "url": "https://example.com/p.png"},
            ],
            tool_call_id="toolu_2",
            name="grep",
            status="error",
            id="t2",
        ),
    ]


def test_replacing_a_tool_result_keeps_every_other_field() -> None:
    history = anthropic_turn()
    neutral = adapter.to_neutral(history)
    for index in (3, 4):
        result = neutral[index].parts[0]
        assert isinstance(result, ToolResultPart)
        edited = list(neutral)
        # A clearing replaces the text and drops the media the result carried (an image here).
        edited[index] = replace_part(
            neutral[index], result, replace(result, content="[cleared: re-read the file]", media=())
        )
        out = adapter.to_native(edited)
        assert same_objects(out[:index], history[:index]) and same_objects(
            out[index + 1 :], history[index + 1 :]
        )
        new, old = out[index], history[index]
        assert isinstance(new, ToolMessage) and isinstance(old, ToolMessage)
        assert new.content == "[cleared: re-read the file]"
        for field in (
            "id",
            "name",
            "tool_call_id",
            "status",
            "artifact",
            "additional_kwargs",
            "response_metadata",
        ):
            assert getattr(new, field) == getattr(old, field), field
        assert new.additional_kwargs is old.additional_kwargs and new.artifact is old.artifact
        assert adapter.to_neutral(out) == edited


def test_dropping_thinking_keeps_blocks_signatures_and_metadata() -> None:
    history = anthropic_turn()
    neutral = adapter.to_neutral(history)
    msg = neutral[2]
    assert [p.kind for p in msg.parts] == [
        "thinking",
        "thinking",
        "thinking",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert len(msg.tool_calls) == 2, "tool_use blocks repeat tool_calls: each call is one part"
    first = msg.parts[0]
    edited = list(neutral)
    edited[2] = replace_part(msg, first, None)
    out = adapter.to_native(edited)
    assert same_objects(out[:2], history[:2]) and same_objects(out[3:], history[3:])
    new, old = out[2], history[2]
    assert isinstance(new, AIMessage) and isinstance(old, AIMessage)
    assert same_objects(new.content, old.content[1:])
    assert new.content[1] == {"type": "thinking", "thinking": "Then grep.", "signature": "EqSigTwo"}
    assert new.tool_calls is old.tool_calls
    assert new.additional_kwargs is old.additional_kwargs
    assert new.response_metadata is old.response_metadata
    assert new.usage_metadata is old.usage_metadata
    assert (new.id, new.name) == ("msg_01", "coder")
    assert adapter.to_neutral(out) == edited


def test_text_edits_keep_the_content_shape() -> None:
    plain = AIMessage("Long answer", id="a", response_metadata={"model_provider": "openai"})
    blocks = SystemMessage(
        content=[
            {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "More rules."},
        ]
    )
    neutral = adapter.to_neutral([plain, blocks])
    text = neutral[0].parts[0]
    [out] = adapter.to_native([replace_part(neutral[0], text, replace(text, text="Short"))])
    assert out.content == "Short" and out.id == "a" and out.response_metadata is plain.response_metadata

    rules = neutral[1].parts[0]
    [out] = adapter.to_native([replace_part(neutral[1], rules, replace(rules, text="Rules!"))])
    assert out.content == [
        {"type": "text", "text": "Rules!", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "More rules."},
    ]
    assert out.content[1] is blocks.content[1]


def test_message_id_and_usage_edits() -> None:
    native = AIMessage(
        "x", id="old", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    )
    [msg] = adapter.to_neutral([native])
    [out] = adapter.to_native([replace(msg, id="new", usage=ReportedUsage(9, 2))])
    assert out.id == "new" and out.content == "x"
    assert out.usage_metadata == {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}


def test_an_id_given_in_place_after_reading_is_never_cleared() -> None:
    history = [HumanMessage("a"), ToolMessage("long output", tool_call_id="c1")]
    neutral = adapter.to_neutral(history)
    add_messages([], history)  # LangGraph gives ids in place to messages that have none
    assert all(m.id for m in history)
    result = neutral[1].parts[0]
    out = adapter.to_native(
        [neutral[0], replace_part(neutral[1], result, replace(result, content="[cleared]"))]
    )
    assert out[0] is history[0]
    assert out[1].id == history[1].id and out[1].content == "[cleared]"
    assert len(add_messages(history, out)) == 2, "the edit replaces the message, it is not appended"


def test_role_change_builds_a_message_of_the_new_role() -> None:
    [msg] = adapter.to_neutral([HumanMessage("I decided to use sqlite.", id="h9")])
    [out] = adapter.to_native([replace(msg, role="system")])
    assert isinstance(out, SystemMessage) and out.content == "I decided to use sqlite." and out.id == "h9"


# --- pins and summaries -----------------------------------------------------------------------


def test_pins_live_in_additional_kwargs() -> None:
    history = anthropic_turn()
    neutral = adapter.to_neutral(history)
    edited = list(neutral)
    edited[1] = replace(neutral[1], pinned=True)
    text = neutral[2].parts[3]
    edited[2] = replace_part(neutral[2], text, replace(text, pinned=True))
    out = adapter.to_native(edited)
    assert out[1].additional_kwargs == {PIN_KEY: True} and out[1].content == "Fix a.py"
    assert out[2].additional_kwargs == {"cache": {"hit": True}, PIN_KEY: [3]}
    assert same_objects(out[2].content, history[2].content)
    back = adapter.to_neutral(out)
    assert back == edited
    assert back[1].pinned and back[2].parts[3].pinned and not back[2].pinned
    assert same_objects(adapter.to_native(back), out)

    # Unpinning removes the key; a value that is not ours is left alone and pins nothing.
    [unpinned] = adapter.to_native([replace(back[1], pinned=False)])
    assert unpinned.additional_kwargs == {}
    foreign = HumanMessage("x", additional_kwargs={PIN_KEY: "yes"})
    [msg] = adapter.to_neutral([foreign])
    assert not msg.pinned
    [out_msg] = adapter.to_native([replace(msg, parts=(TextPart("y"),))])
    assert out_msg.additional_kwargs == {PIN_KEY: "yes"}


def test_pinning_the_second_of_two_equal_blocks_pins_that_one() -> None:
    image = {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}
    native = HumanMessage(content=[{"type": "text", "text": "compare"}, dict(image), dict(image)])
    [msg] = adapter.to_neutral([native])
    second = msg.parts[2]
    [out] = adapter.to_native([replace_part(msg, second, replace(second, pinned=True))])
    assert out.additional_kwargs == {PIN_KEY: [2]}
    assert [p.pinned for p in adapter.to_neutral([out])[0].parts] == [False, False, True]


def test_new_summary_follows_langchain_convention_plus_marker() -> None:
    marker = CompactionMarker(
        covered_from=1, covered_to=40, tokens_before=90_000, tokens_after=3_000, strategy="summarize"
    )
    summary = Message("user", (SummaryPart("## Task\nFix a.py", marker),))
    [out] = adapter.to_native([summary])
    assert isinstance(out, HumanMessage)
    assert out.content == "## Task\nFix a.py" and out.id is None
    assert out.additional_kwargs == {"lc_source": SUMMARY_SOURCE, COMPACTION_KEY: marker.to_dict()}
    restored = messages_from_dict(messages_to_dict([out]))
    [back] = adapter.to_neutral(restored)
    assert back == summary and back.parts[0].marker == marker  # type: ignore[union-attr]
    assert same_objects(adapter.to_native([back]), restored)


def test_langchain_summarization_middleware_messages_are_summaries() -> None:
    native = HumanMessage(
        content="Here is a summary of the conversation to date:\n\nWe fixed a.py.",
        additional_kwargs={"lc_source": SUMMARY_SOURCE},
        id="sum-1",
    )
    [msg] = adapter.to_neutral([native])
    assert msg.role == "user" and msg.parts == (SummaryPart(native.content, None),)  # type: ignore[arg-type]
    assert same_objects(round_trip([native]), [native])


def test_editing_a_summary_updates_text_and_marker_only() -> None:
    marker = CompactionMarker(0, 10, 5000, 400, "summarize", model="m1")
    stored = {"lc_source": SUMMARY_SOURCE, COMPACTION_KEY: marker.to_dict(), "other": True}
    native = HumanMessage(
        content=[
            {"type": "text", "text": "old summary"},
            {"type": "image", "url": "https://example.com/d.png"},
        ],
        additional_kwargs=stored,
        id="sum-2",
    )
    [msg] = adapter.to_neutral([native])
    assert [p.kind for p in msg.parts] == ["summary", "media"]
    summary = msg.parts[0]
    assert isinstance(summary, SummaryPart)

    [out] = adapter.to_native([replace_part(msg, summary, replace(summary, text="new summary"))])
    assert out.content[0] == {"type": "text", "text": "new summary"} and out.content[1] is native.content[1]
    assert out.additional_kwargs is native.additional_kwargs, (
        "an edit of the text alone leaves the marker as it was"
    )

    newer = CompactionMarker(0, 20, 9000, 500, "summarize", model="m1")
    [out] = adapter.to_native([replace_part(msg, summary, replace(summary, text="newer", marker=newer))])
    assert out.additional_kwargs == {**stored, COMPACTION_KEY: newer.to_dict()}
    assert adapter.to_neutral([out])[0].parts[0] == SummaryPart("newer", newer)


# --- new messages (no native) -----------------------------------------------------------------


def test_new_assistant_thinking_takes_the_shape_that_fits_it() -> None:
    parts: tuple[Part, ...] = (
        ThinkingPart("unsigned"),
        ThinkingPart("with id", id="rs_1"),
        ThinkingPart("signed", signature="EqS", provider="anthropic"),
        ThinkingPart("", signature="EmwK", provider="anthropic", redacted=True),
        ThinkingPart("summary", signature="gAAAA", id="rs_2", provider="openai"),
        TextPart("Answer."),
        ToolCallPart("c1", "bash", {"command": "ls"}),
        ToolCallPart("c2", "bash", "ls -la (not JSON)"),
    )
    msg = Message("assistant", parts, usage=ReportedUsage(100, 20))
    [out] = adapter.to_native([msg])
    assert isinstance(out, AIMessage) and out.id is None
    assert out.content == [
        {"type": "reasoning", "reasoning": "unsigned"},
        {"type": "reasoning", "reasoning": "with id", "id": "rs_1"},
        {"type": "thinking", "thinking": "signed", "signature": "EqS"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "summary"}],
            "encrypted_content": "gAAAA",
            "id": "rs_2",
        },
        {"type": "text", "text": "Answer."},
    ]
    assert [(c["id"], c["args"]) for c in out.tool_calls] == [("c1", {"command": "ls"})]
    assert [(c["id"], c["args"]) for c in out.invalid_tool_calls] == [("c2", "ls -la (not JSON)")]
    assert out.usage_metadata == {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    assert adapter.to_neutral([out]) == [msg]


def test_new_tool_results_become_tool_messages() -> None:
    tool = Message(
        "tool",
        (ToolResultPart("c1", "bash", "ok"), ToolResultPart("c2", "grep", "failed", is_error=True)),
    )
    user = Message("user", (TextPart("Now continue."), ToolResultPart("c3", None, "done")))
    out = adapter.to_native([tool, user])
    assert [type(m) for m in out] == [ToolMessage, ToolMessage, ToolMessage, HumanMessage]
    assert [(m.tool_call_id, m.status) for m in out[:3]] == [
        ("c1", "success"),
        ("c2", "error"),
        ("c3", "success"),
    ]  # type: ignore[attr-defined]
    assert out[3].content == "Now continue."
    assert adapter.to_neutral(out) == [
        Message("tool", (tool.parts[0],)),
        Message("tool", (tool.parts[1],)),
        Message("tool", (user.parts[1],)),
        Message("user", (user.parts[0],)),
    ]


def test_new_messages_get_ids_from_langgraph_so_equal_messages_never_collide() -> None:
    notice = Message.user("[earlier turns were removed]")
    out = adapter.to_native([notice, Message.assistant("ok"), notice])
    assert [m.id for m in out] == [None, None, None]
    state = add_messages([], out)
    assert len(state) == 3 and len({m.id for m in state}) == 3


def test_parts_that_cannot_be_written_are_refused_by_index() -> None:
    with pytest.raises(ValueError, match="message 1: only an assistant message can make tool calls"):
        adapter.to_native([Message.user("a"), Message("user", (ToolCallPart("c", "f", {}),))])
    with pytest.raises(ValueError, match=r"message 0: .*OtherPart \(mystery\)"):
        adapter.to_native([Message("user", (OtherPart("mystery", "?"),))])
    with pytest.raises(ValueError, match="message 0: a image/png media part without"):
        adapter.to_native([Message("user", (MediaPart("image/png", "", 10),))])
    with pytest.raises(ValueError, match="message 0: a tool message can only carry tool results, not a text"):
        adapter.to_native([Message("tool", (ToolResultPart("c", None, "x"), TextPart("y")))])


# --- properties on generated histories --------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(langchain_histories())
def test_round_trip_is_identity(history: list[BaseMessage]) -> None:
    neutral = adapter.to_neutral(history)
    assert len(neutral) == len(history)
    assert same_objects(adapter.to_native(neutral), history)
    restored = messages_from_dict(messages_to_dict(history))
    again = adapter.to_neutral(restored)
    assert again == neutral
    assert same_objects(adapter.to_native(again), restored)


@PROPERTY_SETTINGS
@given(langchain_histories())
def test_each_tool_call_is_one_part_answered_by_the_next_tool_messages(history: list[BaseMessage]) -> None:
    neutral = adapter.to_neutral(history)
    for index, (native, msg) in enumerate(zip(history, neutral, strict=True)):
        if isinstance(native, AIMessage):
            assert [c.id for c in msg.tool_calls] == [c["id"] for c in native.tool_calls]
            following = neutral[index + 1 : index + 1 + len(msg.tool_calls)]
            assert [m.tool_results[0].tool_call_id for m in following] == [c.id for c in msg.tool_calls]


EDITS = ("clear_result", "drop_thinking", "replace_text", "edit_call", "pin_message", "pin_part")


def edit_targets(neutral: list[Message], kind: str) -> list[tuple[int, Part | None]]:
    targets: list[tuple[int, Part | None]] = []
    for index, msg in enumerate(neutral):
        if kind == "pin_message":
            targets.append((index, None))
        for part in msg.parts:
            if (
                (kind == "clear_result" and isinstance(part, ToolResultPart))
                or (kind == "drop_thinking" and isinstance(part, ThinkingPart) and len(msg.parts) > 1)
                or (kind == "replace_text" and isinstance(part, TextPart))
                or (kind == "edit_call" and isinstance(part, ToolCallPart))
                or kind == "pin_part"
            ):
                targets.append((index, part))
    return targets


def apply_edit(msg: Message, part: Part | None, kind: str) -> Message:
    if part is None:
        return replace(msg, pinned=True)
    if kind == "clear_result":
        assert isinstance(part, ToolResultPart)
        return replace_part(msg, part, replace(part, content=f"[cleared {len(part.content)} chars]"))
    if kind == "drop_thinking":
        return replace_part(msg, part, None)
    if kind == "replace_text":
        assert isinstance(part, TextPart)
        return replace_part(msg, part, replace(part, text=part.text + " (edited)"))
    if kind == "edit_call":
        assert isinstance(part, ToolCallPart)
        return replace_part(msg, part, replace(part, arguments={"cleared": True}))
    return replace_part(msg, part, replace(part, pinned=True))


def blocks_of(part: Part, native: BaseMessage) -> list[Any]:
    """The content blocks an edit of `part` may change: its own, or the one repeating its call."""
    blocks = native.content if isinstance(native.content, list) else []
    if isinstance(part, ToolResultPart) and isinstance(native, ToolMessage):
        # A tool result is the whole content of its message but for its media (`part.media`),
        # which an edit of its text keeps.
        media = {id(item.native) for item in part.media}
        return [b for b in blocks if id(b) not in media]
    if isinstance(part, ToolCallPart):
        return [b for b in blocks if isinstance(b, dict) and part.id in (b.get("id"), b.get("call_id"))]
    return [b for b in blocks if b is part.native]


@PROPERTY_SETTINGS
@given(langchain_histories(), st.sampled_from(EDITS), st.data())
def test_an_edit_changes_only_what_it_edits(
    history: list[BaseMessage], kind: str, data: st.DataObject
) -> None:
    neutral = adapter.to_neutral(history)
    targets = edit_targets(neutral, kind)
    if not targets:
        return
    index, part = data.draw(st.sampled_from(targets))
    edited = list(neutral)
    edited[index] = apply_edit(neutral[index], part, kind)
    out = adapter.to_native(edited)

    assert len(out) == len(history)
    assert same_objects(out[:index], history[:index]) and same_objects(out[index + 1 :], history[index + 1 :])
    new, old = out[index], history[index]
    assert new is not old and type(new) is type(old)
    assert adapter.to_neutral(out) == edited

    assert (new.id, new.name) == (old.id, old.name)
    assert new.response_metadata is old.response_metadata
    changed_keys = {PIN_KEY} if kind.startswith("pin") else {"reasoning_content", "reasoning"}
    assert {k: v for k, v in new.additional_kwargs.items() if k not in changed_keys} == {
        k: v for k, v in old.additional_kwargs.items() if k not in changed_keys
    }
    if isinstance(old, AIMessage):
        assert isinstance(new, AIMessage)
        assert new.usage_metadata is old.usage_metadata
        if kind != "edit_call":
            assert new.tool_calls is old.tool_calls and new.invalid_tool_calls is old.invalid_tool_calls
    if isinstance(old, ToolMessage):
        assert isinstance(new, ToolMessage)
        assert (new.tool_call_id, new.status, new.artifact) == (old.tool_call_id, old.status, old.artifact)
    if isinstance(old.content, list):
        affected = blocks_of(part, old) if part is not None and not kind.startswith("pin") else []
        untouched = [b for b in old.content if not any(b is a for a in affected)]
        new_blocks = new.content if isinstance(new.content, list) else []
        survivors = [b for b in new_blocks if any(b is o for o in old.content)]
        assert same_objects(survivors, untouched), "untouched blocks stay, as the same objects, in order"
    elif kind not in ("replace_text", "clear_result"):
        assert new.content is old.content


@PROPERTY_SETTINGS
@given(langchain_histories(), texts())
def test_clearing_every_tool_result_at_once(history: list[BaseMessage], placeholder: str) -> None:
    neutral = adapter.to_neutral(history)
    edited = [
        replace(m, parts=tuple(replace(p, content=placeholder) for p in m.parts)) if m.role == "tool" else m
        for m in neutral
    ]
    out = adapter.to_native(edited)
    for new, old in zip(out, history, strict=True):
        if isinstance(old, ToolMessage):
            assert isinstance(new, ToolMessage)
            assert adapter.to_neutral([new])[0].tool_results[0].content == placeholder
            assert (new.id, new.tool_call_id, new.artifact) == (old.id, old.tool_call_id, old.artifact)
        else:
            assert new is old


@PROPERTY_SETTINGS
@given(langchain_histories(), st.data())
def test_many_edits_at_once(history: list[BaseMessage], data: st.DataObject) -> None:
    """What a pipeline does: strip old thinking, clear old results, pin, edit text, all in one pass."""
    neutral = adapter.to_neutral(history)
    edited: list[Message] = []
    for msg in neutral:
        parts: list[Part] = []
        for part in msg.parts:
            action = data.draw(st.sampled_from(["keep", "keep", "edit", "pin", "drop"]))
            if action == "drop" and isinstance(part, ThinkingPart):
                continue
            if action == "edit" and isinstance(part, ToolResultPart):
                part = replace(part, content="[cleared]")
            elif action == "edit" and isinstance(part, TextPart):
                part = replace(part, text=part.text + "!")
            elif action == "pin":
                part = replace(part, pinned=True)
            parts.append(part)
        if not parts:
            parts = list(msg.parts)
        changed = (
            tuple(parts)
            if any(a is not b for a, b in zip(parts, msg.parts)) or len(parts) != len(msg.parts)
            else msg.parts
        )
        edited.append(replace(msg, parts=changed, pinned=msg.pinned or data.draw(st.booleans())))
    out = adapter.to_native(edited)
    assert len(out) == len(history)
    # A pinned message pins all its parts: part pins inside it are not stored apart.
    assert adapter.to_neutral(out) == [
        replace(m, parts=tuple(replace(p, pinned=False) for p in m.parts)) if m.pinned else m for m in edited
    ]
    for msg, new, old in zip(edited, out, history, strict=True):
        if msg.is_untouched:
            assert new is old
        else:
            assert (type(new), new.id, new.name) == (type(old), old.id, old.name)
            assert new.response_metadata is old.response_metadata


# --- a real LangGraph graph -------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}\n" * 20


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to bind tools and recording what it was sent."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted_model() -> ToolCallingFakeModel:
    first = AIMessage(
        content=[
            {"type": "thinking", "thinking": "I should read both files.", "signature": "EqGraphSig"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.py"}},
        ],
        tool_calls=[
            {"id": "toolu_a", "name": "read_file", "args": {"path": "a.py"}},
            {"id": "toolu_b", "name": "read_file", "args": {"path": "b.py"}},
        ],
        response_metadata={"model_provider": "anthropic"},
        usage_metadata={"input_tokens": 50, "output_tokens": 30, "total_tokens": 80},
        id="msg_graph_1",
    )
    return ToolCallingFakeModel(
        messages=iter([first, AIMessage("Both files are fine.", id="msg_graph_2")]), received=[]
    )


def build_graph(model: ToolCallingFakeModel, *, clear_results: bool) -> Any:
    bound = model.bind_tools([read_file])

    def agent(state: MessagesState) -> dict[str, Any]:
        neutral = adapter.to_neutral(state["messages"])
        assert same_objects(adapter.to_native(neutral), state["messages"])
        if clear_results:
            neutral = [
                replace(m, parts=tuple(replace(p, content="[cleared]") for p in m.parts))
                if m.role == "tool"
                else m
                for m in neutral
            ]
        history = adapter.to_native(neutral)
        return {"messages": [bound.invoke(history)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def test_langgraph_agent_runs_through_the_adapter() -> None:
    model = scripted_model()
    graph = build_graph(model, clear_results=False)
    config = {"configurable": {"thread_id": "t1"}}
    result = graph.invoke({"messages": [HumanMessage("Check a.py and b.py")]}, config)
    messages = result["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert messages[-1].content == "Both files are fine."
    assert len(model.received) == 2
    # The model's second call saw the thinking, its signature and both tool_use blocks unchanged.
    sent = model.received[1]
    assert sent[1].content == messages[1].content and sent[1].tool_calls == messages[1].tool_calls
    assert sent[2].content == read_file.invoke({"path": "a.py"})
    # The checkpointed state reads back to the same neutral history.
    stored = graph.get_state(config).values["messages"]
    assert adapter.to_neutral(stored) == adapter.to_neutral(messages)
    assert adapter.to_neutral(stored)[1].parts[0] == ThinkingPart(
        "I should read both files.", signature="EqGraphSig", provider="anthropic"
    )


def test_langgraph_agent_sees_edited_history_while_state_keeps_the_original() -> None:
    model = scripted_model()
    graph = build_graph(model, clear_results=True)
    result = graph.invoke(
        {"messages": [HumanMessage("Check a.py and b.py")]}, {"configurable": {"thread_id": "t2"}}
    )
    sent = model.received[1]
    tool_messages = [m for m in sent if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["[cleared]", "[cleared]"]
    assert [m.tool_call_id for m in tool_messages] == ["toolu_a", "toolu_b"]
    state_tools = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.id for m in tool_messages] == [m.id for m in state_tools], "edited copies keep their graph ids"
    assert all(m.content.startswith("contents of") for m in state_tools)
    assert sent[1] == result["messages"][1]


def test_a_part_pinned_in_a_reply_whose_reasoning_equals_its_text() -> None:
    """Found by hypothesis (`test_many_edits_at_once`): a DeepSeek reply whose reasoning_content and
    text are the same string object. Pinning either part keeps the reasoning where it was (not merged
    into the text) and pins that part alone."""

    history = [
        HumanMessage("0"),
        AIMessage(
            content="0",
            additional_kwargs={"reasoning_content": "0"},
            response_metadata={"model_provider": "deepseek", "model_name": "deepseek-reasoner"},
        ),
    ]
    adapter = LangChainAdapter()
    user, reply = adapter.to_neutral(history)
    for pinned in range(2):
        edited = replace(
            reply, parts=tuple(replace(p, pinned=i == pinned) for i, p in enumerate(reply.parts))
        )
        native = adapter.to_native([user, edited])[1]
        assert native.content == "0" and native.additional_kwargs["reasoning_content"] == "0"
        assert adapter.to_neutral([history[0], native])[1] == edited
