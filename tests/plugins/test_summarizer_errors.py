"""A summarizer that cannot work is an error at once, never retried, never a silent truncation (issue 24).

- A misspelt model name or a provider whose package is not installed is refused when `Summarize`
  is built, in one line (Pydantic AI resolves the name; nothing is sent, no key is needed).
- A model the provider does not know (a 404 from the provider emulator, through the official
  `openai` SDK) is raised from the first call that summarizes, after exactly one request: no retry,
  no truncation instead. Both frameworks: Pydantic AI's `OpenAIChatModel`, LangChain's `ChatOpenAI`.
- A summarizer that fails for a passing reason (a 500) still falls back to truncation, as before.
- The CLI exits non-zero with that one line.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import pytest
import tenacity

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit.errors import InvalidArgumentError
from historykit.processors._summarize import Summarize
from historykit.processors._summarizers import UnusableSummarizerError
from historykit.processors._trigger import Trigger
from tests.emulator import EmulatedRequest, ProviderEmulator, Rejection, Turn

pytestmark = pytest.mark.pydantic_ai


def _history(turns: int = 30) -> list[Message]:
    """A task, `turns` tool calls with long results, and the next request: enough to summarize."""
    messages = [Message("user", (TextPart("Fix the failing test in src/app.py"),))]
    for n in range(turns):
        call = ToolCallPart(f"c{n}", "read", {"path": f"src/m{n}.py"})
        messages.append(Message("assistant", (call,)))
        messages.append(Message("tool", (ToolResultPart(f"c{n}", "read", f"def f{n}(): return {n}\n" * 40),)))
    messages.append(Message("user", (TextPart("Now fix the billing module"),)))
    return messages


def _summarize(model: Any) -> Summarize:
    return Summarize(
        trigger=Trigger(max_tokens=2_000),
        model=model,
        keep_last=2,
        min_gain=0,
        retry_wait=tenacity.wait_none(),
    )


PYDANTIC_AI_1 = importlib.metadata.version("pydantic-ai-slim").startswith("1.")
UNKNOWN = re.compile("Unknown (model|provider)")


@pytest.mark.parametrize(
    "name",
    [
        "opnai:gpt-4o-mni",
        pytest.param(
            "gpt-4o-mni",
            marks=pytest.mark.skipif(PYDANTIC_AI_1, reason="Pydantic AI 1.x infers OpenAI from a gpt- name"),
        ),
    ],
)
def test_an_unknown_model_name_is_refused_when_summarize_is_built(name: str) -> None:
    with pytest.raises(UnusableSummarizerError) as caught:
        Summarize(model=name)
    message = str(caught.value)
    assert name in message and UNKNOWN.search(message) and "\n" not in message
    assert isinstance(caught.value, InvalidArgumentError)  # a ValueError, as before


def test_a_provider_whose_package_is_missing_is_refused_when_summarize_is_built() -> None:
    # groq is no dependency of historykit's environments: Pydantic AI's provider import fails.
    pytest.importorskip("pydantic_ai.providers")
    with pytest.raises(ImportError):
        __import__("groq")
    with pytest.raises(UnusableSummarizerError, match=r"groq:llama-3.*install.*groq") as caught:
        Summarize(model="groq:llama-3.3-70b-versatile")
    assert "\n" not in str(caught.value)


def test_a_known_model_name_needs_no_key_to_be_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert Summarize(model="openai:gpt-4o-mini").model_name == "openai:gpt-4o-mini"


def _rejecting(status: int) -> ProviderEmulator:
    def script(request: EmulatedRequest) -> Turn:
        if status == 404:
            raise Rejection(
                404,
                f"The model `{request.model}` does not exist or you do not have access to it.",
                "request",
                "openai",
                code="model_not_found",
            )
        raise Rejection(status, "The server had an error while processing your request.", "request", "openai")

    return ProviderEmulator(script)


def _pydantic_ai_model(emulator: ProviderEmulator, name: str) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=emulator.openai_client(async_=True)))


def _chat_openai(emulator: ProviderEmulator, name: str) -> Any:
    return emulator.chat_openai(name)


MODELS = {"pydantic-ai": _pydantic_ai_model, "langchain": _chat_openai}


@pytest.mark.parametrize("framework", sorted(MODELS))
async def test_a_model_the_provider_does_not_know_is_raised_from_the_first_call(framework: str) -> None:
    emulator = _rejecting(404)
    summarize = _summarize(MODELS[framework](emulator, "gpt-4o-mni"))
    with pytest.raises(UnusableSummarizerError, match=r"gpt-4o-mni.*404") as caught:
        await summarize.arun(_history(), context_window=8_000)
    assert "\n" not in str(caught.value)
    assert len(emulator.received) == 1  # one request: not retried


@pytest.mark.parametrize("framework", sorted(MODELS))
def test_the_sync_path_raises_it_too(framework: str) -> None:
    emulator = _rejecting(404)
    summarize = _summarize(MODELS[framework](emulator, "gpt-4o-mni"))
    with pytest.raises(UnusableSummarizerError, match="404"):
        summarize.run(_history(), context_window=8_000)
    assert len(emulator.received) == 1


@pytest.mark.parametrize("framework", sorted(MODELS))
async def test_a_passing_failure_is_still_retried_then_truncated(framework: str) -> None:
    emulator = _rejecting(500)
    summarize = _summarize(MODELS[framework](emulator, "gpt-4o-mini"))
    result = await summarize.arun(_history(), context_window=8_000)
    assert len(emulator.received) == summarize.attempts  # every attempt was made
    assert "truncated instead" in str(result.report)
    assert result.report.tokens_after < result.report.tokens_before


def test_the_cli_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from historykit.cli import app
    from historykit.formats import write_transcript

    source = tmp_path / "session.json"
    write_transcript(_history(), source, "pydantic-ai")
    result = CliRunner().invoke(
        app,
        [
            "compact",
            str(source),
            "-w",
            "8000",
            "-p",
            "summarize:model=opnai:gpt-4o-mni",
            "-o",
            str(tmp_path / "o.json"),
        ],
    )
    assert result.exit_code != 0
    assert "opnai:gpt-4o-mni" in result.stderr and UNKNOWN.search(result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()
