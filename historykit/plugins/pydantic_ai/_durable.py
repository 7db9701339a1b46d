"""`HistoryKit` under Pydantic AI's durable execution: DBOS, Temporal, Prefect.

A durable engine records what a run did and, after a crash or on another worker, runs the agent
again from the start, handing back each recorded result instead of doing the work again. Code
that runs between those units ("workflow code") must do the same thing every time. historykit's
pipeline is not workflow code: a summary comes from an LLM (another text every call), its marker
carries the time, and a `Summarize` may run a sync summarizer on a thread. So under an engine the
pipeline call of each model request is one durable unit: the capability's durable operation
`view` (`recompact` for a compact-and-retry after a context overflow, `recall` for a recall
look-up that reads the store). A replay gets the recorded view back, summary text and time
included, and sends the same bytes; caches in the worker only make the unit faster.

How the unit runs:

- `DBOSDurability`, `TemporalDurability`, `PrefectDurability` (and any engine built on Pydantic
  AI's `BaseDurabilityCapability`): Pydantic AI dispatches the capability's `@durable_operation`
  methods as the engine's steps, activities or tasks; they are named after the capability's `id`
  (`"historykit"` unless you give another) and the operation.
- `DBOSAgent` (the wrapper Pydantic AI deprecates for `DBOSDurability`) binds no capability
  operations: in a DBOS workflow, historykit runs the unit as a DBOS step itself
  (`DBOS.run_step_async`), named `historykit.<id>.<operation>`.
- `TemporalAgent` and `PrefectAgent` bind none either, and their activities and tasks cannot be
  made at run time: inside their workflow or flow, `HistoryKit` refuses to run (`UserError`),
  naming the capability to use instead.

What crosses the boundary is the request's messages and what the call is (window, mode, thinking
binding, conversation, a manual compaction); what comes back is the view as positions in those
messages plus the messages the call wrote, and the originals a placeholder replaced (kept for
recall in the workflow). In view-only mode the request also carries the view the run's previous
call was sent, so a worker that never saw the conversation continues from it instead of replaying
the conversation (whose summaries it would write again).

No background work in a durable run: a `Summarize(background_at=...)` would start a summary that
outlives the unit, which no engine records; `HistoryKit` refuses it inside a workflow or flow
(`UserError`), and runs it as usual outside one. A sync summarizer runs on a thread inside the
unit (a step or activity may use threads; workflow code may not).

Example:
    ```python
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    from historykit.plugins.pydantic_ai import HistoryKit

    agent = Agent(model, name="support", capabilities=[HistoryKit(pipeline), DBOSDurability()])
    ```
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage

from historykit._context_window import ContextWindow
from historykit._conversations import conversation_key
from historykit._pipeline import Call, HistoryProcessor, ManualCompaction
from historykit.errors import UserError

Engine = Literal["capability", "dbos"]
"""How a durable unit runs: dispatched by a Pydantic AI durability capability, or as a DBOS step
historykit starts itself (under `DBOSAgent`)."""

KIND = "pydantic-ai"
"""The kind of the conversation keys the Pydantic AI integration makes (`conversation_key`)."""


@dataclass
class PreviousView:
    """View-only mode: the view the run's previous model call was sent, and how many messages of
    the raw history it was derived from."""

    raw_length: int
    """The previous call's raw history is the first `raw_length` messages of this request's."""
    messages: list[ModelMessage]
    """The view it was sent."""


@dataclass
class ViewRequest:
    """One model request's pipeline call, as it crosses into a durable unit."""

    messages: list[ModelMessage]
    """The request's messages: the previous view plus what is new (persistent), or the raw history."""
    window: int
    """The window to budget for, in tokens."""
    window_source: str
    """Where `window` came from (the report shows it)."""
    mode: Literal["persistent", "view"]
    """`persistent` or `view` (`historykit._pipeline.Call.mode`)."""
    binds_thinking: bool | None
    """Whether the model binds replayed thinking (R13); `None`: from the messages."""
    conversation: str | None
    """The run's conversation (`conversation_id`, else `run_id`); `None`: nothing kept for later."""
    manual: bool = False
    """A compaction asked for now (`HistoryKit.compact`)."""
    focus: str | None = None
    """The manual compaction's focus."""
    keep_last: int | None = None
    """The manual compaction's `keep_last`."""
    previous: PreviousView | None = None
    """View-only mode: the view of the run's previous call, to continue from."""

    @classmethod
    def of(
        cls,
        messages: Sequence[ModelMessage],
        call: Call,
        conversation: str | None,
        previous: PreviousView | None = None,
    ) -> ViewRequest:
        """The request for a call an integration decided (`HistoryKit.call_for`)."""
        manual = call.manual
        return cls(
            list(messages),
            call.window.tokens,
            call.window.source,
            "view" if call.mode == "view" else "persistent",
            call.binds_thinking,
            conversation,
            manual is not None,
            manual.focus if manual is not None else None,
            manual.keep_last if manual is not None else None,
            previous if call.mode == "view" else None,
        )

    def call(self) -> Call:
        """The pipeline call this request stands for, rebuilt in the unit."""
        manual = ManualCompaction(self.focus, self.keep_last) if self.manual else None
        return Call(
            ContextWindow(self.window, self.window_source),
            self.mode,
            self.binds_thinking,
            conversation_key(KIND, self.conversation),
            manual,
        )


