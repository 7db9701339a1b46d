"""Composition of history processors, and the report of what they did.

A processor is a deterministic function of a neutral history (and of a `ProcessContext` that
carries the context window and the token counter) returning a new history and notes on what it
changed. `Pipeline([a, b])` or `a | b` runs processors in order; a pipeline is itself a processor.
`Pipeline.run` takes a native history of either framework (or a neutral one) and returns the same
framework's messages: what no processor touched comes back as the very same objects.

Example:
    ```python
    from historykit import Pipeline
    from historykit.processors import Repair

    result = Pipeline([Repair()]).run(messages, context_window=200_000)
    result.messages   # native messages, same framework as `messages`
    result.report     # renders as a table in a terminal and as HTML in Jupyter
    ```
"""

from __future__ import annotations

import html
import logging
import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import accumulate
from typing import Any, ClassVar, Generic, TypeVar, cast

from historykit import _provenance as provenance
from historykit._binding import drop_unbound_thinking, model_binds_thinking, restore_cycle_thinking
from historykit._context_window import ContextWindow, check_context_window, resolve_context_window
from historykit._conversations import Conversations, ConversationState
from historykit._hooks import (
    AfterHook,
    BeforeHook,
    CompactionGate,
    CompactionHooks,
    CompactionReason,
    HookCall,
    hooks_of,
)
from historykit._identity_cache import DEFAULT_CACHE_POLICY, CachePolicy
from historykit._messages import CompactionMarker, Message, SummaryPart, ToolResultPart
from historykit._plans import adrive, drive
from historykit._recall import content_handle, handle_in, handles_in
from historykit._scan_memo import MessageFacts
from historykit._telemetry import pipeline_span
from historykit._tokens import TokenCounter
from historykit._usage import UsageMonitor, UsageWarning
from historykit._view import Mode, request_points
from historykit.errors import ArgumentTypeError, InvalidArgumentError

logger = logging.getLogger("historykit")

MessageT = TypeVar("MessageT")
"""A history's message type: one framework's native message (Pydantic AI's `ModelMessage`,
LangChain's `BaseMessage`) or historykit's neutral `Message`. A run hands back the type it was given."""
_R = TypeVar("_R")
"""What a plan returns (`_Plan`)."""

BINDING_STEP = "ThinkingBinding"
"""The report's name for the step that drops thinking an edit made invalid (`historykit.BINDING_MODELS`)."""
CYCLE_STEP = "ThinkingCycle"
"""The report's name for the step that gives the current tool-use cycle its thinking back (R7)."""


@dataclass(frozen=True)
class ManualCompaction:
    """A compaction the user asked for (`Pipeline.compact`): made now, whatever the triggers say.

    The processor that compacts on request (`Summarize`) summarizes the span it would summarize at
    its trigger, even when that frees little (a small history is summarized, not truncated), gives
    the summarizer the `focus`, and records `automatic=False` and the focus in the marker.

    Example:
        ```python
        import historykit

        pipeline = historykit.default_pipeline()
        pipeline.compact(messages, focus="keep the details of the auth refactor")
        pipeline.compact(messages, keep_last=2)   # keep only the last two units verbatim
        ```
    """

    focus: str | None = None
    """What the summary should keep (e.g. "the details of the auth refactor"); `None`: no focus."""
    keep_last: int | None = None
    """Units kept verbatim at the end instead of the processor's own `keep_last`; `None`: its own."""

    def __post_init__(self) -> None:
        if self.focus is not None and not isinstance(self.focus, str):
            raise ArgumentTypeError(f"focus must be a str or None, got a {type(self.focus).__qualname__}")
        if self.focus is not None and not self.focus.strip():
            # Pydantic AI's compact_messages reads a blank focus as none, too.
            object.__setattr__(self, "focus", None)
        elif self.focus is not None:
            object.__setattr__(self, "focus", self.focus.strip())
        if self.keep_last is not None and (
            isinstance(self.keep_last, bool) or not isinstance(self.keep_last, int) or self.keep_last < 0
        ):
            raise InvalidArgumentError(f"keep_last must be an int >= 0 or None, got {self.keep_last!r}")


@dataclass
class ProcessContext:
    """What a processor may know besides the history itself."""

    context_window: int
    """The model's context window, in tokens."""
    window_source: str
    """Where `context_window` came from: `explicit`, `model profile`, `genai-prices` or `default`."""
    counter: TokenCounter
    """Counts tokens; shared by every step of a run so its cache is shared too."""
    binds_thinking: bool = False
    """True when the model binds replayed thinking to the history (`historykit.BINDING_MODELS`, R13): any
    edit then costs every thinking block after it, which the pipeline drops after its processors."""
    manual: ManualCompaction | None = None
    """A compaction the user asked for in this call (`Pipeline.compact`); `None` for a normal call."""
    cache_policy: CachePolicy = DEFAULT_CACHE_POLICY
    """Bounds every identity cache a processor keeps (`historykit._identity_cache`): the pipeline's
    `cache_policy`, or the default for a processor run outside a pipeline."""
    reported_offset: int = 0
    """What the provider counted of this call's history that `counter` does not see, in tokens:
    the latest response's reported usage (its request and itself) less the counter's count of the
    same messages (tool definitions, instructions outside the history, another tokenizer), when
    the provider counted more (`reported_offset`). Marks in tokens are lowered by it
    (`Trigger.high_tokens`) and reports add it, so compaction starts where the provider's count
    says while cuts are measured with the counter. 0 without usage."""
    conversation: ConversationState = field(default_factory=lambda: ConversationState(None))
    """The state of the conversation this call belongs to (`historykit._conversations`): what a
    processor keeps between calls goes in `conversation.memory(self, ...)`, never in the processor,
    which serves every conversation. A call that names no conversation gets a state of its own."""
    compaction_gate: CompactionGate | None = None
    """The call's `before_compaction` hook (`historykit.BeforeCompaction`) for a step that calls a
    summarizer: it asks the gate before it does (`CompactionGate.ask`), changes nothing when the
    hook vetoed, and gives the summary the gate's focus. `None`: no hook to ask."""


