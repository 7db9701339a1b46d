"""The single-writer guard of the LangGraph saver (`SQLModelSaver(single_writer=True)`): which
checkpoints of this process were stored, refused, or are being stored, and so whether a node's
writes may be saved.

The check itself runs in the write transaction of each `put` (`LangGraphProtocol._check_writer_plan`):
a root checkpoint that does not extend the thread's latest one is refused. What this module adds is
for the writes: LangGraph saves in the background, so a node's writes can reach the saver before the
checkpoint they belong to, and a refused run goes on running its nodes (its error surfaces at the
end of the run). A write waits until its checkpoint is settled here, and is refused with it.

Example:
    ```python
    guard = WriterGuard()
    guard.begin_put("c2")
    assert guard.verdict("t", "c2") is Verdict.WAIT
    guard.end_put("t", "c2", stored=False)   # refused
    assert guard.verdict("t", "c2") is Verdict.REFUSE
    ```
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict

__all__ = ["KEPT", "Verdict", "WriterGuard"]

KEPT = 1024
"""How many checkpoint ids of each kind the guard remembers (a refused run stops at its end)."""


class Verdict(enum.Enum):
    """What to do with a write for a checkpoint."""

    WRITE = "write"
    """Its checkpoint was stored by this process."""
    WAIT = "wait"
    """Its checkpoint is being stored by this process: ask again."""
    REFUSE = "refuse"
    """Its checkpoint was refused, or it belongs to a thread whose run this process refused."""
    ASK_DATABASE = "ask the database"
    """Unknown here (stored by another process, or not put yet): written once the database has it."""


def _keep(recent: OrderedDict[str, None], key: str) -> None:
    recent[key] = None
    recent.move_to_end(key)
    while len(recent) > KEPT:
        recent.popitem(last=False)


class WriterGuard:
    """The checkpoints this process stored, refused or is storing under the single-writer guard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, None] = OrderedDict()
        self._refused: OrderedDict[str, None] = OrderedDict()
        self._refused_threads: OrderedDict[str, None] = OrderedDict()
        self._in_flight: dict[str, int] = {}

    def begin_put(self, checkpoint_id: str) -> None:
        with self._lock:
            self._in_flight[checkpoint_id] = self._in_flight.get(checkpoint_id, 0) + 1

    def end_put(self, thread_id: str, checkpoint_id: str, *, stored: bool) -> None:
        with self._lock:
            left = self._in_flight.pop(checkpoint_id, 1) - 1
            if left > 0:
                self._in_flight[checkpoint_id] = left
            if stored:
                _keep(self._stored, checkpoint_id)

    def refuse(self, thread_id: str, checkpoint_id: str) -> None:
        with self._lock:
            _keep(self._refused, checkpoint_id)
            _keep(self._refused_threads, thread_id)

    def started(self, thread_id: str) -> None:
        """A run of the thread began in this process (its first checkpoint was stored)."""
        with self._lock:
            self._refused_threads.pop(thread_id, None)

    def refused(self, checkpoint_id: str | None) -> bool:
        return checkpoint_id is not None and checkpoint_id in self._refused

    def verdict(self, thread_id: str, checkpoint_id: str) -> Verdict:
        with self._lock:
            if checkpoint_id in self._refused:
                return Verdict.REFUSE
            if checkpoint_id in self._stored:
                return Verdict.WRITE
            if checkpoint_id in self._in_flight:
                return Verdict.WAIT
            if thread_id in self._refused_threads:
                return Verdict.REFUSE
            return Verdict.ASK_DATABASE
