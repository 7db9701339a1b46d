"""Hooks around each compaction: one before it, which may veto it or change its focus, and one after
it, with the sizes and the summary (Claude Code's PreCompact and PostCompact).

A **compaction** is a pipeline call in which a compacting step (every step but the request repairs:
`Summarize`, `ClearToolResults`, `DedupeFileReads`, `PairwiseTruncate`, ...) would change the
history: automatic (a processor's trigger fired, or the integrations' compact-and-retry after the
provider refused a request as too long) or asked for (`Pipeline.compact`, the integrations'
`compact`, `compact_thread`, `compact_conversation`). A step whose edits are no compaction
(`HistoryProcessor.compacts` is `False`: `OffloadToolOutputs`, which shortens each large output as
it arrives) is not asked about, and its edits stand on a veto.

- `before_compaction(event: BeforeCompaction)` is called once per compaction, at the first step
  about to change the history and before any summarizer is called (a step with no summarizer runs
  first and is then asked about; its edits are dropped on a veto). It returns `None` (or `True`) to
  let the compaction proceed, `False` to veto it (the call then sends the history as it was given,
  and no later step of the call compacts), or `AdjustCompaction(focus=...)` to proceed with another
  focus for the summary (an automatic compaction too; the marker records it).
- `after_compaction(event: AfterCompaction)` is called once the compacting steps changed the
  history, with the tokens before and after, the markers written and the summary text.

Both may be plain or `async` functions: the async entry points (`arun`, `acompact`, the Pydantic AI
integrations, LangChain's `ainvoke`) await them; a sync call given an async hook raises
`ArgumentTypeError` naming it. An exception a hook raises propagates: the call fails, nothing is
sent, and (view-only mode) nothing is remembered for the conversation.

A veto never sends a request known not to fit: when the history of a vetoed compaction is over the
context window, the call raises `CompactionVetoedError` instead (the request would be refused).

Each hook call belongs to one model call of one conversation: `event.conversation` is that call's
conversation key (a direct caller's `conversation=`; `("pydantic-ai", conversation_id)` for the
Pydantic AI integrations; `("langgraph", thread_id, checkpoint_ns)` for LangChain's). In view-only
mode only the call being made asks: a compaction of an earlier call that is derived again (a new
process replaying a stored history) fires no hook, since it was made, and reported, when that call
was. A veto or a changed focus is not stored with the conversation, so such a replay compacts as
the configuration says.

Example:
    ```python
    from historykit import AdjustCompaction, AfterCompaction, BeforeCompaction, Pipeline
    from historykit.processors import Summarize

    def before(event: BeforeCompaction) -> AdjustCompaction | bool | None:
        if event.automatic and event.tokens_before < 0.9 * event.context_window:
            return False                                       # not yet: veto
        return AdjustCompaction(focus="keep the open bugs")    # proceed, with this focus

    def after(event: AfterCompaction) -> None:
        print(event.conversation, event.tokens_before, "->", event.tokens_after, event.summary)

    pipeline = Pipeline([Summarize()], before_compaction=before, after_compaction=after)
    ```
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from historykit._messages import CompactionMarker, Message, SummaryPart
from historykit.errors import ArgumentTypeError, CompactionVetoedError

if TYPE_CHECKING:
    from historykit._pipeline import ProcessContext
    from historykit._view import Mode

CompactionReason = Literal["trigger", "manual", "overflow"]
"""Why a compaction happens: a processor's `trigger` fired; it was asked for (`manual`); the provider
refused the request as too long and the integration compacts again to retry (`overflow`)."""


@dataclass(frozen=True)
class _CompactionEvent:
    """What both hooks are told about a compaction."""

    conversation: Hashable | None
    """The conversation's key (see the module documentation); `None` when the call names none."""
    automatic: bool
    """`False` for a compaction someone asked for (`Pipeline.compact`, the integrations' `compact`)."""
    reason: CompactionReason
    """Why it happens: `trigger`, `manual` or `overflow` (a compact-and-retry)."""
    mode: Mode
    """`persistent` or `view` (view-only)."""
    context_window: int
    """The context window the call budgets for, in tokens."""
    tokens_before: int
    """The history's tokens before the compaction (with what the provider reported, as the report)."""
    focus: str | None
    """The focus the summary gets (a manual compaction's, or the before-hook's); `None`: none."""


@dataclass(frozen=True)
class BeforeCompaction(_CompactionEvent):
    """What the `before_compaction` hook is told about the compaction about to happen.

    Example:
        ```python
        def before(event: BeforeCompaction) -> bool | None:
            print(event.conversation, event.reason, event.step, event.tokens_before, event.focus)
            return None   # proceed; False vetoes; AdjustCompaction(focus=...) changes the focus
        ```
    """

    step: str
    """The first step about to change the history (its report name: `Summarize`,
    `ClearToolResults`, ...); later steps of the pipeline may compact too."""


