"""OpenTelemetry spans of the pipeline, through real agents in both frameworks.

Recorded with the OpenTelemetry SDK's in-memory exporter (the `dev` extra has `opentelemetry-sdk`;
without it these tests skip, saying so). A Pydantic AI agent instrumented as Logfire instruments it
(`instrument=True`) gets one `historykit.pipeline` span per model request, inside the agent's own
spans; a LangChain `create_agent` graph run inside an application's span gets them there. Each span
carries its report's figures, each compaction marker is a span event, each usage warning too. Without
`opentelemetry-api` installed, nothing is imported and the pipeline runs as before.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import historykit
from historykit import Report
from historykit._telemetry import SPAN_NAME
from historykit.processors import ClearToolResults, PairwiseTruncate, Repair, Summarize
from historykit.processors._trigger import Trigger
from tests.plugins.test_presets_warnings_gauge import langchain_run, pydantic_ai_run, spec

pytest.importorskip("opentelemetry.trace", reason="needs opentelemetry-api (the otel extra)")

_EXPORTER: Any = None
PYDANTIC_AI_2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")


@pytest.fixture
def spans() -> Iterator[Any]:
    """The spans recorded during the test (the SDK's in-memory exporter on the global provider)."""
    pytest.importorskip(
        "opentelemetry.sdk.trace", reason="needs opentelemetry-sdk (the dev extra) to record spans"
    )
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    global _EXPORTER
    if _EXPORTER is None:
        # The global provider can be set once per process: this module sets it, once.
        provider = TracerProvider()
        _EXPORTER = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def ours(exporter: Any) -> list[Any]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name == SPAN_NAME), key=lambda s: s.start_time
    )


def assert_span_has_the_reports_figures(span: Any, report: Report) -> None:
    a = span.attributes
    assert a["historykit.tokens_before"] == report.tokens_before
    assert a["historykit.tokens_after"] == report.tokens_after
    assert a["historykit.context_window"] == report.context_window
    assert a["historykit.window_source"] == report.window_source
    assert a["historykit.used_fraction"] == round(report.tokens_after / report.context_window, 4)
    assert a["historykit.used_fraction_before"] == round(report.tokens_before / report.context_window, 4)
    assert list(a["historykit.steps"]) == [s.processor for s in report.steps if s.changed]
    assert list(a["historykit.strategies"]) == [m.strategy for m in report.markers]
    assert a["historykit.replayed_calls"] == report.replayed_calls
    assert (a["historykit.thinking_dropped.blocks"], a["historykit.thinking_dropped.tokens"]) == (
        report.thinking_dropped
    )
    assert list(a["historykit.warnings"]) == [w.kind for w in report.warnings]
    assert a["logfire.msg"].startswith(
        f"historykit: {report.tokens_before:,} → {report.tokens_after:,} tokens"
    )
    compactions = [e for e in span.events if e.name == "historykit.compaction"]
    assert [e.attributes["historykit.strategy"] for e in compactions] == [m.strategy for m in report.markers]
    for event, marker in zip(compactions, report.markers):
        assert event.attributes["historykit.tokens_before"] == marker.tokens_before
        assert event.attributes["historykit.tokens_after"] == marker.tokens_after
        assert event.attributes["historykit.covered_to"] == marker.covered_to
    warnings = [e for e in span.events if e.name == "historykit.warning"]
    assert [e.attributes["historykit.kind"] for e in warnings] == [w.kind for w in report.warnings]


WINDOW = 8_000


