"""Shared by the format tests: the fixtures and comparisons through the chat rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from historykit._messages import Message
from historykit.formats._openai_chat import message_to_chat_records

DATA = Path(__file__).resolve().parent / "data"
CLAUDE_CODE = DATA / "claude_code_session.jsonl"
CODEX = DATA / "codex_rollout.jsonl"
CODEX_2025_09 = DATA / "codex_rollout_2025_09.jsonl"
"""A rollout of the 2025-09 generation, written for these tests in the shape public session
viewers' example files have: a bare header line, `record_type` state lines, bare items."""


def chat_records(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """What the corpus format holds of a history: the comparison the corpus conversion is held to."""
    return [record for message in messages for record in message_to_chat_records(message)]


def merge_adjacent_assistants(messages: Sequence[Message]) -> list[Message]:
    """A rollout has no message boundaries: adjacent assistant messages read back as one."""
    out: list[Message] = []
    for message in messages:
        if out and message.role == "assistant" and out[-1].role == "assistant":
            out[-1] = replace(out[-1], parts=out[-1].parts + message.parts)
        else:
            out.append(message)
    return out
