"""Transcript file formats, read into neutral messages."""

from historykit.formats.openai_chat import read_chat_jsonl

__all__ = ["read_chat_jsonl"]