@dataclass(frozen=True)
class AfterCompaction(_CompactionEvent):
    """What the `after_compaction` hook is told about a compaction that changed the history.

    Example:
        ```python
        def after(event: AfterCompaction) -> None:
            saved = event.tokens_before - event.tokens_after
            log.info("%s compacted %s tokens (%s)", event.conversation, saved, event.steps)
            if event.summary is not None:
                archive(event.conversation, event.summary)
        ```
    """

    steps: tuple[str, ...]
    """The steps that changed the history, in order (report names)."""
    tokens_after: int
    """Its tokens after the compacting steps (the request repairs, which follow, are not counted)."""
    markers: tuple[CompactionMarker, ...]
    """The compaction markers the steps wrote (what each replaced, and its tokens)."""
    summary: str | None
    """The text of the summary written, when a step wrote one; `None` otherwise."""


@dataclass(frozen=True)
class AdjustCompaction:
    """What a `before_compaction` hook returns to let the compaction proceed with another focus.

    Example:
        ```python
        def before(event: BeforeCompaction) -> AdjustCompaction:
            return AdjustCompaction(focus="keep every file path and the failing test names")
        ```
    """

    focus: str | None
    """The focus the summary gets instead of `event.focus` (`None` or blank: no focus)."""

    def __post_init__(self) -> None:
        if self.focus is not None and not isinstance(self.focus, str):
            raise ArgumentTypeError(f"focus must be a str or None, got a {type(self.focus).__qualname__}")
        focus = self.focus.strip() if self.focus is not None else None
        object.__setattr__(self, "focus", focus or None)


BeforeAnswer = AdjustCompaction | bool | None
"""What a `before_compaction` hook returns: `None`/`True` proceed, `False` vetoes, `AdjustCompaction`
changes the focus."""
BeforeHook = Callable[[BeforeCompaction], BeforeAnswer | Awaitable[BeforeAnswer]]
"""A `before_compaction` hook: a plain or async function of a `BeforeCompaction`."""
AfterHook = Callable[[AfterCompaction], Any]
"""An `after_compaction` hook: a plain or async function of an `AfterCompaction`."""


@dataclass(frozen=True)
class CompactionHooks:
    """The two hooks of a pipeline or an integration, checked once (`Pipeline(before_compaction=...)`).

    Example:
        ```python
        hooks = CompactionHooks(before=my_before, after=my_after)
        ```
    """

    before: BeforeHook | None = None
    """Called before each compaction (see the module documentation)."""
    after: AfterHook | None = None
    """Called after each compaction that changed the history."""

    def __post_init__(self) -> None:
        for name, hook in (("before_compaction", self.before), ("after_compaction", self.after)):
            if hook is not None and not callable(hook):
                raise ArgumentTypeError(f"{name} must be a function or None, got a {type(hook).__qualname__}")

    @property
    def empty(self) -> bool:
        return self.before is None and self.after is None


NO_HOOKS = CompactionHooks()
"""No hooks: for a pipeline call that derives again what an earlier call compacted."""


def hooks_of(before: BeforeHook | None, after: AfterHook | None) -> CompactionHooks | None:
    """The hooks given to a constructor, checked; `None` when neither is given."""
    hooks = CompactionHooks(before, after)
    return None if hooks.empty else hooks


@dataclass(frozen=True)
class HookCall:
    """One hook call, as a plan yields it: `_drive` makes it (a sync hook only), `_adrive` awaits it."""

    name: str
    """`before_compaction` or `after_compaction`."""
    hook: Callable[[Any], Any]
    event: BeforeCompaction | AfterCompaction

    def call(self) -> Any:
        """The hook's answer, from sync code: an async hook raises `ArgumentTypeError`."""
        if _is_async(self.hook):
            raise ArgumentTypeError(self._async_in_sync())
        answer = self.hook(self.event)
        if inspect.isawaitable(answer):
            close = getattr(answer, "close", None)
            if callable(close):
                close()  # never awaited: no "coroutine was never awaited" warning on top of the error
            raise ArgumentTypeError(self._async_in_sync())
        return answer

    async def acall(self) -> Any:
        """The hook's answer, from async code: an async hook is awaited."""
        answer = self.hook(self.event)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    def _async_in_sync(self) -> str:
        return (
            f"the {self.name} hook {hook_name(self.hook)} is async, but this call is synchronous "
            "(Pipeline.run or compact, a LangChain invoke): call arun/acompact (ainvoke), or give a "
            "plain function"
        )


