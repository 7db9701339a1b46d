"""`POST /v1/messages`: the Anthropic Messages API's validation, thinking checks and responses."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.emulator.errors import Rejection
from tests.emulator.models import is_binding_model
from tests.emulator.script import Turn
from tests.emulator.signing import PrefixChain, canonical
from tests.emulator.tokens import count_messages, count_text, count_tools, count_value

if TYPE_CHECKING:
    from tests.emulator.emulator import ProviderEmulator

BINDING_BETA = "thinking-binding-controls-2026-08-01"
COMPACTION_BETA = "compact-2026-09-04"
"""On-demand compaction: the `compaction` request parameter, and every request that sends its signed block."""
THRESHOLD_COMPACTION_BETA = "compact-2026-01-12"
"""Compaction at a token threshold (`context_management` edit `compact_20260112`) and its unsigned blocks."""
ON_DEMAND_COMPACTION_MODELS = (
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-5-5",
    "claude-sonnet-5",
    "claude-sonnet-4-6",
    "claude-haiku-5-5",
)
"""The models the compaction pages list for on-demand compaction (`claude-fable-5-2` is not among them)."""
_COMPACTION_KEYS = {"type", "content", "signature", "encrypted_content", "cache_control", "tool_changes"}
THINKING_TYPES = ("thinking", "redacted_thinking")

R13_MESSAGE = (
    "{path}: Invalid signature in thinking block. The block is bound to a different conversation. "
    'Remove the block, or set thinking.block_binding.prefix_mismatch_behavior to "drop_block".'
)
R7_MESSAGE = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding "
    "the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
    "previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
R1_MESSAGE = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
R2_MESSAGE = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)


def _reject(message: str, rule: str) -> Rejection:
    return Rejection(400, message, rule, "anthropic")


@dataclass
class _Block:
    block: dict[str, Any]
    index: int  # message index in the request as sent
    position: int  # position in that message's content


@dataclass
class _Turn:
    role: str
    first_index: int
    blocks: list[_Block] = field(default_factory=list)
    closed: bool = False
    """Ends in a compaction block: what follows starts a turn of its own (the prefix it stands for)."""

    def canonical(self) -> dict[str, Any]:
        return {"role": self.role, "content": [canonical(b.block) for b in self.blocks]}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b if isinstance(b, dict) else {"type": "unknown"} for b in content or []]


def _merged_turns(messages: list[dict[str, Any]]) -> list[_Turn]:
    """Consecutive same-role messages combined into one turn, as the Messages API itself does.

    A mid-conversation `{"role": "system"}` entry (operator instructions, which the Messages API accepts
    in `messages`) is a turn of its own: part of every later block's prefix, transparent to pairing.
    """
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise _reject(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'", "request")
        if not turns or turns[-1].role != role or role == "system" or turns[-1].closed:
            turns.append(_Turn(role, i))
        for j, b in enumerate(_content_blocks(message.get("content"))):
            if turns[-1].closed:
                turns.append(_Turn(role, i))
            turns[-1].blocks.append(_Block(b, i, j))
            turns[-1].closed = b.get("type") == "compaction"
    return turns


def _conversation(turns: list[_Turn]) -> list[_Turn]:
    """The user and assistant turns, merged again where only system entries stood between them."""
    merged: list[_Turn] = []
    for turn in turns:
        if turn.role == "system":
            continue
        if merged and merged[-1].role == turn.role:
            merged[-1] = _Turn(turn.role, merged[-1].first_index, [*merged[-1].blocks, *turn.blocks])
        else:
            merged.append(turn)
    return merged


def _check_structure(messages: list[dict[str, Any]], turns: list[_Turn]) -> None:
    conversation = [m for m in messages if m.get("role") != "system"]
    if not conversation:
        raise _reject("messages: at least one message is required", "request")
    opening = _content_blocks(conversation[0].get("content"))
    # A request may open with the assistant's compaction block (the block first, in place of the
    # messages it summarizes).
    if conversation[0].get("role") != "user" and not (
        opening and opening[0].get("type") == "compaction"
    ):  # R4
        raise _reject('messages: first message must use the "user" role', "R4")
    turns = _conversation(turns)
    for i, message in enumerate(messages):  # R6
        content = message.get("content")
        if message.get("role") == "system":
            continue
        if (content == "" or content == []) and i != len(messages) - 1:
            raise _reject(
                f"messages.{i}: all messages must have non-empty content except for the optional final "
                "assistant message",
                "R6",
            )
        for block in _content_blocks(content):
            if block.get("type") == "text" and block.get("text") == "" and content != "":
                raise _reject("messages: text content blocks must be non-empty", "R6")
    seen: set[str] = set()
    for turn in turns:  # R12
        for b in turn.blocks:
            if b.block.get("type") == "tool_use":
                tool_id = str(b.block.get("id"))
                if tool_id in seen:
                    raise _reject(
                        f"messages.{b.index}.content.{b.position}: `tool_use` ids must be unique", "R12"
                    )
                seen.add(tool_id)
    for k, turn in enumerate(turns):
        if turn.role == "user":  # R1
            previous = turns[k - 1] if k > 0 else None
            offered = {
                b.block.get("id")
                for b in (previous.blocks if previous else [])
                if b.block.get("type") == "tool_use"
            }
            for b in turn.blocks:
                if b.block.get("type") == "tool_result" and b.block.get("tool_use_id") not in offered:
                    raise _reject(
                        R1_MESSAGE.format(i=b.index, j=b.position, id=b.block.get("tool_use_id")), "R1"
                    )
            continue
        calls = [str(b.block.get("id")) for b in turn.blocks if b.block.get("type") == "tool_use"]
        if not calls or k == len(turns) - 1:
            continue
        following = turns[k + 1].blocks
        answered = {b.block.get("tool_use_id") for b in following if b.block.get("type") == "tool_result"}
        missing = [c for c in calls if c not in answered]
        if missing:  # R2
            raise _reject(R2_MESSAGE.format(i=turn.first_index, ids=", ".join(missing)), "R2")
        # R3: the results open the next turn; text before them means they do not follow immediately.
        kinds = [b.block.get("type") for b in following]
        if kinds[: len(answered)] != ["tool_result"] * len(answered):
            raise _reject(R2_MESSAGE.format(i=turn.first_index, ids=", ".join(calls)), "R3")


def _system_and_tools(body: dict[str, Any]) -> list[Any]:
    system = body.get("system")
    system_blocks = [{"type": "text", "text": system}] if isinstance(system, str) else (system or [])
    return [canonical(system_blocks), canonical(body.get("tools") or [])]


def _estimate(body: dict[str, Any], turns: list[_Turn]) -> int:
    system = body.get("system")
    total = count_value(system) + count_tools(body.get("tools"))
    return total + count_messages([t.canonical() for t in turns])


@dataclass
class MessagesResult:
    response: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]


def handle_messages(
    emulator: ProviderEmulator, body: dict[str, Any], headers: dict[str, str], turn_for: Any
) -> MessagesResult:
    """Validate `body` like the Messages API, then answer with the script's turn (`turn_for()`)."""
    model = str(body.get("model", ""))
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _reject("messages: Field required", "request")
    turns = _merged_turns(messages)
    _check_structure(messages, turns)

    thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
    binding_config = thinking.get("block_binding")
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}
    if binding_config is not None and BINDING_BETA not in betas:
        raise _reject("thinking.block_binding: Extra inputs are not permitted", "request")
    behavior = (binding_config or {}).get("prefix_mismatch_behavior") or "error"
    binding = is_binding_model(model) and (emulator.enforce_prefix_check or binding_config is not None)

    compaction = body.get("compaction")
    if compaction is not None:
        _check_compaction_request(body, compaction, betas, model)

    head = _system_and_tools(body)
    chain = PrefixChain(head)
    effective: list[_Turn] = []
    transformations: list[dict[str, Any]] = []
    # The API ignores (and does not bill) what comes before the last compaction block; it still
    # validates its structure (done above), and is lenient here about the thinking in it.
    # A block with null content is a failed compaction, which the API treats as a no-op.
    last_compaction = max(
        (
            k
            for k, t in enumerate(turns)
            if t.blocks
            and t.blocks[-1].block.get("type") == "compaction"
            and t.blocks[-1].block.get("content") is not None
        ),
        default=-1,
    )
    for k, turn in enumerate(turns):
        if k < last_compaction:
            continue
        kept = _Turn(turn.role, turn.first_index)
        effective.append(kept)
        for b in turn.blocks:
            kind = b.block.get("type")
            if kind == "compaction":
                state = _check_compaction_block(emulator, b, betas)
                if k != last_compaction:
                    kept.blocks.append(b)  # a no-op block: part of the conversation as it stands
                else:
                    kept.blocks = [b]
                    # Written on a model that binds, it stands for the prefix it summarized, so
                    # thinking in the turns kept after it stays valid; else the conversation starts anew.
                    chain = PrefixChain.from_state(state) if state is not None else PrefixChain(head)
                continue
            if turn.role != "assistant" or kind not in THINKING_TYPES:
                kept.blocks.append(b)
                continue
            text = b.block.get("thinking") if kind == "thinking" else None
            signature = b.block.get("signature") if kind == "thinking" else b.block.get("data")
            path = f"messages.{b.index}.content.{b.position}"
            if binding:
                prefix = chain.digest_with(kept.role, kept.canonical()["content"])
                if not emulator.signer.verify_prefix(signature, text, prefix):
                    if behavior == "drop_block":
                        transformations.append(
                            {"type": "thinking_dropped", "path": path, "reason": "prefix_binding_mismatch"}
                        )
                        continue
                    raise _reject(R13_MESSAGE.format(path=path), "R13")
            elif not emulator.signer.verify_content(signature, text):  # R8
                raise _reject(f"{path}: Invalid `signature` in `thinking` block", "R8")
            kept.blocks.append(b)
        if k == last_compaction and state is not None:
            continue  # the chain stands where the summarized conversation ended
        chain.add_message(kept.canonical())

    conversation = _conversation(effective)
    if thinking.get("type") == "enabled" and not is_binding_model(model):  # R7, last cycle's thinking
        last = conversation[-1]
        tool_results = any(b.block.get("type") == "tool_result" for b in last.blocks)
        if last.role == "user" and tool_results and len(conversation) > 1:
            assistant = conversation[-2]
            first = assistant.blocks[0].block.get("type") if assistant.blocks else "none"
            if first not in THINKING_TYPES:
                raise _reject(R7_MESSAGE.format(i=assistant.first_index, found=first), "R7")

    input_tokens = _estimate(body, effective)
    window = emulator.context_window(model)
    if input_tokens > window:
        raise _reject(f"prompt is too long: {input_tokens} tokens > {window} maximum", "window")

    if compaction is not None:
        summary = emulator.compaction_summary(messages)
        binds = is_binding_model(model)
        block = {
            "type": "compaction",
            "content": summary,
            "signature": emulator.signer.sign_compaction(summary, chain.state if binds else None),
        }
        return MessagesResult(*_compaction_response(model, block, input_tokens))

    turn: Turn = turn_for()
    content: list[dict[str, Any]] = []
    for text in turn.thinking_parts():
        prefix = chain.digest_with("assistant", canonical(content))
        if turn.redacted:
            content.append(
                {"type": "redacted_thinking", "data": emulator.signer.sign(text, prefix, carry_text=True)}
            )
        else:
            content.append(
                {"type": "thinking", "thinking": text, "signature": emulator.signer.sign(text, prefix)}
            )
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        call_id = call.id or f"toolu_{secrets.token_hex(12)}"
        content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": call.args})
    output_tokens = sum(count_value(b) for b in content) or 1
    response: dict[str, Any] = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    if transformations:
        response["input_transformations"] = transformations
    return MessagesResult(response, _stream_events(response))