def summarizing() -> historykit.Pipeline:
    """A pipeline that summarizes (and writes markers) within a few calls of a small window."""
    return historykit.Pipeline(
        [
            Summarize(trigger=Trigger(max_fraction=0.5)),
            PairwiseTruncate(trigger=Trigger(max_fraction=0.9)),
            Repair(),
        ]
    )


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_pydantic_ai_agent_spans_hold_a_pipeline_span_per_request(spans: Any, persist: bool) -> None:
    from historykit.plugins.pydantic_ai import HistoryKit

    reports: list[Report] = []
    kit = HistoryKit(summarizing(), context_window=WINDOW, persist=persist, on_report=reports.append)
    received = pydantic_ai_run(kit, turns=30, lines=25, instrument=True)
    mine = ours(spans)
    assert len(mine) == len(reports) == len(received) == 31
    for span, report in zip(mine, reports):
        assert_span_has_the_reports_figures(span, report)
    assert any(r.markers for r in reports), "the run wrote no compaction marker"
    # Each one nests in the agent's own spans (as Logfire shows them), in the agent run's trace.
    agent_spans = {s.context.span_id: s for s in spans.get_finished_spans() if s.name != SPAN_NAME}
    (run,) = [s for s in agent_spans.values() if s.parent is None]
    for span in mine:
        assert span.parent is not None and span.parent.span_id in agent_spans
        assert span.context.trace_id == run.context.trace_id
        if PYDANTIC_AI_2:  # inside the model request's span (`chat <model>`) it processed the history for
            assert agent_spans[span.parent.span_id].name.startswith("chat ")


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_langchain_agent_pipeline_spans_nest_in_the_applications_span(spans: Any, persist: bool) -> None:
    from opentelemetry import trace

    from historykit.plugins.langchain import HistoryKitMiddleware

    reports: list[Report] = []
    middleware = HistoryKitMiddleware(
        summarizing(), context_window=WINDOW, persist=persist, on_report=reports.append
    )
    with trace.get_tracer("my-app").start_as_current_span("handle request") as request:
        inputs = langchain_run(middleware, turns=30, lines=25)
    mine = ours(spans)
    assert len(mine) == len(reports) == len(inputs) == 31
    for span, report in zip(mine, reports):
        assert_span_has_the_reports_figures(span, report)
        assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
    assert any(r.markers for r in reports), "the run wrote no compaction marker"


@pytest.mark.parametrize("framework", ["pydantic-ai", "langchain"])
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_a_clearing_is_a_marker_of_the_report_and_an_event_of_the_span(
    spans: Any, framework: str, persist: bool
) -> None:
    """A pipeline that only clears tool results: each clearing is in its call's report markers and a
    `historykit.compaction` event of its span (issue 24: the markers were empty, so no event)."""
    from historykit.plugins.langchain import HistoryKitMiddleware
    from historykit.plugins.pydantic_ai import HistoryKit

    clearing = historykit.Pipeline(
        [ClearToolResults(keep=2, min_gain=200, trigger=Trigger(max_fraction=0.5)), Repair()]
    )
    reports: list[Report] = []
    if framework == "pydantic-ai":
        pydantic_ai_run(
            HistoryKit(clearing, context_window=WINDOW, persist=persist, on_report=reports.append), 12, 25
        )
    else:
        middleware = HistoryKitMiddleware(
            clearing, context_window=WINDOW, persist=persist, on_report=reports.append
        )
        langchain_run(middleware, turns=12, lines=25)
    strategies = {m.strategy for r in reports for m in r.markers}
    assert strategies == {"clear_tool_results"}, strategies
    mine = ours(spans)
    assert len(mine) == len(reports)
    for span, report in zip(mine, reports):
        assert_span_has_the_reports_figures(span, report)
    events = [e for span in mine for e in span.events if e.name == "historykit.compaction"]
    assert events and all(e.attributes["historykit.strategy"] == "clear_tool_results" for e in events)


@pytest.mark.parametrize("framework", ["pydantic-ai", "langchain"])
def test_a_usage_warning_is_a_span_event_of_the_call_that_gave_it(spans: Any, framework: str) -> None:
    """A pinned specification over the window: the first call warns `over-window`, the others don't."""
    from pydantic_ai.messages import TextContent

    reports: list[Report] = []
    pipeline = historykit.default_pipeline(on_report=reports.append)
    if framework == "pydantic-ai":
        from historykit.plugins.pydantic_ai import HistoryKit

        prompt = [historykit.pin(TextContent(spec(4_400))), "Read the modules under src/."]
        pydantic_ai_run(HistoryKit(pipeline, context_window=4_000), turns=4, lines=10, prompt=prompt)
    else:
        from langchain_core.messages import HumanMessage

        from historykit.plugins.langchain import HistoryKitMiddleware

        first = [historykit.pin(HumanMessage(spec(4_400), id="spec")), HumanMessage("Read the files.")]
        langchain_run(HistoryKitMiddleware(pipeline, context_window=4_000), turns=4, lines=10, first=first)
    mine = ours(spans)
    assert len(mine) == len(reports) == 5
    assert [list(s.attributes["historykit.warnings"]) for s in mine] == [["over-window"], [], [], [], []]
    (event,) = [e for e in mine[0].events if e.name == "historykit.warning"]
    assert event.attributes["historykit.mark"] == 1.0
    assert event.attributes["message"] == reports[0].warnings[0].message
    for span, report in zip(mine, reports):
        assert_span_has_the_reports_figures(span, report)


