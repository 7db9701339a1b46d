"""Compact and retry: what the integrations do when the provider says the request is too long.

historykit budgets with the window it is given (or the model profile's, or a default). When that is
larger than what the provider accepts (a wrong profile, tool definitions, another tokenizer), the
model call fails with the provider's context-length error. The integrations then compact harder and
retry once (`HistoryKit` for Pydantic AI, `HistoryKitMiddleware` for LangChain):

- `context_overflow(error)` recognises the error, whichever way it arrives: Pydantic AI's
  `ModelHTTPError` (status 400, its body; `ModelContextWindowExceededError` where Pydantic AI
  classifies it), LangChain's `ContextOverflowError`, or the `anthropic` / `openai` SDKs'
  `BadRequestError`, by the providers' wordings (Anthropic `prompt is too long: N tokens > M
  maximum`; OpenAI `context_length_exceeded`, "maximum context length", "exceeds the context
  window"). This module is the one place that knows them.
- `OverflowRetry` runs the pipeline again on the same input with a smaller window: the provider's
  maximum when the error states it (scaled to historykit's count when the provider counted more),
  else `RETRY_FRACTION` of the window or the refused request's size, the smaller (`retry_window`).
  The retry is a compaction: its report has an
  `OverflowRetry` step with a `CompactionMarker(strategy="overflow-retry")`, and it is an
  OpenTelemetry span, `historykit.overflow_retry` (`historykit.telemetry`).

The smaller window then stays with the conversation (`OverflowRetry.windows`), so later calls
continue from the retried view and stay append-only between compactions. In view-only mode the
retried view is the replay of the failed call alone at the smaller window, from the view the
previous call had (what persistent mode does with the same input), and the pipeline remembers it
(`Pipeline.remember_view`) so the replay of later calls continues from it; earlier calls are not
replayed at the smaller window, which would change views the model already answered, thinking
bound to them included. The windows are kept in memory: a new process budgets with the configured
window again, and retries again if the provider still refuses.

A second context-length error is not retried: it reaches the caller as raised.

Example:
    ```python
    from historykit.plugins.langchain import context_overflow   # the same in historykit.plugins.pydantic_ai

    try:
        response = model.invoke(messages)
    except Exception as error:
        overflow = context_overflow(error)   # None: not a context-length error
        if overflow is None:
            raise
        overflow.maximum                     # e.g. 12000, when the provider states it
    ```
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from historykit.binding import history_binds_thinking
from historykit.context_window import ContextWindow
from historykit.messages import CompactionMarker, Message
from historykit.pipeline import Pipeline, PipelineResult, Report, StepNotes, StepReport
from historykit.telemetry import RETRY_SPAN_NAME, pipeline_span
from historykit.view import Mode, request_points

__all__ = [
    "RETRY_FRACTION",
    "RETRY_STEP",
    "RETRY_WINDOW_SOURCE",
    "ContextOverflow",
    "OverflowRetry",
    "context_overflow",
]

RETRY_STEP = "OverflowRetry"
"""The report's name for the step that says a call was compacted again after a context overflow."""
RETRY_WINDOW_SOURCE = "overflow retry"
"""The report's `window_source` for a window that a context overflow shrank."""
RETRY_FRACTION = 0.6
"""The share of the window the retry budgets for when the error does not state the maximum."""

# Anthropic: `prompt is too long: 12345 tokens > 12000 maximum`.
_ANTHROPIC = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")
# OpenAI Chat Completions: `This model's maximum context length is M tokens. However, your messages
# resulted in N tokens.` (older wordings say "you requested N tokens").
_OPENAI = re.compile(
    r"maximum context length is (\d+) tokens\. However, (?:your messages resulted in|you requested) (\d+)"
)
# Any wording without figures (OpenAI Responses: "Your input exceeds the context window of this model").
_ANY = re.compile(
    r"prompt is too long|context_length_exceeded|maximum context length|exceeds the context window",
    re.IGNORECASE,
)
# Classes that mean a context overflow by themselves, by (module prefix, name): matched on the MRO so
# that no framework is imported to recognise its error.
_OVERFLOW_CLASSES = (
    ("langchain_core.", "ContextOverflowError"),
    ("pydantic_ai.", "ModelContextWindowExceededError"),
)


@dataclass(frozen=True)
class ContextOverflow:
    """A provider's context-length error, as `context_overflow` read it."""

    message: str
    """The provider's message (or the error's text)."""
    tokens: int | None = None
    """The request's size as the provider counted it, when the error says."""
    maximum: int | None = None
    """The provider's maximum input, when the error says."""


