"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), read and written.

A rollout has one JSON object a row, `{"timestamp", "type", "payload"}`. Rows of type
`response_item` carry the conversation as OpenAI Responses API items; `session_meta` is the header;
`event_msg` rows (UI events that mirror the items, token counts), `turn_context` rows and
`ghost_snapshot` items (git snapshots) are bookkeeping. Rollouts of the 2025-09 generation and
earlier have no envelope: the first line is the header itself (`{"id", "timestamp",
"instructions", "git"}`), items are written bare, one a line, and `{"record_type": "state"}`
lines mark saved state; both generations read the same way. Reading gives the neutral messages the
corpus conversion gives (`corpus/README.md`):

- `message` items of role `user` are `user` messages, `developer` / `system` ones `system`;
- consecutive `reasoning`, assistant `message` and call items of one model turn are one assistant
  message: reasoning is its readable summary (summaries joined by blank lines; the encrypted
  content is kept as the thinking's signature, never read), `function_call`, `custom_tool_call`
  (freeform input such as `apply_patch`, kept as a string) and `local_shell_call` are tool calls;
- each `function_call_output` / `custom_tool_call_output` is a `tool` message; shell outputs are
  unwrapped from their `{"output": ..., "metadata": ...}` envelope;
- a `compacted` row (Codex's own compaction) is a `user` message holding its summary, where it
  occurs; an item type this reader does not know stays in its assistant turn as an `OtherPart`;
- a `token_count` event (`payload.info.last_token_usage`) is the usage the provider reported for
  the model call just answered: it becomes the `usage` of the assistant message of that call (the
  event also records the window Codex ran under, `model_context_window`:
  `historykit.formats._recorded.recorded_window`); the `model` of the latest `turn_context` row is the
  `model` of the assistant messages after it, and the `turn_context` rows travel with the turn
  after them (`RawRows.preceding`).

Writing (`write_codex`) puts the session header first, writes each turn's `turn_context` rows
before it, copies the rows of untouched messages verbatim, and rebuilds edited and new ones from
the items they came from (an edited shell output goes back into its envelope, with its metadata);
a file of the older generation is written back in its own shape (bare items).

Example:
    ```python
    from historykit.formats._codex import read_codex, write_codex

    messages = read_codex("~/.codex/sessions/2025/11/17/rollout-2025-11-17T15-30-28-019a....jsonl")
    write_codex(messages, "compacted.jsonl")
    ```
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from historykit._messages import (
    MediaPart,
    Message,
    OtherPart,
    Part,
    ReportedUsage,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    payload_digest,
)
from historykit.errors import ArgumentTypeError
from historykit.formats._detect import TranscriptFormatError
from historykit.formats._jsonl import read_jsonl_objects, write_jsonl
from historykit.formats._raw import RawRows

FORMAT_NAME = "Codex rollout"

_CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")
_SKIPPED_ITEMS = ("ghost_snapshot",)
_ROLES: dict[str, Role] = {
    "user": "user",
    "developer": "system",
    "system": "system",
    "assistant": "assistant",
}
_ENVELOPE_KEYS = frozenset({"output", "metadata"})
LEGACY_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
"""Item types written bare (without the `{"timestamp", "type", "payload"}` envelope) in older rollouts."""


def is_legacy_header(row: dict[str, Any]) -> bool:
    """The first line of an older rollout: the session itself, with no `type`."""
    return (
        "type" not in row and "id" in row and "timestamp" in row and ("instructions" in row or "git" in row)
    )


def _envelope(row: dict[str, Any]) -> tuple[str | None, Any]:
    """`(row type, payload)` of a row of either generation; a bare item is a `response_item`."""
    if "payload" in row or "record_type" in row:
        return row.get("type"), row.get("payload")
    if isinstance(row.get("type"), str) and row["type"] in LEGACY_ITEM_TYPES:
        return "response_item", row
    return row.get("type"), None


@dataclass
class _Draft:
    role: Role
    parts: list[Part] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    usage: ReportedUsage | None = None
    model: str | None = None
    preceding: tuple[dict[str, Any], ...] = ()


def read_codex(path: str | Path) -> list[Message]:
    """Neutral messages of a Codex CLI rollout; `TranscriptFormatError` names a bad row."""
    path = Path(path).expanduser()
    rows = read_jsonl_objects(path, FORMAT_NAME)
    context: dict[str, Any] = {}
    drafts: list[_Draft] = []
    names: dict[str, str] = {}
    turn: _Draft | None = None  # the open assistant turn
    model: str | None = None  # the model of the latest turn_context row
    settings: list[dict[str, Any]] = []  # turn_context rows not yet given to a turn

    def error(lineno: int, what: str) -> TranscriptFormatError:
        return TranscriptFormatError(f"{path}:{lineno}: {what}")

    for lineno, row in rows:
        if not context and is_legacy_header(row):
            context = {"header": row, "legacy": True}
            continue
        if "record_type" in row:
            continue  # an older rollout's state marker: no conversation in it
        kind, payload = _envelope(row)
        if kind == "session_meta" and not context:
            context = {"header": row}
            continue
        if kind == "turn_context" and isinstance(payload, dict):
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            settings.append(row)
            continue
        if kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
            usage = _token_usage(payload)
            answered = next((d for d in reversed(drafts) if d.role == "assistant"), None)
            if usage is not None and answered is not None:
                if answered.usage is None:
                    answered.usage = usage
                # Kept with the call it reports on (written after that call's items, before its
                # outputs), so the usage survives a write and a read whatever else is dropped.
                answered.rows.append(row)
            continue
        if kind == "compacted":
            if not isinstance(payload, dict) or not isinstance(payload.get("message"), str):
                raise error(lineno, "a 'compacted' row without a 'payload.message' string")
            drafts.append(_Draft("user", [TextPart(payload["message"], native=payload)], [row]))
            turn = None
            continue
        if kind != "response_item":
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise error(lineno, "a 'response_item' row whose 'payload' is not an item with a 'type'")
        item_type = payload["type"]
        if item_type in _SKIPPED_ITEMS:
            continue
        if item_type == "message":
            role = _ROLES.get(str(payload.get("role")))
            if role is None:
                raise error(lineno, f"a message item with the unknown role {payload.get('role')!r}")
            if role == "assistant":
                turn = _open_turn(turn, drafts, model, settings)
                turn.parts.extend(_content_parts(payload, lineno, error))
                turn.rows.append(row)
            else:
                drafts.append(_Draft(role, _content_parts(payload, lineno, error) or [TextPart("")], [row]))
                turn = None
        elif item_type == "reasoning":
            turn = _open_turn(turn, drafts, model, settings)
            turn.parts.append(_reasoning_part(payload))
            turn.rows.append(row)
        elif item_type in _CALL_ITEMS:
            turn = _open_turn(turn, drafts, model, settings)
            part = _call_part(payload, lineno, error)
            names[part.id] = part.name
            turn.parts.append(part)
            turn.rows.append(row)
        elif item_type in _OUTPUT_ITEMS:
            call_id = payload.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise error(lineno, f"a {item_type} item without a 'call_id'")
            content, _ = _unwrap_output(payload.get("output"))
            drafts.append(
                _Draft("tool", [ToolResultPart(call_id, names.get(call_id), content, native=payload)], [row])
            )
            turn = None
        else:
            turn = _open_turn(turn, drafts, model, settings)
            turn.parts.append(OtherPart(item_type, json.dumps(payload, ensure_ascii=False), native=payload))
            turn.rows.append(row)
    if not drafts:
        raise TranscriptFormatError(
            f"{path}: a {FORMAT_NAME} with no conversation items (response_item rows, or bare items "
            "in a rollout of the 2025-09 generation)"
        )
    return [
        Message.from_native(
            d.role,
            d.parts,
            RawRows("codex", tuple(d.rows), True, context, d.preceding),
            usage=d.usage,
            model=d.model,
        )
        for d in drafts
    ]


def _token_usage(payload: dict[str, Any]) -> ReportedUsage | None:
    """The last call's usage of a `token_count` event (its input includes the cached tokens)."""
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict) or not isinstance(last.get("input_tokens"), int):
        return None
    output = last.get("output_tokens")
    return ReportedUsage(last["input_tokens"], output if isinstance(output, int) else 0)


def _open_turn(
    turn: _Draft | None, drafts: list[_Draft], model: str | None, settings: list[dict[str, Any]]
) -> _Draft:
    """The open assistant turn, or a new one that takes the turn_context rows read since the last."""
    if turn is None:
        turn = _Draft("assistant", model=model, preceding=tuple(settings))
        settings.clear()
        drafts.append(turn)
    return turn


def _content_parts(item: dict[str, Any], lineno: int, error: Any) -> list[Part]:
    content = item.get("content")
    if isinstance(content, str):
        return [TextPart(content, native=item)]
    if not isinstance(content, list):
        raise error(lineno, f"a message item whose 'content' is a {type(content).__name__}, not a list")
    parts: list[Part] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(str(block.get("text", "")), native=block))
        elif kind == "input_image":
            url = block.get("image_url")
            inline = isinstance(url, str) and url.startswith("data:")
            size = len(url.partition(",")[2]) * 3 // 4 if inline and isinstance(url, str) else 0
            digest = payload_digest(url) if inline and isinstance(url, str) else ""
            parts.append(
                MediaPart("image", "" if inline else str(url or ""), size, native=block, digest=digest)
            )
        else:
            parts.append(OtherPart(str(kind), json.dumps(block, ensure_ascii=False), native=block))
    return parts