@dataclass(frozen=True)
class Call:
    """One model call as an integration hands it to the pipeline: everything the pipeline would
    otherwise have to look up again, decided once at the edge.

    Example:
        ```python
        from historykit._context_window import ContextWindow
        from historykit._pipeline import Call

        window = ContextWindow(200_000, "model profile")
        call = Call(window, mode="view", conversation=("langgraph", "t1", ""))
        result = pipeline.run_call(neutral_messages, call)
        ```
    """

    window: ContextWindow
    """The window to budget for, and where it came from (the report shows it)."""
    mode: Mode = "persistent"
    """`persistent`: the messages are the previous view plus what is new; `view`: the raw history."""
    binds_thinking: bool | None = None
    """Whether the model binds replayed thinking to the history (R13); `None`: from the model names
    on the messages."""
    conversation: Hashable | None = None
    """The conversation's key (`historykit._conversations`); `None`: nothing is kept for later calls."""
    manual: ManualCompaction | None = None
    """A compaction asked for now (`Pipeline.compact`); `None` for a normal call."""
    state: ConversationState | None = field(default=None, compare=False)
    """The conversation's state when the integration holds it already (`Pipeline.state_of`): a
    call without a key shares one state between its own steps (a view resumed from the framework's
    state, then the call, then a retry). `None`: the pipeline's state of `conversation`."""
    hooks: CompactionHooks | None = field(default=None, compare=False)
    """The compaction hooks of this call (an integration's `before_compaction`/`after_compaction`);
    `None`: the pipeline's own. `historykit._hooks.NO_HOOKS` for a call that only derives again
    what an earlier call compacted."""
    overflow_retry: bool = False
    """The compact-and-retry after the provider refused the request as too long
    (`historykit.plugins._overflow`): the hooks are told `reason="overflow"`."""

    @property
    def reason(self) -> CompactionReason:
        """Why a compaction of this call happens (`BeforeCompaction.reason`)."""
        return "manual" if self.manual is not None else "overflow" if self.overflow_retry else "trigger"


@dataclass
class StepNotes:
    """What a processor says about its own call; the pipeline adds the token counts."""

    replaced: int = 0
    """Parts whose content was replaced (by a placeholder, a notice or a summary)."""
    removed: int = 0
    """Messages removed from the history."""
    added: int = 0
    """Messages added (notices, summaries, synthetic tool results)."""
    details: list[str] = field(default_factory=list)
    """One line per change, for people reading the report."""
    markers: list[CompactionMarker] = field(default_factory=list)
    """Compaction markers written by this step."""
    originals: dict[str, str] = field(default_factory=dict)
    """Texts this step wrote that a handle its messages name returns (a summary's recall index),
    by handle: the pipeline hands them on in `PipelineResult.originals`, in both modes."""


@dataclass(frozen=True)
class StepReport:
    """One processor's part of a report."""

    processor: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    notes: StepNotes

    @property
    def changed(self) -> bool:
        n = self.notes
        return bool(n.replaced or n.removed or n.added or n.markers)


@dataclass(frozen=True)
class Report:
    """What a pipeline call did, step by step."""

    steps: tuple[StepReport, ...]
    context_window: int
    window_source: str
    tokenizer: str
    tokens_before: int
    tokens_after: int
    replayed_calls: int = 1
    """Model calls processed to produce this view: 1 normally; in view-only mode, more on the first
    call over a stored history (each earlier call is replayed once), 0 for a history seen before."""
    warnings: tuple[UsageWarning, ...] = ()
    """The usage warnings this call gave (`historykit.UsageWarning`): a warn mark crossed, or a call left
    over the window."""

    @property
    def changed(self) -> bool:
        return any(s.changed for s in self.steps)

    @property
    def used_fraction(self) -> float:
        """What the call sends (`tokens_after`) as a fraction of the context window."""
        return self.tokens_after / self.context_window

    @property
    def used_fraction_before(self) -> float:
        """The history the pipeline was given (`tokens_before`) as a fraction of the context window."""
        return self.tokens_before / self.context_window

    @property
    def markers(self) -> list[CompactionMarker]:
        return [m for s in self.steps for m in s.notes.markers]

    @property
    def thinking_dropped(self) -> tuple[int, int]:
        """(blocks, tokens) of thinking dropped because an edit made it invalid on a binding model."""
        step = next((s for s in self.steps if s.processor == BINDING_STEP), None)
        return (0, 0) if step is None else (step.notes.replaced, step.tokens_before - step.tokens_after)

    def _rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for s in self.steps:
            n = s.notes
            rows.append(
                (
                    s.processor,
                    f"{s.tokens_before:,}",
                    f"{s.tokens_after:,}",
                    f"{s.tokens_after / self.context_window:.0%}",
                    f"{s.messages_before} → {s.messages_after}",
                    str(n.replaced),
                    str(n.removed),
                    str(n.added),
                    str(len(n.markers)),
                )
            )
        return rows

    _HEADERS = (
        "processor",
        "tokens before",
        "tokens after",
        "of window",
        "messages",
        "replaced",
        "removed",
        "added",
        "markers",
    )

    def _title(self) -> str:
        return (
            f"{self.tokens_before:,} → {self.tokens_after:,} tokens "
            f"({self.used_fraction_before:.0%} → {self.used_fraction:.0%} of the window); "
            f"window {self.context_window:,} ({self.window_source}); tokenizer {self.tokenizer}"
        )

    def __str__(self) -> str:
        rows = [self._HEADERS, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADERS))]
        lines = [self._title()]
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows]
        lines += [f"  {s.processor}: {d}" for s in self.steps for d in s.notes.details]
        lines += [f"  warning ({w.kind}): {w.message}" for w in self.warnings]
        return "\n".join(lines)

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table(
            title=self._title(),
            title_justify="left",
            caption="\n".join(f"warning ({w.kind}): {w.message}" for w in self.warnings) or None,
            caption_justify="left",
            caption_style="bold yellow",
        )
        for header in self._HEADERS:
            table.add_column(header, justify="left" if header == "processor" else "right")
        for row in self._rows():
            table.add_row(*row)
        return table

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self._HEADERS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self._rows()
        )
        details = "".join(
            f"<li><b>{html.escape(s.processor)}</b>: {html.escape(d)}</li>"
            for s in self.steps
            for d in s.notes.details
        ) + "".join(
            f"<li><b>warning ({html.escape(w.kind)})</b>: {html.escape(w.message)}</li>"
            for w in self.warnings
        )
        return (
            f"<div><p>{html.escape(self._title())}</p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{f'<ul>{details}</ul>' if details else ''}</div>"
        )


@dataclass(frozen=True)
class PipelineResult(Generic[MessageT]):
    """The processed history and the report of the call.

    Generic over the message type: a run over `list[ModelMessage]` gives a
    `PipelineResult[ModelMessage]`, whose `messages` a type checker knows are `list[ModelMessage]`.

    Example:
        ```python
        result = pipeline.run(messages, context_window=128_000)
        history = result.messages   # the same framework's messages as `messages`
        print(result.report)
        ```
    """

    messages: list[MessageT]
    """Native messages of the input's framework (neutral ones for a neutral input)."""
    report: Report
    originals: Mapping[str, str] = field(default_factory=dict)
    """The tool outputs this call's placeholders replaced, by the recall handle each placeholder
    names (`historykit.Recall`): what a recall tool must be able to give back once the processed
    history replaces the original; and, in both modes, the texts a step wrote that its messages name
    by handle (a summary's index of the outputs its recall section had no room for). Empty when no
    step names a recall tool."""
    kept: list[MessageT] | None = None
    """The history to keep (`history`): `messages` without the edits of the steps that only make the
    request valid for providers (`Repair`, `HistoryProcessor.repairs_request`); `None` when they
    made none, so it is `messages` itself."""

    @property
    def history(self) -> list[MessageT]:
        """What the framework keeps as its history in persistent mode (the integrations write this,
        not `messages`): the compaction edits only. The provider-rule repairs go into the request
        alone, so with nothing to compact the framework's history is exactly what it would be
        without historykit; `messages` is what the model is sent."""
        return self.messages if self.kept is None else self.kept


