"""A recorded session cut into turns, and the bundled sample to record from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from historykit._messages import Message, SummaryPart, TextPart, ToolResultPart
from historykit._tokens import TokenCounter
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.formats import detached


def sample_path() -> Path:
    """The bundled sample transcript: a real Claude Code sub-agent session (see `data/SAMPLE-SOURCE.md`).

    Example:
        ```python
        from historykit.formats import read_transcript
        from historykit.testing import sample_path

        messages = read_transcript(sample_path()).messages
        ```
    """
    return Path(str(resources.files("historykit") / "data" / "sample_session.jsonl"))


@dataclass(frozen=True)
class Recording:
    """A recorded agent session, cut into what a replay needs.

    Turns start at the user's messages: a turn is the user message(s) that open it, then the
    assistant messages (one per model call) and tool results up to the next user message.

    Example:
        ```python
        from historykit.testing import Recording

        recording = Recording.load()                 # the bundled sample
        recording = Recording.load("session.jsonl")  # any format historykit.formats reads
        recording = Recording.of(messages)           # neutral messages you built
        recording.model_calls, len(recording.turns)
        ```
    """

    name: str
    """The file name."""
    messages: list[Message]
    """The whole session, neutral."""
    turns: list[tuple[int, int]]
    """`(start, end)` message indices of each turn; the system messages before the first are not in any."""

    @classmethod
    def load(cls, path: str | Path | None = None) -> Recording:
        """Read a transcript (the bundled sample by default), in any format `historykit.formats` reads."""
        from historykit.formats import read_transcript

        path = Path(path) if path is not None else sample_path()
        return cls.of(read_transcript(path).messages, name=path.name)

    @classmethod
    def of(cls, messages: Sequence[Message], *, name: str = "transcript") -> Recording:
        """A recording of neutral messages; `InvalidArgumentError` when there is nothing to replay."""
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise ArgumentTypeError(
                    f"message {index} is a {type(msg).__name__}, not a historykit Message"
                )
        # Cut loose from the file's own rows (a Claude Code or Codex log): the framework adapters
        # build their messages anew, and the recorded usage belongs to the original run, not the replay.
        messages = [replace(detached(m), usage=None) for m in messages]
        starts: list[int] = []
        for index, msg in enumerate(messages):
            if not _is_prompt(msg):
                continue
            previous = messages[index - 1] if index else None
            # Consecutive user messages open one turn together.
            if previous is None or not _is_prompt(previous):
                starts.append(index)
        if not starts:
            raise InvalidArgumentError(f"{name}: no user message to start a replay from")
        for index, msg in enumerate(messages[: starts[0]]):
            if msg.role != "system":
                raise InvalidArgumentError(
                    f"{name}: message {index} ({msg.role}) comes before the first user message, "
                    "where a replay starts"
                )
        if not any(m.role == "assistant" for m in messages):
            raise InvalidArgumentError(f"{name}: no assistant message (model call) to replay")
        ends = [*starts[1:], len(messages)]
        return cls(name, messages, list(zip(starts, ends)))

    @property
    def model_calls(self) -> int:
        """Assistant messages: each answers one model call."""
        return sum(1 for m in self.messages if m.role == "assistant")

    @property
    def system_prompts(self) -> list[str]:
        """The text of the system messages before the first turn."""
        first = self.turns[0][0]
        return [message_text(m) for m in self.messages[:first] if m.role == "system"]

    @property
    def tool_names(self) -> list[str]:
        """Every tool name the session called, sorted."""
        return sorted({p.name for m in self.messages for p in m.tool_calls})

    def prompts(self, turn: int) -> list[str]:
        """The text of the user messages that open a turn."""
        start, end = self.turns[turn]
        out = []
        for msg in self.messages[start:end]:
            if not _is_prompt(msg):
                break
            out.append(message_text(msg))
        return out

    def tool_results(self) -> dict[str, str]:
        """The recorded result of every tool call, by call id."""
        return {
            part.tool_call_id: part.content
            for msg in self.messages
            for part in msg.parts
            if isinstance(part, ToolResultPart)
        }

    def raw_sizes(self, counter: TokenCounter) -> list[int]:
        """Tokens of the raw history each model call would send: everything before its answer."""
        sizes, total = [], 0
        for msg in self.messages:
            if msg.role == "assistant":
                sizes.append(total)
            total += counter.count_message(msg)
        return sizes


def _is_prompt(msg: Message) -> bool:
    """A user message in the user's own voice (tool results are not)."""
    return msg.role == "user" and not any(isinstance(p, ToolResultPart) for p in msg.parts)


def message_text(msg: Message) -> str:
    """A message's text as a reader sees it: its text and summary parts, a blank line apart."""
    return "\n\n".join(p.text for p in msg.parts if isinstance(p, (TextPart, SummaryPart)) and p.text)