def _reasoning_part(item: dict[str, Any]) -> ThinkingPart:
    texts = [
        s["text"]
        for s in item.get("summary") or ()
        if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"]
    ]
    if not texts:
        # Open models put readable reasoning in `content`; OpenAI's is encrypted and absent.
        texts = [
            c["text"]
            for c in item.get("content") or ()
            if isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"]
        ]
    encrypted = item.get("encrypted_content")
    signature = encrypted if isinstance(encrypted, str) and encrypted else None
    return ThinkingPart(
        "\n\n".join(texts),
        signature=signature,
        id=item.get("id") if isinstance(item.get("id"), str) else None,
        provider="openai",
        redacted=not texts and signature is not None,
        native=item,
    )


def _call_part(item: dict[str, Any], lineno: int, error: Any) -> ToolCallPart:
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise error(lineno, f"a {item['type']} item without a 'call_id'")
    if item["type"] == "local_shell_call":
        action = item.get("action")
        return ToolCallPart(call_id, "local_shell", action if isinstance(action, dict) else {}, native=item)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise error(lineno, f"a {item['type']} item without a 'name'")
    if item["type"] == "custom_tool_call":
        return ToolCallPart(call_id, name, str(item.get("input", "")), native=item)
    raw = item.get("arguments", "")
    if isinstance(raw, dict):
        return ToolCallPart(call_id, name, raw, native=item)
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        parsed = None
    return ToolCallPart(call_id, name, parsed if isinstance(parsed, dict) else str(raw), native=item)