def _is_async(hook: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(hook):
        return True
    # An object whose `__call__` is async (a plain function returning a coroutine is caught when
    # it returns one).
    return not inspect.isroutine(hook) and inspect.iscoroutinefunction(type(hook).__call__)


def hook_name(hook: object) -> str:
    """How an error names a hook: its qualified name, else its type's."""
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    module = getattr(hook, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) and module != "builtins" else str(name)


@dataclass
class CompactionGate:
    """One pipeline call's hooks: the before-hook asked once, at the first step about to compact
    (by the pipeline after a step that changed the history, or by a step before it calls a
    summarizer: `Summarize`), and its answer kept for the call's later steps.

    A processor that calls something costly or not deterministic before it changes the history asks
    first: `answer = yield gate.ask(self.name)` when `ask` gives a `HookCall` (its driver makes it),
    then `gate.answer(answer)`; it changes nothing when `gate.vetoed`, and gives a summary
    `gate.focus`.
    """

    hooks: CompactionHooks
    conversation: Hashable | None
    automatic: bool
    reason: CompactionReason
    context_window: int
    mode: Mode
    focus: str | None = None
    """The focus the summary gets: the manual compaction's, or the one the hook gave."""
    asked: bool = False
    """Whether the call decided already (the hook was asked, or there is none to ask)."""
    vetoed: bool = False
    """Whether the before-hook vetoed the compaction."""
    tokens_before: int | None = None
    """The history's tokens when the hook was asked."""
    changed: list[str] = field(default_factory=list)
    """The compacting steps (`HistoryProcessor.compacts`) that changed the history, in order."""
    _given: tuple[Sequence[Message], ProcessContext] | None = field(default=None, repr=False)

    def start(self, messages: Sequence[Message], ctx: ProcessContext) -> None:
        """The history the compacting steps are given, and its context: what the event measures."""
        self._given = (messages, ctx)

    def ask(self, step: str) -> HookCall | None:
        """The before-hook's call for `step`, the first step about to compact; `None` when the call
        decided already or there is no before-hook (the compaction proceeds)."""
        if self.asked:
            return None
        self.asked = True
        self.tokens_before = self._tokens()
        if self.hooks.before is None:
            return None
        event = BeforeCompaction(**self._event_fields(self.tokens_before), step=step)
        return HookCall("before_compaction", self.hooks.before, event)

    def answer(self, answer: object) -> None:
        """Apply what the before-hook returned: `None`/`True` proceed, `False` vetoes,
        `AdjustCompaction` changes the focus; anything else raises `ArgumentTypeError`."""
        if answer is None or answer is True:
            return
        if answer is False:
            self.vetoed = True
            return
        if isinstance(answer, AdjustCompaction):
            self.focus = answer.focus
            return
        assert self.hooks.before is not None
        raise ArgumentTypeError(
            f"the before_compaction hook {hook_name(self.hooks.before)} returned {answer!r}: return "
            "None (or True) to proceed, False to veto, or AdjustCompaction(focus=...) to change the focus"
        )

    def check_fits(self, out: Sequence[Message]) -> None:
        """After a veto: `CompactionVetoedError` when the history `out` the call was left with
        does not fit the window."""
        assert self._given is not None, "CompactionGate.start was not called"
        ctx = self._given[1]
        tokens = sum(ctx.counter.count_message(m) for m in out) + ctx.reported_offset
        if self.vetoed and tokens > self.context_window:
            assert self.hooks.before is not None
            raise CompactionVetoedError(
                f"the before_compaction hook {hook_name(self.hooks.before)} vetoed the compaction of a "
                f"history of {tokens:,} tokens, over the {self.context_window:,}-token context window "
                f"(conversation {self.conversation!r}): the request would be refused as too long. "
                "Let the compaction proceed when the history no longer fits."
            )

    def after(
        self, given: Sequence[Message], out: Sequence[Message], steps: Sequence[Any]
    ) -> HookCall | None:
        """The after-hook's call for a compaction that turned `given` into `out` in `steps` (the
        `StepReport`s); `None` without an after-hook, or when no compacting step changed the
        history (a veto, or only a step that shapes what arrives)."""
        if self.hooks.after is None or self.vetoed or not self.changed:
            return None
        old = {id(m) for m in given}
        summaries = [p.text for m in out if id(m) not in old for p in m.parts if isinstance(p, SummaryPart)]
        event = AfterCompaction(
            **self._event_fields(steps[0].tokens_before if steps else self._tokens()),
            steps=tuple(self.changed),
            tokens_after=steps[-1].tokens_after if steps else self._tokens(),
            markers=tuple(m for s in steps for m in s.notes.markers),
            summary=summaries[-1] if summaries else None,
        )
        return HookCall("after_compaction", self.hooks.after, event)

    def _event_fields(self, tokens_before: int) -> dict[str, Any]:
        """What both events say about this call's compaction."""
        return {
            "conversation": self.conversation,
            "automatic": self.automatic,
            "reason": self.reason,
            "mode": self.mode,
            "context_window": self.context_window,
            "tokens_before": tokens_before,
            "focus": self.focus,
        }

    def _tokens(self) -> int:
        assert self._given is not None, "CompactionGate.start was not called"
        messages, ctx = self._given
        return sum(ctx.counter.count_message(m) for m in messages) + ctx.reported_offset
