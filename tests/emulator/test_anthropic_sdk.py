"""The emulator through the official `anthropic` SDK: what it accepts, what it rejects and how."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import pytest

from tests.emulator import BINDING_MODELS, NON_BINDING_ANTHROPIC_MODEL, ProviderEmulator, ToolCall, Turn
from tests.emulator.anthropic_api import BINDING_BETA
from tests.emulator.signing import prefix_digest

BINDING = "claude-opus-5-5"
TOOLS = [{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}]
SYSTEM = "You are a careful engineer."
R2_TEXT = (
    "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {call_id}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)


def _loop_script(request: Any) -> Turn:
    """Two tool turns with thinking (the second a parallel pair), then a final answer."""
    assistant_turns = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
    if assistant_turns == 0:
        return Turn(thinking="I need a.", tool_calls=[ToolCall("read", {"path": "a"})])
    if assistant_turns == 1:
        return Turn(
            thinking=["Now b and c.", "Both at once."],
            text="Reading two.",
            tool_calls=[ToolCall("read", {"path": "b"}), ToolCall("read", {"path": "c"})],
        )
    return Turn(thinking="Done reading.", text="All three files read.")


def _replay(message: Any) -> dict[str, Any]:
    """An assistant message sent back exactly as received."""
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}


def _results(message: Any, text: str = "contents") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"{text} {b.input}"}
            for b in message.content
            if b.type == "tool_use"
        ],
    }


def _conversation(client: Any, model: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Run the scripted loop to its end; returns the final request's messages."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read a, b and c."}]
    while True:
        reply = client.messages.create(
            model=model, max_tokens=2048, system=SYSTEM, tools=TOOLS, messages=messages, **kwargs
        )
        messages.append(_replay(reply))
        if reply.stop_reason != "tool_use":
            return messages
        messages.append(_results(reply))


def _rejection(client: Any, **kwargs: Any) -> anthropic.APIStatusError:
    kwargs.setdefault("model", NON_BINDING_ANTHROPIC_MODEL)
    kwargs.setdefault("max_tokens", 1024)
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(**kwargs)
    return info.value


def _error(error: anthropic.APIStatusError) -> dict[str, Any]:
    body = error.body
    assert isinstance(body, dict) and body["type"] == "error"
    return dict(body["error"])


@pytest.fixture
def emulator() -> ProviderEmulator:
    return ProviderEmulator(_loop_script)


@pytest.mark.parametrize("model", [NON_BINDING_ANTHROPIC_MODEL, BINDING])
def test_a_thinking_tool_loop_replayed_verbatim_passes(emulator: ProviderEmulator, model: str) -> None:
    client = emulator.anthropic_client()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    messages = _conversation(client, model, thinking=thinking)
    assert [r.status for r in emulator.received] == [200, 200, 200]
    assert messages[-1]["content"][-1] == {"type": "text", "text": "All three files read."}
    # The usage grows with the history and counts what was sent.
    usage = [r.response["usage"]["input_tokens"] for r in emulator.received]
    assert usage == sorted(usage) and usage[0] > 10


async def test_async_client_and_streaming(emulator: ProviderEmulator) -> None:
    client = emulator.anthropic_client(async_=True)
    async with client.messages.stream(
        model=BINDING,
        max_tokens=1024,
        system=SYSTEM,
        tools=TOOLS,
        messages=[{"role": "user", "content": "go"}],
    ) as stream:
        streamed = await stream.get_final_message()
    assert [b.type for b in streamed.content] == ["thinking", "tool_use"]
    assert streamed.content[1].input == {"path": "a"}
    # The streamed block replays like a non-streamed one: its signature binds the same prefix.
    follow_up = await client.messages.create(
        model=BINDING,
        max_tokens=1024,
        system=SYSTEM,
        tools=TOOLS,
        messages=[{"role": "user", "content": "go"}, _replay(streamed), _results(streamed)],
    )
    assert follow_up.stop_reason == "tool_use"


def test_signatures_verify_and_commit_to_text_and_prefix(emulator: ProviderEmulator) -> None:
    client = emulator.anthropic_client()
    messages = _conversation(client, BINDING)
    first_block = messages[1]["content"][0]
    signer = emulator.signer
    assert signer.verify_content(first_block["signature"], first_block["thinking"])
    assert not signer.verify_content(first_block["signature"], first_block["thinking"] + " ")
    assert not ProviderEmulator(_loop_script).signer.verify_content(
        first_block["signature"], first_block["thinking"]
    )
    head = [[{"type": "text", "text": SYSTEM}], TOOLS]
    opening = {"role": "user", "content": [{"type": "text", "text": "Read a, b and c."}]}  # canonical form
    prefix = prefix_digest(head, [opening])
    assert signer.verify_prefix(first_block["signature"], first_block["thinking"], prefix)
    other = prefix_digest(head, [{"role": "user", "content": [{"type": "text", "text": "Read a and b."}]}])
    assert not signer.verify_prefix(first_block["signature"], first_block["thinking"], other)
    # The second turn's first block commits to the first turn's thinking and its signature too.
    second = messages[3]["content"][0]
    assert signer.verify_prefix(
        second["signature"], second["thinking"], prefix_digest(head, [opening, *messages[1:3]])
    )
    forged_first = {
        **messages[1],
        "content": [{**first_block, "signature": "x"}, *messages[1]["content"][1:]],
    }
    forged = prefix_digest(head, [opening, forged_first, messages[2]])
    assert not signer.verify_prefix(second["signature"], second["thinking"], forged)


@pytest.mark.parametrize("model", BINDING_MODELS)
def test_binding_model_rejects_an_edited_prefix_and_drop_block_drops(model: str) -> None:
    emulator = ProviderEmulator(_loop_script)
    client = emulator.anthropic_client()
    messages = _conversation(client, model)
    edited = copy.deepcopy(messages[:-1])
    edited[0]["content"] = "Read a, b and c, carefully."  # an edit at the very start
    error = _rejection(client, model=model, system=SYSTEM, tools=TOOLS, messages=edited)
    assert error.status_code == 400
    assert _error(error)["type"] == "invalid_request_error"
    assert _error(error)["message"] == (
        "messages.1.content.0: Invalid signature in thinking block. The block is bound to a different "
        "conversation. Remove the block, or set thinking.block_binding.prefix_mismatch_behavior to "
        '"drop_block".'
    )
    dropped = client.beta.messages.create(
        model=model,
        max_tokens=1024,
        system=SYSTEM,
        tools=TOOLS,
        messages=edited,
        thinking={"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}},
        betas=[BINDING_BETA],
    )
    # Every thinking block after the edit goes, the later turn's consecutive pair included.
    # (A typed field in anthropic>=1, an extra field before.)
    transformations = [
        t if isinstance(t, dict) else t.model_dump() for t in dropped.input_transformations or []
    ]
    assert [(t["path"], t["reason"]) for t in transformations] == [
        ("messages.1.content.0", "prefix_binding_mismatch"),
        ("messages.3.content.0", "prefix_binding_mismatch"),
        ("messages.3.content.1", "prefix_binding_mismatch"),
    ]


def test_binding_model_accepts_thinking_removed_from_the_edit_onward(emulator: ProviderEmulator) -> None:
    client = emulator.anthropic_client()
    messages = _conversation(client, BINDING, thinking={"type": "adaptive"})
    edited = copy.deepcopy(messages[:-1])
    edited[2]["content"][0]["content"] = "[cleared]"  # edit the first tool result
    for message in edited[3:]:
        if message["role"] == "assistant":
            message["content"] = [b for b in message["content"] if b["type"] != "thinking"]
    reply = client.messages.create(
        model=BINDING,
        max_tokens=1024,
        system=SYSTEM,
        tools=TOOLS,
        messages=edited,
        thinking={"type": "adaptive"},
    )
    assert reply.content[-1].text == "All three files read."
    # The thinking before the edit is still valid, and so is the new thinking produced after it.
    edited.append(_replay(reply))
    edited.append({"role": "user", "content": "And now?"})
    assert client.messages.create(model=BINDING, max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=edited)
    # Removing an earlier block while keeping a later one is a prefix change for the later one.
    gap = copy.deepcopy(messages[:-1])
    gap[1]["content"] = [b for b in gap[1]["content"] if b["type"] != "thinking"]
    error = _rejection(client, model=BINDING, system=SYSTEM, tools=TOOLS, messages=gap)
    assert _error(error)["message"].startswith("messages.3.content.0: Invalid signature in thinking block.")


def test_binding_check_on_an_older_account_runs_only_when_asked() -> None:
    emulator = ProviderEmulator(_loop_script, enforce_prefix_check=False)
    client = emulator.anthropic_client()
    messages = _conversation(client, BINDING)
    messages[0]["content"] = "Something else entirely."
    assert client.messages.create(
        model=BINDING, max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=messages[:-1]
    )
    with pytest.raises(anthropic.BadRequestError, match="bound to a different conversation"):
        client.beta.messages.create(
            model=BINDING,
            max_tokens=1024,
            system=SYSTEM,
            tools=TOOLS,
            messages=messages[:-1],
            thinking={"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}},
            betas=[BINDING_BETA],
        )


def test_non_binding_model_ignores_prefix_edits_but_checks_the_block_itself(
    emulator: ProviderEmulator,
) -> None:
    client = emulator.anthropic_client()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    messages = _conversation(client, NON_BINDING_ANTHROPIC_MODEL, thinking=thinking)[:-1]
    edited = copy.deepcopy(messages)
    edited[0]["content"] = "A different first prompt."
    edited[2]["content"][0]["content"] = "[cleared]"
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL,
        max_tokens=2048,
        system="Other",
        tools=TOOLS,
        messages=edited,
        thinking=thinking,
    )
    tampered = copy.deepcopy(messages)
    tampered[3]["content"][0]["thinking"] += " (edited)"
    error = _rejection(
        client, system=SYSTEM, tools=TOOLS, messages=tampered, thinking=thinking, max_tokens=2048
    )
    assert (error.status_code, _error(error)["message"]) == (
        400,
        "messages.3.content.0: Invalid `signature` in `thinking` block",
    )
    unsigned = copy.deepcopy(messages)
    unsigned[1]["content"][0]["signature"] = ""
    error = _rejection(
        client, system=SYSTEM, tools=TOOLS, messages=unsigned, thinking=thinking, max_tokens=2048
    )
    assert _error(error)["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_r7_the_last_cycle_must_start_with_thinking_when_thinking_is_enabled(
    emulator: ProviderEmulator,
) -> None:
    client = emulator.anthropic_client()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    messages = _conversation(client, NON_BINDING_ANTHROPIC_MODEL, thinking=thinking)[:-1]
    stripped = copy.deepcopy(messages)
    stripped[3]["content"] = [b for b in stripped[3]["content"] if b["type"] != "thinking"]
    error = _rejection(
        client, system=SYSTEM, tools=TOOLS, messages=stripped, thinking=thinking, max_tokens=2048
    )
    assert _error(error)["message"].startswith(
        "messages.3.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block"
    )
    # Older turns may lose their thinking; so may the last one once thinking is off or the cycle is closed.
    older = copy.deepcopy(messages)
    older[1]["content"] = [b for b in older[1]["content"] if b["type"] != "thinking"]
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL,
        max_tokens=2048,
        system=SYSTEM,
        tools=TOOLS,
        messages=older,
        thinking=thinking,
    )
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL, max_tokens=2048, system=SYSTEM, tools=TOOLS, messages=stripped
    )


def test_redacted_thinking_carries_its_binding() -> None:
    emulator = ProviderEmulator(lambda request: Turn(thinking="secret", redacted=True, text="ok"))
    client = emulator.anthropic_client()
    first = client.messages.create(
        model=BINDING, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert first.content[0].type == "redacted_thinking"
    history = [{"role": "user", "content": "hi"}, _replay(first), {"role": "user", "content": "more"}]
    assert client.messages.create(model=BINDING, max_tokens=100, messages=history)
    history[0] = {"role": "user", "content": "hello"}
    error = _rejection(client, model=BINDING, messages=history)
    assert "messages.1.content.0: Invalid signature in thinking block" in _error(error)["message"]


def test_consecutive_same_role_turns_are_merged_not_rejected(emulator: ProviderEmulator) -> None:
    client = emulator.anthropic_client()
    reply = client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL,
        max_tokens=100,
        tools=TOOLS,
        messages=[{"role": "user", "content": "first"}, {"role": "user", "content": "second"}],
    )
    # Tool results split over two user messages are one turn too.
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}, _replay(reply)]
    history += [_results(reply), {"role": "user", "content": "and note this"}]
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL, max_tokens=100, tools=TOOLS, messages=history
    )


def test_structural_rules_are_rejected_with_the_api_text(emulator: ProviderEmulator) -> None:
    client = emulator.anthropic_client()
    reply = client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL,
        max_tokens=100,
        tools=TOOLS,
        messages=[{"role": "user", "content": "go"}],
    )
    call_id = reply.content[-1].id
    assistant = _replay(reply)
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "x"}
    cases: list[tuple[list[dict[str, Any]], str]] = [
        (  # R1
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}],
                }
            ],
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
        ),
        (  # R2
            [{"role": "user", "content": "go"}, assistant, {"role": "user", "content": "never mind"}],
            R2_TEXT.format(call_id=call_id),
        ),
        (  # R3
            [
                {"role": "user", "content": "go"},
                assistant,
                {"role": "user", "content": [{"type": "text", "text": "here:"}, result]},
            ],
            R2_TEXT.format(call_id=call_id),
        ),
        (  # R4
            [assistant, {"role": "user", "content": [result]}],
            'messages: first message must use the "user" role',
        ),
        (  # R6
            [{"role": "user", "content": [{"type": "text", "text": ""}]}],
            "messages: text content blocks must be non-empty",
        ),
        (  # R12
            [{"role": "user", "content": "go"}, assistant, {"role": "user", "content": [result]}, assistant],
            "messages.3.content.1: `tool_use` ids must be unique",
        ),
    ]
    for messages, text in cases:
        error = _rejection(client, tools=TOOLS, messages=messages)
        assert (error.status_code, _error(error)["type"], _error(error)["message"]) == (
            400,
            "invalid_request_error",
            text,
        )
    assert [r.rejection.rule for r in emulator.rejected if r.rejection] == [
        "R1",
        "R2",
        "R3",
        "R4",
        "R6",
        "R12",
    ]


def test_context_window() -> None:
    emulator = ProviderEmulator(lambda request: Turn(text="ok"), context_windows={"claude-haiku-5-5": 1000})
    client = emulator.anthropic_client()
    long = "word " * 1200
    error = _rejection(client, model="claude-haiku-5-5", messages=[{"role": "user", "content": long}])
    assert error.status_code == 400
    tokens = int(_error(error)["message"].split()[4])
    assert _error(error)["message"] == f"prompt is too long: {tokens} tokens > 1000 maximum"
    assert tokens > 1000
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL, max_tokens=10, messages=[{"role": "user", "content": long}]
    )
    counted = client.messages.count_tokens(
        model="claude-haiku-5-5", messages=[{"role": "user", "content": long}]
    )
    assert counted.input_tokens == tokens


def test_mid_conversation_system_entries_are_accepted_and_bound(emulator: ProviderEmulator) -> None:
    """`{"role": "system"}` entries in `messages` are operator instructions the API serves; they sit
    between turns without breaking tool pairing, and count as prefix like any message."""
    client = emulator.anthropic_client()
    messages = _conversation(client, BINDING)[:-1]
    note = {"role": "system", "content": [{"type": "text", "text": "Mind the tests."}]}
    appended = [*messages[:-1], note, messages[-1]]
    assert client.messages.create(
        model=BINDING, max_tokens=100, system=SYSTEM, tools=TOOLS, messages=appended
    )
    inserted = [messages[0], note, *messages[1:]]
    assert client.messages.create(
        model=NON_BINDING_ANTHROPIC_MODEL, max_tokens=100, system=SYSTEM, tools=TOOLS, messages=inserted
    )
    error = _rejection(client, model=BINDING, system=SYSTEM, tools=TOOLS, messages=inserted)
    assert _error(error)["message"].startswith("messages.2.content.0: Invalid signature in thinking block.")
