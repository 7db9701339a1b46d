"""historykit inside real Pydantic AI agents (FunctionModel), on Pydantic AI 1.x and 2.x: the
`HistoryKit` capability, `HistoryKitProcessor` in `history_processors=`, a plain pipeline as a
history processor, the model's context window, reports, and a summarizer that fails."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest
import tenacity
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from historykit import Pipeline, Report, TokenCounter, check, default_pipeline
from historykit._messages import SummaryPart, ToolResultPart
from historykit.errors import InvalidArgumentError
from historykit.plugins.pydantic_ai import (
    HistoryKit,
    HistoryKitProcessor,
    PydanticAIAdapter,
    model_context_window,
)
from historykit.processors import Repair, Summarize

pytestmark = pytest.mark.pydantic_ai

WINDOW = 8_000
TURNS = 205
PROFILE_WINDOW = hasattr(Model, "context_window")
"""2.x models state their context window (profile / genai-prices); 1.x profiles have none."""


def _accepts_history_processors() -> bool:
    """`Agent(history_processors=...)` exists in 1.x only (2.x removed it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            Agent(FunctionModel(lambda messages, info: pai.ModelResponse([])), history_processors=[])
        except Exception:
            return False
    return True


HISTORY_PROCESSORS = _accepts_history_processors()

needs_1x = pytest.mark.skipif(not HISTORY_PROCESSORS, reason="Pydantic AI 2.x removed history_processors=")
needs_profile_window = pytest.mark.skipif(
    not PROFILE_WINDOW, reason="Pydantic AI 1.x model profiles have no context window"
)


def file_content(path: str) -> str:
    """A few KB of a source file, different for every path."""
    return "\n".join(
        f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})  # step {i}" for i in range(70)
    )


def pipeline(summarize: Summarize | None = None) -> Pipeline:
    """The default pipeline; `summarize` replaces its `Summarize` step."""
    steps = default_pipeline().processors
    if summarize is not None:
        steps = [summarize if isinstance(p, Summarize) else p for p in steps]
    return Pipeline(steps)


@dataclass
class FileReadingModel:
    """A FunctionModel that reads files with a tool for `turns` requests, then answers; it measures
    every request it receives."""

    turns: int = TURNS
    files: int = 17
    """How many different files it reads, in turn."""
    counter: TokenCounter = field(default_factory=TokenCounter)
    sizes: list[int] = field(default_factory=list)
    received: list[list[pai.ModelMessage]] = field(default_factory=list)

    def respond(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.sizes.append(self.counter.count(messages, use_usage=False).tokens)
        self.received.append(messages)
        n = len(self.sizes)
        if n > self.turns:
            return pai.ModelResponse([pai.TextPart("All files read; the bug is in src/mod3.py.")])
        path = f"src/mod{n % self.files}.py"
        thinking = pai.ThinkingPart(f"Next I read {path} to see how compute() is used. " * 8)
        call = pai.ToolCallPart("read_file", {"path": path}, tool_call_id=f"call_{n}")
        return pai.ModelResponse([thinking, call])

    def model(self, window: int | None = WINDOW) -> FunctionModel:
        if window is not None and PROFILE_WINDOW:
            return FunctionModel(self.respond, profile={"context_window": window})
        return FunctionModel(self.respond)


def agent_with(model: FunctionModel, **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, **kwargs)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path)

    return agent


def explicit_window() -> int | None:
    """The window to give explicitly: none where the model's profile carries it (2.x)."""
    return None if PROFILE_WINDOW else WINDOW


NO_LIMIT = UsageLimits(request_limit=None)


