"""Presets, usage warnings, the used fraction and the gauge, through real agents in both frameworks:
a Pydantic AI `Agent` (`FunctionModel`) with the `HistoryKit` capability, and a LangChain
`create_agent` graph (a fake chat model) with `HistoryKitMiddleware`.

- Cline's preset compacts at `max(window − 40k, 0.8 · window)`: at 128,000 tokens the first
  compaction comes after the history passed 102,400 tokens, never in the 88,000-102,400 band where
  the tighter of the two marks would have fired.
- ChainReview's preset warns when what a call sends crosses 90% of the window, once per crossing,
  on the `historykit` logger, on the report and to `on_warning`; a call left over the window
  warns once for the whole run, not once per call.
- Every report has the used fraction, and the public gauge shows it as an `on_report` callback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from rich.console import Console

import historykit
from historykit import Gauge, Report, TokenCounter, UsageWarning, pin

pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from pydantic import Field
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.messages import TextContent
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.plugins.pydantic_ai import HistoryKit

COUNTER = TokenCounter()


def file_content(path: str, lines: int | tuple[int, ...]) -> str:
    """A source file; with a tuple of sizes, the n-th file (`src/mod{n}.py`) has `lines[n % len]` lines."""
    if isinstance(lines, tuple):
        lines = lines[int(path.removeprefix("src/mod").removesuffix(".py")) % len(lines)]
    return "\n".join(
        f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})  # step {i}" for i in range(lines)
    )


def spec(tokens: int) -> str:
    """A user's specification of about `tokens` tokens, which the user pins."""
    words, text = 0, ""
    while COUNTER.count_text(text) < tokens:
        text += " ".join(f"rule{words + k}: keep invariant {k % 7} intact." for k in range(40)) + "\n"
        words += 40
    return text


# --- the two agents ------------------------------------------------------------------------------


def pydantic_ai_run(
    kit: HistoryKit,
    turns: int,
    lines: int | tuple[int, ...],
    prompt: Any = "Read the modules under src/.",
    instrument: bool = False,
) -> list[list[pai.ModelMessage]]:
    """Runs an agent that reads `turns` files of `lines` lines, then answers; returns what the
    model received at each call. `instrument`: Pydantic AI's OpenTelemetry spans, as Logfire has them."""
    received: list[list[pai.ModelMessage]] = []

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        received.append(messages)
        n = len(received)
        if n > turns:
            return pai.ModelResponse([pai.TextPart("All files read.")])
        return pai.ModelResponse(
            [pai.ToolCallPart("read_file", {"path": f"src/mod{n}.py"}, tool_call_id=f"c{n}")]
        )

    options: dict[str, Any] = {"capabilities": [kit]}
    if instrument:
        try:  # 2.x: a capability; 1.x: `instrument=True`
            from pydantic_ai.capabilities import Instrumentation

            options["capabilities"] = [Instrumentation(), kit]
        except ImportError:
            options["instrument"] = True
    agent = Agent(FunctionModel(respond), **options)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path, lines)

    result = agent.run_sync(prompt, usage_limits=UsageLimits(request_limit=None))
    assert result.output == "All files read."
    return received


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools; it keeps every input it gets."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFakeModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.inputs.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def script(turns: int) -> Iterator[AIMessage]:
    for n in range(1, turns + 1):
        yield AIMessage(
            "", tool_calls=[{"id": f"c{n}", "name": "read_file", "args": {"path": f"src/mod{n}.py"}}]
        )
    yield AIMessage("All files read.")


def langchain_run(
    middleware: HistoryKitMiddleware,
    turns: int,
    lines: int | tuple[int, ...],
    first: list[BaseMessage] | None = None,
) -> list[list[BaseMessage]]:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path, lines)

    model = ToolCallingFakeModel(messages=script(turns))
    agent = create_agent(model, [read_file], middleware=[middleware])
    messages = first or [HumanMessage("Read the modules under src/.")]
    out = agent.invoke({"messages": messages}, {"recursion_limit": 10 * turns + 10})
    assert out["messages"][-1].content == "All files read."
    return model.inputs


FRAMEWORKS = ["pydantic-ai", "langchain"]