def _unwrap_output(output: Any) -> tuple[str, dict[str, Any] | None]:
    """The text of a call output, and its envelope when it had one (shell outputs do)."""
    if isinstance(output, dict):
        content = output.get("content")
        return (content if isinstance(content, str) else json.dumps(output, ensure_ascii=False)), None
    if not isinstance(output, str):
        return ("" if output is None else json.dumps(output, ensure_ascii=False)), None
    if output.startswith("{") and '"output"' in output:
        try:
            parsed = json.loads(output)
        except ValueError:
            return output, None
        if (
            isinstance(parsed, dict)
            and isinstance(parsed.get("output"), str)
            and set(parsed) <= _ENVELOPE_KEYS
        ):
            return parsed["output"], parsed
    return output, None


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def write_codex(messages: Sequence[Message], path: str | Path) -> None:
    """Write neutral messages as a Codex CLI rollout (see the module docstring)."""
    path = Path(path).expanduser()
    write_jsonl(path, _Writer(messages).rows())


class _Writer:
    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        header: dict[str, Any] | None = None
        for msg in messages:
            if (
                isinstance(msg.native, RawRows)
                and msg.native.format == "codex"
                and "header" in msg.native.context
            ):
                header = msg.native.context["header"]
                break
        self.header = header
        self.legacy = header is not None and is_legacy_header(header)
        self.timestamp = (header or {}).get("timestamp") or _now()

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [self.header] if self.header is not None else []
        for index, msg in enumerate(self.messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(
                    f"message {index} is a {type(msg).__name__}, not a historykit Message"
                )
            raw = msg.native if isinstance(msg.native, RawRows) and msg.native.format == "codex" else None
            if raw is not None:
                out.extend(raw.preceding)  # the turn's settings (model, policies), as they were
            if raw is not None and msg.is_untouched:
                out.extend(raw.rows)
                self.timestamp = raw.rows[-1].get("timestamp", self.timestamp)
                continue
            out.extend(self._rebuilt(msg, raw))
        return out

    def _rebuilt(self, msg: Message, raw: RawRows | None) -> list[dict[str, Any]]:
        # Which item (and row) each original part came from: a message item owns its blocks.
        owner: dict[int, dict[str, Any]] = {}
        row_of: dict[int, dict[str, Any]] = {}
        for raw_row in raw.rows if raw is not None else ():
            payload = _envelope(raw_row)[1]
            if not isinstance(payload, dict):
                continue
            row_of[id(payload)] = raw_row
            owner[id(payload)] = payload
            if payload.get("type") == "message" and isinstance(payload.get("content"), list):
                for block in payload["content"]:
                    owner[id(block)] = payload
        originals: dict[int, int] = {}
        for part in msg.source[1] if msg.source is not None else ():
            source_item = owner.get(id(part.native))
            if source_item is not None:
                originals[id(source_item)] = originals.get(id(source_item), 0) + 1
        groups: list[tuple[dict[str, Any] | None, list[Part]]] = []
        for part in msg.parts:
            part_item = owner.get(id(part.native)) if part.native is not None else None
            if (
                groups
                and part_item is not None
                and groups[-1][0] is part_item
                and not isinstance(part, ToolResultPart)
            ):
                groups[-1][1].append(part)
            else:
                groups.append((part_item, [part]))
        rows: list[dict[str, Any]] = []
        for item, parts in groups:
            row = row_of.get(id(item)) if item is not None else None
            if (
                item is not None
                and row is not None
                and len(parts) == originals.get(id(item))
                and all(msg.part_is_original(p) for p in parts)
            ):
                rows.append(row)
                self.timestamp = row.get("timestamp", self.timestamp)
                continue
            if row is not None and row.get("type") == "compacted" and item is not None:
                text = "\n\n".join(p.text for p in parts if isinstance(p, (TextPart, SummaryPart)))
                rows.append({**row, "payload": {**item, "message": text}})
                continue
            payload = self._item(msg.role, item, parts)
            if row is not None and row is not item:
                self.timestamp = row.get("timestamp", self.timestamp)
                rows.append({**row, "payload": payload})
            elif row is not None or self.legacy:
                rows.append(payload)  # an older rollout's bare item
            else:
                rows.append({"timestamp": self.timestamp, "type": "response_item", "payload": payload})
        # The token counts kept with the message (its recorded usage) follow it, as in the file.
        rows.extend(r for r in (raw.rows if raw is not None else ()) if r.get("type") == "event_msg")
        return rows

    def _item(self, role: Role, item: dict[str, Any] | None, parts: list[Part]) -> dict[str, Any]:
        first = parts[0]
        if isinstance(first, ToolResultPart):
            return _output_item(first, item)
        if isinstance(first, ThinkingPart):
            return {
                **(item or {"content": None}),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": first.text}] if first.text else [],
                "encrypted_content": first.signature,
            }
        if isinstance(first, ToolCallPart):
            return _call_item(first, item)
        if isinstance(first, OtherPart) and item is not None and item.get("type") not in (None, "message"):
            return item
        base: dict[str, Any] = (
            item
            if item is not None and item.get("type") == "message"
            else {"type": "message", "role": "developer" if role == "system" else role}
        )
        text_type = "output_text" if role == "assistant" else "input_text"
        return {**base, "content": [_content_block(p, text_type) for p in parts]}


def _call_item(part: ToolCallPart, native: dict[str, Any] | None) -> dict[str, Any]:
    kind = native.get("type") if native is not None else "function_call"
    if kind == "custom_tool_call":
        return {**(native or {}), "name": part.name, "input": part.arguments_text(), "call_id": part.id}
    if kind == "local_shell_call":
        return {**(native or {}), "action": part.arguments_dict(), "call_id": part.id}
    return {
        **(native or {}),
        "type": "function_call",
        "name": part.name,
        "arguments": part.arguments_text(),
        "call_id": part.id,
    }


def _output_item(part: ToolResultPart, item: dict[str, Any] | None) -> dict[str, Any]:
    native = item or {}
    content, envelope = _unwrap_output(native.get("output")) if native else (None, None)
    if content == part.content:
        output = native["output"]
    elif envelope is not None:
        output = json.dumps({**envelope, "output": part.content}, ensure_ascii=False, separators=(",", ":"))
    else:
        output = part.content
    return {
        **native,
        "type": native.get("type", "function_call_output"),
        "call_id": part.tool_call_id,
        "output": output,
    }


def _content_block(part: Part, text_type: str) -> dict[str, Any]:
    native = part.native if isinstance(part.native, dict) and "type" in part.native else None
    if native is not None and native.get("type") == "message":
        native = None  # a string-content message: the part has no block of its own
    if isinstance(part, (TextPart, SummaryPart)):
        return {**(native or {"type": text_type}), "text": part.text}
    if native is not None:
        return native
    if isinstance(part, MediaPart):
        return {"type": text_type, "text": f"[{part.media_type}{': ' + part.source if part.source else ''}]"}
    return {"type": text_type, "text": getattr(part, "text", "")}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
