"""Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`), read and written.

A session log has one JSON object a row. Rows of `type` `user` and `assistant` carry the
conversation in `message` (an Anthropic Messages API message); the others are bookkeeping
(`progress`, `file-history-snapshot`, `queue-operation`, `system`, `summary` titles). Reading gives
the neutral messages the corpus conversion gives (`corpus/README.md`):

- the content blocks of one API message (one `message.id`), which the log writes on separate rows,
  are one assistant message; `thinking` blocks keep their signature, `redacted_thinking` is
  redacted thinking, `tool_use` blocks are tool calls;
- each `tool_result` block is a `tool` message (with `is_error`), named after its call; the
  results that follow an assistant message are put in the order of its calls;
- rows flagged `isMeta` are skipped (they are never sent to the model as the user's words), and
  in a main-thread log the inline sub-agent rows (`isSidechain`) are left out; a sub-agent log
  (every row a sidechain) is read whole;
- the summary Claude Code injects after auto-compaction is a `user` message where it occurs (its
  row is flagged `isCompactSummary`; `historykit.formats.compaction_boundaries` finds it); the
  `compact_boundary` row Claude Code writes just before it travels with it
  (`RawRows.preceding`), so a writer keeps it where it was;
- `message.usage` of an assistant message is the usage the provider reported for its call (input
  is `input_tokens` plus the cache reads and writes): the message's `usage`; `message.model` is its
  `model` (not for the `<synthetic>` messages Claude Code writes itself);
- a tool call id used twice in one session is made unique with a `__<n>` suffix.

Unlike the corpus conversion, nothing is dropped or invented for pairing: a result whose call is
missing stays (`historykit.check` reports it), and a call without a result stays unanswered.

Writing (`write_claude_code`) copies the rows of every untouched message verbatim and rebuilds
edited and new messages from the rows they came from; `parentUuid` links are rewritten to chain the
rows in the order written, so Claude Code can resume the file; a `compact_boundary` row keeps no
`parentUuid` (its `logicalParentUuid` names the row before it), so a resumed session still starts
its context there. Other bookkeeping rows are not written.

Example:
    ```python
    from historykit.formats._claude_code import read_claude_code, write_claude_code

    messages = read_claude_code("~/.claude/projects/-home-me-app/3f2c....jsonl")
    write_claude_code(messages, "compacted.jsonl")
    ```
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.formats._detect import TranscriptFormatError
from historykit.formats._jsonl import read_jsonl_objects, write_jsonl
from historykit.formats._raw import RawRows

FORMAT_NAME = "Claude Code session"

# Row fields that describe the session rather than one row: copied onto rows written anew.
_ENVELOPE_FIELDS = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "slug")
_UUID_NAMESPACE = uuid.UUID("6f1d2c1e-8a35-4c53-9d0e-2b7f4f1d9c11")
_SYNTHETIC_MODEL = "<synthetic>"
"""The model name Claude Code gives the messages it writes itself (no model produced them)."""


@dataclass
class _Draft:
    """A message being assembled from rows."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    exact: bool = True
    api_id: str | None = None
    usage: ReportedUsage | None = None
    model: str | None = None
    preceding: tuple[dict[str, Any], ...] = ()


