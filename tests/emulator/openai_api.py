"""`POST /v1/chat/completions` and `POST /v1/responses`: OpenAI's validation and responses."""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from tests.emulator.errors import Rejection
from tests.emulator.script import Turn
from tests.emulator.signing import prefix_digest
from tests.emulator.tokens import count_messages, count_text, count_tools, count_value

if TYPE_CHECKING:
    from tests.emulator.emulator import ProviderEmulator


def _reject(message: str, rule: str, param: str | None, code: str | None = None) -> Rejection:
    return Rejection(400, message, rule, "openai", param=param, code=code)


# --- Chat Completions ---------------------------------------------------------------------------

TOOL_WITHOUT_CALL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
    "'tool_calls'."
)


def _check_chat(messages: list[dict[str, Any]]) -> None:
    seen_results: dict[str, int] = {}
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":  # a tool message outside the run after an assistant's tool_calls: R1
            raise _reject(TOOL_WITHOUT_CALL, "R1", f"messages.[{i}].role")
        calls = message.get("tool_calls") or [] if role == "assistant" else []
        i += 1
        if not calls:
            continue
        expected = [str(c.get("id")) for c in calls]
        answered: list[str] = []
        while i < len(messages) and messages[i].get("role") == "tool":
            call_id = str(messages[i].get("tool_call_id"))
            if call_id in seen_results:  # R12
                raise _reject(
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in "
                    f"messages[{seen_results[call_id]}] and messages[{i}].",
                    "R12",
                    f"messages.[{i}].tool_call_id",
                )
            seen_results[call_id] = i
            if call_id not in expected:
                raise _reject(TOOL_WITHOUT_CALL, "R1", f"messages.[{i}].role")
            answered.append(call_id)
            i += 1
        missing = [c for c in expected if c not in answered]
        if missing:  # R2
            raise _reject(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                "'tool_call_id'. The following tool_call_ids did not have response messages: "
                + ", ".join(missing),
                "R2",
                "messages",
            )


def handle_chat(emulator: ProviderEmulator, body: dict[str, Any], turn_for: Any) -> dict[str, Any]:
    model = str(body.get("model", ""))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _reject("[] is too short - 'messages'", "request", "messages")
    _check_chat(messages)
    input_tokens = count_messages(messages) + count_tools(body.get("tools"))
    window = emulator.context_window(model)
    if input_tokens > window:
        raise _reject(
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{input_tokens} tokens. Please reduce the length of the messages.",
            "window",
            "messages",
            "context_length_exceeded",
        )
    turn: Turn = turn_for()
    tool_calls = [
        {
            "id": call.id or f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args)},
        }
        for call in turn.tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    reasoning = sum(count_text(t) for t in turn.thinking_parts())
    output_tokens = count_value(message) + reasoning
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


# --- Responses ----------------------------------------------------------------------------------


