"""The native object of a message read from a JSONL agent log: the rows it came from.

Claude Code sessions and Codex rollouts have no framework objects; the rows of the log are their
native form. A reader wraps the rows of each neutral message in `RawRows` (via
`Message.from_native`), and a writer copies the rows of an untouched message back verbatim and
rebuilds only what a processor edited, keeping every field of the original rows it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class RawRows:
    """The rows of a JSONL log that one neutral message was read from."""

    format: str
    """The format the rows are in (`claude-code`, `codex`): a writer reuses only rows of its own."""
    rows: tuple[dict[str, Any], ...]
    """The rows, in file order."""
    exact: bool
    """True when the rows hold this message and nothing else, so an untouched message can be
    written back as the rows themselves."""
    context: dict[str, Any] = field(default_factory=dict)
    """Shared by every message of one file: the session header or a template row for new rows."""
    preceding: tuple[dict[str, Any], ...] = ()
    """Bookkeeping rows the log has just before this message's rows that a writer keeps in place:
    the agent's own compaction boundary (Claude Code's `compact_boundary` row), which tells the
    agent where the context it resumes from starts."""
