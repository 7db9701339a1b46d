"""Reading and writing transcript files (`historykit.formats`): the format detected or named, the
native messages kept beside the neutral ones, a history written back in its own format."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from historykit._frameworks import adapter_for, framework_for_format, framework_of, frameworks
from historykit._messages import Message
from historykit.errors import ArgumentTypeError
from historykit.formats._detect import TranscriptFormatError, detect_text, resolve_format
from historykit.formats._openai_chat import read_chat_jsonl, write_chat_jsonl


@dataclass(frozen=True)
class TranscriptFile:
    """A transcript read from a file."""

    path: Path
    format: str
    """The canonical format name (`historykit.formats.FORMATS`)."""
    messages: list[Message]
    """The neutral messages."""
    native: list[Any] | None = None
    """The framework's own messages, for `pydantic-ai` and `langchain` files; `None` otherwise."""

    @property
    def history(self) -> list[Any]:
        """What to process: the native messages when there are any (so the result is native too)."""
        return self.native if self.native is not None else self.messages


def read_transcript(path: str | Path, format: str | None = None) -> TranscriptFile:
    """Read a transcript file, detecting its format unless `format` names it.

    Raises `FileNotFoundError` for a missing file, `TranscriptFormatError` (a `ValueError`) naming
    the file, and the line where it applies, for an empty, truncated or unrecognised file, and
    `ImportError` when the format's framework is not installed.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise TranscriptFormatError(f"{path}: a directory, not a transcript file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptFormatError(f"{path}: not UTF-8 text (byte {exc.start}): not a transcript") from None
    if not text.strip():
        raise TranscriptFormatError(f"{path}: the file is empty: no messages to read")
    fmt = resolve_format(format) if format is not None else detect_text(text, str(path))
    native: list[Any] | None = None
    if fmt == "chat":
        messages = read_chat_jsonl(path)
    elif fmt in _framework_formats():
        native, messages = framework_for_format(fmt).read_transcript(path)
    elif fmt == "claude-code":
        from historykit.formats._claude_code import read_claude_code

        messages = read_claude_code(path)
    else:
        from historykit.formats._codex import read_codex

        messages = read_codex(path)
    if not messages:
        raise TranscriptFormatError(f"{path}: no messages in this {fmt} file")
    return TranscriptFile(path, fmt, messages, native)


def write_transcript(messages: Sequence[Any], path: str | Path, format: str) -> None:
    """Write a history (neutral, or native Pydantic AI / LangChain messages) to `path` as `format`.

    Messages read from a file of the same format keep what a processor did not touch; messages from
    another format are converted (what the target format cannot hold is rendered as text). The
    file is written whole and then moved into place.
    """
    fmt = resolve_format(format)
    path = Path(path).expanduser()
    messages = list(messages)
    if fmt in _framework_formats() and messages and _framework_of(messages[0]) == fmt:
        native_out: Sequence[Any] = messages
    else:
        native_out = [_for_format(m, fmt, i) for i, m in enumerate(_neutral(messages))]
    if fmt == "chat":
        write_chat_jsonl(native_out, path)
    elif fmt in _framework_formats():
        framework_for_format(fmt).write_transcript(native_out, path)
    elif fmt == "claude-code":
        from historykit.formats._claude_code import write_claude_code

        write_claude_code(native_out, path)
    else:
        from historykit.formats._codex import write_codex

        write_codex(native_out, path)


def _neutral(messages: list[Any]) -> list[Message]:
    if not messages or isinstance(messages[0], Message):
        return messages
    return adapter_for(messages).to_neutral(messages)


def _framework_of(obj: Any) -> str | None:
    """The format whose native objects `obj` (a native message, or a neutral one's `native`) is."""
    from historykit.formats._raw import RawRows

    if isinstance(obj, RawRows):
        return obj.format
    framework = framework_of(type(obj))
    return framework.format if framework is not None else None


def _framework_formats() -> set[str]:
    """The formats that are a registered framework's native JSON."""
    return {f.format for f in frameworks() if f.format is not None}


def detached(message: Message) -> Message:
    """`message` without its native object (and its parts without theirs), as a processor would make it.

    What a framework adapter needs to build its own message from one read out of another format.
    """
    parts = tuple(replace(p, native=None) for p in message.parts)
    return Message(message.role, parts, id=message.id, pinned=message.pinned, usage=message.usage)


def _for_format(message: Any, fmt: str, index: int) -> Message:
    """`message`, cut loose from a native object of another format so the writer builds it anew."""
    if not isinstance(message, Message):
        raise ArgumentTypeError(f"message {index} is a {type(message).__name__}, not a historykit Message")
    if message.native is None or _framework_of(message.native) == fmt:
        return message
    return detached(message)
