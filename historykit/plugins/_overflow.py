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
- `recompact` / `arecompact` run the pipeline again on the same input with a smaller window: the
  provider's maximum when the error states it (scaled to historykit's count when the provider
  counted more), else `RETRY_FRACTION` of the window or the refused request's size, the smaller
  (`retry_window`). The retry is a compaction: its report has an `OverflowRetry` step with a
  `CompactionMarker(strategy="overflow-retry")`, and it is an OpenTelemetry span,
  `historykit.overflow_retry` (`historykit._telemetry`).

The smaller window then stays with the conversation (`ConversationState.window`,
`historykit._conversations`; `shrunk_window` applies it), so later calls continue from the retried
view and stay append-only between compactions. In view-only mode the retried view is the replay of
the failed call alone at the smaller window, from the view the previous call had (what persistent
mode does with the same input), and the pipeline remembers it for the conversation so the replay
of later calls continues from it; earlier calls are not replayed at the smaller window, which would
change views the model already answered, thinking bound to them included. The conversation state
is kept in memory: the LangChain middleware also keeps the window in the graph state, so a new
process budgets for it at once; elsewhere a new process budgets with the configured window again,
and retries again if the provider still refuses.

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
from collections.abc import Generator
from dataclasses import dataclass, replace

from historykit._binding import history_binds_thinking
from historykit._context_window import ContextWindow
from historykit._conversations import ConversationState
from historykit._hooks import NO_HOOKS
from historykit._messages import CompactionMarker, Message
from historykit._pipeline import Call, Pipeline, PipelineResult, Report, StepNotes, StepReport
from historykit._plans import adrive, drive
from historykit._telemetry import RETRY_SPAN_NAME, pipeline_span
from historykit._view import request_points

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


def shrunk_window(state: ConversationState, configured: ContextWindow) -> ContextWindow:
    """The window a conversation's next call budgets for: the configured one, unless an overflow
    shrank it."""
    shrunk = state.window
    if shrunk is None or shrunk >= configured.tokens:
        return configured
    return ContextWindow(shrunk, RETRY_WINDOW_SOURCE)


def recompact(
    pipeline: Pipeline, messages: list[Message], error: BaseException, call: Call, rejected: list[Message]
) -> PipelineResult[Message] | None:
    """The call's view again, for a smaller window; `None` when `error` is not a context overflow.

    `messages` is the input of the rejected call (the previous view plus what is new, or in
    view-only mode the raw history), `rejected` the messages it sent, `call` what it was; all
    neutral, as the integration converted them. Keeps the smaller window with the conversation.

    Example:
        ```python
        try:
            response = call_model(view)
        except Exception as error:
            result = recompact(pipeline, neutral, error, call, rejected=sent)
            if result is None:
                raise                                          # not a context-length error
            response = call_model(adapter.to_native(result.messages))  # a second failure propagates
        ```
    """
    return drive(_retry(pipeline, messages, error, call, rejected), lambda run: pipeline.run_call(*run))


async def arecompact(
    pipeline: Pipeline, messages: list[Message], error: BaseException, call: Call, rejected: list[Message]
) -> PipelineResult[Message] | None:
    """`recompact` from async code: the pipeline runs with `arun_call` (an async summarizer is awaited)."""
    retry = _retry(pipeline, messages, error, call, rejected)
    return await adrive(retry, lambda run: pipeline.arun_call(*run))


def _retry(
    pipeline: Pipeline, messages: list[Message], error: BaseException, call: Call, rejected: list[Message]
) -> Generator[tuple[list[Message], Call], PipelineResult[Message], PipelineResult[Message] | None]:
    """The retry written once: it yields each pipeline call it needs and is sent the result, which
    `recompact` gets from `run_call` and `arecompact` from `arun_call`."""
    overflow = context_overflow(error)
    if overflow is None:
        return None
    rejected_tokens = sum(pipeline.counter.count_message(m) for m in rejected)
    window = retry_window(overflow, call.window.tokens, rejected_tokens)
    # Decided once for the whole retry: the view it seeds and the views it replays must agree.
    binds = history_binds_thinking(messages) if call.binds_thinking is None else call.binds_thinking
    smaller = replace(call, window=ContextWindow(window, RETRY_WINDOW_SOURCE), binds_thinking=binds)
    with pipeline_span(RETRY_SPAN_NAME) as record:
        points = request_points(messages)
        previous_call = points[-2] if len(points) > 1 else 0
        if call.mode == "view" and previous_call:
            earlier = messages[:previous_call]
            # The previous call's view, derived again: compacted (and its hooks called) already.
            previous = yield earlier, replace(call, binds_thinking=binds, manual=None, hooks=NO_HOOKS)
            pipeline.remember_neutral_view(earlier, previous.history, smaller)
        result = yield messages, replace(smaller, manual=None, overflow_retry=True)
        changed_at = next(
            (i for i, (a, b) in enumerate(zip(rejected, result.messages)) if a != b),
            min(len(rejected), len(result.messages)),
        )
        marker = CompactionMarker(
            covered_from=changed_at,
            covered_to=len(rejected),
            tokens_before=rejected_tokens,
            tokens_after=result.report.tokens_after,
            strategy="overflow-retry",
            automatic=True,
        )
        notes = StepNotes(markers=[marker])
        notes.details.append(
            f"the provider refused the request as too long ({overflow.message}): compacted again "
            f"for a window of {window:,} tokens instead of {call.window.tokens:,}, and retried once"
        )
        step = StepReport(
            RETRY_STEP,
            rejected_tokens,
            result.report.tokens_after,
            len(rejected),
            len(result.messages),
            notes,
        )
        pipeline.state_of(call).window = window
        report: Report = replace(result.report, steps=(*result.report.steps, step))
        record(report)
        return PipelineResult(result.messages, report, result.originals, result.kept)
