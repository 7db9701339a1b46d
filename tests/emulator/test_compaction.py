"""The emulator's compaction endpoints, through the official SDKs: what they return, what they refuse.

Anthropic: on-demand compaction (`compaction={"type": "summarize"}`, beta `compact-2026-09-04`)
answers with one signed `compaction` block (`stop_reason` `"compaction"`); a later request sends
it first, in place of what it summarized. OpenAI: `responses.compact` returns the input's user
messages and one encrypted `compaction` item. Each refusal carries the rule it enforces.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.emulator import ProviderEmulator, ToolCall, Turn
from tests.emulator.anthropic_api import COMPACTION_BETA

BINDING = "claude-opus-5-5"
SYSTEM = "You read files."
TOOLS = [
    {"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}
]


def _scripted(*turns: Turn) -> ProviderEmulator:
    queue = list(turns)
    return ProviderEmulator(lambda request: queue.pop(0))


def _compact(client: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    kwargs.setdefault("model", BINDING)
    kwargs.setdefault("betas", [COMPACTION_BETA])
    return client.beta.messages.create(
        max_tokens=1024, messages=messages, compaction={"type": "summarize"}, **kwargs
    )


def _conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Read src/io.py and fix the bug."},
        {"role": "assistant", "content": "I will read it."},
        {"role": "user", "content": "Go on."},
    ]


def _block(response: Any) -> dict[str, Any]:
    dumped = response.content[0].model_dump(exclude_none=True)
    assert isinstance(dumped, dict)
    return dumped


# --- Anthropic ------------------------------------------------------------------------------------


def test_anthropic_compaction_returns_a_signed_block_that_replaces_what_it_summarized() -> None:
    emulator = _scripted(Turn(text="Fixed."), Turn(text="Fixed."))
    client = emulator.anthropic_client()
    response = _compact(client, _conversation())
    assert response.stop_reason == "compaction"
    block = _block(response)
    assert block["type"] == "compaction" and block["content"] == emulator.compaction_summaries[0]
    assert block["signature"]
    later = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "Continue."}]
    replay = client.beta.messages.create(
        model=BINDING, max_tokens=100, messages=later, betas=[COMPACTION_BETA]
    )
    # What precedes the block is not billed: the same request with the old conversation before it
    # counts the same tokens.
    longer = [*_conversation(), *later]
    both = client.beta.messages.create(
        model=BINDING, max_tokens=100, messages=longer, betas=[COMPACTION_BETA]
    )
    assert emulator.rejected == []
    assert replay.usage.input_tokens == both.usage.input_tokens


@pytest.mark.parametrize(
    ("change", "rule", "text"),
    [
        ({"betas": []}, "request", "compaction: Extra inputs are not permitted"),
        ({"model": "claude-fable-5-2"}, "compaction", "does not support on-demand compaction"),
        ({"model": "claude-opus-5-5-20261001"}, None, None),
        (
            {"context_management": {"edits": [{"type": "compact_20260112"}]}},
            "compaction",
            "cannot be combined with `context_management`",
        ),
        ({"stop_sequences": ["END"]}, "compaction", "stop_sequences"),
        ({"tools": TOOLS, "tool_choice": {"type": "any"}}, "compaction", "cannot call a tool"),
    ],
    ids=["no-beta", "model", "dated-model", "context-management", "stop-sequences", "forced-tool"],
)
def test_anthropic_compaction_request_refusals(
    change: dict[str, Any], rule: str | None, text: str | None
) -> None:
    emulator = ProviderEmulator(lambda request: Turn(text="unused"))
    client = emulator.anthropic_client()
    if rule is None:
        assert _compact(client, _conversation(), **change).stop_reason == "compaction"
        return
    with pytest.raises(anthropic.BadRequestError) as caught:
        _compact(client, _conversation(), **change)
    assert text is not None and text in caught.value.message
    assert emulator.rejected[-1].rejection is not None and emulator.rejected[-1].rejection.rule == rule


@pytest.mark.parametrize(
    ("edit", "betas", "rule"),
    [
        (lambda b: {**b, "content": b["content"] + " (edited)"}, [COMPACTION_BETA], "R8"),
        (lambda b: b, [], "request"),
        (lambda b: {**b, "id": "cmp_1", "encrypted_content": "x"}, [COMPACTION_BETA], "request"),
        (lambda b: {**b, "content": ""}, [COMPACTION_BETA], "R6"),
    ],
    ids=["edited", "no-beta", "openai-item", "empty"],
)
def test_anthropic_replayed_block_refusals(edit: Any, betas: list[str], rule: str) -> None:
    emulator = _scripted(Turn(text="unused"))
    client = emulator.anthropic_client()
    block = edit(_block(_compact(client, _conversation())))
    later = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "Continue."}]
    with pytest.raises(anthropic.BadRequestError):
        client.beta.messages.create(model=BINDING, max_tokens=100, messages=later, betas=betas)
    assert emulator.rejected[-1].rejection is not None and emulator.rejected[-1].rejection.rule == rule


def _kept_thinking_case(exact: bool) -> tuple[ProviderEmulator, list[dict[str, Any]]]:
    """A binding model's conversation: a tool turn with thinking, then a kept turn with thinking,
    compacted up to the kept turn, `exact`ly (same system, tools, messages with their thinking) or
    not (no system prompt, no thinking: what a summarizer that sees only the messages sends)."""
    emulator = _scripted(
        Turn(thinking="I should read the file.", tool_calls=[ToolCall("read", {}, id="toolu_1")]),
        Turn(thinking="The bug is on line 3.", text="Found it."),
    )
    client = emulator.anthropic_client()
    common: dict[str, Any] = {"model": BINDING, "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS}
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix src/io.py."}]
    first = client.messages.create(messages=history, **common)
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}
    )
    second = client.messages.create(messages=history, **common)
    kept = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in second.content]}
    if exact:
        block = _block(_compact(client, history, system=SYSTEM, tools=TOOLS))
    else:
        no_thinking = [
            {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
            if isinstance(m["content"], list)
            else m
            for m in history
        ]
        block = _block(_compact(client, no_thinking, tools=TOOLS))
    swapped = [{"role": "assistant", "content": [block]}, kept, {"role": "user", "content": "Now fix it."}]
    return emulator, swapped


def test_anthropic_kept_thinking_stays_valid_after_an_exact_compaction() -> None:
    emulator, swapped = _kept_thinking_case(exact=True)
    client = emulator.anthropic_client()
    common: dict[str, Any] = {"model": BINDING, "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS}
    emulator.script = lambda request: Turn(thinking="Fixing.", text="Fixed.")
    client.beta.messages.create(messages=swapped, betas=[COMPACTION_BETA], **common)
    assert emulator.rejected == []


def test_anthropic_kept_thinking_is_stale_after_a_compaction_of_another_conversation() -> None:
    emulator, swapped = _kept_thinking_case(exact=False)
    client = emulator.anthropic_client()
    common: dict[str, Any] = {"model": BINDING, "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.messages.create(messages=swapped, betas=[COMPACTION_BETA], **common)
    assert "bound to a different conversation" in caught.value.message
    # Without the kept thinking (what historykit's binding step sends), the request is accepted.
    emulator.script = lambda request: Turn(text="Fixed.")
    without = [swapped[0], {**swapped[1], "content": swapped[1]["content"][1:]}, swapped[2]]
    client.beta.messages.create(messages=without, betas=[COMPACTION_BETA], **common)
    assert emulator.rejected[-1].rejection is not None and emulator.rejected[-1].rejection.rule == "R13"
    assert emulator.received[-1].status == 200


# --- OpenAI ---------------------------------------------------------------------------------------


def _items() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Read src/io.py."},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "def f(): ..."},
        {"role": "assistant", "content": "The bug is in f."},
    ]


def test_openai_compact_returns_user_messages_and_an_encrypted_item() -> None:
    emulator = ProviderEmulator(lambda request: Turn(text="Fixed."))
    client = openai.OpenAI(api_key="x", http_client=emulator.http_client("openai"), max_retries=0)
    compacted = client.responses.compact(model="gpt-5", input=_items())
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "compaction"]
    item = compacted.output[-1].model_dump(exclude_none=True)
    assert emulator.signer.carried_text(item["encrypted_content"]) == emulator.compaction_summaries[0]
    later = [item, {"role": "user", "content": "Fix it."}]
    answer = client.responses.create(model="gpt-5", input=later)
    # Items before a compaction item are processed and billed like any.
    longer = client.responses.create(model="gpt-5", input=[*_items(), *later])
    assert emulator.rejected == []
    assert answer.usage is not None and longer.usage is not None
    assert longer.usage.input_tokens > answer.usage.input_tokens


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        (lambda i: {**i, "encrypted_content": i["encrypted_content"][:-8] + "AAAAAAA="}, "R8"),
        (lambda i: {"type": "compaction", "content": "summary", "signature": "s"}, "request"),
    ],
    ids=["edited", "anthropic-block"],
)
def test_openai_replayed_item_refusals(edit: Any, rule: str) -> None:
    emulator = ProviderEmulator(lambda request: Turn(text="unused"))
    client = emulator.openai_client()
    item = client.responses.compact(model="gpt-5", input=_items()).output[-1].model_dump(exclude_none=True)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="gpt-5", input=[edit(item), {"role": "user", "content": "Go on."}])
    assert emulator.rejected[-1].rejection is not None and emulator.rejected[-1].rejection.rule == rule


def test_openai_compact_validates_its_input_as_responses_does() -> None:
    emulator = ProviderEmulator(lambda request: Turn(text="unused"))
    client = emulator.openai_client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.compact(model="gpt-5", input=_items()[:2])  # a call without its output
    assert "No tool output found for function call call_1" in json.dumps(caught.value.body)
    assert emulator.rejected[-1].rejection is not None and emulator.rejected[-1].rejection.rule == "R2"


def test_anthropic_a_failed_compaction_block_is_a_no_op() -> None:
    """A block with null content (a compaction that produced no summary) is sent back as it is and
    changes nothing: what precedes it still counts."""
    emulator = ProviderEmulator(lambda request: Turn(text="ok"))
    client = emulator.anthropic_client()
    base = _conversation()
    with_block = [
        *base[:2],
        {"role": "assistant", "content": [{"type": "compaction", "content": None}]},
        base[2],
    ]
    plain = client.beta.messages.create(model=BINDING, max_tokens=100, messages=base, betas=[COMPACTION_BETA])
    noop = client.beta.messages.create(
        model=BINDING, max_tokens=100, messages=with_block, betas=[COMPACTION_BETA]
    )
    assert emulator.rejected == []
    assert noop.usage.input_tokens >= plain.usage.input_tokens