class HistoryProcessor(ABC):
    """Base of every processor: subclasses implement `process` (and `aprocess` when they await).

    Any processor can be run alone (`processor.run(messages)`), composed (`a | b`), or called on a
    native history (`processor(messages)` returns the processed messages).
    """

    compacts_on_request: ClassVar[bool] = False
    """True for a processor that makes a `ManualCompaction` (`Summarize`): `Pipeline.compact` needs one."""

    compacts: ClassVar[bool] = True
    """Whether this processor's edits are a compaction, which the compaction hooks are asked about
    (`historykit.BeforeCompaction`) and may veto: `False` for one that only shapes what arrives
    (`OffloadToolOutputs` shortens each large output once, as it comes), whose edits stand."""

    repairs_request: ClassVar[bool] = False
    """True for a processor that only makes the request valid for providers (`Repair`): a pipeline
    runs it after every other step, wherever it stands, and its edits go into what the model is
    sent (`PipelineResult.messages`), never into the history kept (`PipelineResult.history`), so a
    framework's own history is never rewritten by a repair of it."""

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        """Return the processed history (never mutate `messages`) and notes on what changed."""

    async def aprocess(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        """Async variant; processors that await something (a summarizer) override it."""
        return self.process(messages, ctx)

    def _steps(self) -> Iterable[HistoryProcessor]:
        return (self,)

    def __or__(self, other: HistoryProcessor) -> Pipeline:
        if not isinstance(other, HistoryProcessor):
            return NotImplemented
        return Pipeline([*self._steps(), *other._steps()])

    def run(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        counter: TokenCounter | None = None,
        on_report: Callable[[Report], None] | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
    ) -> PipelineResult[MessageT]:
        """Process a native or neutral history; see `Pipeline.run`."""
        return Pipeline(list(self._steps()), counter=counter, on_report=on_report).run(
            messages, context_window, window_source=window_source, mode=mode, binds_thinking=binds_thinking
        )

    async def arun(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        counter: TokenCounter | None = None,
        on_report: Callable[[Report], None] | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
    ) -> PipelineResult[MessageT]:
        """Process a native or neutral history from async code; see `Pipeline.arun`."""
        pipeline = Pipeline(list(self._steps()), counter=counter, on_report=on_report)
        return await pipeline.arun(
            messages, context_window, window_source=window_source, mode=mode, binds_thinking=binds_thinking
        )

    def compact(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        focus: str | None = None,
        keep_last: int | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
    ) -> PipelineResult[MessageT]:
        """Compact a native or neutral history now, with an optional focus; see `Pipeline.compact`."""
        return Pipeline(list(self._steps())).compact(
            messages,
            context_window,
            focus=focus,
            keep_last=keep_last,
            window_source=window_source,
            mode=mode,
            binds_thinking=binds_thinking,
        )

    async def acompact(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        focus: str | None = None,
        keep_last: int | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
    ) -> PipelineResult[MessageT]:
        """`compact` from async code; see `Pipeline.acompact`."""
        return await Pipeline(list(self._steps())).acompact(
            messages,
            context_window,
            focus=focus,
            keep_last=keep_last,
            window_source=window_source,
            mode=mode,
            binds_thinking=binds_thinking,
        )

    def __call__(self, messages: Sequence[MessageT]) -> list[MessageT]:
        """The processed messages only: the shape a plain history-processor callable has."""
        return self.run(messages).messages


class Pipeline(HistoryProcessor):
    """Processors run in order; itself a processor.

    One pipeline serves any number of conversations, at once too: what it keeps between calls
    (view-only replays, summaries, usage warnings) belongs to the conversation named by
    `conversation=` (`historykit._conversations`); a call that names none shares nothing.

    `before_compaction` and `after_compaction` are called around each compaction, with the call's
    conversation (`historykit.BeforeCompaction`, `historykit.AfterCompaction`): the first may veto
    it (`False`) or change the summary's focus (`historykit.AdjustCompaction`); plain or async
    functions (the async entry points await them). An integration given hooks of its own uses
    those instead.

    Example:
        ```python
        from historykit import Pipeline
        from historykit.processors import Repair, Summarize

        pipeline = Pipeline([Repair()], on_report=print)
        pipeline = Pipeline([Repair()], warn_at=0.9, on_warning=print)  # warn past 90% of the window
        pipeline = Pipeline([Summarize()], before_compaction=lambda event: False)  # veto every one
        processed = pipeline(messages)              # native in, native out
        result = pipeline.run(messages, context_window=32_000, conversation="user-42")
        result.report
        ```
    """

    def __init__(
        self,
        processors: Sequence[HistoryProcessor] = (),
        *,
        counter: TokenCounter | None = None,
        on_report: Callable[[Report], None] | None = None,
        warn_at: float | None = None,
        on_warning: Callable[[UsageWarning], None] | None = None,
        cache_policy: CachePolicy | None = None,
        use_usage: bool = True,
        before_compaction: BeforeHook | None = None,
        after_compaction: AfterHook | None = None,
    ) -> None:
        for index, proc in enumerate(processors):
            if not isinstance(proc, HistoryProcessor):
                raise ArgumentTypeError(
                    f"processor {index} is a {type(proc).__module__}.{type(proc).__qualname__}, "
                    "not a historykit processor"
                )
        if cache_policy is not None and not isinstance(cache_policy, CachePolicy):
            raise ArgumentTypeError(
                f"cache_policy must be a CachePolicy, got {type(cache_policy).__qualname__}"
            )
        self.processors: list[HistoryProcessor] = [s for p in processors for s in p._steps()]
        """The processors, in the order they run (nested pipelines are flattened)."""
        self.counter = counter or TokenCounter()
        """Token counter shared by every run of this pipeline, so its cache is reused."""
        self.on_report = on_report
        """Called with every run's report (for logging, metrics or a UI)."""
        self.cache_policy = cache_policy or DEFAULT_CACHE_POLICY
        """How large each processor's identity caches may grow and how many conversations are kept
        (`historykit._identity_cache`): the one knob that bounds the memory they hold, given to every
        step in its `ProcessContext`."""
        self.conversations = Conversations(self.cache_policy)
        """What each conversation keeps between calls, by its key (`historykit._conversations`)."""
        if not isinstance(use_usage, bool):
            raise ArgumentTypeError(f"use_usage must be True or False, got {use_usage!r}")
        self.use_usage = use_usage
        """Count what the provider reported: the latest response's usage stands for everything up to
        it (`ProcessContext.reported_offset`), so reports, triggers and warnings see the provider's
        count. `False`: the counter's estimate alone."""
        self.usage = UsageMonitor(warn_at, on_warning)
        """Warns when what a call sends crosses `warn_at` of the window or is over it, once per
        crossing of a conversation (`historykit.UsageWarning`): logged, on the report, and to `on_warning`."""
        self.compaction_hooks = hooks_of(before_compaction, after_compaction)
        """Called around each compaction (`historykit._hooks`): `before_compaction` may veto it or
        change its focus, `after_compaction` gets the sizes and the summary; `None`: no hooks."""

    def __repr__(self) -> str:
        return f"Pipeline([{', '.join(repr(p) for p in self.processors)}])"

    def _steps(self) -> Iterable[HistoryProcessor]:
        return tuple(self.processors)

    @property
    def recall_tools(self) -> frozenset[str]:
        """The recall tools the placeholders of this pipeline's steps name (`historykit.Recall`)."""
        return frozenset(
            name for p in self.processors if isinstance(name := getattr(p, "recall_tool", None), str)
        )

    def _context(self, call: Call, history: Sequence[Message], state: ConversationState) -> ProcessContext:
        binds = call.binds_thinking
        if binds is None:
            binds = _binds_thinking(history, state)
        return ProcessContext(
            call.window.tokens,
            call.window.source,
            self.counter,
            binds,
            manual=call.manual,
            cache_policy=self.cache_policy,
            conversation=state,
        )

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        out, steps, _ = _drive(self._steps_plan(messages, ctx))
        return out, _merge_notes(steps)

    async def aprocess(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        out, steps, _ = await _adrive(self._steps_plan(messages, ctx))
        return out, _merge_notes(steps)

    def _steps_plan(
        self, messages: list[Message], ctx: ProcessContext, gate: CompactionGate | None = None
    ) -> _Plan[tuple[list[Message], list[StepReport], list[Message]]]:
        """Every processor in turn, the repairs last (`HistoryProcessor.repairs_request`), thinking
        settled after each stage (`_settle_thinking`): yields each step for a runner to process
        (`_drive` calls `process`, `_adrive` awaits `aprocess`), so the sync and the async pipeline
        are this one piece of code. Returns what is sent, the step reports, and what is kept (the
        history before the repairs: the same list when they changed nothing)."""
        if self.use_usage:
            offset = reported_offset(messages, ctx.counter)
            if offset != ctx.reported_offset:
                ctx = replace(ctx, reported_offset=offset)
        kept, steps = yield from self._compaction_plan(messages, ctx, gate)
        sent, repairs = yield from self._repair_plan(kept, ctx)
        return sent, [*steps, *repairs], kept

    def _compaction_plan(
        self, messages: list[Message], ctx: ProcessContext, gate: CompactionGate | None = None
    ) -> _Plan[tuple[list[Message], list[StepReport]]]:
        """The steps that compact (every one but the repairs), then thinking settled: the history
        a persistent integration keeps, and a view-only replay continues from. With a `gate`, the
        call's compaction hooks are asked around it (`historykit._hooks`)."""
        compacting = [p for p in self.processors if not p.repairs_request]
        if gate is not None:
            gate.start(messages, ctx)
            ctx = replace(ctx, compaction_gate=gate)
        out, steps = yield from self._run_steps(messages, compacting, ctx, gate)
        if gate is not None and gate.vetoed:
            gate.check_fits(out)
        if out is messages:
            # Nothing compacted: the history stays the framework's own (a tool-call id used again
            # could make an older exchange look like the current cycle's; the repairs see to it).
            return messages, steps
        out = self._settle_thinking(messages, out, steps, ctx)
        after = gate.after(messages, out, steps) if gate is not None else None
        if after is not None:
            yield after
        return out, steps

    def _repair_plan(
        self, kept: list[Message], ctx: ProcessContext
    ) -> _Plan[tuple[list[Message], list[StepReport]]]:
        """The repairs of the request sent, on the history kept; thinking settled again (on a
        binding model a repair is an edit too)."""
        repairs = [p for p in self.processors if p.repairs_request]
        out, steps = yield from self._run_steps(kept, repairs, ctx)
        if out is kept:
            return kept, steps
        return self._settle_thinking(kept, out, steps, ctx), steps

    def _run_steps(
        self,
        messages: list[Message],
        processors: Sequence[HistoryProcessor],
        ctx: ProcessContext,
        gate: CompactionGate | None = None,
    ) -> _Plan[tuple[list[Message], list[StepReport]]]:
        steps: list[StepReport] = []
        tokens: int | None = None  # of `messages`: each step's total after is the next one's before
        for proc in processors:
            if gate is not None and gate.vetoed and proc.compacts:
                continue  # no step of a vetoed compaction compacts
            before = messages
            messages, notes = yield proc, list(before), ctx
            if same_messages(messages, before):
                messages = before  # unchanged: the very list, so "nothing repaired" is `is`
            elif gate is not None and proc.compacts:
                # A step that calls no summarizer is asked about once it changed the history (it
                # is pure and cheap): on a veto its edits go.
                if (ask := gate.ask(proc.name)) is not None:
                    gate.answer((yield ask))
                if not gate.vetoed:
                    gate.changed.append(proc.name)
            if gate is not None and gate.vetoed and proc.compacts:
                # The vetoed step: the compacting steps before it changed nothing (the hook is
                # asked at the first that does), and its own edits go.
                vetoed = StepNotes(details=["the before_compaction hook vetoed the compaction"])
                messages = before
                steps.append(self._step_report(proc.name, before, before, vetoed, ctx, tokens))
                tokens = steps[-1].tokens_after - ctx.reported_offset
                continue
            messages = mark_written(before, messages, proc.name, notes, ctx)
            step = self._step_report(proc.name, before, messages, notes, ctx, tokens)
            tokens = step.tokens_after - ctx.reported_offset
            if not notes.markers:
                # An edit in place (cleared results, deduplicated reads) is a compaction too: the
                # report (and its span) has a marker for the batch, as the stores have one per message.
                batch = _batch_marker(before, messages, proc.name, step)
                if batch is not None:
                    notes.markers.append(batch)
            steps.append(step)
        return messages, steps

    def _settle_thinking(
        self, given: list[Message], processed: list[Message], steps: list[StepReport], ctx: ProcessContext
    ) -> list[Message]:
        """On a binding model, the thinking after the first edit goes (R13); on others, the current
        cycle keeps its thinking (R7). A report step says what either did."""
        if not ctx.binds_thinking:
            out, restored = restore_cycle_thinking(given, processed)
            if restored:
                notes = StepNotes(replaced=restored)
                notes.details.append(
                    f"gave {restored} assistant message(s) of the current tool-use cycle their thinking "
                    "back: the provider needs it there (an edit made an older exchange the cycle's)"
                )
                out = mark_written(processed, out, CYCLE_STEP, notes, ctx)
                steps.append(self._step_report(CYCLE_STEP, processed, out, notes, ctx))
            return out
        out, drop = drop_unbound_thinking(given, processed)
        if drop.blocks:
            notes = StepNotes(replaced=drop.blocks, removed=drop.messages_removed)
            out = mark_written(processed, out, BINDING_STEP, notes, ctx)
            step = self._step_report(BINDING_STEP, processed, out, notes, ctx)
            notes.details.append(
                f"dropped {drop.blocks} thinking block(s), "
                f"{step.tokens_before - step.tokens_after:,} tokens, "
                f"after message {drop.edit_at}: the model binds thinking to the history before it, "
                "which this call edited"
            )
            steps.append(step)
        return out

    @staticmethod
    def _step_report(
        name: str,
        before: list[Message],
        after: list[Message],
        notes: StepNotes,
        ctx: ProcessContext,
        before_tokens: int | None = None,
    ) -> StepReport:
        """The step's report; `before_tokens`, when known, is the tokens of `before` (the previous
        step's total after): only the messages the step changed are counted then."""
        count = ctx.counter.count_message
        offset = ctx.reported_offset
        if before_tokens is None:
            before_tokens = history_sums(before, ctx)[-1]
        if after is before:
            after_tokens = before_tokens
        else:
            # A long history changes in a few messages per step: count those, not all of it.
            old = {id(m) for m in before}
            new = {id(m) for m in after}
            if len(old) == len(before) and len(new) == len(after):
                after_tokens = (
                    before_tokens
                    - sum(count(m) for m in before if id(m) not in new)
                    + sum(count(m) for m in after if id(m) not in old)
                )
            else:  # one message object twice in a list: identities do not say what changed
                after_tokens = sum(count(m) for m in after)
        return StepReport(name, before_tokens + offset, after_tokens + offset, len(before), len(after), notes)

    def _with(self, counter: TokenCounter | None, on_report: Callable[[Report], None] | None) -> Pipeline:
        """This pipeline with another counter or report callback for one call; it shares the
        conversations' state and the usage warnings."""
        once = Pipeline(
            self.processors,
            counter=counter or self.counter,
            on_report=on_report,
            cache_policy=self.cache_policy,
            use_usage=self.use_usage,
        )
        once.conversations = self.conversations
        once.usage = self.usage
        once.compaction_hooks = self.compaction_hooks
        return once

    def _view_plan(
        self, neutral: list[Message], ctx: ProcessContext, gate: CompactionGate | None = None
    ) -> _Plan[tuple[list[Message], list[StepReport], int, list[Message]]]:
        """View-only mode: the view of a raw history, each model call replayed once (`historykit._view`),
        from the views this conversation derived before. The replay continues from each call's
        compacted history (what persistent mode keeps); the repairs are made on the last one, for
        the request alone. Returns what is sent, the step reports, the calls replayed and the view
        kept."""
        derive = ctx.conversation.views.derive(neutral, _view_setting(ctx))
        steps: list[StepReport] = []
        written: dict[str, str] = {}  # what every replayed call's steps wrote (`StepNotes.originals`)
        # The repairs are measured as the last call replayed was (a view seen before: the raw
        # history's usage; a compacted view's would count what its summary replaced).
        call_ctx = (
            replace(ctx, reported_offset=reported_offset(neutral, ctx.counter)) if self.use_usage else ctx
        )
        try:
            call = next(derive)
            while True:
                if self.use_usage:
                    call_ctx = replace(ctx, reported_offset=reported_offset(call, ctx.counter))
                # Only the call being made asks the hooks: an earlier one derived again was
                # compacted (and its hooks called) when it was made.
                current = gate if call and neutral and call[-1] is neutral[-1] else None
                view, steps = yield from self._compaction_plan(call, call_ctx, current)
                for step in steps:
                    written.update(step.notes.originals)
                call = derive.send(view)
        except StopIteration as done:
            final, replayed = done.value
        if written and steps:
            # A replay in a new process writes again what earlier calls wrote (a summary's index):
            # this call hands it all on, as the calls that first wrote it did.
            last = steps[-1]
            steps[-1] = replace(
                last, notes=replace(last.notes, originals={**written, **last.notes.originals})
            )
        sent, repairs = yield from self._repair_plan(final, call_ctx)
        if replayed or sent is not final:
            # A view derived before and sent as it is reports no step, as before the repairs ran.
            steps = [*steps, *repairs]
        return sent, steps, replayed, final

    def remember_view(
        self,
        raw: Sequence[MessageT],
        view: Sequence[MessageT],
        context_window: int,
        *,
        binds_thinking: bool | None = None,
        conversation: Hashable | None = None,
    ) -> None:
        """View-only mode: make `view` the view of the model call that ends the raw history `raw`,
        under `context_window` (and `binds_thinking`), so later `run(..., mode="view")` calls of
        `conversation` with that setting continue from it. For a compaction made outside the replay:
        a view stored with the conversation and resumed in another process, or the integrations'
        compact-and-retry after a context overflow (`historykit.plugins._overflow`). Without a
        `conversation` there is no later call to remember it for, and nothing happens."""
        from historykit._frameworks import adapter_for

        if conversation is None:
            return
        neutral = adapter_for(raw).to_neutral(raw)
        self.remember_neutral_view(
            neutral,
            adapter_for(view).to_neutral(view),
            Call(ContextWindow(context_window, "explicit"), "view", binds_thinking, conversation),
        )

    def remember_neutral_view(self, raw: Sequence[Message], view: Sequence[Message], call: Call) -> None:
        """`remember_view` for an integration, which has converted the messages already."""
        state = self.state_of(call)
        state.views.remember(raw, view, _view_setting(self._context(call, raw, state)))

    def state_of(self, call: Call) -> ConversationState:
        """The state of the conversation `call` belongs to (`historykit._conversations`)."""
        return call.state if call.state is not None else self.conversations.get(call.conversation)

    def run(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        counter: TokenCounter | None = None,
        on_report: Callable[[Report], None] | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
        conversation: Hashable | None = None,
    ) -> PipelineResult[MessageT]:
        """Process a native (Pydantic AI or LangChain) or neutral history into the view the model is sent.

        - `mode="persistent"` (default): `messages` is the previous view plus what arrived since (the
          processed history was kept as the conversation's history); it is processed once.
        - `mode="view"`: `messages` is the raw history, every message as it arrived; the view is
          derived by replaying its model calls (`historykit._view`), the same view persistent
          processing would have sent, with the same summarizer calls. Name the `conversation` so
          the next call replays only what is new.
        - `conversation`: the key of the conversation this call belongs to (any hashable: a user or
          thread id). What the pipeline keeps between calls (views, summaries, background
          summaries, usage warnings) is kept for it alone; `None`: nothing is shared with any
          other call.
        - `binds_thinking`: whether the model binds replayed thinking to the history (R13,
          `historykit.BINDING_MODELS`); `None`: read from the model name on the latest assistant message.
        - `window_source` says where a given `context_window` came from (the framework glue passes
          `model profile`); the report shows it.

        Raises `ArgumentTypeError` (a `TypeError`) naming the index and type of an item that is not
        a message of the history's framework, `InvalidArgumentError` (a `ValueError`) for an
        unknown `mode` or a `context_window` that is not a positive int. Returns a
        `PipelineResult[M]` for a `Sequence[M]`: its `.messages` are of the input's framework;
        untouched messages are the very same objects. Its report carries the usage warnings the
        call gave (`historykit.UsageWarning`); with `opentelemetry-api` installed, the call is one span
        (`historykit._telemetry`).
        """
        if counter is not None or on_report is not None:
            return self._with(counter, on_report).run(
                messages,
                context_window,
                window_source=window_source,
                mode=mode,
                binds_thinking=binds_thinking,
                conversation=conversation,
            )
        adapter, neutral, call = self._prepare(
            messages, context_window, window_source, mode, binds_thinking, conversation
        )
        return native_result(adapter, messages, neutral, self.run_call(neutral, call))

    async def arun(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        counter: TokenCounter | None = None,
        on_report: Callable[[Report], None] | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
        conversation: Hashable | None = None,
    ) -> PipelineResult[MessageT]:
        """`run` for async code: processors that await (a summarizer) run on the caller's loop."""
        if counter is not None or on_report is not None:
            return await self._with(counter, on_report).arun(
                messages,
                context_window,
                window_source=window_source,
                mode=mode,
                binds_thinking=binds_thinking,
                conversation=conversation,
            )
        adapter, neutral, call = self._prepare(
            messages, context_window, window_source, mode, binds_thinking, conversation
        )
        return native_result(adapter, messages, neutral, await self.arun_call(neutral, call))

    def compact(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        focus: str | None = None,
        keep_last: int | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
        conversation: Hashable | None = None,
    ) -> PipelineResult[MessageT]:
        """Compact now, whatever the triggers say, with an optional `focus` for the summary.

        What Claude Code's `/compact <focus>` does, and Pydantic AI's `compact_messages(instructions=)`:
        the pipeline runs as for a model call (`run`), and its `Summarize` step summarizes everything
        between the task and the last `keep_last` units (its own `keep_last` unless given), even when
        that frees little: a small history is summarized, not truncated. The summarizer gets the
        focus (the LLM summarizers in their prompt; `ExtractiveSummarizer` lists what matches it
        first); the marker records `automatic=False` and the focus. Nothing to summarize (only the
        task and the kept tail), a summary longer than what it would replace, or every summarizer
        failing leaves the history as the other steps made it (the report says so): a request to
        compact never truncates.

        The result is the view, as `run` gives it, and the next calls continue from it: in
        persistent mode, keep `result.messages` as the history; in view-only mode (`mode="view"`,
        `messages` the raw history ending with what the next model call sends) the pipeline
        remembers it as that call's view for `conversation`, so its later `run(..., mode="view")`
        calls continue from it. On a model that binds thinking, the thinking after the summary is
        dropped.

        Raises `InvalidArgumentError` (a `ValueError`) when no step compacts on request (add a
        `Summarize`), and in view-only mode when `messages` ends with an assistant message (no model
        call is about to be made: compact when the next one is, e.g. through the integrations'
        `compact()`).

        Example:
            ```python
            result = pipeline.compact(history, 128_000, focus="keep the details of the auth refactor")
            history = result.messages
            result.report.markers[0].automatic  # False
            ```
        """
        request = ManualCompaction(focus, keep_last)
        adapter, neutral, call = self._prepare(
            messages, context_window, window_source, mode, binds_thinking, conversation, request
        )
        return native_result(adapter, messages, neutral, self.run_call(neutral, call))

    async def acompact(
        self,
        messages: Sequence[MessageT],
        context_window: int | None = None,
        *,
        focus: str | None = None,
        keep_last: int | None = None,
        window_source: str | None = None,
        mode: Mode = "persistent",
        binds_thinking: bool | None = None,
        conversation: Hashable | None = None,
    ) -> PipelineResult[MessageT]:
        """`compact` for async code: an async summarizer is awaited on the caller's loop."""
        request = ManualCompaction(focus, keep_last)
        adapter, neutral, call = self._prepare(
            messages, context_window, window_source, mode, binds_thinking, conversation, request
        )
        return native_result(adapter, messages, neutral, await self.arun_call(neutral, call))

    def run_call(self, messages: list[Message], call: Call) -> PipelineResult[Message]:
        """One model call of an integration, on the neutral messages it converted once: `run` (or
        `compact`, when `call.manual` asks) without looking anything up again. The result's messages
        are neutral; `native_result` turns them into the framework's."""
        self._check_call(messages, call)
        with pipeline_span() as record:
            return _drive(self._call_plan(messages, call, record))

    async def arun_call(self, messages: list[Message], call: Call) -> PipelineResult[Message]:
        """`run_call` for async code."""
        self._check_call(messages, call)
        with pipeline_span() as record:
            return await _adrive(self._call_plan(messages, call, record))

    def _prepare(
        self,
        messages: Sequence[object],
        context_window: int | None,
        window_source: str | None,
        mode: Mode,
        binds_thinking: bool | None,
        conversation: Hashable | None,
        manual: ManualCompaction | None = None,
    ) -> tuple[Any, list[Message], Call]:
        """What the public entry points check and prepare alike: the history's adapter, its neutral
        messages, the call (`manual` from `compact`)."""
        from historykit._frameworks import adapter_for

        _check_mode(mode)
        if binds_thinking is not None and not isinstance(binds_thinking, bool):
            raise ArgumentTypeError(f"binds_thinking must be True, False or None, got {binds_thinking!r}")
        check_context_window(context_window)
        if conversation is not None and not isinstance(conversation, Hashable):
            raise ArgumentTypeError(
                "conversation must be a hashable key (a str, an int, a tuple), got a "
                f"{type(conversation).__qualname__}"
            )
        window = resolve_context_window(context_window, None, "")
        if context_window is not None and window_source is not None:
            window = ContextWindow(context_window, window_source)
        adapter = adapter_for(messages)
        return adapter, adapter.to_neutral(messages), Call(window, mode, binds_thinking, conversation, manual)

    def _check_call(self, messages: list[Message], call: Call) -> None:
        if call.manual is None:
            return
        if not any(p.compacts_on_request for p in self.processors):
            raise InvalidArgumentError(
                f"{self!r} has no step that compacts on request: add a Summarize step to compact now"
            )
        if call.mode == "view" and messages and messages[-1].role == "assistant":
            raise InvalidArgumentError(
                "in view-only mode a compaction is made for the model call about to be made: the raw "
                "history must end with what that call sends (a user message or tool results), not an "
                "assistant message"
            )

    def _call_plan(
        self, neutral: list[Message], call: Call, record: Callable[[Report], None] | None = None
    ) -> _Plan[PipelineResult[Message]]:
        """One call's processing, written once for `run_call` and `arun_call`: the steps; in
        view-only mode the replay; for a manual compaction, the compaction."""
        state = self.state_of(call)
        ctx = self._context(call, neutral, state)
        gate = self._gate(call, ctx)
        if call.manual is None:
            if call.mode == "view":
                processed, steps, replayed, kept = yield from self._view_plan(
                    neutral, replace(ctx, manual=None), gate
                )
            else:
                processed, steps, kept = yield from self._steps_plan(neutral, ctx, gate)
                replayed = 1
        elif call.mode != "view":
            processed, steps, kept = yield from self._steps_plan(neutral, ctx, gate)
            replayed = 1
        else:
            # Made for the call about to be made, after the view of the previous one, and remembered
            # as that call's view.
            previous = _previous_call(neutral)
            view: list[Message] = []
            replayed = 0
            if previous:
                _, _, replayed, view = yield from self._view_plan(
                    neutral[:previous], replace(ctx, manual=None)
                )
            processed, steps, kept = yield from self._steps_plan([*view, *neutral[previous:]], ctx, gate)
            state.views.remember(neutral, kept, _view_setting(ctx))
            replayed += 1
        return self._finish(neutral, processed, steps, ctx, call, replayed, record, kept)

    def _gate(self, call: Call, ctx: ProcessContext) -> CompactionGate | None:
        """The call's compaction hooks, asked at most once each (`historykit._hooks`); `None`: none."""
        hooks = call.hooks if call.hooks is not None else self.compaction_hooks
        if hooks is None or hooks.empty:
            return None
        return CompactionGate(
            hooks,
            call.conversation,
            call.manual is None,
            call.reason,
            ctx.context_window,
            call.mode,
            focus=call.manual.focus if call.manual is not None else None,
        )

    def _finish(
        self,
        neutral: list[Message],
        processed: list[Message],
        steps: list[StepReport],
        ctx: ProcessContext,
        call: Call,
        replayed: int = 1,
        record: Callable[[Report], None] | None = None,
        kept: list[Message] | None = None,
    ) -> PipelineResult[Message]:
        before = steps[0].tokens_before if steps else sum(ctx.counter.count_message(m) for m in neutral)
        # A pipeline with no step counts on its own (anchored as its steps would be).
        if not steps and self.use_usage:
            before += reported_offset(neutral, ctx.counter)
        after = steps[-1].tokens_after if steps else before
        report = Report(
            tuple(steps),
            ctx.context_window,
            ctx.window_source,
            str(ctx.counter.tokenizer_name),
            before,
            after,
            replayed,
        )
        # The one place usage warnings and the span's figures come from (not each integration).
        report = replace(report, warnings=self.usage.check(report, ctx.conversation))
        if record is not None:
            record(report)
        if report.changed:
            logger.debug("historykit pipeline:\n%s", report)
        if self.on_report is not None:
            self.on_report(report)
        written = {h: text for step in report.steps for h, text in step.notes.originals.items()}
        # View-only mode keeps every tool output in the history: only what a step wrote is handed on.
        originals = (
            {}
            if call.mode == "view"
            else _placeholder_originals(neutral, processed, self.recall_tools, written.values())
        )
        originals.update(written)
        return PipelineResult(processed, report, originals, None if kept is processed else kept)


class _Binding:
    """Whether each message of a conversation's latest history names a binding model (`None`: it
    names none), for `_binds_thinking`."""

    def __init__(self) -> None:
        self.models: MessageFacts[bool | None] = MessageFacts()


_named = partial(operator.is_not, None)


def _binding_of(message: Message) -> bool | None:
    return model_binds_thinking(message.model) if message.role == "assistant" and message.model else None


def _binds_thinking(history: Sequence[Message], state: ConversationState) -> bool:
    """`history_binds_thinking(history)`, from what the conversation's latest call read of each
    message (`historykit._scan_memo`): the latest assistant message that names its model decides."""
    named = state.memory(_Binding, _Binding).models.of(history, _binding_of)
    return next(filter(_named, reversed(named)), None) is True


class _Counted:
    """The token counts of a conversation's latest history given to `history_sums`."""

    def __init__(self) -> None:
        self.counts: MessageFacts[int] = MessageFacts()


def history_sums(messages: Sequence[Message], ctx: ProcessContext) -> tuple[int, ...]:
    """The prefix sums of `ctx.counter`'s counts of `messages`: entry `i` is the tokens of
    `messages[:i]` (`len(messages) + 1` entries). The counts of the conversation's latest call are
    reused for the same leading messages (`historykit._scan_memo`), the rest counted; the sums are
    made again only when a count is."""
    memo = ctx.conversation.memory(_Counted, _Counted).counts
    return memo.derived(memo.of(messages, ctx.counter.count_message, ctx.counter), prefix_totals)


def prefix_totals(values: Iterable[int]) -> tuple[int, ...]:
    """`(0, v0, v0 + v1, ...)`: entry `i` is the total of the first `i` values."""
    return tuple(accumulate(values, initial=0))


def reported_offset(messages: Sequence[Message], counter: TokenCounter) -> int:
    """`ProcessContext.reported_offset` of a call's history: the usage the latest response reported
    (its request plus itself) less `counter`'s count of the messages up to it, when that is more;
    0 when it is less, when that response reports none, or when a compaction someone asked for (a
    marker with `automatic=False`) stands before it: one made outside a model call
    (`compact_thread`, `compact_conversation`) may have shrunk what that response's usage
    measured, so it anchors nothing until the next summary.

    A response's own output counts at least what the counter makes of it (some logs record the
    usage at the start of the stream, with 1 output token)."""
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
    if at is None or messages[at].usage is None:
        return 0
    usage = messages[at].usage
    assert usage is not None
    if usage.input_tokens <= 0 or any(_asked_for(m) for m in messages[:at]):
        return 0
    response = counter.count_message(messages[at])
    prefix = sum(counter.counts(messages[:at])) + response
    # A provider that counts less than the counter does not make compaction come later: the larger
    # count stands (test models report rough guesses; another tokenizer may count a little less).
    return max(usage.input_tokens + max(usage.output_tokens, response) - prefix, 0)


def _asked_for(message: Message) -> bool:
    """Whether `message` was written by a compaction someone asked for (`ManualCompaction`)."""
    marker = message.marker or _summary_marker(message)
    return marker is not None and not marker.automatic


def native_result(
    adapter: Any, original: Sequence[MessageT], neutral: Sequence[Message], result: PipelineResult[Message]
) -> PipelineResult[MessageT]:
    """`result` (of `Pipeline.run_call` on `neutral`, the conversion of `original` by `adapter`)
    with the framework's messages: the caller's own objects when nothing changed, else the adapter's
    conversion, recorded for the stores (`historykit._provenance`); its `kept` history likewise."""

    def native(processed: list[Message]) -> list[Any]:
        if same_messages(processed, neutral):
            return list(original)
        out = adapter.to_native(processed)
        # So a store can keep what this call replaced even if no store saw it before.
        provenance.record(original, out)
        return cast("list[Any]", out)

    sent = native(result.messages)
    kept = None if result.kept is None else native(result.kept)
    return PipelineResult(sent, result.report, result.originals, kept)


def _placeholder_originals(
    given: Sequence[Message],
    processed: Sequence[Message],
    tools: frozenset[str],
    written: Iterable[str] = (),
) -> dict[str, str]:
    """The tool outputs of `given` that the placeholders this call wrote name by recall handle, or
    that the texts its steps `written` name (a summary's index of the outputs it had no room for)."""
    if not tools:
        return {}
    kept = {id(m) for m in given}
    wanted = {
        handle
        for msg in processed
        if id(msg) not in kept
        for tool in tools
        for handle in _handles_named(msg, tool)
    }
    wanted.update(handle for text in written for tool in tools for handle in handles_in(text, tool))
    found: dict[str, str] = {}
    if not wanted:
        return found
    for msg in given:
        for part in msg.parts:
            if isinstance(part, ToolResultPart):
                own = content_handle(part.content)
                if own in wanted:
                    found[own] = part.content
    return found


def _handles_named(msg: Message, tool: str) -> Iterator[str]:
    """The handles a message historykit wrote names: a placeholder's one, or each of a summary's
    recall section (`historykit.processors._summary_recall`)."""
    for part in msg.parts:
        if isinstance(part, ToolResultPart):
            if (handle := handle_in(part.content, tool)) is not None:
                yield handle
        elif isinstance(part, SummaryPart):
            yield from handles_in(part.text, tool)


_StepCall = tuple[HistoryProcessor, list[Message], ProcessContext]
"""One step of a pipeline's plan: a processor, the messages it processes, the call's context."""

_Plan = Generator[_StepCall | HookCall, Any, _R]
"""A pipeline's work written once: it yields each step and is sent the step's output, or a
compaction hook's call (`historykit._hooks`) and is sent its answer. `_drive` runs it with `process`
and plain hooks, `_adrive` with `aprocess` and awaited hooks (an async summarizer or hook awaited on
the caller's loop), as the stores' plans of queries are run by a sync or an async runner."""


def _drive(plan: _Plan[_R]) -> _R:
    """Run a plan synchronously: each step's `process`, or the hook a `HookCall` names, answers
    it (`historykit._plans`)."""
    return drive(plan, _answer)


async def _adrive(plan: _Plan[_R]) -> _R:
    """Run a plan from async code: each step's `aprocess`, or an async hook, is awaited."""
    return await adrive(plan, _aanswer)


def _answer(item: Any) -> Any:
    if isinstance(item, HookCall):
        return item.call()
    proc, messages, ctx = item
    return proc.process(messages, ctx)


async def _aanswer(item: Any) -> Any:
    if isinstance(item, HookCall):
        return await item.acall()
    proc, messages, ctx = item
    return await proc.aprocess(messages, ctx)


def same_messages(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether two histories hold the very same message objects, in order (what "unchanged" means
    for a step): compared in one C-level pass, as each step of every call asks it."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def strategy_of(processor: str) -> str:
    """The marker strategy of a processor's report name: `ClearToolResults` -> `clear_tool_results`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", processor).lower()


def mark_written(
    before: list[Message], after: list[Message], processor: str, notes: StepNotes, ctx: ProcessContext
) -> list[Message]:
    """`after` with a marker on every message the step wrote (one that is not an object of `before`).

    The marker says what it replaced: the messages of `before` between the step's kept neighbours
    (a cleared copy stands in for one result, a summary or a notice for a run of messages), tokens
    before and after, and which processor wrote it. A summary keeps the marker its summarizer gave
    it; a truncation that a processor reported keeps that strategy. The stores tell originals from
    what a compaction wrote by this marker (`EDIT_KEY`), so the original transcript is never mixed
    with copies."""
    if after is before or same_messages(before, after):
        return after
    count = ctx.counter.count_message
    reported = [m for m in notes.markers if m.strategy != "summarize"]
    strategy = reported[-1].strategy if reported else strategy_of(processor)
    out = list(after)
    for written, replaced in provenance.written_runs(before, after):
        one_to_one = len(replaced) == len(written)
        for offset, at in enumerate(written):
            msg = out[at]
            covered = replaced[offset : offset + 1] if one_to_one else replaced
            marker = _summary_marker(msg)
            if marker is None:
                marker = CompactionMarker(
                    covered_from=covered.start,
                    covered_to=covered.stop,
                    tokens_before=sum(count(before[i]) for i in covered),
                    tokens_after=count(msg),
                    strategy=strategy,
                )
            if msg.marker != marker:
                out[at] = replace(msg, marker=marker)
    return out


def _batch_marker(
    before: list[Message], after: list[Message], processor: str, step: StepReport
) -> CompactionMarker | None:
    """One marker for every message a step wrote: the span of `before` they replaced, and the
    step's tokens before and after; `None` when it wrote none."""
    if after is before or same_messages(before, after):
        return None
    replaced = [r for _, r in provenance.written_runs(before, after)]
    if not replaced:
        return None
    return CompactionMarker(
        covered_from=min(r.start for r in replaced),
        covered_to=max(r.stop for r in replaced),
        tokens_before=step.tokens_before,
        tokens_after=step.tokens_after,
        strategy=strategy_of(processor),
    )


def _summary_marker(msg: Message) -> CompactionMarker | None:
    for part in msg.parts:
        if isinstance(part, SummaryPart) and part.marker is not None:
            return part.marker
    return None


def _check_mode(mode: object) -> None:
    if mode not in ("persistent", "view"):
        raise InvalidArgumentError(f"mode must be 'persistent' or 'view', got {mode!r}")


def _previous_call(raw: Sequence[Message]) -> int:
    """Where the model call before the one that ends `raw` is (its prefix length); 0: none."""
    points = request_points(raw)
    return points[-2] if len(points) > 1 else 0


def _view_setting(ctx: ProcessContext) -> str:
    """What, besides the raw history, decides a view: views made under another setting are not reused."""
    return f"{ctx.context_window}/{ctx.binds_thinking}"


def _merge_notes(steps: list[StepReport]) -> StepNotes:
    merged = StepNotes()
    for s in steps:
        merged.replaced += s.notes.replaced
        merged.removed += s.notes.removed
        merged.added += s.notes.added
        merged.details.extend(f"{s.processor}: {d}" for d in s.notes.details)
        merged.markers.extend(s.notes.markers)
    return merged