def _input_items(emulator: ProviderEmulator, body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    items: list[dict[str, Any]] = []
    for i, item in enumerate(raw or []):
        if item.get("type") == "item_reference":
            stored = emulator.stored_items.get(str(item.get("id")))
            if stored is None:
                raise _reject(f"Item with id '{item.get('id')}' not found.", "request", f"input[{i}]")
            item = stored
        items.append(item)
    return items


def _check_responses(emulator: ProviderEmulator, items: list[dict[str, Any]]) -> None:
    seen_ids: set[str] = set()
    calls: set[str] = set()
    outputs: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        item_id = item.get("id")
        if isinstance(item_id, str) and kind != "message":
            if item_id in seen_ids:  # R12
                raise _reject(
                    f"Duplicate item found with id {item_id}. "
                    "Remove duplicate items from your input and try again.",
                    "R12",
                    "input",
                )
            seen_ids.add(item_id)
        if kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:  # R1
                raise _reject(
                    f"No tool call found for function call output with call_id {call_id}.", "R1", "input"
                )
            outputs.add(call_id)
        elif kind == "compaction":  # only the compact endpoint's own, unmodified items
            encrypted = item.get("encrypted_content")
            if not isinstance(encrypted, str):
                raise _reject(
                    f"Missing required parameter: 'input[{i}].encrypted_content'.",
                    "request",
                    f"input[{i}].encrypted_content",
                    "missing_required_parameter",
                )
            extra = sorted(set(item) - {"type", "id", "encrypted_content", "created_by"})
            if extra:
                raise _reject(
                    f"Unknown parameter: 'input[{i}].{extra[0]}'.",
                    "request",
                    f"input[{i}].{extra[0]}",
                    "unknown_parameter",
                )
            if not emulator.signer.verify_content(encrypted, None):
                raise _reject(
                    f"The encrypted content for item {item_id} could not be verified.", "R8", "input"
                )
        elif kind == "reasoning":  # R9: the item it was produced with must follow it
            follower = emulator.reasoning_followers.get(str(item_id))
            nxt = items[i + 1] if i + 1 < len(items) else None
            if follower is not None and not _is_follower(nxt, follower):
                raise _reject(
                    f"Item '{item_id}' of type 'reasoning' was provided without its required following item.",
                    "R9",
                    "input",
                )
            if item.get("encrypted_content") is not None and not emulator.signer.verify_content(
                item.get("encrypted_content"), None
            ):
                raise _reject(
                    f"The encrypted content for item {item_id} could not be verified.", "R8", "input"
                )
    missing = [c for c in calls if c not in outputs]
    if missing:  # R2
        raise _reject(f"No tool output found for function call {missing[0]}.", "R2", "input")


def _is_follower(item: dict[str, Any] | None, follower: dict[str, Any]) -> bool:
    """Whether `item` is the one produced right after the reasoning (same type; same id when it has one)."""
    if item is None or item.get("type", "message") != follower["type"]:
        return False
    if follower["type"] == "function_call":
        return item.get("call_id") == follower["call_id"]
    return item.get("id") in (None, follower["id"])


def _input_tokens(emulator: ProviderEmulator, body: dict[str, Any], items: list[dict[str, Any]]) -> int:
    """The input estimate, checked against the window. Items before a compaction item are processed
    and billed like any (the compaction item only stands for what it summarized); the item itself
    counts as the summary it carries."""
    readable = [
        {"type": "message", "content": emulator.signer.carried_text(item.get("encrypted_content")) or ""}
        if item.get("type") == "compaction"
        else item
        for item in items
    ]
    tokens = count_value(body.get("instructions")) + count_messages(readable) + count_tools(body.get("tools"))
    window = emulator.context_window(str(body.get("model", "")))
    if tokens > window:
        raise _reject(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "window",
            "input",
            "context_length_exceeded",
        )
    return tokens


def handle_compact(emulator: ProviderEmulator, body: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/responses/compact`: the input validated as `/v1/responses` validates it; the output is
    the input's user messages followed by one compaction item whose `encrypted_content` is signed
    (only this emulator can read it back, and an edited one is refused)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _reject(
            "Missing required parameter: 'model'.", "request", "model", "missing_required_parameter"
        )
    if body.get("previous_response_id"):
        raise _reject(
            "previous_response_id is not supported by the emulator", "request", "previous_response_id"
        )
    items = _input_items(emulator, body)
    if not items:
        raise _reject(
            "Missing required parameter: 'input'.", "request", "input", "missing_required_parameter"
        )
    _check_responses(emulator, items)
    input_tokens = _input_tokens(emulator, body, items)
    conversation = [
        {"role": item.get("role", "user"), "content": item.get("content")}
        for item in items
        if item.get("type", "message") == "message"
    ]
    summary = emulator.compaction_summary(conversation)
    compaction_id = f"cmp_{secrets.token_hex(12)}"
    users = [
        {
            "type": "message",
            "id": f"msg_{secrets.token_hex(12)}",
            "role": "user",
            "status": "completed",
            "content": item["content"]
            if isinstance(item.get("content"), list)
            else [{"type": "input_text", "text": str(item.get("content"))}],
        }
        for item in items
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]
    item = {
        "type": "compaction",
        "id": compaction_id,
        "encrypted_content": emulator.signer.sign(summary, b"compaction", carry_text=True),
    }
    output_tokens = count_text(summary)
    return {
        "id": compaction_id.replace("cmp_", "resp_"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*users, item],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def handle_responses(emulator: ProviderEmulator, body: dict[str, Any], turn_for: Any) -> dict[str, Any]:
    model = str(body.get("model", ""))
    if body.get("previous_response_id"):
        raise _reject(
            "previous_response_id is not supported by the emulator", "request", "previous_response_id"
        )
    items = _input_items(emulator, body)
    _check_responses(emulator, items)
    instructions = body.get("instructions")
    input_tokens = _input_tokens(emulator, body, items)
    turn: Turn = turn_for()
    output: list[dict[str, Any]] = []
    reasoning_id: str | None = None
    parts = turn.thinking_parts()
    if parts:
        reasoning_id = f"rs_{secrets.token_hex(12)}"
        text = "\n\n".join(parts)
        prefix = prefix_digest([instructions, body.get("tools") or []], items)
        output.append(
            {
                "type": "reasoning",
                "id": reasoning_id,
                "summary": [{"type": "summary_text", "text": p} for p in parts],
                "encrypted_content": emulator.signer.sign(text, prefix, carry_text=True),
                "status": None,
            }
        )
    if turn.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{secrets.token_hex(12)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for call in turn.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{secrets.token_hex(12)}",
                "call_id": call.id or f"call_{secrets.token_hex(12)}",
                "name": call.name,
                "arguments": json.dumps(call.args),
                "status": "completed",
            }
        )
    if reasoning_id is not None and len(output) > 1:
        emulator.reasoning_followers[reasoning_id] = output[1]
    for item in output:
        emulator.stored_items[str(item["id"])] = item
    reasoning_tokens = sum(count_text(p) for p in parts)
    output_tokens = sum(count_value(o) for o in output if o["type"] != "reasoning") + reasoning_tokens
    return {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": time.time(),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "instructions": instructions,
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "reasoning": body.get("reasoning"),
        "text": {"format": {"type": "text"}},
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        },
    }
