"""`WriteOrder`: a thread's writers go in one at a time, first come first served, and a queue
lives only while someone is in it or waiting."""

from __future__ import annotations

import asyncio
import threading
import time

from historykit.checkpointers._write_order import WriteOrder


def _arrive_in_order(order: WriteOrder, key: str | None, count: int) -> list[int]:
    """`count` threads ask for `key`'s turn one after another while the first holds it; the order
    they get in."""
    entered: list[int] = []
    asked = threading.Semaphore(0)

    def writer(i: int) -> None:
        asked.release()
        with order.turn(key):
            entered.append(i)
            time.sleep(0.001)

    with order.turn(key):
        threads = []
        for i in range(count):
            thread = threading.Thread(target=writer, args=(i,))
            thread.start()
            asked.acquire()
            time.sleep(0.005)  # the thread is waiting for its turn before the next one asks
            threads.append(thread)
    for thread in threads:
        thread.join()
    return entered


def test_writers_of_a_thread_go_in_the_order_they_asked() -> None:
    order = WriteOrder(whole_database=False)
    assert _arrive_in_order(order, "t", 12) == list(range(12))
    assert not order._queues, "a queue outlived its writers"


def test_one_queue_for_the_whole_database() -> None:
    order = WriteOrder(whole_database=True)
    assert _arrive_in_order(order, None, 8) == list(range(8))


def test_other_threads_do_not_wait() -> None:
    order = WriteOrder(whole_database=False)
    with order.turn("busy"):
        done = threading.Event()

        def other() -> None:
            with order.turn("free"):
                done.set()

        threading.Thread(target=other).start()
        assert done.wait(5), "a writer of another thread waited for this one"


def test_tasks_of_a_thread_go_in_the_order_they_asked() -> None:
    async def main() -> list[int]:
        order = WriteOrder(whole_database=False)
        entered: list[int] = []

        async def writer(i: int) -> None:
            async with order.aturn("t"):
                entered.append(i)
                await asyncio.sleep(0)

        async with order.aturn("t"):
            tasks = [asyncio.create_task(writer(i)) for i in range(10)]
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        assert not order._async_queues[asyncio.get_running_loop()]
        return entered

    assert asyncio.run(main()) == list(range(10))


def test_a_writer_interrupted_while_waiting_does_not_stall_the_ones_behind_it() -> None:
    order = WriteOrder(whole_database=True)
    turns = order._whole
    assert turns is not None
    real_wait = turns._changed.wait
    interrupted = threading.Event()

    def wait_or_interrupt(timeout: float | None = None) -> bool:
        if threading.current_thread().name == "interrupted":
            raise KeyboardInterrupt
        return real_wait(timeout)

    turns._changed.wait = wait_or_interrupt  # type: ignore[method-assign]
    entered: list[str] = []

    def writer() -> None:
        try:
            with order.turn(None):
                entered.append(threading.current_thread().name)
        except KeyboardInterrupt:
            interrupted.set()

    with order.turn(None):
        first = threading.Thread(target=writer, name="interrupted")
        first.start()
        assert interrupted.wait(5)
        second = threading.Thread(target=writer, name="behind")
        second.start()
    second.join(5)
    assert entered == ["behind"]
