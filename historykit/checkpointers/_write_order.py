"""Writers of one thread go to the database one at a time, in the order they reached the saver.

LangGraph saves a step's writes (`put_writes`) from a pool of threads, or as concurrent tasks,
while its checkpoints (`put`) follow one another. The message log numbers each message the thread
has not seen yet in the order the writes that bring them commit. Left to race for the database,
a later write sometimes commits first (on PostgreSQL, where writers of one thread only queue for
the thread's lock well into their transaction, a few times a step), and the numbers of a
conversation stop being in the conversation's order: its list of references, one run of numbers
while they are, then grows by a run or two every step, and so does the cost of every later write
and read (`historykit.checkpointers._refs`). So the saver lets a thread's writers in one at a time,
first come first served. The calls arrive in the order LangGraph submitted them: a pool thread or
a task runs Python from its start until its first wait on the database, and the turn is taken
before that. On SQLite, which has one writer at a time anyway, the queue is the whole file's.

Example:
    ```python
    order = WriteOrder(whole_database=False)
    with order.turn("thread-1"):
        ...  # one write transaction of thread-1
    ```
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Generic, TypeVar

__all__ = ["WriteOrder"]


class _Turns:
    """A lock that lets its waiters in in the order they asked (`threading.Lock` wakes any one)."""

    __slots__ = ("_abandoned", "_changed", "_next", "_serving")

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next = 0
        self._serving = 0
        self._abandoned: set[int] = set()

    def __enter__(self) -> None:
        with self._changed:
            ticket = self._next
            self._next += 1
            try:
                while ticket != self._serving:
                    self._changed.wait()
            except BaseException:
                # Interrupted while waiting (KeyboardInterrupt): the writers behind it must not
                # wait for a turn no one will take.
                self._abandoned.add(ticket)
                self._next_turn()
                raise

    def __exit__(self, *exc: object) -> None:
        with self._changed:
            self._serving += 1
            self._next_turn()

    def _next_turn(self) -> None:
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        self._changed.notify_all()


_Q = TypeVar("_Q")


class _Queues(Generic[_Q]):
    """A queue per thread id, kept while someone holds or waits for it (sync and async alike)."""

    def __init__(self, make: Callable[[], _Q]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._held: dict[str, tuple[_Q, int]] = {}

    def take(self, key: str) -> _Q:
        """The queue of `key`, counted as held until `give_back`."""
        with self._lock:
            queue, holders = self._held.get(key, (None, 0))
            queue = self._make() if queue is None else queue
            self._held[key] = (queue, holders + 1)
            return queue

    def give_back(self, key: str) -> None:
        with self._lock:
            queue, holders = self._held[key]
            if holders == 1:
                del self._held[key]
            else:
                self._held[key] = (queue, holders - 1)

    def __len__(self) -> int:
        return len(self._held)


class WriteOrder:
    """One first-come-first-served queue of writers per thread, or one for the whole database.

    Queues exist while someone holds or waits for them: a server's saver serving many threads
    keeps none for the threads that are not writing.
    """

    def __init__(self, *, whole_database: bool) -> None:
        """Args:
        whole_database: one queue for every write (SQLite: one writer at a time, whatever the thread).
        """
        self._whole = _Turns() if whole_database else None
        self._queues: _Queues[_Turns] = _Queues(_Turns)
        self._async_whole: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._async_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queues[asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    @contextmanager
    def turn(self, thread_id: str | None) -> Iterator[None]:
        """Wait for this writer's turn (`thread_id` `None`: a write of no one thread, which only
        the whole database's queue orders)."""
        if self._whole is not None:
            with self._whole:
                yield
        elif thread_id is None:
            yield
        else:
            turns = self._queues.take(thread_id)
            try:
                with turns:
                    yield
            finally:
                self._queues.give_back(thread_id)

    @asynccontextmanager
    async def aturn(self, thread_id: str | None) -> AsyncIterator[None]:
        """`turn` for tasks of the running event loop (`asyncio.Lock` lets waiters in in order)."""
        loop = asyncio.get_running_loop()
        if self._whole is not None:
            lock = self._async_whole.get(loop)
            if lock is None:
                lock = self._async_whole[loop] = asyncio.Lock()
            async with lock:
                yield
        elif thread_id is None:
            yield
        else:
            queues = self._async_queues.get(loop)
            if queues is None:
                queues = self._async_queues[loop] = _Queues(asyncio.Lock)
            lock = queues.take(thread_id)
            try:
                async with lock:
                    yield
            finally:
                queues.give_back(thread_id)
