"""`Summarize`: replace the older span of a history with one structured summary.

Example:
    ```python
    from historykit.processors import Summarize
    from historykit.processors import Trigger

    summarize = Summarize(trigger=Trigger(max_fraction=0.8), keep_last=6)  # extractive, no LLM
    summarize = Summarize(trigger=Trigger(max_tokens=60_000), model="openai:gpt-4o-mini")
    summarize = Summarize(model=["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])  # at 80%: the default
    result = await summarize.arun(messages, context_window=128_000)
    ```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, ClassVar, TypeAlias

import tenacity

from historykit._digests import MessageDigests
from historykit._hooks import HookCall
from historykit._messages import (
    CompactionMarker,
    Message,
    ProviderCompaction,
    SummaryPart,
)
from historykit._pipeline import HistoryProcessor, ManualCompaction, ProcessContext, StepNotes
from historykit._plans import adrive, drive
from historykit._recall import check_recall_tool
from historykit._validate import check_bool, check_fraction, check_instance, check_int, check_ratio
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.processors._pairwise_truncate import CompactionState, Cut, Point
from historykit.processors._summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    UnusableSummarizerError,
    complete_summary,
    summarizer_for,
)
from historykit.processors._summary_recall import ensure_recall_section, recall_room
from historykit.processors._trigger import Trigger, TriggerField
from historykit.processors._turns import is_user_request

_log = logging.getLogger(__name__)

SUMMARY_HEADER = (
    "[historykit] Summary of the earlier conversation, which it replaces "
    "(the messages after it follow verbatim)."
)
"""First line of every summary `Summarize` writes."""


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Summarize(TriggerField, HistoryProcessor):
    """Replaces the older span of the history with ONE structured summary; keeps a recent tail.

    When the history crosses the high-water mark, everything between the task and the last
    `keep_last` units (a tool call with all its results is one unit) is replaced by a summary
    message (a `SummaryPart` in a user message) that records a `CompactionMarker`: the range it
    covers (indices of the original history), tokens before and after, the model, when. The tail is
    shortened further, never splitting a unit, when that is needed to reach the low-water mark.
    Always kept verbatim: system messages, the first user message (the task), pinned content (a
    pinned part keeps its whole unit), the request of the turn the cut falls in (placed right after
    the summary, so the last thing in the user's voice is still what they asked for; the marker's
    `kept_after` says so), and the final request. The summary has sections for the task, the
    user's messages and constraints (verbatim: whatever the summarizer writes, missing ones are
    added, see `complete_summary`), decisions, files touched (every file written or edited is
    added), done and pending work, and open errors.

    An earlier summary is updated, not summarized: the summarizer gets it with the new messages,
    and the new marker extends its covered range. A failing summarizer is retried with exponential
    backoff (`tenacity`); given a chain (`summarizer=[cheap, reliable]`, `model=[name, name]`), the
    next one is tried, with its own retries, and the marker records the one that wrote the summary;
    each failure is logged once per cause on the `historykit` logger. When all fail this call falls
    back to `PairwiseTruncate`'s behaviour, so the run goes on (the notes say so). A summarizer that
    cannot work as configured (`UnusableSummarizerError`: an unknown model name or a missing
    provider package, refused when this is built; a missing key, a 401/403/404 from the provider at
    the first call) is raised from the call at once, never retried nor truncated instead. No compaction
    loops: a compaction must be expected to free `min_gain` tokens (a summary that turns out longer
    and frees less is not used), and after one that freed less or left the history over the
    high-water mark (read from the latest marker) the next must free as much as the gap between
    the high- and low-water marks, else no summary is written at this call: the history is left as
    it is (truncated when it is over the window, or always with `truncate_instead`).

    With a `rewrite_ratio`, a summary must also pay for the cache write it causes, as clearing
    does (`historykit.processors._batching`): the summary and every message after it are written
    to the provider's prompt cache again. A summary that frees less than that because the history
    is over the mark mostly by what just arrived (a final request larger than what the summary
    would free, which the call must keep verbatim) waits for a later call, when what arrived is old
    enough to be covered too; it never waits past `wait_limit`.

    `aprocess` awaits the summarizer (a sync one runs in a worker thread); `process` works from sync
    code, even on a thread whose event loop is running: an async summarizer then runs on a
    background event loop of its own.

    Deterministic given a deterministic summarizer. It decides for the call at hand; in view-only
    use the pipeline derives each call's input the way persistent use has it (`historykit._view`),
    so both make the same summarizer calls. Summaries are also remembered in this instance by the
    content they cover, so a span summarized once (a view-only conversation replayed in a new
    process, a retried call) is not summarized again; a span whose summary failed is truncated for
    as long as the conversation's state is kept. What it remembers belongs to the conversation the
    call names (`ProcessContext.conversation`, `historykit._conversations`): one instance serves many
    conversations, and a summary is only ever reused within its own.

    Compacting on request (`summarize.compact(messages, focus=...)`, `Pipeline.compact`, the
    integrations' `compact()`): everything between the task and the last `keep_last` units (or the
    request's own `keep_last`) is summarized now, whatever the triggers say and however little it
    frees (a small history is summarized, not truncated; only a summary longer than what it would
    replace is not used); the summarizer gets the focus (as `focus=`, when it takes it) and the
    marker records `automatic=False` and the focus.

    With `background_at`, the summary is started before it is needed: from that fraction of the
    high-water mark, the span the crossing call is expected to summarize is summarized on the
    caller's event loop (a thread from sync code) while the agent works. The crossing call uses
    it only if it covers exactly the span that call chose (the same inputs), else summarizes in the
    foreground: the views, markers and thinking binding are the same as without it. A background
    summary is kept for the call's conversation, so a pipeline call that names none never starts one.

    Example:
        ```python
        import tenacity
        from historykit.processors import Summarize
        from historykit.processors import Trigger

        Summarize()                                          # over 80% of the window, extractive (no LLM)
        Summarize(trigger=Trigger(max_tokens=50_000), keep_last=4, model="anthropic:claude-haiku-4-5")
        Summarize(trigger=Trigger(max_fraction=0.7), model=my_langchain_chat_model)
        Summarize(summarizer=my_async_function, retry_wait=tenacity.wait_none())
        Summarize(model=["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
        Summarize(summarizer=[my_llm_summarizer, ExtractiveSummarizer()])
        Summarize(model="openai:gpt-4o-mini", background_at=0.6)
        Summarize().compact(messages, 128_000, focus="keep the details of the auth refactor")
        ```
    """

    keep_last: int = 6
    """At most this many units stay verbatim at the end (a tool call and all its results are one
    unit); fewer when that is needed to reach the low-water mark, never less than the final request."""
    keep_last_tokens: int | None = None
    """Also keep at most this many tokens of tail verbatim (the final request is always kept)."""
    summarizer: Summarizer | Sequence[Summarizer] | None = None
    """Any callable `messages -> str` (sync or async), or a list of them: a chain, tried in order,
    each with its own `attempts`; default: `ExtractiveSummarizer()`."""
    model: Any = None
    """Instead of `summarizer`: a Pydantic AI model name, `Model` or `Agent`, or a LangChain chat
    model; or a list of them, tried in order (`["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"]`)."""
    summary_tokens: int = 2_000
    """Expected size of a summary: room left for it when choosing the tail, and the LLM's budget."""
    min_gain: int = 1_000
    """A compaction must be expected to free at least this many tokens."""
    attempts: int = 3
    """Attempts of each summarizer before the next one in the chain (after the last: truncation); an
    `UnusableSummarizerError` is raised at the first."""
    retry_wait: Any = None
    """A `tenacity` wait between attempts; default exponential backoff, 1 s doubling up to 20 s."""
    clock: Callable[[], datetime] = _utc_now
    """Gives the marker's `created_at`."""
    automatic: bool = True
    """Recorded in the marker (`False`: every compaction of this instance counts as asked for); a
    compaction asked for with `compact()` records `False` whatever this says."""
    cache_size: int = 1_024
    """Summaries a conversation remembers by covered content (its view-only replay in a new process
    reuses them): keep it above the number of compactions a conversation has."""
    background_at: float | None = None
    """Fraction of the token high-water mark (0 < x < 1) from which the summary the trigger is
    expected to write is started in the background (an asyncio task in `aprocess`, a thread in
    `process`) while the agent works; the call that fires uses it when it covers exactly the span
    that call summarizes, else summarizes in the foreground. `None`: no background summaries."""
    truncate_instead: bool = False
    """When the trigger fires but no summary is worth writing (nothing to summarize, or it would
    free less than it must), truncate as `PairwiseTruncate` does. `False`: leave the history as it
    is until a summary is worth writing, unless it is over the window (then it is truncated): a
    mark well under the window (`default_pipeline()`'s 40%) would otherwise drop messages the
    window has room for, and leave truncation to the backstop after it. A summary that failed or
    turned out too long is truncated either way: asking again at every call would loop."""
    rewrite_ratio: float = 0.0
    """A summary that frees less than this many times the tokens it makes the provider write to
    its prompt cache again (the summary and every message after it, as expected), because the
    final request, which it must keep, is larger than what it frees, waits: the history is left as
    it is until a later call, or until it crosses `wait_limit`. `0`: summarize whenever the trigger
    fires."""
    wait_limit: Trigger | None = None
    """Over this trigger's high-water mark a summary is written whatever its rewrite costs (with a
    `rewrite_ratio`); `None`: the context window. `default_pipeline()` gives its truncation
    backstop's trigger, so that no history is truncated while a summary waits to pay."""
    recall_tool: str | None = None
    """The name of the recall tool, when the integration installed one (`historykit._recall`): the
    summary then lists the tool outputs it replaced, each with the call that returns it
    (`historykit.processors._summary_recall`), the newest in about 15% of the window."""
    compacts_on_request: ClassVar[bool] = True
    _digests: MessageDigests = field(default_factory=MessageDigests, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.summarizer is not None and self.model is not None:
            raise InvalidArgumentError("give either summarizer= or model=, not both")
        if self.model is not None:
            models = _as_chain(self.model, "model")
            self._summarizers: tuple[Summarizer, ...] = tuple(
                summarizer_for(m, self.summary_tokens) for m in models
            )
        elif self.summarizer is None:
            self._summarizers = (ExtractiveSummarizer(),)
        else:
            chain = _as_chain(self.summarizer, "summarizer")
            for index, candidate in enumerate(chain):
                if not callable(candidate):
                    where = f"summarizer {index}" if len(chain) > 1 else "summarizer"
                    raise ArgumentTypeError(
                        f"{where} must be a callable taking messages, got a {type(candidate).__qualname__}"
                    )
            self._summarizers = tuple(chain)
        check_fraction(
            "background_at", self.background_at, what="a fraction in (0, 1)", below_one=True, optional=True
        )
        for name in ("keep_last", "min_gain", "cache_size"):
            check_int(name, getattr(self, name), what="an int >= 0")
        check_bool("truncate_instead", self.truncate_instead)
        check_ratio("rewrite_ratio", self.rewrite_ratio)
        check_instance("wait_limit", self.wait_limit, Trigger, "a historykit Trigger", optional=True)
        # A summary of no tokens is no summary: the model would be asked to write nothing.
        check_int("summary_tokens", self.summary_tokens, minimum=1, what="an int >= 1")
        if self.keep_last_tokens is not None and self.keep_last_tokens < 0:
            raise InvalidArgumentError(f"keep_last_tokens must be >= 0, got {self.keep_last_tokens!r}")
        check_int("attempts", self.attempts, minimum=1, what="an int >= 1")
        check_recall_tool(self.recall_tool)
        # Causes of summarizer failures already logged: each once, not once per compaction.
        self._warned: set[str] = set()
        # Background summaries run here from sync code; made on first use.
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def model_name(self) -> str | None:
        """What a marker records when the first summarizer writes the summary (see `writer_name`)."""
        return self.writer_name(0)

    @property
    def summarizers(self) -> tuple[Summarizer, ...]:
        """The chain, in the order it is tried (one summarizer unless a list was given)."""
        return self._summarizers

    def writer_name(self, index: int) -> str | None:
        """What the marker records as the model when summarizer `index` wrote the summary: its
        `model_name`; in a chain, a callable without that attribute is named by its qualified name
        (the extractive summarizer's `model_name` is `None`: no model)."""
        summarizer = self._summarizers[index]
        name = getattr(summarizer, "model_name", None)
        if isinstance(name, str):
            return name
        if len(self._summarizers) == 1 or hasattr(summarizer, "model_name"):
            return None
        return _callable_name(summarizer)

    # -- entry points -----------------------------------------------------------------------------

    def process(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        return drive(self._compact(messages, ctx), self._reply)

    async def aprocess(self, messages: list[Message], ctx: ProcessContext) -> tuple[list[Message], StepNotes]:
        return await adrive(self._compact(messages, ctx), self._areply)

    def _reply(self, request: _Request | HookCall) -> Any:
        """What `_compact` asked for, from sync code: the before-compaction hook's answer, a
        background summary started (nothing to answer yet), or the summary of its inputs."""
        if isinstance(request, HookCall):
            return request.call()
        if request.background:
            self._start_thread(request)
            return None
        return self._background_reply(request) or self._summarize_sync(request.inputs, focus=request.focus)

    async def _areply(self, request: _Request | HookCall) -> Any:
        """`_reply` from async code: the hook and the summarizer are awaited."""
        if isinstance(request, HookCall):
            return await request.acall()
        if request.background:
            self._start_task(request)
            return None
        return await self._abackground_reply(request) or await self._summarize_async(
            request.inputs, focus=request.focus
        )

    # -- the compaction -------------------------------------------------------------------------------

    def _compact(
        self, messages: list[Message], ctx: ProcessContext
    ) -> Generator[_Request | HookCall, Any, tuple[list[Message], StepNotes]]:
        """Compacts this call's history if it must; yields summarizer requests, receives their
        replies (`None` for a background request, which the driver only starts); before it asks
        for a summary, yields the call's `before_compaction` hook (`ProcessContext.compaction_gate`)
        and receives its answer."""
        self._digests.cache_policy = ctx.cache_policy
        memory = ctx.conversation.memory(self, _Memory)
        state = CompactionState(messages, ctx, self.trigger, self.recall_tool)
        notes = state.notes
        point = state.current_call()
        manual = ctx.manual
        if manual is not None:
            return (yield from self._compact_on_request(state, point, manual, ctx, memory))
        if not state.fires(point):
            # A call whose state ends with it starts nothing for later calls: none would ask for it.
            lasting = ctx.conversation.lasting
            for ahead in self._background_requests(state, point, memory) if lasting else ():
                yield ahead
                notes.details.append(
                    f"started a background summary of {len(ahead.inputs)} messages at "
                    f"{point.tokens:,} tokens, for the call that crosses {state.high:,}"
                )
            return state.result()
        plan = self._plan(state, point)
        if plan is None:
            self._no_summary(state, point, ctx, "nothing to summarize; ")
            return state.result()
        cut, expected = plan
        gain = point.tokens - expected
        needed = self._needed_gain(state)
        if gain < needed:
            why = f"summarizing would free about {max(gain, 0):,} tokens (< {needed:,}); "
            self._no_summary(state, point, ctx, why)
            return state.result()
        rewrite = expected - state.cum[state.head]
        if self._waits(state, point, gain, rewrite):
            state.notes.details.append(
                f"summarizing would free about {gain:,} tokens, less than the {rewrite:,} it makes the "
                f"cache write again (rewrite_ratio={self.rewrite_ratio:g}); left as it is"
            )
            return state.result()
        if (yield from self._vetoed(ctx)):
            return state.result()  # unchanged: the pipeline's report says the hook vetoed it
        focus = ctx.compaction_gate.focus if ctx.compaction_gate is not None else None
        inputs = self._inputs(state, cut)
        cached, reply, fresh = yield from self._summary(
            inputs, memory, window=ctx.context_window, focus=focus
        )
        failures = reply.failures if reply is not None else []
        if cached.text is None:
            state.truncate(point, f"summarizer failed ({cached.error}), truncated instead; ")
            return state.result()
        summary = self._summary_message(state, point, cut, cached, ctx, focus=focus)
        marker = summary.parts[0].marker  # type: ignore[union-attr]
        assert marker is not None
        if marker.tokens_before - marker.tokens_after < self.min_gain:
            # Longer than expected: a summary that frees so little is not worth the cache miss.
            why = f"the summary would free only {marker.tokens_before - marker.tokens_after:,} tokens; "
            state.truncate(point, why)
            return state.result()
        self._apply(state, point, cut, summary, fresh, failures, reply, cached.index)
        return state.result()

    def _no_summary(self, state: CompactionState, point: Point, ctx: ProcessContext, why: str) -> None:
        """No summary is worth writing at this call: truncate (`truncate_instead`, or a history
        over the window, which cannot go out as it is), else leave the history as it is."""
        if self.truncate_instead or point.tokens > ctx.context_window:
            state.truncate(point, why)
        else:
            state.notes.details.append(f"{why}left as it is (truncate_instead=False)")

    def _waits(self, state: CompactionState, point: Point, gain: int, rewrite: int) -> bool:
        """The summary does not pay for the `rewrite` it causes because of what just arrived: the
        final request, which this call must keep verbatim and the next can cover, is larger than
        what the summary would free (most of the rewrite would be that request). Any other summary
        is written now: waiting would not make it pay sooner, and the cheap edits that go on in the
        meantime would make the provider's cache miss at the calls in between. Never past
        `wait_limit`."""
        if gain >= self.rewrite_ratio * rewrite or self._over_wait_limit(point, state.ctx):
            return False
        arrived = state.cum[point.end] - state.cum[state.start_of(state.last_cut_unit(point))]
        return arrived > gain

    def _over_wait_limit(self, point: Point, ctx: ProcessContext) -> bool:
        """The history is past where a summary stops waiting to pay for its rewrite: `wait_limit`'s
        high-water mark, else the window (a history over it cannot go out as it is)."""
        limit = self.wait_limit.high_tokens(ctx) if self.wait_limit is not None else None
        return point.tokens > (limit if limit is not None else ctx.context_window)

    def _vetoed(self, ctx: ProcessContext) -> Generator[HookCall, Any, bool]:
        """Asks the call's `before_compaction` hook, if it was not asked yet (`CompactionGate`),
        before a summary is asked for; whether it vetoed the compaction."""
        gate = ctx.compaction_gate
        if gate is None:
            return False
        ask = gate.ask(self.name)
        if ask is not None:
            gate.answer((yield ask))
        return gate.vetoed

    def _summary(
        self,
        inputs: list[Message],
        memory: _Memory,
        manual: ManualCompaction | None = None,
        *,
        window: int,
        focus: str | None = None,
    ) -> Generator[_Request, _Reply | None, tuple[_Cached, _Reply | None, bool]]:
        """The summary of `inputs` (for a manual compaction, with its focus; for an automatic one,
        with the `focus` a `before_compaction` hook gave): remembered by the conversation, or asked
        of the driver. Returns it, the driver's reply (`None` when remembered) and whether it is new."""
        key = self._digests.key(inputs)
        if manual is not None:
            # A summary the user asked for is its own: another focus, or none, writes another text.
            key = f"{key}/manual/{manual.focus or ''}"
            focus = manual.focus
        elif focus is not None:
            key = f"{key}/focus/{focus}"
        cached = memory.recall(key)
        if cached is not None:
            return cached, None, False
        reply = yield _Request(inputs, key, memory, focus=focus)
        assert reply is not None
        writer = self.writer_name(reply.writer) if reply.writer is not None else None
        # A native backend's summary carries the provider's own block (`NativeSummary`).
        compaction = getattr(reply.text, "provider_compaction", None)
        cached = _Cached(reply.text, reply.error, writer=writer, compaction=compaction)
        if reply.text is not None and reply.writer is not None:
            cached.text, cached.index = self._finish_text(
                reply.text, inputs, self._summarizers[reply.writer], window
            )
        memory.remember(key, cached, self.cache_size)
        return cached, reply, True

    def _apply(
        self,
        state: CompactionState,
        point: Point,
        cut: Cut,
        summary: Message,
        fresh: bool,
        failures: list[str],
        reply: _Reply | None,
        index: tuple[str, str] | None,
    ) -> None:
        notes = state.notes
        marker = summary.parts[0].marker  # type: ignore[union-attr]
        assert marker is not None
        state.apply(cut, summary)
        if index is not None:
            # Handed on at every application, not only the first: a view replay in a new process
            # applies a remembered summary, and the conversation must get its index back.
            notes.originals[index[0]] = index[1]
        if fresh:
            notes.markers.append(marker)
            notes.details.extend(f"summarizer failed ({failure}), tried the next" for failure in failures)
        covered = marker.covered_to - marker.covered_from
        notes.details.append(
            f"{'summarized' if fresh else 're-applied the summary of'} messages "
            f"{marker.covered_from}-{marker.covered_to} ({covered} messages; "
            f"{sum(len(p.messages) for p in cut.kept)} kept verbatim) "
            f"before message {point.end}: {marker.tokens_before:,} -> {marker.tokens_after:,} tokens"
            + (f" ({marker.model})" if marker.model else "")
            + (" (written in the background)" if reply is not None and reply.background else "")
            + (
                ""
                if marker.automatic
                else " (asked for" + (f", focus: {marker.focus!r})" if marker.focus else ")")
            )
        )

    def _compact_on_request(
        self,
        state: CompactionState,
        point: Point,
        manual: ManualCompaction,
        ctx: ProcessContext,
        memory: _Memory,
    ) -> Generator[_Request | HookCall, Any, tuple[list[Message], StepNotes]]:
        """A compaction the user asked for (`Pipeline.compact`): everything between the task and the
        units kept, summarized whatever it frees (never truncated instead), the summarizer given the
        focus; nothing changes when there is nothing to cover, the summary would be longer than what
        it replaces, or every summarizer failed (the notes say which)."""
        notes = state.notes
        # The units asked to stay verbatim stay: a manual compaction aims at no mark.
        plan = self._plan(state, point, keep_last=manual.keep_last, to_low_water=False)
        if plan is None:
            notes.details.append(
                "asked to compact, but there is nothing to summarize: only the task, the kept tail "
                "and pinned content are left"
            )
            return state.result()
        cut, _ = plan
        if (yield from self._vetoed(ctx)):
            return state.result()  # unchanged: the pipeline's report says the hook vetoed it
        if ctx.compaction_gate is not None:
            # The focus the hook gave (`AdjustCompaction`), else the request's own.
            manual = replace(manual, focus=ctx.compaction_gate.focus)
        inputs = self._inputs(state, cut)
        cached, reply, fresh = yield from self._summary(inputs, memory, manual, window=ctx.context_window)
        if cached.text is None:
            notes.details.append(
                f"asked to compact, but the summarizer failed ({cached.error}): the history is left as it was"
            )
            return state.result()
        summary = self._summary_message(state, point, cut, cached, ctx, manual)
        marker = summary.parts[0].marker  # type: ignore[union-attr]
        assert marker is not None
        if marker.tokens_after >= marker.tokens_before:
            notes.details.append(
                f"asked to compact, but the summary would make the history longer ({marker.tokens_before:,} "
                f"-> {marker.tokens_after:,} tokens): the history is left as it was"
            )
            return state.result()
        failures = reply.failures if reply is not None else []
        writer = reply.writer if reply is not None else None
        if manual.focus is not None and writer is not None and not _takes_focus(self._summarizers[writer]):
            notes.details.append(
                f"the summarizer {self._log_name(writer)} takes no focus= argument: the focus "
                "is recorded in the marker only"
            )
        self._apply(state, point, cut, summary, fresh, failures, reply, cached.index)
        return state.result()

    def _needed_gain(self, state: CompactionState) -> int:
        """`min_gain`, or after a compaction that gained too little, a full high-to-low swing."""
        marker = state.marker
        if marker is None:
            return self.min_gain
        high, low = state.high, state.low
        over = high is not None and marker.tokens_after > high
        small = marker.tokens_before - marker.tokens_after < self.min_gain
        if not (over or small):
            return self.min_gain
        swing = high - low if high is not None and low is not None else 0
        return max(self.min_gain, swing)

    def _plan(
        self,
        state: CompactionState,
        point: Point,
        growth: int | None = None,
        units: int = 1,
        keep_last: int | None = None,
        to_low_water: bool = True,
    ) -> tuple[Cut, int] | None:
        """Where a summary at `point` cuts, and the size expected after it; `None` when nothing to cover.

        With `growth`, a prediction: where the summary of a later call cuts, one that sees this
        history plus `growth` more tokens in `units` more units; `None` when that cut would fall in
        what has not arrived yet."""
        predicting = growth is not None
        more = growth or 0
        last = len(state.units) if predicting else state.last_cut_unit(point)
        if last <= state.live_unit:
            return None
        end_unit = len(state.units) + units if predicting else state.unit_at(point.end)
        end_tokens = state.cum[point.end] + more
        unit = max(state.live_unit + 1, end_unit - (self.keep_last if keep_last is None else keep_last))
        if self.keep_last_tokens is not None:
            while unit < last and end_tokens - state.cum[state.start_of(unit)] > self.keep_last_tokens:
                unit += 1
        unit = min(unit, last)
        walk = state.walk("summarize")
        for index in range(state.live_unit, unit):
            state.advance(walk, index)
        previous = walk.previous_summary
        expected_summary = self.summary_tokens
        if previous is not None:
            expected_summary = max(expected_summary, state.ctx.counter.count_message(previous))
        while True:
            tokens, count = state.tokens_after(walk, point, unit, expected_summary)
            if not to_low_water or state.trigger.satisfied(
                tokens + more, count + (2 if predicting else 0), state.ctx
            ):
                return walk.cut(unit, state.start_of(unit)), tokens + more
            if unit >= last:
                return None if predicting else (walk.cut(unit, state.start_of(unit)), tokens)
            state.advance(walk, unit)
            unit += 1

    def _background_requests(self, state: CompactionState, point: Point, memory: _Memory) -> list[_Request]:
        """At a call past `background_at` but under the trigger: the summaries the call that
        crosses the high-water mark may write, those not known or under way already.

        Between two compactions (a cycle) one starts at `background_at`, predicted as if the
        coming calls each add a unit of the recent mean size until one crosses the mark. When the
        next call may cross it (one more unit as large as a recent one would), the prediction is
        best: one summary per distinct span that a next unit the size of each recent one would
        give. At most `_STARTS_PER_CYCLE` per cycle: an LLM summary costs money."""
        high = state.high
        if self.background_at is None or high is None or point.tokens < self.background_at * high:
            return []
        recent = state.units[max(state.live_unit, len(state.units) - _RECENT_UNITS) :]
        if not recent:
            return []
        sizes = [state.cum[u.end] - state.cum[u.start] for u in recent]
        gap = high + 1 - point.tokens
        started = memory.cycle(self._digests.key(state.messages[: state.live]))
        if max(sizes) >= gap:
            guesses = [(max(size, gap), 1) for size in sorted(set(sizes), reverse=True)]
        elif not started:
            step = max(1, sum(sizes) // len(sizes))
            ahead = -(-gap // step)
            guesses = [(ahead * step, ahead)]
        else:
            return []
        requests: list[_Request] = []
        for growth, units in guesses:
            if len(started) >= _STARTS_PER_CYCLE:
                break
            plan = self._plan(state, point, growth=growth, units=units)
            if plan is None or not plan[0].covered:
                continue
            inputs = self._inputs(state, plan[0])
            key = self._digests.key(inputs)
            if key in started or key in memory.cache or key in memory.pending:
                continue
            started.append(key)
            requests.append(_Request(inputs, key, memory, background=True))
        return requests

    def _inputs(self, state: CompactionState, cut: Cut) -> list[Message]:
        """What the summarizer gets: the task, the summary to update, the messages to cover."""
        head = state.messages[: state.head]
        task = [m for m in head if is_user_request(m)][-1:]
        previous = [cut.previous_summary] if cut.previous_summary is not None else []
        return [*task, *previous, *cut.covered]

    def _finish_text(
        self, text: str, inputs: list[Message], writer: Summarizer, window: int
    ) -> tuple[str, tuple[str, str] | None]:
        """The summary's final text, and the index of the recall items it had no room for."""
        text = complete_summary(text.strip(), inputs, writer)
        index = None
        if self.recall_tool is not None:
            finished = ensure_recall_section(text, inputs, self.recall_tool, recall_room(window))
            text, index = finished.text, finished.index
        if not text.startswith(SUMMARY_HEADER):
            text = f"{SUMMARY_HEADER}\n\n{text}"
        return text, index

    def _summary_message(
        self,
        state: CompactionState,
        point: Point,
        cut: Cut,
        cached: _Cached,
        ctx: ProcessContext,
        manual: ManualCompaction | None = None,
        *,
        focus: str | None = None,
    ) -> Message:
        """The summary message; its marker records the manual compaction's focus, else `focus`
        (a `before_compaction` hook's, for an automatic one)."""
        assert cached.text is not None
        if cached.tokens is None or cached.tokenizer is not ctx.counter.tokenizer:
            cached.tokens = ctx.counter.count_message(Message("user", (SummaryPart(cached.text),)))
            cached.tokenizer = ctx.counter.tokenizer
        text_tokens = cached.tokens
        previous = cut.previous_summary
        previous_marker = next(
            (p.marker for p in previous.parts if isinstance(p, SummaryPart))
            if previous is not None
            else iter(()),
            None,
        )
        covered_from = previous_marker.covered_from if previous_marker is not None else state.head
        covered_to = state.original_index(cut.start)
        after = (
            state.cum[state.head]
            + cut.kept_tokens
            + text_tokens
            + state.cum[point.end]
            - state.cum[cut.start]
        )
        kept_after = len(cut.opener.messages) if cut.opener is not None else 0
        numbers = (covered_from, covered_to, point.tokens, after, kept_after)
        message = cached.messages.get(numbers)
        if message is None:
            marker = CompactionMarker(
                covered_from=covered_from,
                covered_to=covered_to,
                tokens_before=point.tokens,
                tokens_after=after,
                strategy="summarize",
                model=cached.writer,
                created_at=self.clock(),
                automatic=self.automatic and manual is None,
                focus=manual.focus if manual is not None else focus,
                kept_after=kept_after,
            )
            part = SummaryPart(cached.text, marker, provider_compaction=cached.compaction)
            message = cached.messages[numbers] = Message("user", (part,))
        return message

    # -- calling the summarizer -------------------------------------------------------------------

    def _wait(self) -> Any:
        return self.retry_wait if self.retry_wait is not None else tenacity.wait_exponential(1, min=1, max=20)

    def _summarize_sync(
        self, inputs: list[Message], background: bool = False, focus: str | None = None
    ) -> _Reply:
        """The chain in order, each summarizer with its retries, until one writes a summary."""
        failures: list[str] = []
        for index, summarizer in enumerate(self._summarizers):
            retrying = tenacity.Retrying(
                stop=tenacity.stop_after_attempt(self.attempts),
                wait=self._wait(),
                retry=_worth_retrying,
                reraise=True,
            )
            try:
                text = retrying(lambda s=summarizer: _checked(_call_blocking(s, inputs, focus)))
            except Exception as exc:
                _raise_if_unusable(exc, background)
                failures.append(self._failed(index, exc, background))
                continue
            return _Reply(text, None, index, failures)
        return _Reply(None, "; ".join(failures), None, failures)

    async def _summarize_async(
        self, inputs: list[Message], background: bool = False, focus: str | None = None
    ) -> _Reply:
        failures: list[str] = []
        for index, summarizer in enumerate(self._summarizers):
            retrying = tenacity.AsyncRetrying(
                stop=tenacity.stop_after_attempt(self.attempts),
                wait=self._wait(),
                retry=_worth_retrying,
                reraise=True,
            )

            async def attempt(s: Summarizer = summarizer) -> str:
                return _checked(await _call_async(s, inputs, focus))

            try:
                text: str = await retrying(attempt)
            except Exception as exc:
                _raise_if_unusable(exc, background)
                failures.append(self._failed(index, exc, background))
                continue
            return _Reply(text, None, index, failures)
        return _Reply(None, "; ".join(failures), None, failures)

    def _failed(self, index: int, exc: Exception, background: bool = False) -> str:
        """Describes summarizer `index` failing every attempt; the cause is logged the first time.

        A summarizer that cannot work (a misspelt model name, a missing provider package) would
        otherwise only ever show in the notes, as compactions that fall back."""
        name = self._log_name(index)
        # A background failure is its own cause: what follows it differs (the foreground tries).
        cause = f"{index}/{name}/{background}/{type(exc).__qualname__}: {exc}"
        if cause not in self._warned:
            self._warned.add(cause)
            then = (
                f"trying {self._log_name(index + 1)} next"
                if index + 1 < len(self._summarizers)
                else "the call that needs it summarizes in the foreground"
                if background
                else "truncating instead"
            )
            _log.warning(
                "the summarizer %s failed after %d attempt%s; %s (logged once per cause)",
                name,
                self.attempts,
                "s" if self.attempts != 1 else "",
                then,
                exc_info=exc,
            )
        described = _describe(exc, self.attempts)
        # One summarizer: the description alone, as the notes have always said it.
        return f"{name}: {described}" if len(self._summarizers) > 1 else described

    def _log_name(self, index: int) -> str:
        return self.writer_name(index) or _callable_name(self._summarizers[index])

    # -- background summaries ---------------------------------------------------------------------

    def _start_task(self, request: _Request) -> None:
        task = asyncio.get_running_loop().create_task(
            self._summarize_async(request.inputs, background=True), name="historykit-background-summary"
        )
        request.memory.keep_pending(request.key, task)

    def _start_thread(self, request: _Request) -> None:
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="historykit-background-summary"
            )
        request.memory.keep_pending(
            request.key, self._threads.submit(self._summarize_sync, request.inputs, True)
        )

    def _background_reply(self, request: _Request) -> _Reply | None:
        """The background summary of exactly these inputs, waited for; `None` when there is none or
        it failed (the foreground then tries again)."""
        job = request.memory.take_pending(request.key)
        if job is None:
            return None
        if not isinstance(job, concurrent.futures.Future) and not (job.done() and not job.cancelled()):
            return None  # a task of another event loop, still running: it cannot be waited for here
        reply = job.result()
        return _background(reply)

    async def _abackground_reply(self, request: _Request) -> _Reply | None:
        job = request.memory.take_pending(request.key)
        if job is None:
            return None
        if isinstance(job, concurrent.futures.Future):
            reply = await asyncio.wrap_future(job)
        elif job.get_loop() is asyncio.get_running_loop():
            try:
                # Shielded: a cancelled caller must not cancel the summary itself.
                reply = await asyncio.shield(job)
            except asyncio.CancelledError:
                if job.cancelled():
                    return None
                raise
        elif job.done() and not job.cancelled():
            reply = job.result()
        else:
            return None
        return _background(reply)


_RECENT_UNITS = 4
"""Units whose mean size predicts what the coming calls add."""
_STARTS_PER_CYCLE = 4
"""Background summaries started between two compactions: one early, the others just before the mark."""
_MAX_PENDING = _STARTS_PER_CYCLE
"""Background summaries kept until the call that fires asks for them."""


def _background(reply: _Reply) -> _Reply | None:
    if reply.text is None:
        return None
    reply.background = True
    return reply


def _as_chain(value: Any, name: str) -> tuple[Any, ...]:
    """A list or tuple is a chain; anything else is one summarizer (a model name is a str)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise InvalidArgumentError(f"{name} is an empty list: give at least one")
        return tuple(value)
    return (value,)


def _callable_name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__qualname__


@dataclass
class _Request:
    """What the compaction asks its driver for: a summary of `inputs`, now or in the background."""

    inputs: list[Message]
    key: str
    """The digest of `inputs`: a background summary is used only for the very same inputs."""
    memory: _Memory
    """What the call's conversation remembers: where the summary, or the background job, is kept."""
    background: bool = False
    focus: str | None = None
    """A manual compaction's focus, for the summarizers that take one."""


@dataclass
class _Reply:
    text: str | None
    error: str | None
    writer: int | None = None
    """Index of the summarizer that wrote `text`."""
    failures: list[str] = field(default_factory=list)
    """The summarizers of the chain that failed before it, described."""
    background: bool = False
    """Written by a background summary."""


_Job: TypeAlias = "asyncio.Task[_Reply] | concurrent.futures.Future[_Reply]"
"""A background summary under way: a task on the caller's event loop, or a thread's future."""


class _Memory:
    """What one `Summarize` remembers for one conversation (`ConversationState.memory`): its
    summaries by covered content, the background summaries under way, the spans started per cycle."""

    def __init__(self) -> None:
        self.cache: OrderedDict[str, _Cached] = OrderedDict()
        self.pending: OrderedDict[str, _Job] = OrderedDict()
        self.cycles: OrderedDict[str, list[str]] = OrderedDict()
        # A double submit runs two calls of one conversation on two threads at once.
        self._lock = threading.Lock()

    def recall(self, key: str) -> _Cached | None:
        with self._lock:
            cached = self.cache.get(key)
            if cached is not None:
                self.cache.move_to_end(key)
            return cached

    def remember(self, key: str, entry: _Cached, limit: int) -> None:
        with self._lock:
            self.cache[key] = entry
            while len(self.cache) > limit:
                self.cache.popitem(last=False)

    def cycle(self, key: str) -> list[str]:
        """The background summaries started in the cycle (the history since the last compaction) `key`."""
        with self._lock:
            started = self.cycles.setdefault(key, [])
            while len(self.cycles) > _MAX_PENDING:
                self.cycles.popitem(last=False)
            return started

    def keep_pending(self, key: str, job: _Job) -> None:
        with self._lock:
            self.pending[key] = job
            # Mispredicted spans are never asked for: keep only the latest few.
            while len(self.pending) > _MAX_PENDING:
                self.pending.popitem(last=False)

    def take_pending(self, key: str) -> _Job | None:
        with self._lock:
            return self.pending.pop(key, None)


@dataclass
class _Cached:
    text: str | None
    """The finished summary text; `None` when the summarizer failed."""
    error: str | None
    writer: str | None = None
    """What the marker records as the model: the summarizer of the chain that wrote it."""
    compaction: ProviderCompaction | None = None
    """The provider's own block, when a native backend wrote the summary."""
    index: tuple[str, str] | None = None
    """`(handle, text)` of the recall index the summary names (`_summary_recall`), if it wrote one."""
    messages: dict[tuple[int, int, int, int, int], Message] = field(default_factory=dict)
    """The summary messages made from it, by marker numbers: the same call gives the same object."""
    tokens: int | None = None
    """Tokens of a message carrying the text, once counted."""
    tokenizer: Any = None
    """The tokenizer `tokens` was counted with."""


def _checked(result: object) -> str:
    if not isinstance(result, str):
        raise ArgumentTypeError(f"the summarizer returned a {type(result).__qualname__}, not a str")
    if not result.strip():
        raise InvalidArgumentError("the summarizer returned an empty summary")
    return result


# A summarizer that cannot work as configured fails the same way on every attempt: retrying it
# only delays the error, and truncating instead would hide it (issue 24).
_worth_retrying = tenacity.retry_if_exception(
    lambda exc: isinstance(exc, Exception) and not isinstance(exc, UnusableSummarizerError)
)


def _raise_if_unusable(exc: Exception, background: bool) -> None:
    """Re-raise `exc` when the summarizer is unusable; a background summary leaves it to the
    foreground call (which then raises it from the call that needs the summary)."""
    if isinstance(exc, UnusableSummarizerError) and not background:
        raise exc


def _describe(exc: BaseException, attempts: int) -> str:
    return f"{type(exc).__name__}: {exc} after {attempts} attempt{'s' if attempts != 1 else ''}"


def _takes_focus(summarizer: object) -> bool:
    """Whether a summarizer accepts `focus=` (the built-in ones do; a plain `messages -> str` does not)."""
    try:
        parameters = inspect.signature(summarizer).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(p.name == "focus" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _focused_call(summarizer: Summarizer, inputs: list[Message], focus: str | None) -> object:
    """The summarizer called with the focus when there is one and it takes it."""
    if focus is not None and _takes_focus(summarizer):
        return summarizer(inputs, focus=focus)  # type: ignore[call-arg]
    return summarizer(inputs)


def _call_blocking(summarizer: Summarizer, inputs: list[Message], focus: str | None = None) -> object:
    result = _focused_call(summarizer, inputs, focus)
    if inspect.isawaitable(result):
        return _BackgroundLoop.run(result)
    return result


class _BackgroundLoop:
    """One event loop on a daemon thread, for async summarizers called from sync code.

    Long-lived rather than `asyncio.run` per call: a provider's cached HTTP client is bound to the
    loop it was first used on, and this works whether or not the calling thread runs a loop.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, awaitable: Awaitable[Any]) -> Any:
        async def wait() -> Any:
            return await awaitable

        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="historykit-summarizer", daemon=True).start()
                cls._loop = loop
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(wait(), loop).result()


async def _call_async(summarizer: Summarizer, inputs: list[Message], focus: str | None = None) -> object:
    if _is_coroutine_function(summarizer):
        return await _focused_call(summarizer, inputs, focus)  # type: ignore[misc]
    # A sync summarizer (an LLM client that blocks) must not block the caller's event loop.
    result = await asyncio.to_thread(_focused_call, summarizer, inputs, focus)
    if inspect.isawaitable(result):
        result = await result
    return result


def _is_coroutine_function(fn: object) -> bool:
    # An object whose `__call__` is `async def` (the LLM adapters) counts too.
    call = type(fn).__dict__.get("__call__") if not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