@dataclass
class RecompactRequest:
    """A compact-and-retry after a context overflow (`historykit.plugins._overflow`), as it crosses
    into a durable unit: the refused step's request, what it sent, and the provider's message."""

    request: ViewRequest
    """The refused step's pipeline call."""
    rejected: list[ModelMessage]
    """The messages the refused request sent."""
    overflow: str
    """The provider's context-length message (what `context_overflow` read from the error)."""


@dataclass
class ViewResult:
    """What a pipeline call in a durable unit gives back, recorded by the engine."""

    order: list[int]
    """The view, in order: `i >= 0` is message `i` of the request, `i < 0` is `written[-i - 1]`."""
    written: list[ModelMessage]
    """The messages the call wrote (summaries, cleared copies, notices)."""
    originals: dict[str, str] = field(default_factory=dict)
    """The tool outputs this call's placeholders replaced, by recall handle (persistent mode)."""
    window: int | None = None
    """The window an overflow shrank the conversation to, when this call shrank it."""
    kept: list[int] | None = None
    """The history kept (`PipelineResult.history`), encoded as `order`; `None`: the view itself."""

    @classmethod
    def encode(
        cls,
        given: Sequence[ModelMessage],
        view: Sequence[ModelMessage],
        originals: dict[str, str],
        window: int | None = None,
        kept: Sequence[ModelMessage] | None = None,
    ) -> ViewResult:
        """`view` (and `kept`) relative to `given`: the messages it kept are positions (the same
        objects); a message both write is written once."""
        position = {id(message): index for index, message in enumerate(given)}
        written: list[ModelMessage] = []

        def positions(messages: Sequence[ModelMessage]) -> list[int]:
            order: list[int] = []
            for message in messages:
                index = position.get(id(message))
                if index is None:
                    written.append(message)
                    index = -len(written)
                    position[id(message)] = index
                order.append(index)
            return order

        order = positions(view)
        return cls(order, written, dict(originals), window, None if kept is None else positions(kept))

    def decode(self, given: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The view, from the request's messages `given` and the messages written."""
        return [given[i] if i >= 0 else self.written[-i - 1] for i in self.order]

    def decode_kept(self, given: Sequence[ModelMessage]) -> list[ModelMessage] | None:
        """The history kept, when it is not the view (`None`)."""
        if self.kept is None:
            return None
        return [given[i] if i >= 0 else self.written[-i - 1] for i in self.kept]


class LastViews:
    """View-only mode: the view each run's latest call was sent (workflow side, from recorded
    results), so the next call's unit continues from it (`PreviousView`). Bounded: the oldest runs
    go first."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        """Runs remembered."""
        self._views: OrderedDict[str, PreviousView] = OrderedDict()

    def get(self, run: str | None) -> PreviousView | None:
        return self._views.get(run) if run is not None else None

    def keep(self, run: str | None, raw_length: int, view: list[ModelMessage]) -> None:
        if run is None:
            return
        self._views[run] = PreviousView(raw_length, view)
        self._views.move_to_end(run)
        while len(self._views) > self.limit:
            self._views.popitem(last=False)


def durable_engine(ctx: Any, capability_id: str | None, operation: str) -> Engine | None:
    """How this call's pipeline must run: `None` outside any durable workflow or flow (in place, as
    always); `"capability"` when a durability capability dispatches the capability's operations;
    `"dbos"` in a DBOS workflow of the legacy `DBOSAgent`. Raises `UserError` inside a Temporal
    workflow or Prefect flow that no durability capability serves (the legacy `TemporalAgent`,
    `PrefectAgent`), where the pipeline could only run as workflow code."""
    operations: Any = getattr(ctx, "_durable_operations", None)
    bound = bool(operations) and capability_id is not None and (capability_id, operation) in operations
    if bound:
        return "capability" if _in_capability_container(ctx) else None
    if _in_dbos_workflow_code():
        return "dbos"
    for engine, capability, inside in (
        ("Temporal", "TemporalDurability", _in_temporal_workflow),
        ("Prefect", "PrefectDurability", _in_prefect_flow),
    ):
        if inside():
            raise UserError(
                f"HistoryKit inside a {engine} {'workflow' if engine == 'Temporal' else 'flow'} that no "
                f"durability capability serves (the deprecated {engine}Agent wrapper): its summaries "
                "would run as workflow code, which a replay runs again and gets other text from. Build the "
                f"agent with capabilities=[HistoryKit(...), {capability}()] instead"
            )
    return None


def refuse_background(processors: Sequence[HistoryProcessor]) -> None:
    """`UserError` when a step would start work that outlives the durable unit (background summaries)."""
    for processor in processors:
        if getattr(processor, "background_at", None) is not None:
            raise UserError(
                f"{type(processor).__name__}(background_at=...) starts background summaries, which a "
                "durable engine cannot record or replay: build it without background_at for agents run "
                "in a durable workflow or flow (it works as before outside one)"
            )


def _in_capability_container(ctx: Any) -> bool:
    """Whether the run is inside the durable container (workflow, flow) of the durability
    capability that bound the operations; outside it the capability runs everything in place."""
    try:
        from pydantic_ai.durable_exec import BaseDurabilityCapability
    except ImportError:  # pragma: no cover - a Pydantic AI without durable capabilities binds nothing
        return False
    agent = getattr(ctx, "agent", None)
    found = BaseDurabilityCapability.from_agent(agent) if agent is not None else None
    if found is not None:
        return bool(found.in_durable_context)
    return _in_dbos_workflow_code() or _in_temporal_workflow() or _in_prefect_flow()


def _in_dbos_workflow_code() -> bool:
    """In a DBOS workflow's own code (not in one of its steps)."""
    dbos = sys.modules.get("dbos")
    if dbos is None:
        return False  # nothing imported DBOS: no workflow can be running
    return dbos.DBOS.workflow_id is not None and dbos.DBOS.step_id is None


def _in_temporal_workflow() -> bool:
    if "temporalio.workflow" not in sys.modules:
        return False
    from temporalio import workflow

    return bool(workflow.in_workflow())


def _in_prefect_flow() -> bool:
    if "prefect.context" not in sys.modules:
        return False
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None and TaskRunContext.get() is None