def read_claude_code(path: str | Path) -> list[Message]:
    """Neutral messages of a Claude Code session log; `TranscriptFormatError` names a bad row."""
    path = Path(path).expanduser()
    rows = read_jsonl_objects(path, FORMAT_NAME)
    conversation = [
        (n, r) for n, r in rows if r.get("type") in ("user", "assistant") or is_compact_boundary(r)
    ]
    main_thread = any(not r.get("isSidechain") for _, r in conversation if not is_compact_boundary(r))
    context: dict[str, Any] = {}
    drafts: list[_Draft] = []
    reader = _Reader(path, drafts)
    boundary: list[dict[str, Any]] = []
    for lineno, row in conversation:
        if row.get("isMeta") or (main_thread and row.get("isSidechain")):
            continue
        if is_compact_boundary(row):
            boundary.append(row)
            continue
        if not context:
            context = {k: row[k] for k in _ENVELOPE_FIELDS if k in row}
        made = len(drafts)
        reader.add_row(lineno, row)
        if boundary and len(drafts) > made:
            # The boundary travels with the message after it (the compact summary), so a writer
            # puts it back where Claude Code wrote it.
            drafts[made].preceding, boundary = tuple(boundary), []
    if not drafts:
        raise TranscriptFormatError(f"{path}: a {FORMAT_NAME} with no conversation rows (user / assistant)")
    _order_results(drafts)
    return [
        Message.from_native(
            d.role,
            d.parts,
            RawRows("claude-code", tuple(d.rows), d.exact, context, d.preceding),
            usage=d.usage,
            model=d.model,
        )
        for d in drafts
    ]


def is_compact_boundary(row: dict[str, Any]) -> bool:
    """Claude Code's own compaction boundary row: the context the session resumes from starts after it
    (its `parentUuid` is null, so the chain Claude Code follows back stops there)."""
    return row.get("type") == "system" and row.get("subtype") == "compact_boundary"


class _Reader:
    def __init__(self, path: Path, drafts: list[_Draft]) -> None:
        self.path = path
        self.drafts = drafts
        self.call_names: dict[str, str] = {}
        self.call_ids: dict[str, str] = {}  # id in the log -> id given (made unique)
        self.seen_ids: dict[str, int] = {}
        self.open_assistant: _Draft | None = None

    def error(self, lineno: int, what: str) -> TranscriptFormatError:
        return TranscriptFormatError(f"{self.path}:{lineno}: {what}")

    def add_row(self, lineno: int, row: dict[str, Any]) -> None:
        message = row.get("message")
        if not isinstance(message, dict):
            raise self.error(lineno, f"a {row['type']} row without a 'message' object")
        content = message.get("content")
        if content is None:
            content = []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise self.error(
                lineno, f"'message.content' must be a string or a list, got {type(content).__name__}"
            )
        for n, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise self.error(lineno, f"content block {n} is not an object with a 'type'")
        if row["type"] == "assistant":
            self._add_assistant(lineno, row, message, content)
        else:
            self._add_user(lineno, row, message, content)

    def _add_assistant(
        self, lineno: int, row: dict[str, Any], message: dict[str, Any], content: list[dict[str, Any]]
    ) -> None:
        api_id = message.get("id") if isinstance(message.get("id"), str) else None
        draft = self.open_assistant
        if draft is None or api_id is None or draft.api_id != api_id:
            draft = _Draft("assistant", api_id=api_id)
            self.drafts.append(draft)
            self.open_assistant = draft
        draft.rows.append(row)
        draft.usage = _usage(message.get("usage")) or draft.usage
        model = message.get("model")
        if isinstance(model, str) and model and model != _SYNTHETIC_MODEL:
            draft.model = model
        for n, block in enumerate(content):
            draft.parts.append(self._assistant_part(lineno, n, block))

    def _assistant_part(self, lineno: int, n: int, block: dict[str, Any]) -> Part:
        kind = block["type"]
        if kind == "text":
            return TextPart(_text(block.get("text")), native=block)
        if kind == "thinking":
            return ThinkingPart(
                _text(block.get("thinking")),
                signature=block.get("signature") or None,
                provider="anthropic",
                native=block,
            )
        if kind == "redacted_thinking":
            return ThinkingPart(
                "", signature=block.get("data") or None, provider="anthropic", redacted=True, native=block
            )
        if kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise self.error(lineno, f"tool_use block {n} needs an 'id' and a 'name'")
            given = self._unique_id(call_id)
            self.call_names[given] = name
            arguments = block.get("input")
            if not isinstance(arguments, (dict, str)):
                arguments = {} if arguments is None else json.dumps(arguments)
            return ToolCallPart(given, name, arguments, native=block)
        return OtherPart(kind, json.dumps(block, ensure_ascii=False), native=block)

    def _unique_id(self, call_id: str) -> str:
        count = self.seen_ids.get(call_id, 0) + 1
        self.seen_ids[call_id] = count
        given = call_id if count == 1 else f"{call_id}__{count}"
        self.call_ids[call_id] = given
        return given

    def _add_user(
        self, lineno: int, row: dict[str, Any], message: dict[str, Any], content: list[dict[str, Any]]
    ) -> None:
        results = [b for b in content if b["type"] == "tool_result"]
        others = [b for b in content if b["type"] != "tool_result"]
        # One row holding one kind of content is written back as itself; a mixed row is split.
        exact = not (results and others) and len(results) <= 1
        for n, block in enumerate(content):
            if block["type"] != "tool_result":
                continue
            log_id = block.get("tool_use_id")
            if not isinstance(log_id, str) or not log_id:
                raise self.error(lineno, f"tool_result block {n} needs a 'tool_use_id'")
            call_id = self.call_ids.get(log_id, log_id)
            part = ToolResultPart(
                call_id,
                self.call_names.get(call_id),
                _result_text(block.get("content")),
                is_error=bool(block.get("is_error")),
                native=block,
            )
            self.drafts.append(_Draft("tool", [part], [row], exact))
        if others or not results:
            parts = [_user_part(b) for b in others]
            if not parts:
                parts = [TextPart("")]
            self.drafts.append(_Draft("user", parts, [row], exact))
            # The user spoke: a later row of the same API message would be a new turn.
            self.open_assistant = None


