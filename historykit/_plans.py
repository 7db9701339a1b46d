"""One driver for the work historykit writes once for sync and async callers.

A piece of work that needs something only the caller can get (a processor's output, a database
query's rows, a summarizer's text, a store's transcript) is written as a generator, a *plan*: it
yields what it needs, is sent the answer, and returns its result. Sync code runs a plan with
`drive`, answering each request with a function; async code runs the very same plan with
`adrive`, awaiting each answer. So no logic is written twice, and the two ways can never drift:
a pipeline's steps (`historykit._pipeline`), a store's queries (`historykit.checkpointers._database`),
a summary's requests (`historykit.processors._summarize`), recall's look-up (`historykit._recall`),
the compact-and-retry after an overflow (`historykit.plugins._overflow`) and the single-writer
guard's wait (`historykit.checkpointers._saver_base`) are all plans.

An answer that fails is raised inside the plan, where it made the request: a plan handles a failed
request as code handles a failed call (the conversation store turns a duplicate key into its
conflict error), and its `with` and `finally` blocks run at once rather than when the abandoned
generator is collected.

Example:
    ```python
    from historykit._plans import adrive, drive

    def plan():
        rows = yield "SELECT 1"          # a request
        return len(rows)

    drive(plan(), lambda query: [1])              # 1
    await adrive(plan(), fetch_rows)              # fetch_rows: an async function of the request
    ```
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

Request = TypeVar("Request")
Answer = TypeVar("Answer")
Result = TypeVar("Result")


def drive(plan: Generator[Request, Answer, Result], answer: Callable[[Request], Answer]) -> Result:
    """Run `plan`, answering each request with `answer(request)`; its result."""
    try:
        request = next(plan)
        while True:
            try:
                reply = answer(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(
    plan: Generator[Request, Answer, Result], answer: Callable[[Request], Awaitable[Answer]]
) -> Result:
    """`drive` from async code: each answer is awaited."""
    try:
        request = next(plan)
        while True:
            try:
                reply = await answer(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