def test_a_processor_error_ends_the_span_with_an_error_and_propagates(spans: Any) -> None:
    from opentelemetry.trace import StatusCode

    from historykit._pipeline import HistoryProcessor, ProcessContext, StepNotes

    class Broken(HistoryProcessor):
        def process(self, messages: list[Any], ctx: ProcessContext) -> tuple[list[Any], StepNotes]:
            raise RuntimeError("the summarizer's credentials expired")

    with pytest.raises(RuntimeError, match="credentials expired"):
        historykit.Pipeline([Broken()]).run([historykit.Message.user("Fix the bug.")], context_window=8_000)
    (span,) = ours(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert any(e.name == "exception" for e in span.events)


def test_without_opentelemetry_nothing_is_imported(tmp_path: Path) -> None:
    """In a process where `opentelemetry` cannot be imported, the pipeline runs and imports none of it."""
    code = textwrap.dedent(
        """
        import sys
        from importlib.abc import MetaPathFinder

        class NoOpenTelemetry(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(name)
                return None

        sys.meta_path.insert(0, NoOpenTelemetry())
        import historykit
        from historykit import _telemetry as telemetry

        task = [historykit.Message.user("Fix the bug.")]
        result = historykit.default_pipeline().run(task, context_window=8_000)
        assert result.report.tokens_after > 0
        assert not telemetry.available()
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], sorted(sys.modules)
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("framework", ["pydantic-ai", "langchain"])
async def test_a_compact_and_retry_is_a_span_holding_the_harder_compaction(
    spans: Any, framework: str, persist: bool
) -> None:
    """The provider emulator refuses the first call over its real window (`prompt is too long`): the
    retry is a `historykit.overflow_retry` span with the retry's report (its `overflow-retry`
    marker an event), and the pipeline span of the harder compaction inside it."""
    from historykit._telemetry import RETRY_SPAN_NAME
    from historykit.plugins._overflow import RETRY_STEP
    from tests.plugins.test_overflow_retry import BINDING, CONFIGURED, _emulator, _lc_agent, _pai_agent

    emulator = _emulator(BINDING)
    reports: list[Report] = []
    pipeline = historykit.default_pipeline()
    if framework == "pydantic-ai":
        from historykit.plugins.pydantic_ai import HistoryKit

        kit = HistoryKit(pipeline, context_window=CONFIGURED, persist=persist, on_report=reports.append)
        assert (await _pai_agent(emulator, BINDING, kit).run("Read the files.")).output == "All done."
    else:
        from historykit.plugins.langchain import HistoryKitMiddleware

        middleware = HistoryKitMiddleware(
            pipeline, context_window=CONFIGURED, persist=persist, on_report=reports.append
        )
        agent = _lc_agent(emulator, BINDING, middleware)
        state = await agent.ainvoke({"messages": [{"role": "user", "content": "Read the files."}]})
        assert state["messages"][-1].text == "All done."
    assert len(emulator.rejected) == 1
    (retry_report,) = [r for r in reports if any(s.processor == RETRY_STEP for s in r.steps)]
    finished = spans.get_finished_spans()
    (retry,) = [s for s in finished if s.name == RETRY_SPAN_NAME]
    assert_span_has_the_reports_figures(retry, retry_report)
    assert "overflow-retry" in retry.attributes["historykit.strategies"]
    inner = [
        s for s in finished if s.name == SPAN_NAME and s.parent and s.parent.span_id == retry.context.span_id
    ]
    assert inner and inner[-1].attributes["historykit.window_source"] == "overflow retry"
    # Every other call is one pipeline span outside any retry.
    outside = [s for s in finished if s.name == SPAN_NAME and s not in inner]
    assert len(outside) == len(reports) - 1
