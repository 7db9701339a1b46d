"""OpenTelemetry: a span for every pipeline call, with the report's figures.

When `opentelemetry-api` is installed (the `otel` extra; Pydantic AI and Logfire bring it along),
each `Pipeline.run`/`arun` is one span named `historykit.pipeline`, a child of the span that is
current: Pydantic AI's agent run and model request spans (Logfire, `Agent.instrument_all()`),
LangChain's or your own. Without the package nothing is imported and nothing is recorded; with it
but no tracer provider configured, the API's no-op tracer records nothing either.

The span's attributes (all under `historykit.`):

| attribute | |
|---|---|
| `tokens_before`, `tokens_after` | the history given, and what the call sends |
| `context_window`, `window_source` | the window budgeted for, and where it came from |
| `used_fraction_before`, `used_fraction` | the two above over the window |
| `messages_before`, `messages_after` | message counts |
| `steps` | the processors that changed something, in order |
| `strategies` | the strategies of the compaction markers written (`summarize`, `truncate`, ...) |
| `replayed_calls` | model calls replayed to derive the view (view-only mode) |
| `thinking_dropped.blocks`, `thinking_dropped.tokens` | thinking dropped on a binding model |
| `warnings` | the kinds of the usage warnings given (`historykit.UsageWarning`) |
| `tokenizer` | how tokens were counted |

A compact-and-retry after a context overflow is a span of its own, `historykit.overflow_retry`,
with the same attributes for the retry's report (its strategies include `overflow-retry`) and the
pipeline span of the harder compaction inside it.

Each compaction marker is also a span event, `historykit.compaction` (strategy, covered range,
tokens before and after, model, automatic, the focus of a manual one), and each usage warning one,
`historykit.warning`.
Logfire shows the span with a one-line message (`logfire.msg`). An exception raised by a processor
is recorded on the span, which then ends with an error status, and propagates.

Example:
    ```python
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    historykit.default_pipeline().run(messages)   # one `historykit.pipeline` span
    ```
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from historykit._pipeline import Report


SPAN_NAME = "historykit.pipeline"
"""The name of the span of every pipeline call."""
RETRY_SPAN_NAME = "historykit.overflow_retry"
"""The name of the span of a compact-and-retry after a context overflow (`historykit.plugins._overflow`):
it holds the pipeline's span of the harder compaction, and the report with the `OverflowRetry` step."""


@lru_cache(maxsize=1)
def available() -> bool:
    """True when `opentelemetry-api` is installed (looked up once, without importing it)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):  # a namespace package without the API
        return False


def _tracer() -> Any:
    if not available():
        return None
    from opentelemetry import trace

    from historykit import __version__

    # Asked for on every call: the global provider may be set after historykit was imported
    # (the API's proxy tracer handles that too, but a cached tracer would outlive a provider swap).
    return trace.get_tracer("historykit", __version__)


def _ignore(report: Report) -> None:
    return None


@contextmanager
def pipeline_span(name: str = SPAN_NAME) -> Iterator[Callable[[Report], None]]:
    """A span around one pipeline call (or a compact-and-retry, `RETRY_SPAN_NAME`); the call hands
    its report to the function this yields."""
    tracer = _tracer()
    if tracer is None:
        yield _ignore
        return
    with tracer.start_as_current_span(name) as span:
        yield lambda report: _record(span, report) if span.is_recording() else None


def _record(span: Any, report: Report) -> None:
    blocks, thinking_tokens = report.thinking_dropped
    attributes: dict[str, Any] = {
        "historykit.tokens_before": report.tokens_before,
        "historykit.tokens_after": report.tokens_after,
        "historykit.context_window": report.context_window,
        "historykit.window_source": report.window_source,
        "historykit.used_fraction_before": round(report.used_fraction_before, 4),
        "historykit.used_fraction": round(report.used_fraction, 4),
        "historykit.messages_before": report.steps[0].messages_before if report.steps else 0,
        "historykit.messages_after": report.steps[-1].messages_after if report.steps else 0,
        "historykit.steps": [s.processor for s in report.steps if s.changed],
        "historykit.strategies": [m.strategy for m in report.markers],
        "historykit.replayed_calls": report.replayed_calls,
        "historykit.thinking_dropped.blocks": blocks,
        "historykit.thinking_dropped.tokens": thinking_tokens,
        "historykit.warnings": [w.kind for w in report.warnings],
        "historykit.tokenizer": report.tokenizer,
        "logfire.msg": _message(report),
    }
    span.set_attributes(attributes)
    for marker in report.markers:
        event: dict[str, Any] = {
            "historykit.strategy": marker.strategy,
            "historykit.covered_from": marker.covered_from,
            "historykit.covered_to": marker.covered_to,
            "historykit.tokens_before": marker.tokens_before,
            "historykit.tokens_after": marker.tokens_after,
            "historykit.automatic": marker.automatic,
        }
        if marker.model is not None:
            event["historykit.model"] = marker.model
        if marker.focus is not None:
            event["historykit.focus"] = marker.focus
        span.add_event("historykit.compaction", event)
    for warning in report.warnings:
        span.add_event(
            "historykit.warning",
            {
                "historykit.kind": warning.kind,
                "historykit.used_fraction": round(warning.used_fraction, 4),
                "historykit.mark": warning.mark,
                "message": warning.message,
            },
        )


def _message(report: Report) -> str:
    what = ", ".join(dict.fromkeys(m.strategy for m in report.markers)) or (
        "edited" if report.changed else "unchanged"
    )
    return (
        f"historykit: {report.tokens_before:,} → {report.tokens_after:,} tokens "
        f"({report.used_fraction:.0%} of {report.context_window:,}), {what}"
    )
