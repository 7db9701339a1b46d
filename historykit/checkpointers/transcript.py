"""The original transcript of a thread: every message it ever had, with its compaction markers.

Compaction removes messages from the graph state (a summary replaces them), but the message log
keeps them. `Transcript` is what a store returns for a thread: the messages in the order the
thread first saw them, and one `StoredCompaction` per summary message.

Example:
    ```python
    transcript = saver.transcript("thread-1")
    for compaction in transcript.compactions:
        summary = transcript.messages[compaction.summary_index]
        replaced = compaction.marker.covered_to - compaction.marker.covered_from
        print(f"{summary.id} replaced {replaced} messages")
    ```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from historykit.messages import CompactionMarker

__all__ = ["StoredCompaction", "Transcript"]


@dataclass(frozen=True, slots=True)
class StoredCompaction:
    """A compaction marker as stored, located in its transcript."""

    marker: CompactionMarker
    summary_index: int
    """Index in `Transcript.messages` of the summary message that carries the marker."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """Every message of a thread, in first-seen order, and its compactions in the same order."""

    thread_id: str
    messages: list[Any] = field(default_factory=list)
    """Native messages (LangChain `BaseMessage`s for the LangGraph saver)."""
    compactions: list[StoredCompaction] = field(default_factory=list)