def _usage(value: Any) -> ReportedUsage | None:
    """An Anthropic `usage` object: every input token of the call, cache reads and writes included."""
    if not isinstance(value, dict) or not isinstance(value.get("input_tokens"), int):
        return None
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    total = sum(v for k in keys if isinstance(v := value.get(k), int))
    output = value.get("output_tokens")
    return ReportedUsage(total, output if isinstance(output, int) else 0)


def _text(value: Any) -> str:
    return (
        value if isinstance(value, str) else ("" if value is None else json.dumps(value, ensure_ascii=False))
    )


def _result_text(content: Any) -> str:
    """A tool result's content as the model reads it: text items joined, media named."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                pieces.append(_text(item.get("text")))
            elif isinstance(item, dict) and item.get("type") in ("image", "document"):
                source = _source(item)
                pieces.append(f"[{item['type']}: {source.get('media_type', 'unknown type')}]")
            else:
                pieces.append(_text(item))
        return "\n".join(pieces)
    return _text(content)


def _source(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source")
    return source if isinstance(source, dict) else {}


def _user_part(block: dict[str, Any]) -> Part:
    kind = block["type"]
    if kind == "text":
        return TextPart(_text(block.get("text")), native=block)
    if kind in ("image", "document"):
        source = _source(block)
        data = source.get("data")
        size = len(data) * 3 // 4 if isinstance(data, str) else 0
        url = source.get("url")
        media_type = source.get("media_type")
        return MediaPart(
            media_type if isinstance(media_type, str) and media_type else kind,
            url if isinstance(url, str) else "",
            size,
            native=block,
            digest=payload_digest(data) if isinstance(data, str) else "",
        )
    return OtherPart(kind, json.dumps(block, ensure_ascii=False), native=block)


def _order_results(drafts: list[_Draft]) -> None:
    """Put the tool messages that follow an assistant message in the order of its calls."""
    index = 0
    while index < len(drafts):
        draft = drafts[index]
        index += 1
        if draft.role != "assistant":
            continue
        order = {p.id: n for n, p in enumerate(q for q in draft.parts if isinstance(q, ToolCallPart))}
        end = index
        while end < len(drafts) and drafts[end].role == "tool":
            end += 1
        if end - index > 1:
            run = drafts[index:end]
            run.sort(key=lambda d: order.get(d.parts[0].tool_call_id, len(order)))  # type: ignore[union-attr]
            drafts[index:end] = run
        index = end


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def write_claude_code(messages: Sequence[Message], path: str | Path) -> None:
    """Write neutral messages as a Claude Code session log (see the module docstring)."""
    path = Path(path).expanduser()
    writer = _Writer(messages)
    write_jsonl(path, writer.rows())


class _Writer:
    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        self.context: dict[str, Any] = {}
        for msg in messages:
            if isinstance(msg.native, RawRows) and msg.native.format == "claude-code":
                self.context = msg.native.context
                break
        self.session = str(self.context.get("sessionId", "historykit"))
        self.previous: str | None = None
        self.timestamp: str | None = None
        self.emitted: set[int] = set()

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index, msg in enumerate(self.messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(
                    f"message {index} is a {type(msg).__name__}, not a historykit Message"
                )
            for row in [*self._preceding_rows(msg), *self._message_rows(index, msg)]:
                out.append(self._link(row))
        return out

    def _preceding_rows(self, msg: Message) -> list[dict[str, Any]]:
        """The agent's compaction boundary before `msg`, once, whether or not `msg` was edited."""
        raw = msg.native if isinstance(msg.native, RawRows) and msg.native.format == "claude-code" else None
        if raw is None:
            return []
        fresh = [r for r in raw.preceding if id(r) not in self.emitted]
        self.emitted.update(id(r) for r in raw.preceding)
        return fresh

    def _link(self, row: dict[str, Any]) -> dict[str, Any]:
        if is_compact_boundary(row):
            # A boundary starts the chain Claude Code resumes from: no parent, the row before it
            # named as its logical parent only.
            if row.get("parentUuid") is not None or row.get("logicalParentUuid") != self.previous:
                row = {**row, "parentUuid": None, "logicalParentUuid": self.previous}
        elif row.get("parentUuid") != self.previous:
            row = {**row, "parentUuid": self.previous}
        self.previous = row.get("uuid") or self.previous
        if isinstance(row.get("timestamp"), str):
            self.timestamp = row["timestamp"]
        return row

    def _message_rows(self, index: int, msg: Message) -> list[dict[str, Any]]:
        raw = msg.native if isinstance(msg.native, RawRows) and msg.native.format == "claude-code" else None
        if raw is not None and raw.exact and msg.is_untouched:
            fresh = [r for r in raw.rows if id(r) not in self.emitted]
            self.emitted.update(id(r) for r in raw.rows)
            return fresh
        base = raw.rows[0] if raw is not None else None
        # Only a message that was its row alone may take the row's place (and its uuid).
        own = base if raw is not None and raw.exact else None
        if msg.role == "assistant":
            return [self._assistant_row(index, msg, base)]
        if msg.role == "system":
            raise InvalidArgumentError(
                f"message {index} is a system message: a Claude Code session log has no system "
                "messages (its system prompt is not logged)"
            )
        rows: list[dict[str, Any]] = []
        results = [p for p in msg.parts if isinstance(p, ToolResultPart)]
        rest = [p for p in msg.parts if not isinstance(p, ToolResultPart)]
        for n, part in enumerate(results):
            same = own if len(results) == 1 and not rest else None
            rows.append(self._user_row(index, n, [_result_block(part)], same, base))
        if rest or not results:
            blocks = [_user_block(p) for p in rest] or [{"type": "text", "text": ""}]
            row = self._user_row(index, len(results), blocks, own if not results else None, base)
            if any(isinstance(p, SummaryPart) for p in rest):
                row["isCompactSummary"] = True
            rows.append(row)
        return rows

    def _new_uuid(self, index: int, n: int) -> str:
        return str(uuid.uuid5(_UUID_NAMESPACE, f"{self.session}:{self.previous}:{index}:{n}"))

    def _envelope(self, base: dict[str, Any] | None) -> dict[str, Any]:
        source = base if base is not None else self.context
        return {k: source[k] for k in _ENVELOPE_FIELDS if k in source}

    def _user_row(
        self,
        index: int,
        n: int,
        blocks: list[dict[str, Any]],
        same: dict[str, Any] | None,
        base: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if same is not None:
            # The message was one row: keep every field of it, except the structured copy of a
            # tool's output, which would still hold what the processor cleared.
            row = {k: v for k, v in same.items() if k != "toolUseResult"}
            row["message"] = {**same["message"], "content": blocks}
            return row
        return {
            "parentUuid": self.previous,
            **self._envelope(base),
            "type": "user",
            "message": {"role": "user", "content": blocks},
            "uuid": self._new_uuid(index, n),
            "timestamp": (base or {}).get("timestamp") or self.timestamp,
        }

    def _assistant_row(self, index: int, msg: Message, base: dict[str, Any] | None) -> dict[str, Any]:
        blocks = [_assistant_block(p) for p in msg.parts]
        if base is not None and isinstance(base.get("message"), dict):
            return {**base, "message": {**base["message"], "content": blocks}}
        return {
            "parentUuid": self.previous,
            **self._envelope(None),
            "type": "assistant",
            "message": {
                "id": f"msg_historykit_{self._new_uuid(index, 0).replace('-', '')[:24]}",
                "type": "message",
                "role": "assistant",
                "model": _SYNTHETIC_MODEL,
                "content": blocks,
                "stop_reason": None,
                "stop_sequence": None,
            },
            "uuid": self._new_uuid(index, 0),
            "timestamp": self.timestamp,
        }


def _native_block(part: Part) -> dict[str, Any]:
    return dict(part.native) if isinstance(part.native, dict) else {}


def _assistant_block(part: Part) -> dict[str, Any]:
    block = _native_block(part)
    if isinstance(part, TextPart):
        return {**block, "type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        if part.redacted:
            return {**block, "type": "redacted_thinking", "data": part.signature or ""}
        return {**block, "type": "thinking", "thinking": part.text, "signature": part.signature or ""}
    if isinstance(part, ToolCallPart):
        arguments = part.arguments if isinstance(part.arguments, dict) else part.arguments_dict()
        if not arguments and isinstance(part.arguments, str) and part.arguments:
            arguments = {"input": part.arguments}
        # An edited call keeps the id the log had (the reader may have made it unique).
        return {
            **block,
            "type": "tool_use",
            "id": block.get("id", part.id),
            "name": part.name,
            "input": arguments,
        }
    if isinstance(part, SummaryPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, OtherPart) and block:
        return block
    return _user_block(part)


def _result_block(part: ToolResultPart) -> dict[str, Any]:
    block = _native_block(part)
    same_content = isinstance(part.native, dict) and _result_text(part.native.get("content")) == part.content
    out = {
        **block,
        "type": "tool_result",
        "tool_use_id": block.get("tool_use_id", part.tool_call_id),
        "content": block.get("content") if same_content else part.content,
    }
    if part.is_error:
        out["is_error"] = True
    else:
        out.pop("is_error", None)
    return out


def _user_block(part: Part) -> dict[str, Any]:
    block = _native_block(part)
    if isinstance(part, (TextPart, SummaryPart)):
        return {**block, "type": "text", "text": part.text}
    if isinstance(part, MediaPart) and block:
        return block
    if isinstance(part, OtherPart) and block:
        return block
    if isinstance(part, ThinkingPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "text", "text": f"[tool call {part.name}({part.arguments_text()})]"}
    if isinstance(part, MediaPart):
        return {"type": "text", "text": f"[{part.media_type}{': ' + part.source if part.source else ''}]"}
    if isinstance(part, ToolResultPart):
        return _result_block(part)
    return {"type": "text", "text": getattr(part, "text", "")}