def tool_returns(messages: list[pai.ModelMessage]) -> list[pai.ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, pai.ModelRequest)
        for p in m.parts
        if isinstance(p, pai.ToolReturnPart)
    ]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_a_long_file_reading_run_never_sends_a_request_over_the_window(persist: bool) -> None:
    fn = FileReadingModel()
    reports: list[Report] = []
    kit = HistoryKit(pipeline(), context_window=explicit_window(), on_report=reports.append, persist=persist)
    agent = agent_with(fn.model(), capabilities=[kit])

    result = agent.run_sync("Read the modules under src/ and find the bug.", usage_limits=NO_LIMIT)

    assert result.output.startswith("All files read")
    assert len(fn.sizes) == TURNS + 1
    assert max(fn.sizes) <= WINDOW
    # Without processing the requests would have grown far past the window.
    raw = len(file_content("src/mod1.py")) // 4 * TURNS
    assert raw > 10 * WINDOW
    # Every request the model got was valid, and the task was always in it.
    for messages in fn.received[:: TURNS // 20]:
        assert check(messages) == []
        first = PydanticAIAdapter().to_neutral(messages)[0]
        assert first.role == "user" and "find the bug" in first.text
    # Reports reach the callback and the capability, one per model request.
    assert len(reports) == TURNS + 1 and kit.last_report is reports[-1]
    assert all(r.context_window == WINDOW for r in reports)
    assert {r.window_source for r in reports} == {"model profile" if PROFILE_WINDOW else "explicit"}
    assert any(r.changed for r in reports)
    history = result.all_messages()
    returns = tool_returns(history)
    if persist:
        # The processed history became the run's history: it is small, and holds a summary.
        assert len(history) < TURNS
        neutral = PydanticAIAdapter().to_neutral(history)
        summaries = [p for m in neutral for p in m.parts if isinstance(p, SummaryPart)]
        assert summaries and all(s.marker is not None for s in summaries)
    else:
        # View only: the run's history has every message, unedited.
        assert len(returns) == TURNS
        assert all(r.content == file_content(f"src/mod{i % 17}.py") for i, r in enumerate(returns, start=1))


@needs_profile_window
def test_the_window_comes_from_the_models_profile_unless_given() -> None:
    fn = FileReadingModel(turns=3)
    reports: list[Report] = []
    agent = agent_with(
        fn.model(window=50_000), capabilities=[HistoryKit(pipeline(), on_report=reports.append)]
    )
    agent.run_sync("Read the files.", usage_limits=NO_LIMIT)
    assert {(r.context_window, r.window_source) for r in reports} == {(50_000, "model profile")}

    reports.clear()
    kit = HistoryKit(pipeline(), context_window=9_000, on_report=reports.append)
    agent_with(FileReadingModel(turns=3).model(window=50_000), capabilities=[kit]).run_sync("Read the files.")
    assert {(r.context_window, r.window_source) for r in reports} == {(9_000, "explicit")}


class NamedFunctionModel(FunctionModel):
    """A FunctionModel that calls itself an OpenAI model, as a real one would."""

    @property
    def system(self) -> str:
        return "openai"


def test_a_known_model_gets_its_window_from_genai_prices() -> None:
    from genai_prices.data_snapshot import get_snapshot

    _, info = get_snapshot().find_provider_model(
        "gpt-4o", provider=None, provider_id="openai", provider_api_url=None
    )
    model = NamedFunctionModel(FileReadingModel(turns=1).respond, model_name="gpt-4o")
    window = model_context_window(model)
    assert window is not None and window.tokens == info.context_window
    # 2.x folds genai-prices into the profile; 1.x has no profile window, so historykit looks it up.
    assert window.source == ("model profile" if PROFILE_WINDOW else "genai-prices")
    assert model_context_window(FunctionModel(FileReadingModel(turns=1).respond)) is None

    reports: list[Report] = []
    agent_with(model, capabilities=[HistoryKit(pipeline(), on_report=reports.append)]).run_sync("Read.")
    assert {(r.context_window, r.window_source) for r in reports} == {(window.tokens, window.source)}
    reports.clear()
    agent_with(
        FunctionModel(FileReadingModel(turns=1).respond),
        capabilities=[HistoryKit(pipeline(), on_report=reports.append)],
    ).run_sync("Read.")
    assert {r.window_source for r in reports} == {"default"}


def test_a_failing_summarizer_does_not_fail_the_run() -> None:
    calls: list[int] = []

    async def broken(messages: Any) -> str:
        calls.append(len(messages))
        raise RuntimeError("the summarizer is down")

    summarize = Summarize(summarizer=broken, attempts=2, retry_wait=tenacity.wait_none())
    fn = FileReadingModel()
    reports: list[Report] = []
    kit = HistoryKit(pipeline(summarize), context_window=explicit_window(), on_report=reports.append)
    result = agent_with(fn.model(), capabilities=[kit]).run_sync("Read everything.", usage_limits=NO_LIMIT)

    assert result.output.startswith("All files read")
    assert calls and len(calls) % 2 == 0  # every attempt was made, twice per compaction
    assert max(fn.sizes) <= WINDOW
    details = [d for r in reports for s in r.steps if s.processor == "Summarize" for d in s.notes.details]
    assert any("summarizer failed" in d and "the summarizer is down" in d for d in details)


def test_a_second_run_keeps_the_summary_as_its_own_message_with_its_marker() -> None:
    # Pydantic AI merges consecutive requests when a run starts: the summary written after the task
    # must still be read back as a summary of its own, which the next compaction updates.
    fn = FileReadingModel(turns=120)
    kit = HistoryKit(pipeline(), context_window=explicit_window())
    agent = agent_with(fn.model(), capabilities=[kit])
    first = agent.run_sync("Read the modules under src/.", usage_limits=NO_LIMIT)
    stored = pai.ModelMessagesTypeAdapter.validate_json(
        pai.ModelMessagesTypeAdapter.dump_json(first.all_messages())
    )

    fn.sizes.clear()
    fn.turns = 120
    second = agent.run_sync("Now read them again.", message_history=stored, usage_limits=NO_LIMIT)

    assert max(fn.sizes) <= WINDOW
    neutral = PydanticAIAdapter().to_neutral(second.all_messages())
    summaries = [m for m in neutral if any(isinstance(p, SummaryPart) for p in m.parts)]
    assert len(summaries) == 1 and len(summaries[0].parts) == 1
    marker = summaries[0].parts[0].marker  # type: ignore[union-attr]
    assert marker is not None and marker.strategy == "summarize"
    users = [m.text for m in neutral if m.role == "user" and not m.tool_results and m not in summaries]
    assert users[0] == "Read the modules under src/."
    assert "Now read them again." in users


@needs_1x
def test_history_kit_processor_in_history_processors_takes_the_run_context() -> None:
    fn = FileReadingModel()
    reports: list[Report] = []
    processor = HistoryKitProcessor(pipeline(), context_window=WINDOW, on_report=reports.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 1.107 deprecates history_processors= in favour of capabilities
        agent = agent_with(fn.model(), history_processors=[processor])
    result = agent.run_sync("Read the modules under src/.", usage_limits=NO_LIMIT)
    assert result.output.startswith("All files read")
    assert max(fn.sizes) <= WINDOW
    assert len(reports) == TURNS + 1 and processor.last_report is reports[-1]
    assert len(result.all_messages()) < TURNS  # history processors persist their output


def _reused_call_ids() -> list[pai.ModelMessage]:
    """Two turns whose tool calls are both `call_0`: provider rule R12, which `Repair` fixes by
    renaming the later call (and its result) in the request."""
    history: list[pai.ModelMessage] = []
    for path in ("a.py", "b.py"):
        history += [
            pai.ModelRequest([pai.UserPromptPart(f"Read {path}.")]),
            pai.ModelResponse([pai.ToolCallPart("read_file", {"path": path}, tool_call_id="call_0")]),
            pai.ModelRequest([pai.ToolReturnPart("read_file", file_content(path), tool_call_id="call_0")]),
            pai.ModelResponse([pai.TextPart(f"Read {path}.")]),
        ]
    return history


def _call_ids(messages: list[pai.ModelMessage]) -> list[str]:
    return [
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, (pai.ToolCallPart, pai.ToolReturnPart))
    ]


def _sent_and_kept(**agent_kwargs: Any) -> tuple[list[str], list[str]]:
    """The tool-call ids of the request the model is sent and of the history the run keeps, for a
    run on `_reused_call_ids()` with nothing to compact."""
    sent: list[list[pai.ModelMessage]] = []

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        sent.append(list(messages))
        return pai.ModelResponse([pai.TextPart("Both read.")])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 1.107 deprecates history_processors= in favour of capabilities
        agent: Agent[None, str] = Agent(FunctionModel(respond), **agent_kwargs)
    result = agent.run_sync("What did you read?", message_history=_reused_call_ids())
    assert len(sent) == 1
    return _call_ids(sent[0]), _call_ids(result.all_messages())


@needs_1x
def test_a_history_processor_keeps_the_repairs_the_capability_sends_alone() -> None:
    # `Repair` edits are meant for the request only (`PipelineResult.messages`); the framework keeps
    # `PipelineResult.history`. A 1.x history processor returns one list, which Pydantic AI both
    # sends and writes back as the run's history, so there the repairs are kept as well; the
    # capability (1.x with capabilities) sends the repaired view from `wrap_model_request` and keeps
    # the history unrepaired, as without historykit.
    assert check(_reused_call_ids())  # R12: the history breaks a rule the request must not
    repaired = ["call_0", "call_0", "call_0__2", "call_0__2"]
    unrepaired = ["call_0"] * 4
    assert _sent_and_kept() == (unrepaired, unrepaired)
    processor = HistoryKitProcessor(default_pipeline(), context_window=100_000)
    assert _sent_and_kept(history_processors=[processor]) == (repaired, repaired)
    kit = HistoryKit(default_pipeline(), context_window=100_000)
    assert _sent_and_kept(capabilities=[kit]) == (repaired, unrepaired)
    # Nothing was compacted: the only edits are the repair's.
    assert processor.last_report is not None
    assert {m.strategy for m in processor.last_report.markers} == {"repair"}


@needs_1x
def test_a_plain_pipeline_works_as_a_history_processor() -> None:
    fn = FileReadingModel(turns=30)
    reports: list[Report] = []
    plain = Pipeline(pipeline().processors, on_report=reports.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = agent_with(fn.model(), history_processors=[plain])
    result = agent.run_sync("Read the modules under src/.", usage_limits=NO_LIMIT)
    assert result.output.startswith("All files read")
    # Called with the messages alone (on a worker thread): it cannot know the model's window.
    assert len(reports) == 31 and {r.window_source for r in reports} == {"default"}


def test_reports_are_logged_at_debug_level(caplog: pytest.LogCaptureFixture) -> None:
    fn = FileReadingModel(turns=40)
    kit = HistoryKit(pipeline(), context_window=explicit_window())
    with caplog.at_level(logging.DEBUG, logger="historykit"):
        agent_with(fn.model(), capabilities=[kit]).run_sync("Read the files.", usage_limits=NO_LIMIT)
    logged = [r.getMessage() for r in caplog.records if r.name == "historykit"]
    assert any("ClearToolResults" in line or "DedupeFileReads" in line for line in logged)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(TypeError, match="historykit processor or Pipeline"):
        HistoryKit(lambda messages: messages)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context_window"):
        HistoryKit(pipeline(), context_window=0)
    with pytest.raises(ValueError, match="context_window"):
        HistoryKitProcessor(pipeline(), context_window=-5)
    single = HistoryKit(Repair())
    assert isinstance(single.pipeline, Pipeline) and [type(p) for p in single.pipeline.processors] == [Repair]


def test_tool_results_the_model_sees_are_the_files_or_short_notices() -> None:
    # Re-reads of four files in a 20k window: deduplication and clearing fire before any summary.
    # Nothing is invented: each result the model receives is the file or a short notice naming it.
    fn = FileReadingModel(turns=60, files=4)
    reports: list[Report] = []
    kit = HistoryKit(pipeline(), context_window=20_000, on_report=reports.append)
    agent_with(fn.model(window=None), capabilities=[kit]).run_sync("Read the files.", usage_limits=NO_LIMIT)
    assert max(fn.sizes) <= 20_000
    seen: dict[str, str] = {}
    for messages in fn.received:
        for msg in PydanticAIAdapter().to_neutral(messages):
            for part in msg.parts:
                if isinstance(part, ToolResultPart):
                    seen[part.tool_call_id] = part.content
    files = {f"src/mod{i}.py": file_content(f"src/mod{i}.py") for i in range(4)}
    notices = {call: text for call, text in seen.items() if text not in files.values()}
    assert notices
    for text in notices.values():
        assert len(text) < 400 and any(path in text for path in files)
    edits = {s.processor for r in reports for s in r.steps if s.notes.replaced}
    assert edits & {"DedupeFileReads", "ClearToolResults"}


def _failing(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
    from pydantic_ai.exceptions import ModelAPIError

    raise ModelAPIError("primary", "the primary model is down")


@needs_profile_window
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
@pytest.mark.parametrize("wrapped", [False, True], ids=["fallback", "instrumented-fallback"])
def test_a_fallback_model_agent_budgets_for_the_models_that_may_answer(persist: bool, wrapped: bool) -> None:
    """A `FallbackModel` has no profile of its own (reading it raises): the window is the smallest of
    its candidates (any may answer), so the backup that answers never gets a request over its own."""
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.instrumented import InstrumentedModel

    fn = FileReadingModel(turns=60)
    primary = FunctionModel(_failing, profile={"context_window": 200_000})
    backup = fn.model(window=WINDOW)
    model: Model = FallbackModel(primary, backup)
    if wrapped:
        model = InstrumentedModel(model)
    reports: list[Report] = []
    kit = HistoryKit(pipeline(), persist=persist, on_report=reports.append)
    result = agent_with(model, capabilities=[kit]).run_sync("Read the files.", usage_limits=NO_LIMIT)  # type: ignore[arg-type]

    assert result.output.startswith("All files read")
    assert {(r.context_window, r.window_source) for r in reports} == {(WINDOW, "model profile")}
    assert any(r.markers for r in reports), "the run must compact for the window to matter"
    assert max(fn.sizes) <= WINDOW
    assert check(fn.received[-1]) == []


def test_wrappers_and_fallbacks_take_the_binding_of_the_models_that_answer() -> None:
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.instrumented import InstrumentedModel

    from historykit.plugins.pydantic_ai import model_binds_thinking_blocks

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        return pai.ModelResponse([pai.TextPart("ok")])

    plain = FunctionModel(respond)
    binding = FunctionModel(respond, model_name="claude-fable-5-1")
    assert model_binds_thinking_blocks(plain) is False
    assert model_binds_thinking_blocks(binding) is True
    assert model_binds_thinking_blocks(InstrumentedModel(binding)) is True
    assert model_binds_thinking_blocks(FallbackModel(plain, binding)) is True
    assert (
        model_binds_thinking_blocks(InstrumentedModel(FallbackModel(plain, FunctionModel(respond)))) is False
    )
    assert model_binds_thinking_blocks(FallbackModel(FallbackModel(plain, binding), plain)) is True


def test_the_capability_and_its_recall_toolset_have_stable_ids() -> None:
    kit = HistoryKit(Repair(), recall=True)
    assert kit.id == "historykit"
    assert kit.get_toolset().id == "historykit_recall"
    other = HistoryKit(Repair(), recall=True, id="second")
    assert other.get_toolset().id == "second_recall"
    with pytest.raises(InvalidArgumentError, match="id must be a non-empty str"):
        HistoryKit(Repair(), id="")