def run_agent(
    framework: str,
    pipeline: historykit.Pipeline,
    *,
    window: int,
    turns: int,
    lines: int | tuple[int, ...],
    persist: bool = True,
    pinned_spec: str | None = None,
    on_report: Any = None,
) -> list[Report]:
    """One agent run in `framework` with `pipeline` under `window`; the reports of its calls."""
    reports: list[Report] = []

    def keep(report: Report) -> None:
        reports.append(report)
        if on_report is not None:
            on_report(report)

    if framework == "pydantic-ai":
        kit = HistoryKit(pipeline, context_window=window, persist=persist, on_report=keep)
        prompt: Any = "Read the modules under src/."
        if pinned_spec is not None:
            prompt = [pin(TextContent(pinned_spec)), "Read the modules under src/."]
        sent = pydantic_ai_run(kit, turns, lines, prompt)
    else:
        middleware = HistoryKitMiddleware(pipeline, context_window=window, persist=persist, on_report=keep)
        first = None
        if pinned_spec is not None:
            first = [pin(HumanMessage(pinned_spec, id="spec")), HumanMessage("Read the modules under src/.")]
        sent = langchain_run(middleware, turns, lines, first)
    assert len(reports) == len(sent) == turns + 1
    return reports


# --- Cline's preset ------------------------------------------------------------------------------

CLINE_WINDOW = 128_000
CLINE_MARK = 102_400
TIGHTER_MARK = 88_000  # min(128,000 − 40,000, 0.8 · 128,000): what combining with min() gives


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cline_preset_compacts_past_102_400_tokens_at_a_128k_window(framework: str, persist: bool) -> None:
    reports = run_agent(
        framework,
        historykit.default_pipeline(preset="cline"),
        window=CLINE_WINDOW,
        turns=32,
        lines=200,  # about 4,000 tokens a file: several calls fall in the 88,000-102,400 band
        persist=persist,
    )
    first = next(i for i, r in enumerate(reports) if r.changed)
    assert reports[first].tokens_before > CLINE_MARK
    assert all(r.tokens_before <= CLINE_MARK and not r.changed for r in reports[:first])
    band = [r for r in reports[:first] if TIGHTER_MARK < r.tokens_before <= CLINE_MARK]
    assert band, "no call fell between 88,000 and 102,400 tokens: the run does not tell the marks apart"
    assert all(r.tokens_after <= CLINE_WINDOW for r in reports)
    assert reports[first].tokens_after < CLINE_MARK


# --- ChainReview's preset and the warnings --------------------------------------------------------

WINDOW = 8_000


