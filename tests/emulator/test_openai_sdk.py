"""The emulator through the official `openai` SDK: Chat Completions and Responses."""

from __future__ import annotations

import json
import re
from typing import Any

import openai
import pytest

from tests.emulator import ProviderEmulator, ToolCall, Turn

MODEL = "gpt-5"
CHAT_TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
RESPONSES_TOOLS = [{"type": "function", "name": "read", "parameters": {"type": "object"}}]


def _script(request: Any) -> Turn:
    done = json.dumps(request.body).count("contents of")
    if done == 0:
        return Turn(
            thinking="Two reads.",
            tool_calls=[ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})],
        )
    return Turn(thinking="Both read.", text="Read a and b.")


def _error(error: openai.APIStatusError) -> dict[str, Any]:
    body = error.body
    assert isinstance(body, dict)
    return dict(body)


@pytest.fixture
def emulator() -> ProviderEmulator:
    return ProviderEmulator(_script, context_windows={"gpt-5-mini": 500})


def test_chat_tool_loop_passes_and_reports_usage(emulator: ProviderEmulator) -> None:
    client = emulator.openai_client()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read a and b"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    calls = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls" and len(calls) == 2
    assert first.usage.completion_tokens_details.reasoning_tokens > 0
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages += [{"role": "tool", "tool_call_id": c.id, "content": f"contents of {c.id}"} for c in calls]
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    assert second.choices[0].message.content == "Read a and b."
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    assert [r.status for r in emulator.received] == [200, 200]


async def test_chat_rejections(emulator: ProviderEmulator) -> None:
    client = emulator.openai_client(async_=True)
    first = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "go"}], tools=CHAT_TOOLS
    )
    assistant = first.choices[0].message.model_dump(exclude_none=True)
    a, b = (c.id for c in first.choices[0].message.tool_calls)
    cases = [
        (
            [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": a, "content": "x"}],
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'.",
            "messages.[1].role",
            None,
        ),
        (
            [
                {"role": "user", "content": "go"},
                assistant,
                {"role": "tool", "tool_call_id": a, "content": "x"},
            ],
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {b}",
            "messages",
            None,
        ),
        (
            [
                {"role": "user", "content": "go"},
                assistant,
                {"role": "tool", "tool_call_id": a, "content": "x"},
                {"role": "tool", "tool_call_id": a, "content": "x"},
            ],
            f"Invalid parameter: Duplicate value for 'tool_call_id' of '{a}', "
            "in messages[2] and messages[3].",
            "messages.[3].tool_call_id",
            None,
        ),
        (
            [{"role": "user", "content": "word " * 600}],
            r"This model's maximum context length is 500 tokens\. "
            r"However, your messages resulted in (6\d\d) tokens\. Please reduce the length of the messages\.",
            "messages",
            "context_length_exceeded",
        ),
    ]
    for messages, message, param, code in cases:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="gpt-5-mini", messages=messages, tools=CHAT_TOOLS)
        error = _error(info.value)
        assert info.value.status_code == 400
        expected = message if code is None else error["message"]
        if code is not None:  # the estimate: 600 words, the message and the tool definition
            assert re.fullmatch(message, error["message"])
        assert (error["message"], error["type"], error["param"], error["code"]) == (
            expected,
            "invalid_request_error",
            param,
            code,
        )
    # Consecutive user messages are fine on Chat Completions.
    assert await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    )


def test_responses_tool_loop_with_reasoning_items(emulator: ProviderEmulator) -> None:
    client = emulator.openai_client()
    items: list[dict[str, Any]] = [{"role": "user", "content": "read a and b"}]
    first = client.responses.create(
        model=MODEL, input=items, tools=RESPONSES_TOOLS, include=["reasoning.encrypted_content"]
    )
    kinds = [o.type for o in first.output]
    assert kinds == ["reasoning", "function_call", "function_call"]
    items += [o.model_dump(exclude_none=True) for o in first.output]
    calls = [o for o in first.output if o.type == "function_call"]
    items += [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"contents of {c.name}"}
        for c in calls
    ]
    second = client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS)
    assert second.output_text == "Read a and b."
    assert second.usage.input_tokens > first.usage.input_tokens
    # Stored items can be referenced by id instead of sent again.
    by_reference = [items[0]] + [{"type": "item_reference", "id": o.id} for o in first.output] + items[4:]
    assert client.responses.create(model=MODEL, input=by_reference, tools=RESPONSES_TOOLS)


def test_responses_rejections(emulator: ProviderEmulator) -> None:
    client = emulator.openai_client()
    first = client.responses.create(model=MODEL, input="go", tools=RESPONSES_TOOLS)
    reasoning, call_a, call_b = (o.model_dump(exclude_none=True) for o in first.output)
    outputs = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": "contents of x"}
        for c in (call_a, call_b)
    ]
    user = {"role": "user", "content": "go"}
    cases = [
        (
            [user, reasoning, call_b, call_a, *outputs],
            f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required following item.",
            "R9",
        ),
        (
            [user, reasoning],
            f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required following item.",
            "R9",
        ),
        (
            [user, outputs[0]],
            f"No tool call found for function call output with call_id {call_a['call_id']}.",
            "R1",
        ),
        (
            [user, reasoning, call_a, call_b, outputs[0]],
            f"No tool output found for function call {call_b['call_id']}.",
            "R2",
        ),
        (
            [user, reasoning, call_a, call_b, *outputs, call_a],
            f"Duplicate item found with id {call_a['id']}. "
            "Remove duplicate items from your input and try again.",
            "R12",
        ),
    ]
    for items, message, rule in cases:
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS)
        error = _error(info.value)
        assert (error["message"], error["param"]) == (message, "input"), rule
        assert emulator.received[-1].rejection is not None and emulator.received[-1].rejection.rule == rule
    # Dropping the reasoning item along with nothing else is fine: reasoning is optional input.
    assert client.responses.create(model=MODEL, input=[user, call_a, call_b, *outputs], tools=RESPONSES_TOOLS)
    with pytest.raises(openai.BadRequestError, match="exceeds the context window"):
        client.responses.create(model="gpt-5-mini", input="word " * 600)