def context_overflow(error: BaseException) -> ContextOverflow | None:
    """The context-length error `error` reports, or `None` when it is another error.

    Recognised: an error class that means it (LangChain's `ContextOverflowError`, Pydantic AI's
    `ModelContextWindowExceededError`), or an HTTP 400 (`status_code`, as Pydantic AI's
    `ModelHTTPError` and the SDKs' `BadRequestError` carry it) whose message or body has a
    provider's context-length wording.
    """
    by_class = any(
        klass.__module__.startswith(module) and klass.__name__ == name
        for klass in type(error).__mro__
        for module, name in _OVERFLOW_CLASSES
    )
    if not by_class and getattr(error, "status_code", None) != 400:
        return None
    text = _error_text(error)
    found = _ANTHROPIC.search(text)
    if found is not None:
        return ContextOverflow(found.group(0), tokens=int(found.group(1)), maximum=int(found.group(2)))
    found = _OPENAI.search(text)
    if found is not None:
        return ContextOverflow(found.group(0), tokens=int(found.group(2)), maximum=int(found.group(1)))
    found = _ANY.search(text)
    if found is not None or by_class:
        message = getattr(error, "message", None)
        return ContextOverflow(message if isinstance(message, str) and message else str(error))
    return None


def _error_text(error: BaseException) -> str:
    parts = [str(error)]
    message = getattr(error, "message", None)
    if isinstance(message, str):
        parts.append(message)
    body = getattr(error, "body", None)
    if body is not None:
        parts.append(body if isinstance(body, str) else json.dumps(body, default=str))
    return "\n".join(parts)


def retry_window(overflow: ContextOverflow, window: int, sent_tokens: int) -> int:
    """The window the retry budgets for, given the one the refused call used and its size.

    The provider's maximum when the error states one below `window`, in historykit's measure (the
    provider also counts tool definitions and uses its own tokenizer: its maximum is scaled by how
    much more it counted than historykit did). Otherwise `RETRY_FRACTION` of `window`, or the
    refused request's own size (`sent_tokens`, historykit's count) when that is smaller: the
    provider's window is below it, so a window of that size makes the triggers fire.
    """
    if overflow.maximum is not None and overflow.maximum < window:
        target = overflow.maximum
        if overflow.tokens and 0 < sent_tokens < overflow.tokens:
            target = target * sent_tokens // overflow.tokens
    else:
        target = int(window * RETRY_FRACTION)
        if sent_tokens > 0:
            target = min(target, sent_tokens)
    return max(1, min(target, window - 1))


@dataclass(frozen=True)
class _Run:
    """One pipeline run a retry needs: the arguments of `Pipeline.run` / `arun`."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class _Plan:
    """One retry, worked out before the pipeline runs again."""

    overflow: ContextOverflow
    window: int
    neutral: list[Message]
    binds: bool
    previous_call: int
    """In view-only mode, where the raw history's previous model call is (0: none)."""


