"""What a store gives back for a thread: the original transcript, the compactions, and the view.

A compaction never edits what is stored. The message log keeps every message the thread ever had:
the originals, each once, in the order the thread first saw them, and beside them the messages a
compaction wrote (a summary, a cleared copy of a tool result, a truncation notice, a response whose
thinking was dropped, ...), each with its `CompactionMarker`. `Transcript` separates the two:

- `messages`: the originals, never edited: what `historykit export` writes by default;
- `compactions`: one `StoredCompaction` per message a compaction wrote, every kind, in log order;
- `view`: the history as the store last kept it, which is the view the model was last sent plus
  what came after it (`historykit export --view`); `None` where the store keeps no history beyond
  the log.

Example:
    ```python
    transcript = saver.transcript("thread-1")
    for compaction in transcript.compactions:
        marker = compaction.marker
        print(f"{marker.strategy}: messages {marker.covered_from}-{marker.covered_to} of the history it saw, "
              f"{marker.tokens_before} -> {marker.tokens_after} tokens, before original #{compaction.at}")
    ```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from historykit._messages import CompactionMarker

__all__ = ["StoredCompaction", "Transcript"]


@dataclass(frozen=True, slots=True)
class StoredCompaction:
    """A message a compaction wrote, with its marker, located among the originals."""

    marker: CompactionMarker
    """What the compaction did: its strategy, what it replaced, tokens before and after, when."""
    message: Any
    """The native message it wrote (a summary, a cleared copy, a notice, ...)."""
    at: int
    """How many originals the thread had logged before it: its place in `Transcript.messages`."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """A thread's originals in first-seen order, the compactions made over them, and the latest view."""

    thread_id: str
    messages: list[Any] = field(default_factory=list)
    """The original messages (native: LangChain `BaseMessage`s for the LangGraph saver, Pydantic AI
    `ModelMessage`s for the conversation store), each once, never edited."""
    compactions: list[StoredCompaction] = field(default_factory=list)
    """Every message a compaction wrote, with its marker, in the order they were logged."""
    view: list[Any] | None = None
    """The history as last stored: the view last sent plus what arrived after it."""

    def logged(self) -> list[Any]:
        """Originals and the messages compactions wrote, interleaved in the order they were logged."""
        out: list[Any] = []
        at = 0
        for compaction in self.compactions:
            out.extend(self.messages[at : compaction.at])
            at = compaction.at
            out.append(compaction.message)
        out.extend(self.messages[at:])
        return out