def level(report: Report, warn_at: float) -> int:
    """0 under the warn mark, 1 over it, 2 over the window."""
    if report.tokens_after > report.context_window:
        return 2
    return 1 if report.tokens_after > warn_at * report.context_window else 0


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "historykit"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("historykit: the call")
    ]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_chainreview_warns_once_per_crossing_of_90_percent(
    framework: str, persist: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A pinned specification takes 80% of the window, which no processor may shorten: a large file
    (two of every three) pushes what a call sends over 90%, a small one lets the summary bring it
    back under, so the run crosses the mark again and again, and stays over it between two large
    files. Each crossing warns once: `near-limit` before anything was compacted, `not-freed` after."""
    given: list[UsageWarning] = []
    pipeline = historykit.default_pipeline(preset="chainreview", on_warning=given.append)
    with caplog.at_level(logging.WARNING, logger="historykit"):
        reports = run_agent(
            framework,
            pipeline,
            window=WINDOW,
            turns=24,
            lines=(5, 40, 40),
            persist=persist,
            pinned_spec=spec(6_400),
        )
    levels = [level(r, 0.9) for r in reports]
    for previous, current, report in zip([0, *levels], levels, reports):
        assert len(report.warnings) == (1 if current > previous else 0), (previous, current, report.warnings)
    warned = [w for r in reports for w in r.warnings]
    assert warned, "the run never crossed 90%"
    assert any(lv >= 1 and not r.warnings for lv, r in zip(levels, reports)), "no call stayed over the mark"
    assert given == warned
    assert warnings_logged(caplog) == [w.message for w in warned]
    assert len(warned) >= 3, "the run crossed the mark once only"
    assert {w.kind for w in warned} == {"near-limit", "not-freed"}
    for warning, report in [(w, r) for r in reports for w in r.warnings]:
        assert warning.kind == ("not-freed" if report.changed else "near-limit") and warning.mark == 0.9
        assert warning.used_fraction > 0.9
        assert f"{warning.used_fraction:.0%} of the 8,000-token window" in warning.message


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_call_left_over_the_window_warns_once_for_the_whole_run(
    framework: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The pinned specification alone is over the window: no processor may touch it, so every call is
    over; the run warns once (`over-window`), not once per call."""
    window = 4_000
    with caplog.at_level(logging.WARNING, logger="historykit"):
        reports = run_agent(
            framework,
            historykit.default_pipeline(),
            window=window,
            turns=6,
            lines=10,
            pinned_spec=spec(4_400),
        )
    assert all(r.tokens_after > window for r in reports)
    assert [len(r.warnings) for r in reports] == [1] + [0] * (len(reports) - 1)
    (warning,) = reports[0].warnings
    assert warning.kind == "over-window" and warning.mark == 1.0
    assert "compaction could not free enough" in warning.message
    assert warnings_logged(caplog) == [warning.message]


# --- the used fraction and the gauge ------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_report_has_the_used_fraction_and_the_gauge_shows_it(framework: str) -> None:
    gauge = Gauge(warn_at=0.9)
    reports = run_agent(
        framework, historykit.default_pipeline(), window=WINDOW, turns=30, lines=25, on_report=gauge
    )
    assert gauge.reports == reports and gauge.last is reports[-1]
    for report in reports:
        assert report.used_fraction == report.tokens_after / WINDOW
        assert report.used_fraction_before == report.tokens_before / WINDOW
        share = f"{report.used_fraction_before:.0%} → {report.used_fraction:.0%} of the window"
        assert share in str(report) and share in report._repr_html_()
    assert any(r.changed and r.used_fraction < r.used_fraction_before for r in reports)  # it compacted
    last = reports[-1]
    lines = str(gauge).splitlines()
    assert lines[0].startswith("sent     ") and f"{last.used_fraction:>4.0%}" in lines[0]
    assert lines[0].endswith(f"{last.tokens_after:,} / {WINDOW:,} tokens")
    filled = round(last.used_fraction * gauge.width)
    assert abs(lines[0][9 : 9 + gauge.width].count("█") - filled) <= 1
    assert lines[1].endswith(f"{last.used_fraction_before:.0%}  given to the pipeline; window: explicit")
    compactions = sum(len(r.markers) for r in reports)
    peak = max(r.used_fraction for r in reports)
    assert lines[2].endswith(f"{len(reports)} calls, {compactions} compactions, peak {peak:.0%}")
    assert len(lines[2][9 : 9 + gauge.width].strip()) == min(len(reports), gauge.width)
    page = gauge._repr_html_()
    assert f"width:{last.used_fraction:.1%}" in page and "left:90.0%" in page
    console = Console(record=True, width=120)
    console.print(gauge)
    assert console.export_text().splitlines()[0] == lines[0]


def test_a_gauge_given_a_console_prints_each_call_as_it_comes() -> None:
    console = Console(record=True, width=120)
    gauge = Gauge(console=console, history=False)
    reports = run_agent(
        "langchain", historykit.default_pipeline(), window=WINDOW, turns=5, lines=10, on_report=gauge
    )
    printed = console.export_text().splitlines()
    assert len(printed) == len(reports)
    for line, report in zip(printed, reports):
        assert f"{report.tokens_after:,} / {WINDOW:,} tokens" in line
    with pytest.raises(TypeError, match="a Gauge takes historykit Reports"):
        gauge("not a report")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="warn_at must be a fraction"):
        Gauge(warn_at=0)


def test_the_used_fraction_grows_then_drops_where_the_pipeline_compacts() -> None:
    """Across a run the used fraction only grows between compactions (append-only), and every drop
    is a call that compacted."""
    reports = run_agent("pydantic-ai", historykit.default_pipeline(), window=WINDOW, turns=30, lines=25)
    for before, after in pairwise(reports):
        if after.used_fraction < before.used_fraction:
            assert after.changed
