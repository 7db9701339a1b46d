"""historykit inside real agents, end to end, against the provider emulator through the official SDKs.

Each run: 200+ tool-calling turns with thinking on a 12k window, so the history is compacted many
times. What must hold (DESIGN.md section 7, PROVIDER-RULES.md R1–R13):

- no request is rejected: not for a rule, not for the window, not for a stale thinking block on a
  binding model (the emulator rejects what the real API rejects, with its status and text);
- the view is append-only between compactions: each request sends the previous one's history plus
  what arrived since, unless a compaction happened, and a compaction makes the request smaller;
- view-only and persistent processing send the same requests.

Pydantic AI runs `HistoryKit` (a capability) around `AnthropicModel`; LangChain runs
`HistoryKitMiddleware` in `create_agent` around `ChatAnthropic`. Both on a binding model name
(Claude Fable 5.2) and a non-binding one.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from historykit import default_pipeline
from historykit._pipeline import Report
from tests.emulator import (
    NON_BINDING_ANTHROPIC_MODEL,
    EmulatedRequest,
    ProviderEmulator,
    RecordedRequest,
    ToolCall,
    Turn,
    extends,
)

# slow: its eight 200-turn agent runs take a minute or more: the module starts first (tests/conftest.py).
pytestmark = [pytest.mark.e2e_binding, pytest.mark.slow]

WINDOW = 12_000
TOOL_TURNS = 200
FILES = 30
BINDING = "claude-fable-5-2"
SECRET = b"historykit-e2e"
SYSTEM = "You are a careful engineer. Read the files you are asked about."


def file_contents(path: str) -> str:
    """A deterministic source file of a few hundred tokens."""
    seed = hashlib.sha256(path.encode()).hexdigest()
    lines = [f"# {path}"]
    lines += [
        f"def step_{seed[i : i + 6]}(x):\n    return x * {i} + {int(seed[i], 16)}" for i in range(0, 48, 2)
    ]
    return "\n".join(lines)


def read_file(path: str) -> str:
    """Read a file of the project."""
    return file_contents(path)


def agent_script(tool_turns: int = TOOL_TURNS) -> Callable[[EmulatedRequest], Turn]:
    """`tool_turns` turns of thinking + one or two `read_file` calls (deterministic ids), then an answer.

    Stateful, so it follows the run whatever the history shows; every id is a function of the turn,
    so two runs that send the same requests get the same responses, signatures included.
    """
    played = 0

    def script(request: EmulatedRequest) -> Turn:
        nonlocal played
        if "read_file" not in request.tool_names:  # a summarizer's call
            return Turn(text="Summary: files were read.")
        turn = played
        played += 1
        if turn >= tool_turns:
            return Turn(thinking=f"Turn {turn}: every file is read.", text="All files read.")
        count = 2 if turn % 3 == 0 else 1
        calls = [
            ToolCall(
                "read_file", {"path": f"src/mod_{(turn * 7 + k) % FILES}.py"}, id=f"toolu_{turn:04d}_{k}"
            )
            for k in range(count)
        ]
        return Turn(
            thinking=f"Turn {turn}: I read {count} more file(s) and compare them with what I saw.",
            tool_calls=calls,
        )

    return script


@dataclass
class Run:
    emulator: ProviderEmulator
    reports: list[Report] = field(default_factory=list)
    failure: BaseException | None = None
    """What stopped the agent (the SDK's error for a rejected request), if anything did."""


def _emulator(model: str) -> ProviderEmulator:
    return ProviderEmulator(agent_script(), context_windows={model: WINDOW}, secret=SECRET)


def _thinking(model: str) -> dict[str, Any]:
    return {"type": "adaptive"} if model == BINDING else {"type": "enabled", "budget_tokens": 1024}


@functools.cache  # each configuration runs once per session; both tests read it
def run_pydantic_ai(model_name: str, persist: bool) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    run = Run(_emulator(model_name))
    provider = AnthropicProvider(anthropic_client=run.emulator.anthropic_client(async_=True))
    kit = HistoryKit(default_pipeline(), context_window=WINDOW, persist=persist, on_report=run.reports.append)
    agent = Agent(
        AnthropicModel(model_name, provider=provider),
        instructions=SYSTEM,
        capabilities=[kit],
        model_settings={"anthropic_thinking": _thinking(model_name), "max_tokens": 2048},  # type: ignore[typeddict-unknown-key]
    )
    agent.tool_plain(read_file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pydantic AI warns when it retries a stale block: counted below
        try:
            result = agent.run_sync(
                "Read every module of src/.", usage_limits=UsageLimits(request_limit=None)
            )
        except Exception as error:  # the rejection is what the assertions report
            run.failure = error
            return run
    assert result.output == "All files read."
    return run


@functools.cache
def run_langchain(model_name: str, persist: bool) -> Run:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from historykit.plugins.langchain import HistoryKitMiddleware

    run = Run(_emulator(model_name))
    llm = run.emulator.chat_anthropic(model_name, thinking=_thinking(model_name), max_tokens=2048)
    middleware = HistoryKitMiddleware(
        default_pipeline(), context_window=WINDOW, persist=persist, on_report=run.reports.append
    )
    agent = create_agent(llm, tools=[tool(read_file)], system_prompt=SYSTEM, middleware=[middleware])
    try:
        state = agent.invoke(
            {"messages": [{"role": "user", "content": "Read every module of src/."}]},
            {"recursion_limit": 10 * TOOL_TURNS},
        )
    except Exception as error:  # the rejection is what the assertions report
        run.failure = error
        return run
    assert state["messages"][-1].text == "All files read."
    return run


RUNNERS = {"pydantic_ai": run_pydantic_ai, "langchain": run_langchain}


def _describe(record: RecordedRequest) -> str:
    rejection = record.rejection
    return f"{rejection.rule}: {rejection.message}" if rejection else "accepted"


def assert_view_contract(run: Run) -> None:
    emulator = run.emulator
    rejected = emulator.rejected
    assert not rejected, (
        f"{len(rejected)} of {len(emulator.received)} requests rejected; first at request "
        f"{emulator.received.index(rejected[0])}: {_describe(rejected[0])}"
    )
    assert run.failure is None, repr(run.failure)
    accepted = emulator.accepted
    assert len(accepted) == TOOL_TURNS + 1
    assert len(run.reports) == len(accepted)  # one pipeline run per model call
    # The window was used and compacted many times: the history is far larger than it.
    usage = [r.response["usage"]["input_tokens"] for r in accepted]
    assert max(usage) <= WINDOW
    breaks = [i for i, (a, b) in enumerate(itertools.pairwise(accepted), start=1) if not extends(a, b)]
    assert breaks, "no compaction in a run many times the window"
    # Between compactions the view only grows; a compaction is a batch that makes the request smaller.
    grown = [i for i in breaks if usage[i] >= usage[i - 1]]
    assert not grown, f"requests {grown} edited the view without compacting it"
    # One batch: the call after a compaction extends it (two edits in a row are one compaction split up).
    twice = [i for i in breaks if i - 1 in breaks]
    assert not twice, f"requests {twice} edited the view again right after a compaction"
    # Every tool turn's thinking reached the emulator and came back signed (none forged, none lost):
    # the last request that only extends the one before carries it (a compaction on a binding model
    # drops the thinking before it, so the very last request may have none when it compacts).
    last = accepted[max(i for i in range(len(accepted)) if i not in breaks)].body["messages"]
    assert any(b.get("type") == "thinking" for m in last if m["role"] == "assistant" for b in m["content"])


CASES = [
    pytest.param("pydantic_ai", BINDING, True),
    pytest.param("pydantic_ai", BINDING, False),
    pytest.param("pydantic_ai", NON_BINDING_ANTHROPIC_MODEL, True),
    pytest.param("pydantic_ai", NON_BINDING_ANTHROPIC_MODEL, False),
    pytest.param("langchain", BINDING, True),
    pytest.param("langchain", BINDING, False),
    pytest.param("langchain", NON_BINDING_ANTHROPIC_MODEL, True),
    pytest.param("langchain", NON_BINDING_ANTHROPIC_MODEL, False),
]


@pytest.mark.parametrize(("framework", "model", "persist"), CASES)
def test_long_agent_run_is_never_rejected_and_append_only(framework: str, model: str, persist: bool) -> None:
    run = RUNNERS[framework](model, persist)
    assert_view_contract(run)
    dropped = sum(report.thinking_dropped[0] for report in run.reports)
    # On the binding model every compaction costs the thinking after it, and the reports count it;
    # on the other one the thinking of the current cycle is never touched.
    assert (dropped > 0) if model == BINDING else (dropped == 0)


@pytest.mark.parametrize(
    ("framework", "model"),
    [
        pytest.param("pydantic_ai", BINDING),
        pytest.param("pydantic_ai", NON_BINDING_ANTHROPIC_MODEL),
        pytest.param("langchain", BINDING),
        pytest.param("langchain", NON_BINDING_ANTHROPIC_MODEL),
    ],
)
def test_view_only_and_persistent_send_the_same_requests(framework: str, model: str) -> None:
    runs = RUNNERS[framework](model, True), RUNNERS[framework](model, False)
    for run in runs:  # two runs stopped at the same rejection are not the same view
        assert run.failure is None and not run.emulator.rejected, _describe(run.emulator.received[-1])
    persistent, view_only = (run.emulator.received for run in runs)
    assert len(persistent) == len(view_only) == TOOL_TURNS + 1
    differing = [
        i for i, (a, b) in enumerate(zip(persistent, view_only, strict=True)) if a.history() != b.history()
    ]
    assert not differing, f"{len(differing)} of {len(persistent)} requests differ, first at {differing[0]}"