@dataclass
class OverflowRetry:
    """Compact-and-retry for one integration: the retry itself and the windows conversations shrank to.

    Example:
        ```python
        retry = OverflowRetry()
        window = retry.window(thread_id, configured)          # the shrunk window once a call overflowed
        try:
            response = call_model(view)
        except Exception as error:
            result = retry.recompact(pipeline, messages, error, conversation=thread_id, window=window,
                                     mode="view", binds_thinking=None, rejected=view)
            if result is None:
                raise                                          # not a context-length error
            response = call_model(result.messages)             # a second failure propagates
        ```
    """

    windows: dict[Hashable, int] = field(default_factory=dict)
    """The window each conversation shrank to after a context overflow (by thread or conversation id)."""

    def window(self, conversation: Hashable, configured: ContextWindow) -> ContextWindow:
        """The window a conversation's next call budgets for: the configured one, unless an overflow
        shrank it."""
        shrunk = self.windows.get(conversation)
        if shrunk is None or shrunk >= configured.tokens:
            return configured
        return ContextWindow(shrunk, RETRY_WINDOW_SOURCE)

    def _plan(
        self,
        messages: Sequence[Any],
        error: BaseException,
        window: ContextWindow,
        binds_thinking: bool | None,
        rejected_tokens: int,
    ) -> _Plan | None:
        overflow = context_overflow(error)
        if overflow is None:
            return None
        from historykit.frameworks import adapter_for

        neutral = adapter_for(messages).to_neutral(messages)
        # Decided once for the whole retry: the view it seeds and the views it replays must agree.
        binds = history_binds_thinking(neutral) if binds_thinking is None else binds_thinking
        points = request_points(neutral)
        previous = points[-2] if len(points) > 1 else 0
        return _Plan(
            overflow, retry_window(overflow, window.tokens, rejected_tokens), neutral, binds, previous
        )

    def recompact(
        self,
        pipeline: Pipeline,
        messages: Sequence[Any],
        error: BaseException,
        *,
        conversation: Hashable,
        window: ContextWindow,
        mode: Mode,
        binds_thinking: bool | None,
        rejected: Sequence[Any],
    ) -> PipelineResult | None:
        """The call's view again, for a smaller window; `None` when `error` is not a context overflow.

        `messages` is the input of the rejected call (the previous view plus what is new, or in
        view-only mode the raw history), `rejected` the messages it sent, `window` the window it
        used. Remembers the smaller window for `conversation`.
        """
        retry = self._retry(pipeline, messages, error, conversation, window, mode, binds_thinking, rejected)
        try:
            run = next(retry)
            while True:
                run = retry.send(pipeline.run(*run.args, **run.kwargs))
        except StopIteration as done:
            return cast("PipelineResult | None", done.value)

    async def arecompact(
        self,
        pipeline: Pipeline,
        messages: Sequence[Any],
        error: BaseException,
        *,
        conversation: Hashable,
        window: ContextWindow,
        mode: Mode,
        binds_thinking: bool | None,
        rejected: Sequence[Any],
    ) -> PipelineResult | None:
        """`recompact` from async code: the pipeline runs with `arun` (an async summarizer is awaited)."""
        retry = self._retry(pipeline, messages, error, conversation, window, mode, binds_thinking, rejected)
        try:
            run = next(retry)
            while True:
                run = retry.send(await pipeline.arun(*run.args, **run.kwargs))
        except StopIteration as done:
            return cast("PipelineResult | None", done.value)

    def _retry(
        self,
        pipeline: Pipeline,
        messages: Sequence[Any],
        error: BaseException,
        conversation: Hashable,
        window: ContextWindow,
        mode: Mode,
        binds_thinking: bool | None,
        rejected: Sequence[Any],
    ) -> Generator[_Run, PipelineResult, PipelineResult | None]:
        """The retry written once: it yields each pipeline run it needs and is sent the result, which
        `recompact` gets from `run` and `arecompact` from `arun`."""
        rejected_tokens = _tokens(pipeline, rejected)
        plan = self._plan(messages, error, window, binds_thinking, rejected_tokens)
        if plan is None:
            return None
        with pipeline_span(RETRY_SPAN_NAME) as record:
            if mode == "view" and plan.previous_call:
                earlier = plan.neutral[: plan.previous_call]
                previous = yield _Run(
                    (earlier, window.tokens), {"mode": "view", "binds_thinking": plan.binds}
                )
                pipeline.remember_view(earlier, previous.messages, plan.window, binds_thinking=plan.binds)
            result = yield _Run(
                (plan.neutral if mode == "view" else messages, plan.window),
                {"window_source": RETRY_WINDOW_SOURCE, "mode": mode, "binds_thinking": plan.binds},
            )
            retried = self._finish(
                plan, messages, rejected, rejected_tokens, result, conversation, window, mode
            )
            record(retried.report)
            return retried

    def _finish(
        self,
        plan: _Plan,
        messages: Sequence[Any],
        rejected: Sequence[Any],
        rejected_tokens: int,
        result: PipelineResult,
        conversation: Hashable,
        window: ContextWindow,
        mode: Mode,
    ) -> PipelineResult:
        from historykit.frameworks import adapter_for

        retried = result.messages
        if mode == "view":
            # The replay ran on neutral messages: the request needs the framework's own.
            retried = adapter_for(messages).to_native(retried) if messages else list(retried)
        before = adapter_for(rejected).to_neutral(rejected)
        after = adapter_for(retried).to_neutral(retried)
        changed_at = next(
            (i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after))
        )
        marker = CompactionMarker(
            covered_from=changed_at,
            covered_to=len(before),
            tokens_before=rejected_tokens,
            tokens_after=result.report.tokens_after,
            strategy="overflow-retry",
            automatic=True,
        )
        notes = StepNotes(markers=[marker])
        notes.details.append(
            f"the provider refused the request as too long ({plan.overflow.message}): compacted again "
            f"for a window of {plan.window:,} tokens instead of {window.tokens:,}, and retried once"
        )
        step = StepReport(
            RETRY_STEP, rejected_tokens, result.report.tokens_after, len(before), len(after), notes
        )
        self.windows[conversation] = plan.window
        report: Report = replace(result.report, steps=(*result.report.steps, step))
        return PipelineResult(list(retried), report)


def _tokens(pipeline: Pipeline, messages: Sequence[Any]) -> int:
    from historykit.frameworks import adapter_for

    return sum(pipeline.counter.count_message(m) for m in adapter_for(messages).to_neutral(messages))
