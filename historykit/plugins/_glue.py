"""What every framework integration shares, written once and framework-free.

An integration (the Pydantic AI capability and history processor, the LangChain middleware and
hook) holds a pipeline, a context-window rule, report delivery and pending manual compactions.
`Glue` is that and its rules; each integration adds how its framework hands it the history, the
model and the conversation key, converts the history once (its own adapter, in and out) and hands
the pipeline one `historykit._pipeline.Call`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from historykit._context_window import ContextWindow, resolve_context_window
from historykit._conversations import ConversationState
from historykit._hooks import AfterHook, BeforeHook, CompactionHooks, hooks_of
from historykit._pipeline import HistoryProcessor, ManualCompaction, Pipeline, PipelineResult, Report
from historykit.errors import ArgumentTypeError, InvalidArgumentError, WrongFrameworkError
from historykit.plugins._overflow import shrunk_window


def pipeline_of(processor: object) -> Pipeline:
    """`processor` as a pipeline (a single processor is wrapped in one); `ArgumentTypeError` if neither."""
    # One pipeline for the glue's lifetime: its token counter (and cache) then serves every call.
    if isinstance(processor, Pipeline):
        return processor
    if isinstance(processor, HistoryProcessor):
        return Pipeline([processor])
    raise ArgumentTypeError(
        f"processor must be a historykit processor or Pipeline, got a "
        f"{type(processor).__module__}.{type(processor).__qualname__}"
    )


class Glue:
    """The state every integration keeps, and the rules that use it (a mixin: no `__init__`).

    What outlives a call lives in the pipeline's conversation states (`historykit._conversations`),
    under the key the integration reads off its framework; the glue itself holds configuration and
    the manual compactions asked for.
    """

    pipeline: Pipeline
    """The pipeline that runs (a single processor is wrapped in one)."""
    context_window: int | None
    """The window to budget for; `None`: the model's, else historykit's default."""
    on_report: Callable[[Report], None] | None
    """Called with every call's report."""
    last_report: Report | None
    """The report of the latest call."""
    binds_thinking: bool | None
    """Whether the model binds thinking to the history (R13); `None`: from the model."""
    compaction_hooks: CompactionHooks | None
    """The `before_compaction`/`after_compaction` hooks given to the integration (`historykit._hooks`),
    handed to the pipeline with each call's conversation; `None`: the pipeline's own, if any."""
    _manual: dict[str | None, ManualCompaction]

    def _hooks(self, before: BeforeHook | None, after: AfterHook | None) -> CompactionHooks | None:
        """The hooks given to the integration, checked: given to both it and its pipeline, the
        hooks would be configured twice, which `InvalidArgumentError` refuses."""
        hooks = hooks_of(before, after)
        if hooks is not None and self.pipeline.compaction_hooks is not None:
            raise InvalidArgumentError(
                "compaction hooks are given to both the integration and its pipeline: give "
                "before_compaction/after_compaction to one of them"
            )
        return hooks

    def _take_manual(self, conversation: str | None) -> ManualCompaction | None:
        """The manual compaction asked for this conversation, else for any; it is used up."""
        request = self._manual.pop(conversation, None) if conversation is not None else None
        return request or self._manual.pop(None, None)

    def _window_with(self, stated: ContextWindow | None, state: ConversationState) -> ContextWindow:
        """The window of a call: `context_window`, else what the model `stated`, else the default;
        then the smaller one a context overflow left for the conversation."""
        configured = resolve_context_window(
            self.context_window,
            stated.tokens if stated else None,
            stated.source if stated else "model profile",
        )
        return shrunk_window(state, configured)

    def _binds_with(self, stated: bool | None) -> bool | None:
        """`binds_thinking` when set, else what the model `stated`."""
        return self.binds_thinking if self.binds_thinking is not None else stated

    def _deliver(self, result: PipelineResult[Any]) -> PipelineResult[Any]:
        """Hand the call's report on; the result itself is returned."""
        self.last_report = result.report
        if self.on_report is not None:
            self.on_report(result.report)
        return result


class WrongFramework:
    """A class attribute that another framework reads when it is handed this glue by mistake.

    Reading it raises `WrongFrameworkError` (an `ArgumentTypeError`) with `message`, which names the
    glue to use instead; so passing the Pydantic AI capability to a LangChain agent (which reads
    `wrap_tool_call` off each middleware's class) fails with that advice. The error is an
    `AttributeError` too: code that only looks at members (`inspect.getmembers`, `hasattr`; Pydantic
    AI collects every capability's durable operations that way) finds no such attribute and goes on.

    Example:
        ```python
        class HistoryKit:
            wrap_tool_call = WrongFramework("HistoryKit is a Pydantic AI capability; ...")
        ```
    """

    def __init__(self, message: str) -> None:
        self.message = message
        """Why the object does not fit, and what to use instead."""

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        raise WrongFrameworkError(self.message)


def refuse_call(message: str) -> Callable[..., Any]:
    """A `__call__` that raises `ArgumentTypeError(message)`: for glue another framework would call."""

    def __call__(self: object, *args: Any, **kwargs: Any) -> Any:
        raise ArgumentTypeError(message)

    return __call__
