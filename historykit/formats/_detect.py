"""Which transcript format a file is in, decided from its content.

Five formats are known, each under one canonical name, recognised as follows:

- `chat`: the corpus format, OpenAI chat-completions messages one a line (JSONL objects with a
  `role`);
- `pydantic-ai`: Pydantic AI messages as `ModelMessagesTypeAdapter` dumps them (a JSON array of
  objects with `kind` and `parts`);
- `langchain`: LangChain messages as `messages_to_dict` dumps them (a JSON array of objects with
  `type` and `data`);
- `claude-code`: a Claude Code session log, `~/.claude/projects/<project>/<session>.jsonl` (JSONL
  rows with a `type` such as `user`, `assistant`, `summary`, and a `uuid` / `sessionId`);
- `codex`: a Codex CLI rollout, `~/.codex/sessions/.../rollout-*.jsonl` (JSONL rows with a `type`
  such as `session_meta` or `response_item`, and a `payload`; in the 2025-09 generation and before,
  a header line `{"id", "timestamp", "instructions"}`, `{"record_type": "state"}` lines and bare
  Responses API items such as `{"type": "message", "role": ..., "content": [...]}`).

Example:
    ```python
    from historykit.formats._detect import detect_format, resolve_format

    detect_format("session.jsonl")      # 'claude-code'
    resolve_format("Claude_Code")       # 'claude-code'
    ```
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from historykit.errors import TranscriptFormatError

FORMATS: tuple[str, ...] = ("chat", "pydantic-ai", "langchain", "claude-code", "codex")
"""The canonical format names, in the order they are documented."""

_ALIASES = {
    "openai": "chat",
    "openai-chat": "chat",
    "corpus": "chat",
    "pydanticai": "pydantic-ai",
    "pai": "pydantic-ai",
    "lc": "langchain",
    "claude": "claude-code",
    "claudecode": "claude-code",
    "codex-cli": "codex",
}

CLAUDE_CODE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation"}
)
"""Row types a Claude Code session has (only `user` and `assistant` rows carry the conversation)."""

CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
"""Row types a Codex CLI rollout has (only `response_item` and `compacted` rows carry the conversation)."""

_BARE_CODEX_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "local_shell_call"}
)

_SNIFF_ROWS = 200


def resolve_format(name: str) -> str:
    """The canonical name of a format name or alias; `TranscriptFormatError` lists the valid ones."""
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in FORMATS and key not in _framework_formats():
        raise TranscriptFormatError(f"unknown format {name!r}: use one of {', '.join(FORMATS)}")
    return key


def _framework_formats() -> set[str]:
    # A framework added as a package (`historykit.plugins.register`) brings its own format.
    from historykit._frameworks import frameworks

    return {f.format for f in frameworks() if f.format is not None}


def detect_format(path: str | Path) -> str:
    """The format of the transcript file at `path`; `TranscriptFormatError` when it is none of them."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptFormatError(f"{path}: not UTF-8 text (byte {exc.start}): not a transcript") from None
    return detect_text(text, str(path))


def detect_text(text: str, name: str = "<text>") -> str:
    """The format of a transcript's text; `name` is used in error messages."""
    stripped = text.lstrip()
    if not stripped:
        raise TranscriptFormatError(f"{name}: the file is empty: no messages to read")
    if stripped[0] == "[":
        return _detect_json_array(stripped, name)
    rows = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if rows == 0 and _is_json(stripped):
                raise TranscriptFormatError(
                    f"{name}: a JSON document that is not a list of messages; expected one of: "
                    f"{', '.join(FORMATS)}"
                ) from None
            raise TranscriptFormatError(
                f"{name}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}), so the format "
                "cannot be told; the line may be cut short"
            ) from None
        rows += 1
        found = _classify_row(record)
        if found is not None:
            return found
        if rows >= _SNIFF_ROWS:
            break
    raise TranscriptFormatError(
        f"{name}: not a known transcript format (none of its first {rows} rows looks like a "
        f"message); known formats: {', '.join(FORMATS)}"
    )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _classify_row(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    row_type = record.get("type")
    if isinstance(row_type, str) and "payload" in record and row_type in CODEX_TYPES:
        return "codex"
    if "record_type" in record and len(record) <= 2:
        return "codex"  # an older rollout's state marker
    if (
        "type" not in record
        and "role" not in record
        and "id" in record
        and "timestamp" in record
        and ("instructions" in record or "git" in record)
    ):
        return "codex"  # an older rollout's header line
    if row_type in _BARE_CODEX_ITEMS and "payload" not in record:
        return "codex"  # an older rollout's bare item (the chat format has no `type`)
    if (
        isinstance(row_type, str)
        and row_type in CLAUDE_CODE_TYPES
        and ("uuid" in record or "sessionId" in record or "leafUuid" in record or "messageId" in record)
    ):
        return "claude-code"
    if "role" in record and ("content" in record or "tool_calls" in record):
        return "chat"
    return None


def _detect_json_array(text: str, name: str) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptFormatError(
            f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "the file may be cut short"
        ) from None
    if not isinstance(data, list):
        raise TranscriptFormatError(f"{name}: expected a JSON list of messages")
    if not data:
        raise TranscriptFormatError(f"{name}: an empty list: no messages to read")
    first = data[0]
    if isinstance(first, dict):
        if first.get("kind") in ("request", "response") and "parts" in first:
            return "pydantic-ai"
        if isinstance(first.get("type"), str) and isinstance(first.get("data"), dict):
            return "langchain"
        if "role" in first:
            raise TranscriptFormatError(
                f"{name}: a JSON list of chat messages; the chat format is JSON Lines (one message a "
                "line): convert it with `jq -c '.[]'`"
            )
    raise TranscriptFormatError(
        f"{name}: a JSON list whose items are neither Pydantic AI messages (`kind`, `parts`) nor "
        f"LangChain messages (`type`, `data`); known formats: {', '.join(FORMATS)}"
    )
