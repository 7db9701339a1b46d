"""The single-writer guard of the LangGraph saver (`SQLModelSaver(single_writer=True)`): which
checkpoints of this process were stored, refused, or are being stored, and so whether a node's
writes may be saved.

The check itself runs in the write transaction of each `put` (`CheckpointPlans._check_writer_plan`):
a root checkpoint that does not extend the thread's latest one is refused. What this module adds is
for the writes: LangGraph saves in the background, so a node's writes can reach the saver before the
checkpoint they belong to, and a refused run goes on running its nodes (its error surfaces at the
end of the run). A write waits until its checkpoint is settled here, and is refused with it.

Example:
    ```python
    guard = WriterGuard()
    guard.begin_put("c2")
    assert guard.verdict("t", "c2") is Verdict.WAIT
    guard.refuse("t", "c2", "a checkpoint after c0 while its latest is c1")
    guard.end_put("t", "c2", stored=False)
    assert guard.verdict("t", "c2") is Verdict.REFUSE
    ```
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime, timezone

__all__ = ["KEPT", "RUN_SILENCE", "Verdict", "WriterGuard", "has_steps_to_run", "saved_within"]

KEPT = 1024
"""How many checkpoint ids of each kind the guard remembers (a refused run stops at its end)."""

RUN_SILENCE = 600.0
"""Seconds after which a checkpoint with steps still to run is taken as left by a run that was
stopped (its process killed), not one still working: a new run may start on it then."""

_TRIGGERS = ("branch:to:", "__start__", "__pregel_tasks")
"""The channels whose update makes LangGraph run a node (an edge, the input, a `Send`); a graph's
state channels never do."""


def has_steps_to_run(updated_channels: Iterable[str] | None) -> bool:
    """Whether LangGraph saved a checkpoint with nodes still to run after it: it was saved with a
    trigger among its updated channels. Unknown (a checkpoint of an older LangGraph) is no."""
    return any(str(channel).startswith(_TRIGGERS) for channel in updated_channels or ())


def saved_within(ts: object, seconds: float) -> bool:
    """Whether a checkpoint's `ts` (LangGraph's ISO time of saving) is less than `seconds` ago.
    A time that does not parse is taken as recent: the guard errs towards refusing."""
    try:
        saved = datetime.fromisoformat(str(ts))
    except ValueError:
        return True
    if saved.tzinfo is None:
        saved = saved.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - saved).total_seconds() < seconds


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


def _keep(recent: OrderedDict[str, str | None], key: str, value: str | None = None) -> None:
    recent[key] = value
    recent.move_to_end(key)
    while len(recent) > KEPT:
        recent.popitem(last=False)


class WriterGuard:
    """The checkpoints this process stored, refused or is storing under the single-writer guard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, str | None] = OrderedDict()
        # checkpoint id / thread id -> why it was refused (a refused run's writes repeat it)
        self._refused: OrderedDict[str, str | None] = OrderedDict()
        self._refused_threads: OrderedDict[str, str | None] = OrderedDict()
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

    def refuse(self, thread_id: str, checkpoint_id: str, why: str) -> None:
        with self._lock:
            _keep(self._refused, checkpoint_id, why)
            _keep(self._refused_threads, thread_id, why)

    def why_refused(self, thread_id: str, checkpoint_id: str) -> str | None:
        """What the refusal of the checkpoint (or else of the thread's run) said."""
        with self._lock:
            return self._refused.get(checkpoint_id) or self._refused_threads.get(thread_id)

    def started(self, thread_id: str) -> None:
        """A run of the thread begins in this process (it reads the thread's latest checkpoint):
        writes of a checkpoint not put yet are its own, no longer a refused run's."""
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