def _check_compaction_request(body: dict[str, Any], compaction: Any, betas: set[str], model: str) -> None:
    """What Anthropic refuses on an on-demand compaction request (the `compaction` parameter)."""
    if COMPACTION_BETA not in betas:
        raise _reject("compaction: Extra inputs are not permitted", "request")
    if not isinstance(compaction, dict) or compaction.get("type") != "summarize":
        raise _reject("compaction.type: Input should be 'summarize'", "request")
    if not any(
        model == name or re.fullmatch(re.escape(name) + r"-\d{8}", model)
        for name in ON_DEMAND_COMPACTION_MODELS
    ):
        raise _reject(f"compaction: the model {model!r} does not support on-demand compaction", "compaction")
    if body.get("context_management") is not None:
        raise _reject("compaction: cannot be combined with `context_management`", "compaction")
    if body.get("stop_sequences"):
        raise _reject("stop_sequences: not supported on a compaction request", "compaction")
    output_config = body.get("output_config")
    if isinstance(output_config, dict) and output_config.get("format") is not None:
        raise _reject("output_config.format: not supported on a compaction request", "compaction")
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool"):
        raise _reject(
            "tool_choice: a compaction request samples no reply and cannot call a tool", "compaction"
        )


def _check_compaction_block(emulator: ProviderEmulator, b: _Block, betas: set[str]) -> bytes | None:
    """Validate a replayed compaction block; the prefix state it stands for, when it stands for one."""
    block, path = b.block, f"messages.{b.index}.content.{b.position}"
    for key in block:
        if key not in _COMPACTION_KEYS:
            raise _reject(f"{path}.{key}: Extra inputs are not permitted", "request")
    content = block.get("content")
    if content is not None and (not isinstance(content, str) or not content):
        raise _reject(f"{path}.content: compaction content must be a non-empty string or null", "R6")
    signature = block.get("signature")
    if signature is not None:
        if COMPACTION_BETA not in betas:
            raise _reject(f"{path}.signature: Extra inputs are not permitted", "request")
        if content is None or not emulator.signer.verify_content(signature, content):
            raise _reject(f"{path}: Invalid `signature` in `compaction` block", "R8")
        return emulator.signer.compaction_state(signature, content)
    if content is not None and THRESHOLD_COMPACTION_BETA not in betas and COMPACTION_BETA not in betas:
        raise _reject(
            f"{path}: Input tag 'compaction' found using 'type' does not match any expected tag", "request"
        )
    return None


def _compaction_response(
    model: str, block: dict[str, Any], input_tokens: int
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    response: dict[str, Any] = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": count_value(block) or 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return response, _stream_events(response)


def _stream_events(response: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream `response`, in the Messages API's order."""
    start = {
        **response,
        "content": [],
        "stop_reason": None,
        "usage": {**response["usage"], "output_tokens": 1},
    }
    start.pop("input_transformations", None)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(response["content"]):
        kind = block["type"]
        if kind == "thinking":
            opening: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif kind == "text":
            opening, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        elif kind == "tool_use":
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        else:
            opening, deltas = block, []
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": response["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": response["usage"]["output_tokens"]},
    }
    if "input_transformations" in response:
        delta["input_transformations"] = response["input_transformations"]
    events.append(("message_delta", delta))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def count_tokens_response(body: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/messages/count_tokens`: the same estimate the window check uses."""
    messages = body.get("messages") or []
    turns = _merged_turns(messages)
    return {"input_tokens": _estimate(body, turns)}


__all__ = ["BINDING_BETA", "MessagesResult", "count_text", "count_tokens_response", "handle_messages"]
